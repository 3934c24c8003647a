package lsm_test

import (
	"errors"
	"testing"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestBatchJustUnderJournalLimit: Apply refuses a batch
// over maxBatchBytes (a quarter of Journal.Size) with ErrBatchTooLarge, which
// fs's flush handles by splitting. But the journal's frame limit is a
// quarter of the ring (Journal.Size minus the superblocks) in whole frames
// with a header: a batch a little under the Apply limit passes Apply's check,
// Enqueue refuses it with ErrRecordTooLarge, and applyLocked makes that a
// sticky background error: the engine stops accepting writes (every later
// write(2) is EIO) because of one large batch that should just have been
// refused (or split).
func TestBatchJustUnderJournalLimit(t *testing.T) {
	opts := func() *lsm.Options {
		return &lsm.Options{FS: vfs.NewMem(), UUID: [16]byte{9}, ValueThreshold: -1, CacheSize: -1,
			MemtableSize: 4 << 20, Journal: lsm.JournalOptions{Size: 4 << 20}}
	}
	o := opts()
	if err := lsm.Format("/db", o); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open("/db", o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := lsm.NewBatch()
	b.Set([]byte("k"), make([]byte, (4<<20)/4-1024)) // under the Apply limit
	err = db.Apply(b, false)
	t.Logf("Apply of a %d-byte batch: %v", b.Len(), err)
	if err != nil && !errors.Is(err, lsm.ErrBatchTooLarge) {
		t.Errorf("a batch under Apply's limit failed with %v, not ErrBatchTooLarge (which callers split on)", err)
	}
	b2 := lsm.NewBatch()
	b2.Set([]byte("small"), []byte("v"))
	if err := db.Apply(b2, false); err != nil {
		t.Fatalf("the engine refuses every write after that one batch: %v", err)
	}
}
