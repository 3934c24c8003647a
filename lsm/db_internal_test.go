package lsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/lsmfs/lsmfs/journal"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestNewIterRacingCleaner: between NewIter's registration of its sequence
// number and the loading of its read state, the memtable rotates, a file's
// values are deleted and compacted away, and the cleaner retires their
// segments. The iterator must neither fail reading a removed segment (it
// did when the read state was loaded first: errSegmentGone from an
// iterator, which does not retry) nor keep the segments once closed.
func TestNewIterRacingCleaner(t *testing.T) {
	opts := &Options{FS: vfs.NewMem(), UUID: [16]byte{5}, ValueThreshold: 100, VlogSegmentSize: 64 << 10, VlogCleanThreshold: 0.001}
	if err := Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	d, err := Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	key := func(blk uint64) []byte { return binary.BigEndian.AppendUint64([]byte("B"), blk) }
	val := make([]byte, 1024)
	const blocks = 640 // 10 segments
	for blk := range uint64(blocks) {
		b := NewBatch()
		binary.BigEndian.PutUint64(val, blk)
		b.Set(key(blk), val)
		if err := d.Apply(b, false); err != nil {
			t.Fatal(err)
		}
	}
	cleaned := 0
	d.testHookNewIter = func() {
		d.testHookNewIter = nil
		// The delete goes to a memtable the read state loaded first
		// would not hold.
		if err := d.Flush(); err != nil {
			t.Error(err)
			return
		}
		b := NewBatch()
		b.DeleteRange(key(0), key(blocks))
		if err := d.Apply(b, false); err != nil {
			t.Error(err)
			return
		}
		if err := d.Compact(nil, nil); err != nil { // rotates, and counts the discards
			t.Error(err)
			return
		}
		n, err := d.CleanValueLog()
		if err != nil {
			t.Error(err)
		}
		cleaned = n
	}
	it := d.NewIter(&IterOptions{LowerBound: key(0), UpperBound: key(blocks)})
	if cleaned == 0 {
		t.Fatal("the cleaner retired no segment during NewIter: the test sets up nothing")
	}
	seen := 0
	for ok := it.First(); ok; ok = it.Next() {
		if it.Value() == nil {
			break
		}
		seen++
	}
	if err := it.Close(); err != nil {
		t.Fatalf("iterator over the deleted file (%d keys seen): %v", seen, err)
	}
	if seen != 0 {
		t.Fatalf("iterator saw %d keys of a file deleted before its read state was loaded", seen)
	}
	// Closed, the iterator no longer holds the retired segments.
	if _, err := d.CleanValueLog(); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	zombies, readers := len(d.mu.zombies), len(d.mu.iterSeqs)
	d.mu.Unlock()
	if zombies != 0 || readers != 0 {
		t.Fatalf("after Close: %d segments kept for readers, %d reader sequence numbers registered", zombies, readers)
	}
	t.Logf("%d segments retired while the iterator opened", cleaned)
}

// TestJournalErrorIsCorrupt: a damaged journal is the engine's ErrCorrupt
// too (fsck's exit code depends on it); other journal errors are not.
func TestJournalErrorIsCorrupt(t *testing.T) {
	damaged := fmt.Errorf("journal: recover frame seq=3 off=4096: %w: bad checksum", journal.ErrCorrupt)
	if err := journalError(damaged); !errors.Is(err, ErrCorrupt) || !errors.Is(err, journal.ErrCorrupt) {
		t.Fatalf("journalError(%v) = %v, want both ErrCorrupt", damaged, err)
	}
	if err := journalError(syscall.EIO); errors.Is(err, ErrCorrupt) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("journalError(EIO) = %v", err)
	}
}
