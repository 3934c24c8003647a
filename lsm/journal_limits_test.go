package lsm

import (
	"errors"
	"fmt"
	"github.com/lsmfs/lsmfs/journal"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestBatchTooLargeForJournalKeepsEngine: Apply admits a batch up to
// Journal.Size/4 (the option, not the ring the journal really has), but the
// journal refuses a frame larger than a quarter of its ring (ring = device
// minus two superblock blocks; plus frame header and block rounding). The
// journal's ErrRecordTooLarge then reaches applyLocked, which records it as
// the engine's sticky background error: one oversized batch makes the engine
// refuse every later write. It should fail alone with ErrBatchTooLarge
// (fs/writebuf.go splits its batch on exactly that error).
func TestBatchTooLargeForJournalKeepsEngine(t *testing.T) {
	for _, tc := range []struct {
		name       string
		formatSize int64 // journal size at Format (mkfs)
		openSize   int64 // Journal.Size at Open (a mount passes none: default)
		batch      int
	}{
		// The same options at Format and Open: a batch just below 1 MiB.
		{"same-options", 4 << 20, 4 << 20, 1<<20 - 1000},
		// mkfs with a 4 MiB journal (or a small journal device), mounted
		// with defaults: Journal.Size defaults to 256 MiB at Open.
		{"mount-defaults", 4 << 20, 0, 2 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := vfs.NewMem()
			fo := &Options{FS: fsys, UUID: [16]byte{9}, ValueThreshold: -1, Journal: JournalOptions{Size: tc.formatSize}}
			if err := Format("/db", fo); err != nil {
				t.Fatal(err)
			}
			oo := &Options{FS: fsys, UUID: [16]byte{9}, ValueThreshold: -1, Journal: JournalOptions{Size: tc.openSize}}
			d, err := Open("/db", oo)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			b := NewBatch()
			b.Set([]byte("big"), make([]byte, tc.batch-100))
			err = d.Apply(b, true)
			t.Logf("apply of a %d-byte batch: %v", b.Len(), err)
			if err != nil && !errors.Is(err, ErrBatchTooLarge) {
				t.Errorf("apply of a batch too large for the journal: %v, want nil or ErrBatchTooLarge", err)
			}
			small := NewBatch()
			small.Set([]byte("small"), []byte("v"))
			if err := d.Apply(small, true); err != nil {
				t.Fatalf("a small batch after it: %v (the engine fail-stopped)", err)
			}
		})
	}
}

// TestSmallJournalOpensAfterCrash: the engine with the smallest
// journal it accepts (4 MiB) and the default MaxFrameBytes: small
// incompressible batches applied without sync gather into one frame longer
// than a quarter of the ring; SyncJournal acknowledges it; after a crash
// Open refuses the journal as corrupt (frames follow the oversized one).
func TestSmallJournalOpensAfterCrash(t *testing.T) {
	fsys := vfs.NewMem()
	opts := &Options{FS: fsys, UUID: [16]byte{9}, ValueThreshold: -1,
		Journal: JournalOptions{Size: 4 << 20, DisableCompression: true}}
	if err := Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	d, err := Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	v := make([]byte, 200)
	for i := 0; i < 6000; i++ {
		for k := range v {
			v[k] = byte(rng.Uint32())
		}
		b := NewBatch()
		b.Set([]byte(fmt.Sprintf("k%05d", i)), v)
		if err := d.Apply(b, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.SyncJournal(); err != nil {
		t.Fatal(err)
	}
	b := NewBatch()
	b.Set([]byte("last"), []byte("v"))
	if err := d.Apply(b, true); err != nil {
		t.Fatal(err)
	}
	t.Logf("journal: %+v", d.Metrics().Journal)
	crashed := fsys.CrashClone()
	d.Close()
	d2, err := Open("/db", &Options{FS: crashed, UUID: [16]byte{9}, ValueThreshold: -1,
		Journal: JournalOptions{Size: 4 << 20, DisableCompression: true}})
	if err != nil {
		t.Fatalf("open after a crash, every batch acknowledged by SyncJournal: %v", err)
	}
	defer d2.Close()
	t.Logf("recovery: %+v", d2.wal.Recovery())
	if _, err := d2.Get([]byte("last")); err != nil {
		t.Fatalf("get of a synced key after the crash: %v", err)
	}
}

// TestReopenFullJournalAllInTables: a crash after a flush
// recorded its tables in the manifest but before its Checkpoint reached the
// journal superblock (or a Checkpoint that failed with EIO, then a remount)
// leaves a journal whose live records are all in tables. Replay skips them
// all (replayed == 0), so Open schedules no flush and never checkpoints. If
// the stale live part fills the ring, the first writer waits for ring space
// with d.commit held; OnPressure -> relieveJournalPressure finds the mutable
// memtable empty and the queue empty, so no flush runs and no Checkpoint
// ever comes: the write (and every later one, and Close) hangs forever.
// (vs.journalLSN, recorded by every flush, is never used to checkpoint.)
func TestReopenFullJournalAllInTables(t *testing.T) {
	fsys := vfs.NewMem()
	opts := func() *Options {
		return &Options{FS: fsys, UUID: [16]byte{9}, ValueThreshold: -1,
			Journal: JournalOptions{Size: 4 << 20, DisableCompression: true}}
	}
	if err := Format("/db", opts()); err != nil {
		t.Fatal(err)
	}
	d, err := Open("/db", opts())
	if err != nil {
		t.Fatal(err)
	}
	old := NewBatch()
	old.Set([]byte("k"), make([]byte, 100<<10))
	if err := d.Apply(old, true); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil { // flushes: the batch is in a table
		t.Fatal(err)
	}
	// The state a crash between the flush's manifest write and its
	// Checkpoint leaves: journal frames not checkpointed whose batches the
	// tables hold (same seq as the flushed one), filling most of the ring.
	f, err := fsys.OpenReadWrite("/db/journal")
	if err != nil {
		t.Fatal(err)
	}
	j, err := journal.Open(f, journal.Options{UUID: [16]byte{9}, DisableCompression: true})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < 36; i++ { // 36 x ~104 KiB of a 4 MiB ring
		b := NewBatch()
		v := make([]byte, 100<<10)
		for k := range v {
			v[k] = byte(rng.Uint32())
		}
		b.Set([]byte("k"), v)
		b.setSeq(1)
		if _, err := j.Append([][]byte{b.repr}, true); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("journal before reopen: %v", j.Stats())
	j.Close()

	d, err = Open("/db", opts())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after open: %v", d.Metrics().Journal)
	done := make(chan error, 1)
	go func() {
		b := NewBatch()
		b.Set([]byte("new"), make([]byte, 600<<10))
		done <- d.Apply(b, true)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("first write after reopen: %v", err)
		}
		d.Close()
	case <-time.After(5 * time.Second):
		t.Fatalf("first write after reopen still waits for journal space after 5s (journal: %v)", d.Metrics().Journal)
	}
}
