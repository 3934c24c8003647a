package vfs_test

import (
	"path/filepath"
	"testing"

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
