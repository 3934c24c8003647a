package tests

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestNoSpaceMounted puts the data directory on a 256 MiB tmpfs and fills
// the mounted lsmfs: writers get ENOSPC (not EIO) through the kernel, the
// daemon keeps serving, rm works when full, and once it has freed space new
// writes succeed again; fsck is clean at the end.
func TestNoSpaceMounted(t *testing.T) {
	f, small := newSmallFS(t, "256m")

	chunk := content(7, 1<<20)
	writeSync := func(p string) error {
		fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		_, err = fh.Write(chunk)
		return errors.Join(err, fh.Sync(), fh.Close())
	}
	var names []string
	var err error
	for i := 0; i < 400; i++ {
		p := f.path(fmt.Sprintf("f%03d", i))
		if err = writeSync(p); err != nil {
			os.Remove(p)
			break
		}
		names = append(names, p)
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the filesystem: %v after %d files of 1 MiB; want ENOSPC%s", err, len(names), f.logTail())
	}
	t.Logf("ENOSPC after %d files of 1 MiB: %v", len(names), err)
	// Still serving: reads and listings work, more data fails with ENOSPC.
	if b, err := os.ReadFile(names[0]); err != nil || len(b) != len(chunk) {
		t.Fatalf("read when full: %d bytes, %v", len(b), err)
	}
	if err := writeSync(f.path("more")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write when full: %v, want ENOSPC", err)
	}
	os.Remove(f.path("more"))
	// rm works when full.
	for _, p := range names[:len(names)*3/4] {
		if err := os.Remove(p); err != nil {
			t.Fatalf("rm when full: %v", err)
		}
	}
	// Space comes back.
	deadline := time.Now().Add(time.Minute)
	for {
		err = writeSync(f.path("after"))
		if err == nil || !errors.Is(err, syscall.ENOSPC) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		ls, _ := runTimeout("sh", "-c", "ls -l "+f.dataDir+"; df "+small+"; "+lsmfsBin+" stats "+f.mnt)
		t.Fatalf("write after rm: %v\n%s%s", err, ls, f.logTail())
	}
	for i := 0; i < 8; i++ {
		if err := writeSync(f.path(fmt.Sprintf("again%d", i))); err != nil {
			t.Fatalf("write %d after rm: %v", i, err)
		}
	}
	f.remount()
	if b, err := os.ReadFile(f.path("again7")); err != nil || len(b) != len(chunk) {
		t.Fatalf("after remount: %d bytes, %v", len(b), err)
	}
}

// TestNoSpaceJournalFull: the data device fills from outside (another
// file on it) while small files, whose data goes to the journal and the
// tree, keep coming. The memtable's flush then fails for lack of room, so
// the journal ring cannot be reclaimed and fills; writers get ENOSPC. rm
// must still work in that state (the ring keeps its last sixteenth for
// batches that delete), and once the other file is gone the flush goes
// through, the ring is reclaimed and writes are accepted again, with
// nothing lost across a remount and fsck clean.
func TestNoSpaceJournalFull(t *testing.T) {
	f, small := newSmallFS(t, "128m")
	if err := os.Mkdir(f.path("d"), 0o755); err != nil {
		t.Fatal(err)
	}

	// Leave 4 MiB free: above the engine's reserve (1% of the device),
	// below what a flush of the ring's worth of records needs.
	var st unix.Statfs_t
	if err := unix.Statfs(small, &st); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(small, "filler")
	fd, err := unix.Open(filler, unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Fallocate(fd, 0, 0, int64(st.Bavail)*st.Bsize-4<<20)
	unix.Close(fd)
	if err != nil {
		t.Fatalf("fill the device: %v", err)
	}

	// Small files of incompressible bytes (the tables compress), an fsync
	// every 64, until ENOSPC.
	write := func(name string, id int64, sync bool) error {
		fh, err := os.OpenFile(f.path("d", name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		_, err = fh.Write(content(id, 1000))
		if err == nil && sync {
			err = fh.Sync()
		}
		return errors.Join(err, fh.Close())
	}
	n := 0
	for ; n < 200_000; n++ {
		if err = write(fmt.Sprintf("f%06d", n), int64(n), n%64 == 0); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the journal: %v after %d files; want ENOSPC%s", err, n, f.logTail())
	}
	s := statsJSON(t, f.mnt)
	t.Logf("ENOSPC after %d files of 1000 bytes; journal ring %d of %d bytes live", n, s.Journal.LiveBytes, s.Journal.Capacity)
	if s.Journal.LiveBytes < s.Journal.Capacity*3/4 {
		t.Fatalf("ENOSPC with the journal ring %d of %d bytes live: the ring did not fill, the test missed its state%s", s.Journal.LiveBytes, s.Journal.Capacity, f.logTail())
	}

	// rm works with the ring full.
	for i := 0; i < 2000; i++ {
		if err := os.Remove(f.path("d", fmt.Sprintf("f%06d", i))); err != nil {
			t.Fatalf("rm %d with the journal full: %v%s", i, err, f.logTail())
		}
	}

	// Space comes back: the flush goes through and writes are accepted.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err = write("after", -1, true)
		if err == nil || !errors.Is(err, syscall.ENOSPC) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("write after the device was freed: %v%s", err, f.logTail())
	}
	for i := 0; i < 2000; i++ {
		if err := write(fmt.Sprintf("g%06d", i), int64(1e6+i), false); err != nil {
			t.Fatalf("write %d after the device was freed: %v", i, err)
		}
	}
	f.remount()
	ents, err := os.ReadDir(f.path("d"))
	if err != nil {
		t.Fatal(err)
	}
	if want := n - 2000 + 1 + 2000; len(ents) != want {
		t.Fatalf("after remount: %d entries, want %d", len(ents), want)
	}
	for _, i := range []int{2000, n / 2, n - 1} {
		b, err := os.ReadFile(f.path("d", fmt.Sprintf("f%06d", i)))
		if err != nil || !bytes.Equal(b, content(int64(i), 1000)) {
			t.Fatalf("f%06d after remount: %d bytes, %v", i, len(b), err)
		}
	}
}

// newSmallFS mounts a tmpfs of size (mount(8)'s size=) in a temporary
// directory and a fresh lsmfs (a 16 MiB journal) with its data directory
// there; both are unmounted at cleanup, fsck first. It returns the
// filesystem and the tmpfs's path.
func newSmallFS(t *testing.T, size string) (*testFS, string) {
	t.Helper()
	requireMount(t)
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.Mkdir(small, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := runTimeout("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", small); err != nil {
		t.Skipf("skipped: cannot mount a tmpfs for the data directory: %v", err)
	}
	t.Cleanup(func() {
		if _, err := runTimeout("umount", small); err != nil {
			t.Errorf("umount the tmpfs: %v", err)
		}
	})
	f := &testFS{t: t, dataDir: filepath.Join(small, "data"), mnt: filepath.Join(dir, "mnt"), logFile: filepath.Join(dir, "daemon.log")}
	if err := os.Mkdir(f.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.cleanup) // before the tmpfs goes: registered after it
	if _, err := lsmfs("mkfs", "--journal-size", "16M", f.dataDir); err != nil {
		t.Fatal(err)
	}
	f.mount()
	return f, small
}
