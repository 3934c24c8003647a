package lsm

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lsmfs/lsmfs/journal"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestFailedOpenLeavesJournal: Open promises "Nothing is written until
// the engine's files are known good: a failed Open leaves the directory as
// it found it". The checkpoint replay() now takes when nothing was replayed
// is written before the value log is checked and started; an Open that
// fails after it has already moved the journal's checkpoint.
func TestFailedOpenLeavesJournal(t *testing.T) {
	mem := vfs.NewMem()
	opts := func(fs vfs.FS) *Options {
		return &Options{FS: fs, UUID: [16]byte{9},
			Journal: JournalOptions{Size: 4 << 20, DisableCompression: true}}
	}
	if err := Format("/db", opts(mem)); err != nil {
		t.Fatal(err)
	}
	d, err := Open("/db", opts(mem))
	if err != nil {
		t.Fatal(err)
	}
	b := NewBatch()
	b.Set([]byte("k"), []byte("v"))
	if err := d.Apply(b, true); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// Frames the tables already hold (a crash between a flush's manifest
	// edit and its checkpoint).
	f, err := mem.OpenReadWrite("/db/journal")
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(f, journal.Options{UUID: [16]byte{9}, DisableCompression: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		b := NewBatch()
		b.Set([]byte("k"), []byte("v"))
		b.setSeq(1)
		if _, err := j.Append([][]byte{b.repr}, true); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	before := readAllMem(t, mem, "/db/journal")

	// An Open that fails after replay (here: the value log's segment
	// cannot be created, EIO).
	efs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpCreate && strings.HasSuffix(op.Path, ".vlog") {
			return vfs.EIO
		}
		return nil
	}))
	if d, err := Open("/db", opts(efs)); err == nil {
		d.Close()
		t.Fatal("open did not fail")
	} else {
		t.Logf("open failed as wanted: %v", err)
	}
	after := readAllMem(t, mem, "/db/journal")
	if !bytes.Equal(before, after) {
		t.Fatalf("a failed Open changed the journal (%d bytes differ)", diffCount(before, after))
	}
}

func readAllMem(t *testing.T, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, _ := f.Size()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

func diffCount(a, b []byte) int {
	n := 0
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			n++
		}
	}
	return n + max(len(a), len(b)) - min(len(a), len(b))
}
