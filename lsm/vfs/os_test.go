package vfs_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestStartWriteback: OS files take the writeback hint (the value log uses
// it every few MiB); the in-memory filesystem's files do not offer it.
func TestStartWriteback(t *testing.T) {
	f, err := vfs.Default.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	wb, ok := f.(vfs.WriteBacker)
	if !ok {
		t.Fatal("an OS file is not a vfs.WriteBacker")
	}
	if err := wb.StartWriteback(0, 1<<20); err != nil {
		t.Fatalf("StartWriteback: %v", err)
	}
	mf, err := vfs.NewMem().Create("f")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := mf.(vfs.WriteBacker); ok {
		t.Fatal("a MemFS file claims writeback (it has nothing to write back)")
	}
}

// TestDropCache: an OS file's DropCache lets its clean cached pages go
// (mincore(2) of a mapping sees them leave), and a later read returns the
// same bytes. The value log uses it after reading a long run.
func TestDropCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := vfs.Default.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 1 << 20
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i * 13)
	}
	if _, err := f.WriteAt(want, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil { // dirty pages are not dropped
		t.Fatal(err)
	}
	got := make([]byte, size)
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if n := resident(t, path, size); n == 0 {
		t.Skip("the page cache did not keep the file's pages (nothing to drop)")
	}
	d, ok := f.(vfs.CacheDropper)
	if !ok {
		t.Fatal("an OS file is not a vfs.CacheDropper")
	}
	if err := d.DropCache(0, size); err != nil {
		t.Fatalf("DropCache: %v", err)
	}
	if n := resident(t, path, size); n != 0 {
		t.Errorf("%d pages resident after DropCache, want 0", n)
	}
	clear(got)
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("read after DropCache returned other bytes")
	}
	mf, err := vfs.NewMem().Create("f")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := mf.(vfs.CacheDropper); ok {
		t.Fatal("a MemFS file claims a page cache")
	}
}

// resident counts the pages of the file's first size bytes in the page
// cache.
func resident(t *testing.T, path string, size int) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (size+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(size), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestWriteAtv: a vectored write of more buffers than one pwritev(2) takes,
// empty ones among them, writes what WriteAt of the joined bytes would, on
// an OS file and (joined) on an in-memory one.
func TestWriteAtv(t *testing.T) {
	var bufs [][]byte
	var want []byte
	for i := range 3000 {
		b := bytes.Repeat([]byte{byte(i)}, i%7*100)
		bufs = append(bufs, b)
		want = append(want, b...)
	}
	osf, err := vfs.Default.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer osf.Close()
	if _, ok := osf.(vfs.VectorWriterAt); !ok {
		t.Fatal("an OS file is not a vfs.VectorWriterAt")
	}
	memf, err := vfs.NewMem().Create("f")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []vfs.File{osf, memf} {
		n, err := vfs.WriteAtv(f, append([][]byte(nil), bufs...), 100)
		if err != nil || n != len(want) {
			t.Fatalf("%T: WriteAtv: %d, %v; want %d", f, n, err, len(want))
		}
		got := make([]byte, len(want)+100)
		if _, err := f.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[100:], want) || !bytes.Equal(got[:100], make([]byte, 100)) {
			t.Fatalf("%T: the file differs from the joined buffers", f)
		}
	}
}
