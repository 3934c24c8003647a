package lsm_test

// Regression tests for bugs found in review: each failed before its fix.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lsmfs/lsmfs/blockcache"
	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestSnapshotStableUnderConcurrentFlush: a snapshot taken while a batch is
// still being inserted into a segment that a concurrent Flush rotated must
// keep its view (the flush read the snapshot list before the insert ended
// and dropped the version the snapshot sees).
func TestSnapshotStableUnderConcurrentFlush(t *testing.T) {
	for _, policy := range []lsm.MemtablePolicy{lsm.PolicyNone, lsm.PolicyEager} {
		t.Run(string(policy), func(t *testing.T) {
			fs := vfs.NewMem()
			opts := &lsm.Options{FS: fs, UUID: [16]byte{1}, ValueThreshold: -1, MemtablePolicy: policy,
				Journal: lsm.JournalOptions{Size: 64 << 20}}
			if err := lsm.Format("/db", opts); err != nil {
				t.Fatal(err)
			}
			db, err := lsm.Open("/db", opts)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var stop atomic.Bool
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { // writer: every batch overwrites A and is slow to insert
				defer wg.Done()
				for i := uint64(1); !stop.Load(); i++ {
					b := lsm.NewBatch()
					b.Set([]byte("A"), binary.BigEndian.AppendUint64(nil, i))
					for j := 0; j < 2000; j++ {
						b.Set([]byte(fmt.Sprintf("f%05d", j)), []byte("x"))
					}
					if err := db.Apply(b, false); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				for !stop.Load() {
					if err := db.Flush(); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			deadline := time.Now().Add(3 * time.Second)
			for time.Now().Before(deadline) && !t.Failed() {
				s := db.NewSnapshot()
				v1, err1 := s.Get([]byte("A"))
				time.Sleep(time.Millisecond)
				v2, err2 := s.Get([]byte("A"))
				if (err1 == nil) != (err2 == nil) || string(v1) != string(v2) {
					t.Errorf("the snapshot's view changed: %x (%v), then %x (%v)", v1, err1, v2, err2)
				}
				s.Close()
			}
			stop.Store(true)
			wg.Wait()
		})
	}
}

// TestSharedCacheIsolation: two engines sharing one block cache never read
// each other's blocks (cache keys are per-engine file numbers).
func TestSharedCacheIsolation(t *testing.T) {
	c, err := blockcache.New(8 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	open := func(id byte, val string) *lsm.DB {
		fs := vfs.NewMem()
		opts := &lsm.Options{FS: fs, UUID: [16]byte{id}, Cache: c, ValueThreshold: -1}
		if err := lsm.Format("/db", opts); err != nil {
			t.Fatal(err)
		}
		db, err := lsm.Open("/db", opts)
		if err != nil {
			t.Fatal(err)
		}
		b := lsm.NewBatch()
		b.Set([]byte("k"), []byte(val))
		if err := db.Apply(b, true); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		return db
	}
	a, b := open(1, "engine-A"), open(2, "engine-B")
	defer a.Close()
	defer b.Close()
	if v, err := a.Get([]byte("k")); err != nil || string(v) != "engine-A" {
		t.Fatalf("A: %q %v", v, err)
	}
	c.Wait()
	if v, err := b.Get([]byte("k")); err != nil || string(v) != "engine-B" {
		t.Fatalf("B read %q %v", v, err)
	}
}

func putRound(t *testing.T, db *lsm.DB, round byte) {
	val := make([]byte, 1000)
	for i := 0; i < 100; i++ {
		b := lsm.NewBatch()
		val[0] = round
		b.Set([]byte(fmt.Sprintf("k%03d", i)), val)
		if err := db.Apply(b, false); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSnapshotIteratorOutlivesSnapshot: an iterator made from a snapshot
// keeps reading after the snapshot is closed and the value log cleaned.
func TestSnapshotIteratorOutlivesSnapshot(t *testing.T) {
	fs := vfs.NewMem()
	opts := &lsm.Options{FS: fs, UUID: [16]byte{1}, ValueThreshold: 100, VlogSegmentSize: 64 << 10}
	if err := lsm.Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	putRound(t, db, 0)
	s := db.NewSnapshot()
	it := s.NewIter(nil)
	s.Close()
	putRound(t, db, 1)
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CleanValueLog(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if v := it.Value(); len(v) != 1000 || v[0] != 0 {
			break
		}
		n++
	}
	if err := it.Error(); err != nil || n != 100 {
		t.Errorf("read %d of 100 values of the snapshot; error %v", n, err)
	}
	it.Close()
}

// TestCleanedSegmentLeftOverIsRemoved: a segment the cleaner deleted but
// whose removal a crash undid is removed at open, not taken for a live one.
func TestCleanedSegmentLeftOverIsRemoved(t *testing.T) {
	fs := vfs.NewMem()
	opts := &lsm.Options{FS: fs, UUID: [16]byte{1}, ValueThreshold: 100, VlogSegmentSize: 64 << 10}
	if err := lsm.Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	putRound(t, db, 0)
	if err := db.SyncJournal(); err != nil {
		t.Fatal(err)
	}
	before := fs.CrashClone() // holds the round-0 segments
	putRound(t, db, 1)
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CleanValueLog(); err != nil {
		t.Fatal(err)
	}
	after := fs.CrashClone()
	db.Close()
	// Bring back a removed segment file, as a crash before the removal was
	// durable would.
	var resurrected string
	names, _ := before.List("/db")
	for _, n := range names {
		if strings.HasSuffix(n, ".vlog") {
			if _, err := after.Stat("/db/" + n); err != nil {
				resurrected = n
				f, _ := after.Create("/db/" + n)
				f.Close()
				copyFile(t, before, after, "/db/"+n)
				after.SyncDir("/db")
				break
			}
		}
	}
	if resurrected == "" {
		t.Fatal("no segment was removed")
	}
	o := *opts
	o.FS = after
	db, err = lsm.Open("/db", &o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := after.Stat("/db/" + resurrected); err == nil {
		t.Errorf("%s, deleted by the cleaner, is still there after open", resurrected)
	}
	for i := 0; i < 100; i++ {
		if v, err := db.Get([]byte(fmt.Sprintf("k%03d", i))); err != nil || v[0] != 1 {
			t.Fatalf("k%03d: %v", i, err)
		}
	}
}

// TestDamagedActiveSegment: a damaged record in the synced part of the
// segment that was active at a crash is corruption, not a torn tail. Open
// sealed the segment at the damage, which lost every acknowledged value
// after it, and the cleaner then removed the segment with them.
func TestDamagedActiveSegment(t *testing.T) {
	fs := vfs.NewMem()
	opts := &lsm.Options{FS: fs, UUID: [16]byte{1}, ValueThreshold: 64, VlogCleanThreshold: 0.99,
		Journal: lsm.JournalOptions{Size: 64 << 20}}
	if err := lsm.Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	val := func(i int) []byte { return []byte(strings.Repeat(fmt.Sprintf("value %04d ", i), 20)) }
	// Not synchronous batches: those keep small values inline until a
	// flush moves them to segments of its own; these go to the active one.
	for i := 0; i < 100; i++ {
		b := lsm.NewBatch()
		b.Set([]byte(fmt.Sprintf("k%04d", i)), val(i))
		if err := db.Apply(b, false); err != nil {
			t.Fatal(err)
		}
		if i == 50 {
			if err := db.Flush(); err != nil { // half the pointers in a table
				t.Fatal(err)
			}
		}
	}
	if err := db.SyncJournal(); err != nil { // all acknowledged
		t.Fatal(err)
	}
	crashed := fs.CrashClone()
	db.Close()
	names, err := crashed.List("/db")
	if err != nil {
		t.Fatal(err)
	}
	var seg string
	for _, n := range names {
		if strings.HasSuffix(n, ".vlog") {
			seg = "/db/" + n // the only segment: active at the crash
		}
	}
	f, err := crashed.OpenReadWrite(seg)
	if err != nil {
		t.Fatal(err)
	}
	size, _ := f.Size()
	if size < 100*int64(len(val(0))) {
		t.Fatalf("active segment of %d bytes: the values are not in it", size)
	}
	// Damage a value byte a third of the way in (records of keys in the
	// table) and, in a second copy, two thirds in (keys in the journal).
	for _, at := range []int64{size / 3, 2 * size / 3} {
		img := crashed.CrashClone()
		g, err := img.OpenReadWrite(seg)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		g.ReadAt(b, at)
		b[0] ^= 0x40
		g.WriteAt(b, at)
		g.Sync()
		g.Close()
		o := *opts
		o.FS = img
		db, err := lsm.Open("/db", &o)
		if err == nil {
			db.Close()
			t.Fatalf("damage at %d of %d: Open succeeded; want ErrCorrupt", at, size)
		}
		if !errors.Is(err, lsm.ErrCorrupt) {
			t.Fatalf("damage at %d: %v; want ErrCorrupt", at, err)
		}
		o.ReadOnly = true
		if db, err = lsm.Open("/db", &o); err != nil {
			t.Fatal(err)
		}
		rep, err := db.Check()
		db.Close()
		if err != nil || rep.OK() {
			t.Fatalf("damage at %d: read-only Check found nothing (%v): %s", at, err, rep.String())
		}
	}
	f.Close()
	// Undamaged, the crashed copy opens with every value.
	o := *opts
	o.FS = crashed
	if db, err = lsm.Open("/db", &o); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < 100; i++ {
		if v, err := db.Get([]byte(fmt.Sprintf("k%04d", i))); err != nil || string(v) != string(val(i)) {
			t.Fatalf("k%04d: %q, %v", i, v, err)
		}
	}
}

// TestConcurrentFormat: two Formats of one new directory (two first mounts,
// or mkfs and a first mount) must not interleave their files: exactly one
// succeeds, and the directory opens as that one's engine. Both passed the
// CURRENT check and wrote a journal and a manifest each, so the directory
// could hold one's journal and the other's manifest.
func TestConcurrentFormat(t *testing.T) {
	for i := 0; i < 20; i++ {
		dir := t.TempDir() + "/db"
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for g := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[g] = lsm.Format(dir, &lsm.Options{UUID: [16]byte{byte(g + 1)}, Journal: lsm.JournalOptions{Size: 4 << 20}})
			}()
		}
		wg.Wait()
		won := -1
		for g, err := range errs {
			if err == nil {
				if won >= 0 {
					t.Fatalf("round %d: both formats succeeded", i)
				}
				won = g
			}
		}
		if won < 0 {
			t.Fatalf("round %d: both formats failed: %v", i, errors.Join(errs...))
		}
		db, err := lsm.Open(dir, &lsm.Options{})
		if err != nil {
			t.Fatalf("round %d: open after the formats (%v): %v", i, errs, err)
		}
		if got := db.UUID(); got != [16]byte{byte(won + 1)} {
			t.Errorf("round %d: engine uuid %x, want the winner's", i, got)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestActiveSegmentZeroed: the value-log segment active at a crash, whose
// records durable pointers name, loses its header (a zeroed sector) or all
// of its bytes. Open must refuse with ErrCorrupt, and Check report it: a
// header of zeros was taken for a segment created just before the crash and
// never used, and the writable Open deleted it with every value in it.
func TestActiveSegmentZeroed(t *testing.T) {
	for _, whole := range []bool{false, true} {
		t.Run(fmt.Sprintf("whole=%v", whole), func(t *testing.T) {
			fs := vfs.NewMem()
			opts := &lsm.Options{FS: fs, UUID: [16]byte{1}, ValueThreshold: 64, Journal: lsm.JournalOptions{Size: 4 << 20}}
			if err := lsm.Format("/db", opts); err != nil {
				t.Fatal(err)
			}
			db, err := lsm.Open("/db", opts)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 40; i++ {
				b := lsm.NewBatch()
				b.Set(fmt.Appendf(nil, "k%04d", i), []byte(strings.Repeat(fmt.Sprintf("value %04d ", i), 20)))
				if err := db.Apply(b, false); err != nil { // sync batches keep small values inline
					t.Fatal(err)
				}
				if err := db.SyncJournal(); err != nil {
					t.Fatal(err)
				}
				if i == 20 {
					if err := db.Flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			crashed := fs.CrashClone()
			db.Close()
			names, _ := crashed.List("/db")
			var seg string
			for _, n := range names {
				if strings.HasSuffix(n, ".vlog") {
					seg = "/db/" + n
				}
			}
			f, err := crashed.OpenReadWrite(seg)
			if err != nil {
				t.Fatal(err)
			}
			zeros := 16
			if whole {
				fi, err := crashed.Stat(seg)
				if err != nil {
					t.Fatal(err)
				}
				zeros = int(fi.Size())
			}
			f.WriteAt(make([]byte, zeros), 0)
			f.Sync()
			f.Close()

			ro := *opts
			ro.FS, ro.ReadOnly = crashed.CrashClone(), true
			if db, err := lsm.Open("/db", &ro); err == nil {
				rep, err := db.Check()
				db.Close()
				if err == nil && rep.OK() {
					t.Errorf("Check found nothing wrong:\n%s", rep.String())
				}
			} else if !errors.Is(err, lsm.ErrCorrupt) {
				t.Errorf("read-only open: %v, want ErrCorrupt or a Check problem", err)
			}
			o := *opts
			o.FS = crashed
			if db, err := lsm.Open("/db", &o); err == nil {
				db.Close()
				names, _ := crashed.List("/db")
				t.Fatalf("writable open succeeded; files after it: %v", names)
			} else if !errors.Is(err, lsm.ErrCorrupt) {
				t.Fatalf("writable open: %v, want ErrCorrupt", err)
			}
			if _, err := crashed.Stat(seg); err != nil {
				t.Errorf("the refused open removed %s: %v", seg, err)
			}
		})
	}
}
