package lsm_test

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/lsmfs/lsmfs/journal"
	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestReplayHugeBatchCount: a journal record (in a frame with a valid
// checksum) whose batch header claims 37,000,000 entries but holds one. Open
// must refuse it as corrupt without sizing a memtable for that count: it
// allocated a 4 GiB arena before decoding the second entry (format review).
func TestReplayHugeBatchCount(t *testing.T) {
	mem := vfs.NewMem()
	opts := &lsm.Options{FS: mem, UUID: [16]byte{1}, Journal: lsm.JournalOptions{Size: 4 << 20}}
	if err := lsm.Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	b := lsm.NewBatch()
	b.Set([]byte("a"), []byte("1"))
	if err := db.Apply(b, true); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := mem.OpenReadWrite("/db/journal")
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(f, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// batch: version 1 | seq u64 | count u32 | entries
	rec := binary.LittleEndian.AppendUint64([]byte{1}, 2)
	rec = binary.LittleEndian.AppendUint32(rec, 37_000_000)
	rec = append(rec, 1 /* KindSet */, 1, 'b', 1, '2')
	if _, err := j.Append([][]byte{rec}, true); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = lsm.Open("/db", opts)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, lsm.ErrCorrupt) {
		t.Errorf("open: %v, want ErrCorrupt", err)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 256<<20 {
		t.Errorf("a %d-byte journal record made Open allocate %d MiB", len(rec), d>>20)
	}
}
