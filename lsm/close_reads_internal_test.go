package lsm

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// trackFS counts open handles per path and runs a hook before a Remove.
type trackFS struct {
	vfs.FS
	mu   sync.Mutex
	open map[string]int
}

type trackFile struct {
	vfs.File
	fs     *trackFS
	name   string
	closed atomic.Bool
}

func (f *trackFile) Close() error {
	if f.closed.CompareAndSwap(false, true) {
		f.fs.mu.Lock()
		f.fs.open[f.name]--
		f.fs.mu.Unlock()
	}
	return f.File.Close()
}

func (t *trackFS) Open(name string) (vfs.File, error) {
	f, err := t.FS.Open(name)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.open[name]++
	t.mu.Unlock()
	return &trackFile{File: f, fs: t, name: name}, nil
}

// TestIterAfterClose: an iterator opened before DB.Close and moved after it
// fails with ErrClosed, and no file stays open once it is closed. It went
// on reading, opening each table it reached into the closed table cache for
// good (read-path review).
func TestIterAfterClose(t *testing.T) {
	tfs := &trackFS{FS: vfs.NewMem(), open: map[string]int{}}
	opts := &Options{FS: tfs, UUID: [16]byte{6}, ValueThreshold: -1, TargetFileSize: 64 << 10, CacheSize: -1, DisableCompression: true,
		Journal: JournalOptions{Size: 4 << 20}}
	if err := Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	d, err := Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	val := bytes.Repeat([]byte("v"), 500)
	for i := 0; i < 3000; i += 100 {
		b := NewBatch()
		for k := i; k < i+100; k++ {
			b.Set([]byte(fmt.Sprintf("k%05d", k)), val)
		}
		if err := d.Apply(b, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	it := d.NewIter(nil)
	if !it.First() {
		t.Fatal("empty")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	n := 1
	for it.Next() {
		n++
	}
	if n > 1 || !errors.Is(it.Error(), ErrClosed) {
		t.Errorf("after Close the iterator read %d keys, error %v; want ErrClosed at once", n, it.Error())
	}
	it.Close()
	tfs.mu.Lock()
	defer tfs.mu.Unlock()
	leaked := 0
	for name, c := range tfs.open {
		if c > 0 {
			t.Logf("%s: %d handles", name, c)
			leaked += c
		}
	}
	if leaked > 0 {
		t.Errorf("%d file handle(s) still open after DB.Close and Iterator.Close", leaked)
	}
}
