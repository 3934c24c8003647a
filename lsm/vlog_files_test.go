package lsm_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// countFS counts the value-log files opened with Open and not closed.
type countFS struct {
	vfs.FS
	open atomic.Int64
}

type countFile struct {
	vfs.File
	fs     *countFS
	closed bool
}

func (c *countFS) Open(name string) (vfs.File, error) {
	f, err := c.FS.Open(name)
	if err != nil || !strings.HasSuffix(name, ".vlog") {
		return f, err
	}
	c.open.Add(1)
	return &countFile{File: f, fs: c}, nil
}

func (f *countFile) Close() error {
	if !f.closed {
		f.closed = true
		f.fs.open.Add(-1)
	}
	return f.File.Close()
}

// TestVlogReaderFilesBounded: the value-log reader kept every segment file
// it ever read open until the segment was cleaned or the engine closed, so
// the descriptors held grew with the data (one per 64 MiB segment by
// default: 16k for 1 TiB), with no bound like the table cache's. Past
// RLIMIT_NOFILE every open fails with EMFILE: reads of file data fail,
// and so do the cleaner and compactions. It now keeps the most recently
// used ones (vlog.DefaultMaxOpen), and the reads all succeed.
func TestVlogReaderFilesBounded(t *testing.T) {
	cfs := &countFS{FS: vfs.NewMem()}
	o := faultOptions(cfs)
	o.ValueThreshold = 100
	if err := lsm.Format("/db", o); err != nil {
		t.Fatal(err)
	}
	db := openFault(t, cfs, o)
	v := strings.Repeat("v", 4000)
	const n = 3000 // about 16 values per 64 KiB segment: ~190 segments
	for i := 0; i < n; i += 10 {
		b := lsm.NewBatch()
		for j := i; j < i+10; j++ {
			b.Set([]byte(fmt.Sprintf("k%05d", j)), []byte(v))
		}
		if err := db.Apply(b, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openFault(t, cfs, o)
	defer db.Close()
	db.SetVlogMaxOpen(64) // the default, 1024, is past the segments here
	for i := 0; i < n; i += 16 {
		if _, err := db.Get([]byte(fmt.Sprintf("k%05d", i))); err != nil {
			t.Fatal(err)
		}
	}
	segs := db.Metrics().Vlog.Segments
	if held := cfs.open.Load(); held > 64 {
		t.Fatalf("%d value-log files held open after reading from %d segments", held, segs)
	}
}
