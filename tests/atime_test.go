package tests

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func atimeOf(t *testing.T, p string) (atime, mtime time.Time) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return time.Unix(st.Atim.Unix()), time.Unix(st.Mtim.Unix())
}

// readDirect reads p's first block with O_DIRECT, so that the READ reaches
// the daemon whatever the kernel caches.
func readDirect(t *testing.T, p string) {
	t.Helper()
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON) // page-aligned
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	if _, err := unix.Pread(fd, buf, 0); err != nil {
		t.Fatal(err)
	}
}

// TestAtimeThroughKernel: reads and listings that reach the daemon move the
// access times as relatime says, and stat through the kernel shows them
// (the kernel forgets its cached atime after a READ or READDIR). With
// noatime nothing moves. Also with the writeback cache, where the kernel
// stamps mtime itself.
func TestAtimeThroughKernel(t *testing.T) {
	for _, opts := range []string{"", "writeback_cache"} {
		t.Run("opts="+opts, func(t *testing.T) { atimeThroughKernel(t, opts) })
	}
}

func atimeThroughKernel(t *testing.T, opts string) {
	f := newFS(t, fsOptions{mountOpts: opts})
	tick := func() { time.Sleep(20 * time.Millisecond) }
	p, d := f.path("f"), f.path("d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.remount() // nothing cached: cat reads through the daemon
	a0, m0 := atimeOf(t, p)
	if _, err := os.ReadFile(p); err != nil {
		t.Fatal(err)
	}
	a1, _ := atimeOf(t, p)
	if !a1.After(m0) || !a1.After(a0) {
		t.Fatalf("cat: atime %v -> %v (mtime %v): want it after the write", a0, a1, m0)
	}
	readDirect(t, p)
	if a, _ := atimeOf(t, p); !a.Equal(a1) {
		t.Fatalf("second read moved atime %v -> %v (relatime)", a1, a)
	}
	// Append: the next read that reaches the daemon moves it again. (With
	// the writeback cache the kernel stamps mtime from its coarse clock:
	// the sleeps keep each step in a tick of its own.)
	tick()
	w, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(" world")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	tick()
	readDirect(t, p)
	if a, m := atimeOf(t, p); !a.After(m) {
		t.Fatalf("read after append: atime %v, mtime %v", a, m)
	}
	// copy_file_range reads its source; the kernel forgets only the
	// destination's attributes, so lsmfs tells it about the source's.
	w, err = os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("!")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	atimeOf(t, p) // the kernel caches the attributes again
	tick()
	src, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := os.Create(f.path("copy"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := unix.CopyFileRange(int(src.Fd()), nil, int(dst.Fd()), nil, 4, 0)
	src.Close()
	dst.Close()
	if err != nil || n != 4 {
		t.Fatalf("copy_file_range: %d, %v", n, err)
	}
	if a, m := atimeOf(t, p); !a.After(m) {
		t.Fatalf("copy_file_range source: atime %v, mtime %v", a, m)
	}
	da0, dm0 := atimeOf(t, d)
	if _, err := os.ReadDir(d); err != nil {
		t.Fatal(err)
	}
	if da, _ := atimeOf(t, d); !da.After(dm0) || !da.After(da0) {
		t.Fatalf("ls: directory atime %v -> %v (mtime %v)", da0, da, dm0)
	}

	// noatime: a read after a change leaves the time alone.
	f.unmount()
	if err := f.tryMount("noatime"); err != nil {
		t.Fatalf("mount -o noatime: %v%s", err, f.logTail())
	}
	if err := unix.Utimes(p, []unix.Timeval{{Sec: 1_000_000}, {Sec: 2_000_000}}); err != nil {
		t.Fatal(err)
	}
	readDirect(t, p)
	if a, _ := atimeOf(t, p); a.Unix() != 1_000_000 {
		t.Fatalf("noatime: atime %v, want it left at 1000000", a)
	}
}
