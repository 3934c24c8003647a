package vfs_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// fiemap returns the extents of f's [0, size) as (length, flags) pairs,
// from the FS_IOC_FIEMAP ioctl (synced first).
func fiemap(t *testing.T, f *os.File, size int64) [][2]uint64 {
	t.Helper()
	const (
		fsIocFiemap   = 0xC020660B // _IOWR('f', 11, struct fiemap)
		flagSync      = 0x1
		headerLen     = 32
		extentLen     = 56
		maxExtents    = 256
		extentLast    = 0x1
		offMapped     = 20
		offCount      = 24
		offExtLength  = 16
		offExtFlags   = 40
		offFlagsInHdr = 16
	)
	buf := make([]byte, headerLen+maxExtents*extentLen)
	binary.NativeEndian.PutUint64(buf[8:], uint64(size))
	binary.NativeEndian.PutUint32(buf[offFlagsInHdr:], flagSync)
	binary.NativeEndian.PutUint32(buf[offCount:], maxExtents)
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFiemap, uintptr(unsafe.Pointer(&buf[0])))
	if errno == unix.EOPNOTSUPP || errno == unix.ENOTTY {
		t.Skipf("FIEMAP not supported on %s's filesystem", f.Name())
	}
	if errno != 0 {
		t.Fatalf("FIEMAP: %v", errno)
	}
	n := binary.NativeEndian.Uint32(buf[offMapped:])
	var out [][2]uint64
	for i := range n {
		e := buf[headerLen+int(i)*extentLen:]
		out = append(out, [2]uint64{binary.NativeEndian.Uint64(e[offExtLength:]), uint64(binary.NativeEndian.Uint32(e[offExtFlags:]))})
	}
	return out
}

// TestPreallocateWritesBlocks: Preallocate on an OS file keeps what was
// written, reads zeros past it, and leaves no unwritten extent (ext4 and XFS
// mark fallocated blocks unwritten, and the first write into one makes its
// fdatasync commit the filesystem's journal: a journal frame's force would
// cost two).
func TestPreallocateWritesBlocks(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	f, err := vfs.Default.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := bytes.Repeat([]byte("lsmfs"), 1000)
	if _, err := f.WriteAt(head, 0); err != nil {
		t.Fatal(err)
	}
	const size = 5<<20 + 4096
	if err := f.Preallocate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Preallocate(4096); err != nil { // smaller: nothing changes
		t.Fatal(err)
	}
	if n, err := f.Size(); err != nil || n != size {
		t.Fatalf("size %d, %v; want %d", n, err, size)
	}
	got := make([]byte, size)
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:len(head)], head) {
		t.Fatal("Preallocate changed the written head of the file")
	}
	if !bytes.Equal(got[len(head):], make([]byte, size-len(head))) {
		t.Fatal("Preallocate's range does not read as zeros")
	}
	osf, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer osf.Close()
	var total uint64
	for _, e := range fiemap(t, osf, size) {
		if e[1]&0x800 != 0 { // FIEMAP_EXTENT_UNWRITTEN
			t.Fatalf("extents %v: an unwritten extent is left", fiemap(t, osf, size))
		}
		total += e[0]
	}
	if total < size {
		t.Fatalf("extents cover %d bytes of %d: a hole is left", total, size)
	}
}
