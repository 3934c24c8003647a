package sstable_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/sstable"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestCloseSyncs checks that a closed table survives a crash once its
// directory entry is durable: Close synced the data.
func TestCloseSyncs(t *testing.T) {
	fs := vfs.NewMem()
	f, err := fs.Create("t.sst")
	if err != nil {
		t.Fatal(err)
	}
	w := sstable.NewWriter(f, sstable.DefaultWriterOptions())
	kvs := randomKVs(rand.New(rand.NewPCG(1, 1)), 500, 2, 100)
	for _, e := range kvs {
		if err := w.Add(e.key, e.value); err != nil {
			t.Fatal(err)
		}
	}
	m, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.SyncDir(""); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone()
	rf, err := crashed.Open("t.sst")
	if err != nil {
		t.Fatal(err)
	}
	r, err := sstable.Open(rf, int64(m.Size), sstable.ReaderOptions{})
	if err != nil {
		t.Fatalf("table lost by a crash after Close: %v", err)
	}
	defer r.Close()
	it := r.NewIter()
	defer it.Close()
	if got, err := scanAll(it); err != nil || len(got) != len(kvs) {
		t.Fatalf("scan after crash: %d entries, %v", len(got), err)
	}
}

// TestWriterIOErrorSticky fills the filesystem: the write error surfaces
// with context, and every later call returns it.
func TestWriterIOErrorSticky(t *testing.T) {
	fs := vfs.NewMem()
	fs.SetCapacity(64 << 10)
	f, err := fs.Create("t.sst")
	if err != nil {
		t.Fatal(err)
	}
	w := sstable.NewWriter(f, sstable.WriterOptions{DisableCompression: true})
	var first error
	for i := 0; first == nil && i < 1_000_000; i++ {
		first = w.Add(base.MakeInternalKey(fmt.Appendf(nil, "k%08d", i), 1, base.KindSet), make([]byte, 100))
	}
	if first == nil {
		// The buffer may hold everything until Close.
		_, first = w.Close()
	}
	if !errors.Is(first, syscall.ENOSPC) || errors.Is(first, base.ErrCorrupt) {
		t.Fatalf("first error %v, want ENOSPC", first)
	}
	if err := w.Add(base.MakeInternalKey([]byte("z"), 1, base.KindSet), nil); err == nil {
		t.Fatal("Add after a write error succeeded")
	}
	if _, err := w.Close(); err == nil {
		t.Fatal("Close after a write error succeeded")
	}
	w.Abort()
}

// failingFile fails every ReadAt after the first n.
type failingFile struct {
	bytesFile
	n   atomic.Int64
	err error
}

func (f *failingFile) ReadAt(p []byte, off int64) (int, error) {
	if f.n.Add(-1) < 0 {
		return 0, f.err
	}
	return f.bytesFile.ReadAt(p, off)
}

// TestReadIOError injects a read error at each read of Open and of a scan:
// it surfaces wrapped, is not reported as corruption, and sticks.
func TestReadIOError(t *testing.T) {
	kvs := randomKVs(rand.New(rand.NewPCG(2, 2)), 300, 2, 100)
	data, _ := writeTable(t, sstable.WriterOptions{BlockSize: 512, BloomBitsPerKey: 10}, kvs, []base.RangeTombstone{{Start: []byte("a"), End: []byte("b"), Seq: 5}})
	injected := errors.New("injected EIO")
	sawOpen, sawIter := false, false
	for n := int64(0); ; n++ {
		f := &failingFile{bytesFile: newBytesFile(data), err: injected}
		f.n.Store(n)
		r, err := sstable.Open(f, int64(len(data)), sstable.ReaderOptions{FileName: "x.sst"})
		if err != nil {
			if !errors.Is(err, injected) || errors.Is(err, base.ErrCorrupt) {
				t.Fatalf("read %d: Open error %v", n, err)
			}
			sawOpen = true
			continue
		}
		it := r.NewIter()
		_, err = scanAll(it)
		it.Close()
		r.Close()
		if err == nil {
			break
		}
		if !errors.Is(err, injected) || errors.Is(err, base.ErrCorrupt) {
			t.Fatalf("read %d: scan error %v", n, err)
		}
		sawIter = true
	}
	if !sawOpen || !sawIter {
		t.Fatalf("errors seen at open %v, in scan %v", sawOpen, sawIter)
	}
}
