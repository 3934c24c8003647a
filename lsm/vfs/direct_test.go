package vfs_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestReadAtDirect: a file opened for reading reads around the page cache
// what was written through another descriptor, dirty pages included, down
// to a last block cut by the file's end (io.EOF with the bytes there are);
// it refuses unaligned reads; Cached tells whether the page cache holds a
// range; Close closes the second descriptor too. Files opened for writing
// and in-memory files do not offer direct reads.
func TestReadAtDirect(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	w, err := vfs.Default.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const size = 3<<20 + 123
	want := make([]byte, size)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	if _, err := w.WriteAt(want, 0); err != nil { // dirty, not synced
		t.Fatal(err)
	}
	if _, ok := w.(vfs.DirectReader); ok {
		t.Error("a file opened for writing offers direct reads")
	}
	fds := openFDs(t)
	f, err := vfs.Default.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := f.(vfs.DirectReader)
	if !ok {
		t.Fatal("an OS file opened for reading is not a vfs.DirectReader")
	}
	stat := cachestat(t, f)
	if stat && !d.Cached(0, size) {
		t.Error("Cached: a file just written is not all in the page cache")
	}
	buf := vfs.AlignedBuffer(1 << 20)
	if p := uintptr(unsafe.Pointer(&buf[0])); p%vfs.DirectAlign != 0 {
		t.Fatalf("AlignedBuffer at %#x", p)
	}
	for _, off := range []int64{0, 1 << 20, 2 << 20} {
		clear(buf)
		n, err := d.ReadAtDirect(buf, off)
		if errors.Is(err, vfs.ErrNoDirect) {
			t.Skipf("%s does not take O_DIRECT", dir)
		}
		if err != nil || n != len(buf) || !bytes.Equal(buf, want[off:off+int64(n)]) {
			t.Fatalf("ReadAtDirect at %d: %d, %v (bytes equal: %v)", off, n, err, bytes.Equal(buf[:n], want[off:off+int64(n)]))
		}
	}
	// The last block: 123 bytes, then the end of the file.
	tail := buf[:vfs.DirectAlign]
	n, err := d.ReadAtDirect(tail, 3<<20)
	if n != 123 || err != io.EOF || !bytes.Equal(tail[:n], want[3<<20:]) {
		t.Fatalf("ReadAtDirect of the last block: %d, %v", n, err)
	}
	for _, c := range []struct {
		p   []byte
		off int64
	}{{buf[:4096], 100}, {buf[:1000], 0}, {buf[1 : 4096+1], 0}} {
		if _, err := d.ReadAtDirect(c.p, c.off); !errors.Is(err, unix.EINVAL) {
			t.Errorf("unaligned ReadAtDirect (len %d at %d): %v, want EINVAL", len(c.p), c.off, err)
		}
	}
	// Synced and dropped, the pages leave the cache.
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.(vfs.CacheDropper).DropCache(0, size); err != nil {
		t.Fatal(err)
	}
	if d.Cached(0, size) {
		t.Error("Cached: true after the pages were dropped")
	}
	// One page read back through the cache: that page is cached, the
	// file is not.
	if _, err := f.ReadAt(buf[:4096], 1<<20); err != nil {
		t.Fatal(err)
	}
	if stat && (!d.Cached(1<<20, 4096) || d.Cached(0, size)) {
		t.Errorf("Cached after one page was read: that page %v, the file %v; want true, false",
			d.Cached(1<<20, 4096), d.Cached(0, size))
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := openFDs(t); got != fds {
		t.Errorf("%d descriptors open after Close, %d before Open", got, fds)
	}
	mf, err := vfs.NewMem().Create("f")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := mf.(vfs.DirectReader); ok {
		t.Error("a MemFS file claims direct reads")
	}
}

// cachestat reports whether the kernel answers cachestat(2) for f (Linux
// 6.5 and later, unless a seccomp filter refuses it); without it Cached
// reports false for every range.
func cachestat(t *testing.T, f vfs.File) bool {
	t.Helper()
	var st unix.Cachestat_t
	err := unix.Cachestat(uint(f.(interface{ Fd() uintptr }).Fd()), &unix.CachestatRange{Len: 1}, &st, 0)
	if err != nil {
		t.Logf("cachestat(2): %v; Cached is not checked", err)
	}
	return err == nil
}

// openFDs counts the process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// TestReadAtDirectRetriesOpen: a second descriptor that cannot be opened for
// want of descriptors (EMFILE) makes that read fall back (ErrNoDirect), and
// the next read, with descriptors to spare, opens it and reads around the
// cache: a passing shortage does not turn direct reads off for the file.
func TestReadAtDirectRetriesOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	want := bytes.Repeat([]byte{7}, 8192)
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := vfs.Default.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := f.(vfs.DirectReader)
	buf := vfs.AlignedBuffer(8192)

	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = uint64(lowestFreeFD(t)) // the next open would need a descriptor past it
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	_, err = d.ReadAtDirect(buf, 0)
	if rerr := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); rerr != nil {
		t.Fatal(rerr)
	}
	if !errors.Is(err, vfs.ErrNoDirect) {
		t.Fatalf("ReadAtDirect with no descriptor to spare: %v, want ErrNoDirect", err)
	}
	n, err := d.ReadAtDirect(buf, 0)
	if errors.Is(err, vfs.ErrNoDirect) {
		t.Fatal("a failed open for want of descriptors turned direct reads off")
	}
	if (err != nil && err != io.EOF) || n != len(want) || !bytes.Equal(buf, want) {
		t.Fatalf("ReadAtDirect after the shortage: %d, %v", n, err)
	}
}

// lowestFreeFD returns the lowest descriptor number not in use (the one an
// open gets).
func lowestFreeFD(t *testing.T) int {
	t.Helper()
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	return fd
}
