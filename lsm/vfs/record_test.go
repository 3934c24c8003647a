package vfs_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/vfs"
)

func readAll(t *testing.T, m *vfs.MemFS, name string) (string, bool) {
	t.Helper()
	f, err := m.Open(name)
	if err != nil {
		return "", false
	}
	defer f.Close()
	n, _ := f.Size()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil && n > 0 {
		t.Fatal(err)
	}
	return string(b), true
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestRecordingWindow(t *testing.T) {
	r := vfs.NewRecording(vfs.NewMem())
	must(t, r.MkdirAll("/d"))
	x, err := r.Create("/d/x")
	must(t, err)
	_, err = x.Write([]byte("aaaa"))
	must(t, err)
	must(t, x.Sync())
	must(t, r.SyncDir("/d"))
	if n := r.Pending(); n != 0 {
		t.Fatalf("%d pending after syncs", n)
	}
	_, err = x.WriteAt([]byte("bbbb"), 4)
	must(t, err)
	y, err := r.Create("/d/y")
	must(t, err)
	_, err = y.Write([]byte("yy"))
	must(t, err)
	must(t, r.Rename("/d/y", "/d/z"))

	w := r.Capture()
	if w.Len() != 4 {
		t.Fatalf("window:\n%s", w)
	}
	type want struct{ x, y, z string } // "-" absent
	check := func(what string, m *vfs.MemFS, wt want) {
		t.Helper()
		for _, c := range []struct{ name, want string }{{"/d/x", wt.x}, {"/d/y", wt.y}, {"/d/z", wt.z}} {
			got, ok := readAll(t, m, c.name)
			if !ok {
				got = "-"
			}
			if got != c.want {
				t.Errorf("%s: %s = %q, want %q\n%s", what, c.name, got, c.want, m)
			}
		}
	}
	check("prefix 0", w.Prefix(0), want{"aaaa", "-", "-"})
	check("prefix 1", w.Prefix(1), want{"aaaabbbb", "-", "-"})
	check("prefix 2", w.Prefix(2), want{"aaaabbbb", "", "-"})
	check("prefix 3", w.Prefix(3), want{"aaaabbbb", "yy", "-"})
	check("prefix 4", w.Prefix(4), want{"aaaabbbb", "-", "yy"})
	// Only the rename reached the disk: the create before it did too (entry
	// changes persist in order), the data write did not.
	check("rename only", w.Subset(func(i int) bool { return i == 3 }), want{"aaaa", "-", ""})
	check("torn", w.Torn(0, 2), want{"aaaabb", "-", "-"})

	// A state is durable as it is: its own CrashClone keeps everything.
	check("crash of a state", w.Prefix(4).CrashClone(), want{"aaaabbbb", "-", "yy"})

	n := w.States(rand.New(rand.NewPCG(1, 2)), 5, func(desc string, m *vfs.MemFS) bool { return true })
	if n != 5+2+5 {
		t.Errorf("States gave %d states, want 12", n)
	}
	// The window does not change with the filesystem.
	must(t, x.Sync())
	must(t, r.SyncDir("/d"))
	if r.Pending() != 1 { // z's data
		t.Errorf("pending after syncs: %d", r.Pending())
	}
	check("prefix 0 after later syncs", w.Prefix(0), want{"aaaa", "-", "-"})
}

func TestRecordingHook(t *testing.T) {
	r := vfs.NewRecording(vfs.NewMem())
	must(t, r.MkdirAll("/d"))
	var events []string
	var windows []*vfs.Window
	r.SetHook(func(e vfs.Event) {
		events = append(events, e.Op)
		windows = append(windows, e.Capture())
	})
	f, err := r.Create("/d/f")
	must(t, err)
	for i := 0; i < 3; i++ {
		_, err := f.Write([]byte{byte('0' + i)})
		must(t, err)
	}
	must(t, f.Sync())
	must(t, r.SyncDir("/d"))
	r.SetHook(nil)
	if got := strings.Join(events, ","); got != "create /d/f,write /d/f@0+1,write /d/f@1+1,write /d/f@2+1,sync /d/f,syncdir /d" {
		t.Fatalf("events %s", got)
	}
	// After the third write: 4 pending changes; its last prefix has "012".
	w := windows[3]
	if got, _ := readAll(t, w.Prefix(w.Len()), "/d/f"); got != "012" || w.Len() != 4 {
		t.Fatalf("window after the writes: %q\n%s", got, w)
	}
	// After the sync, only the entry is pending; its prefix 0 lacks the file.
	w = windows[4]
	if _, ok := readAll(t, w.Prefix(0), "/d/f"); ok || w.Len() != 1 {
		t.Fatalf("window after the sync:\n%s", w)
	}
	if windows[5].Len() != 0 {
		t.Fatalf("window after syncdir:\n%s", windows[5])
	}
}

func TestRecordingTruncateAndRemove(t *testing.T) {
	r := vfs.NewRecording(vfs.NewMem())
	must(t, r.MkdirAll("/d"))
	f, err := r.Create("/d/f")
	must(t, err)
	_, err = f.Write([]byte("hello world"))
	must(t, err)
	must(t, f.Sync())
	must(t, r.SyncDir("/d"))
	must(t, f.Truncate(5))
	must(t, f.Preallocate(8))
	must(t, r.Remove("/d/f"))
	w := r.Capture()
	for k, want := range []string{"hello world", "hello", "hello\x00\x00\x00", "-"} {
		got, ok := readAll(t, w.Prefix(k), "/d/f")
		if !ok {
			got = "-"
		}
		if got != want {
			t.Errorf("prefix %d: %q, want %q", k, got, want)
		}
	}
}
