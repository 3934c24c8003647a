package vfs_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
	"unsafe"

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

// TestWriteAtDirect: an OS file written partly through the page cache and
// partly with O_DIRECT reads back whole, through its own descriptor and a
// new one; a misaligned direct write is refused with ErrNoDirect, so the
// caller can fall back.
func TestWriteAtDirect(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := vfs.Default.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dw, ok := f.(vfs.DirectWriter)
	if !ok {
		t.Fatal("an OS file is not a vfs.DirectWriter")
	}
	want := make([]byte, 5*vfs.DirectAlign+100)
	for i := range want {
		want[i] = byte(i*7 + i>>12)
	}
	if _, err := f.WriteAt(want[:vfs.DirectAlign], 0); err != nil {
		t.Fatal(err)
	}
	mem := make([]byte, 5*vfs.DirectAlign)
	if a := int(uintptr(unsafe.Pointer(&mem[0])) % vfs.DirectAlign); a != 0 {
		mem = mem[vfs.DirectAlign-a:]
	}
	mid := mem[:3*vfs.DirectAlign]
	copy(mid, want[vfs.DirectAlign:4*vfs.DirectAlign])
	if _, err := dw.WriteAtDirect(mid, vfs.DirectAlign); errors.Is(err, vfs.ErrNoDirect) {
		t.Skipf("the test directory's filesystem refuses O_DIRECT: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(want[4*vfs.DirectAlign:], 4*vfs.DirectAlign); err != nil {
		t.Fatal(err)
	}
	for _, g := range []vfs.File{f, reopen(t, path)} {
		got := make([]byte, len(want))
		if _, err := g.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatal("the file does not read back as written")
		}
	}
	if _, err := dw.WriteAtDirect(mid, 100); !errors.Is(err, vfs.ErrNoDirect) {
		t.Fatalf("misaligned direct write: got %v, want ErrNoDirect", err)
	}
	mf, err := vfs.NewMem().Create("f")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := mf.(vfs.DirectWriter); ok {
		t.Fatal("a MemFS file claims O_DIRECT")
	}
}

func reopen(t *testing.T, path string) vfs.File {
	g, err := vfs.Default.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}
