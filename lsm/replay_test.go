package lsm_test

import (
	"fmt"
	"io"
	"testing"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

func copyFile(t *testing.T, from, to *vfs.MemFS, path string) {
	src, err := from.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	size, _ := src.Size()
	data := make([]byte, size)
	if _, err := src.ReadAt(data, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	src.Close()
	dst, err := to.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := dst.Sync(); err != nil {
		t.Fatal(err)
	}
	dst.Close()
}

// TestReplayAfterFlushAheadOfJournal: a flush made unsynced batches durable
// in a table, and power failed before the journal checkpoint was written
// (and before their frames were forced). The journal then reuses the LSNs of
// the lost frames for new batches; those must still be replayed after the
// next crash.
func TestReplayAfterFlushAheadOfJournal(t *testing.T) {
	fs := vfs.NewMem()
	opts := &lsm.Options{FS: fs, UUID: [16]byte{3}, Journal: lsm.JournalOptions{Size: 8 << 20}}
	if err := lsm.Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	put := func(db *lsm.DB, k string, sync bool) {
		b := lsm.NewBatch()
		b.Set([]byte(k), []byte("v-"+k))
		if err := db.Apply(b, sync); err != nil {
			t.Fatal(err)
		}
	}
	put(db, "a", true)
	for i := 0; i < 10; i++ {
		put(db, fmt.Sprint("b", i), false) // never forced in the journal
	}
	beforeFlush := fs.CrashClone() // the journal as it is before the flush
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	afterFlush := fs.CrashClone() // the manifest names the flushed table
	db.Close()
	// The power loss state: the manifest after the flush, the journal before
	// its checkpoint.
	copyFile(t, beforeFlush, afterFlush, "/db/journal")

	o := *opts
	o.FS = afterFlush
	db, err = lsm.Open("/db", &o)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		put(db, fmt.Sprint("c", i), false)
	}
	put(db, "d", true) // forces every frame before it
	crashed := afterFlush.CrashClone()
	db.Close()

	o.FS = crashed
	db, err = lsm.Open("/db", &o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, k := range []string{"a", "b0", "b9", "c0", "c9", "d"} {
		if v, err := db.Get([]byte(k)); err != nil || string(v) != "v-"+k {
			t.Errorf("after the second crash, %s: %q %v", k, v, err)
		}
	}
}
