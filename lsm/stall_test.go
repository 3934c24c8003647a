package lsm_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestLargeBatchesWithSmallMemtable: batches close to the memtable size must
// neither stall forever nor fail.
func TestLargeBatchesWithSmallMemtable(t *testing.T) {
	fs := vfs.NewMem()
	opts := &lsm.Options{FS: fs, UUID: [16]byte{1}, MemtableSize: 256 << 10, Journal: lsm.JournalOptions{Size: 8 << 20}}
	if err := lsm.Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 64; i++ {
			b := lsm.NewBatch()
			for j := 0; j < 8; j++ {
				b.Set([]byte(fmt.Sprintf("f%03d/b%02d", i, j)), make([]byte, 16<<10))
			}
			if err := db.Apply(b, i%4 == 0); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Apply stalled")
	}
	if v, err := db.Get([]byte("f063/b07")); err != nil || len(v) != 16<<10 {
		t.Fatalf("get: %d %v", len(v), err)
	}
}
