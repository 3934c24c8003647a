package lsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

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

// TestJournalRoomRefusalAsksForReclaim: while flushes fail for lack of room
// (background work blocked, the engine not counting as full), a deletion
// does not ask for a reclaim pass itself; the first batch refused for space
// does. A batch refused because the journal ring is nearly full (which it
// fills in that state: no flush, no checkpoint) is one, or the pass that
// would turn the deletion into free space is never asked for. Deletions
// are still accepted once writes are refused.
func TestJournalRoomRefusalAsksForReclaim(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem(), nil)
	o := &Options{FS: efs, UUID: [16]byte{0xfa, 0x18}, ValueThreshold: -1, CacheSize: -1, SpaceReserve: -1,
		MemtableSize: 64 << 20, InMemoryFlushSize: 1 << 20, // the 4 MiB ring fills first
		Journal: JournalOptions{Size: 4 << 20, CommitInterval: time.Hour, MaxFrameBytes: 64 << 10}}
	if err := Format("/db", o); err != nil {
		t.Fatal(err)
	}
	d, err := Open("/db", o)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	efs.SetInjector(vfs.Randomly(1, 1, vfs.ENOSPC, vfs.And(vfs.Kinds(vfs.OpWrite, vfs.OpCreate), vfs.PathContains(".sst"))))
	rng := rand.New(rand.NewPCG(1, 1))
	v := make([]byte, 32<<10)
	put := func(i int) error {
		for k := range v {
			v[k] = byte(rng.Uint32()) // incompressible: frames take their size in the ring
		}
		b := NewBatch()
		b.Set([]byte(fmt.Sprintf("k%05d", i)), v)
		return d.Apply(b, i%8 == 0)
	}
	var refused error
	deleted := false
	for i := 0; i < 10000 && refused == nil; i++ {
		if err := put(i); err != nil {
			if !errors.Is(err, ErrNoSpace) {
				t.Fatalf("put %d: %v", i, err)
			}
			if deleted {
				refused = err
				break
			}
			// Refused before the state the deletion needs was seen: a
			// writer already waiting for ring space when the flush failed
			// gives up (ringWaitStop), and a failed flush makes the
			// engine full until statfs is read again.
			time.Sleep(time.Millisecond)
		}
		if !deleted && d.space.blockedFlag.Load() && !d.space.full.Load() {
			// (A failed flush makes the engine full until its next
			// statfs finds room: there is plenty, only tables fail.)
			// The retry timer is stopped first: its flush, failing,
			// would make the engine full again between the check and
			// the delete (review). Blocked without a timer, nothing
			// starts a flush until the reclaim pass.
			d.mu.Lock()
			d.stopSpaceTimerLocked()
			ok := d.space.blocked && !d.space.full.Load() && !d.mu.flushing
			d.mu.Unlock()
			if !ok {
				continue
			}
			b := NewBatch()
			b.Delete([]byte("k00000"))
			if err := d.Apply(b, false); err != nil {
				t.Fatalf("delete: %v", err)
			}
			deleted = true
			if !d.space.freedSince.Load() || d.space.full.Load() {
				t.Fatalf("after a delete while blocked: freedSince %v, full %v; want a pending pass, not full", d.space.freedSince.Load(), d.space.full.Load())
			}
		}
	}
	if !deleted || !errors.Is(refused, ErrNoSpace) {
		t.Fatalf("never blocked (deleted %v) or not refused for space: %v", deleted, refused)
	}
	if d.space.freedSince.Load() {
		t.Fatalf("a batch was refused for space (%v) and the deletion's reclaim pass was not asked for", refused)
	}
	// Deletions still get in: the ring keeps room for them (an rm on a
	// full filesystem must not fail because writes filled the journal).
	for i := 1; i < 20; i++ {
		b := NewBatch()
		b.Delete([]byte(fmt.Sprintf("k%05d", i)))
		if err := d.Apply(b, i%4 == 0); err != nil {
			t.Fatalf("delete %d after writes were refused: %v", i, err)
		}
	}
	if err := put(99999); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("a write after the deletions: %v, want ErrNoSpace (the ring is as full)", err)
	}
}
