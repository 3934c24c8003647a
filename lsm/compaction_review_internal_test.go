package lsm

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/internal/manifest"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// rawEntries counts the point entries and range tombstones stored in all tables.
func rawEntries(t *testing.T, d *DB) (points, tombs int) {
	rs := d.loadReadState()
	defer rs.unref()
	for _, files := range rs.version.levels {
		for _, f := range files {
			r, rel, err := d.tableCache.get(f.FileNum)
			if err != nil {
				t.Fatal(err)
			}
			it := r.NewIter()
			for ok := it.First(); ok; ok = it.Next() {
				points++
			}
			it.Close()
			tombs += len(r.RangeTombstones())
			rel()
		}
	}
	return
}

// TestCompactRewritesBottom: data deleted while a snapshot was open
// reaches the bottom level with its tombstones; once the snapshot is closed,
// Compact(nil, nil) (lsmfs compact) never rewrites the bottom level, so the
// deleted versions and their tombstones stay on disk forever.
func TestCompactRewritesBottom(t *testing.T) {
	for _, style := range []CompactionStyle{CompactionLeveled, CompactionTiered} {
		t.Run(string(style), func(t *testing.T) {
			opts := &Options{FS: vfs.NewMem(), UUID: [16]byte{7}, ValueThreshold: -1, Compaction: style, Journal: JournalOptions{Size: 4 << 20}}
			if err := Format("/db", opts); err != nil {
				t.Fatal(err)
			}
			d, err := Open("/db", opts)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			b := NewBatch()
			for i := 0; i < 1000; i++ {
				b.Set([]byte(fmt.Sprintf("k%04d", i)), make([]byte, 100))
			}
			if err := d.Apply(b, false); err != nil {
				t.Fatal(err)
			}
			if err := d.Compact(nil, nil); err != nil {
				t.Fatal(err)
			}
			snap := d.NewSnapshot()
			b = NewBatch()
			for i := 0; i < 500; i++ {
				b.Delete([]byte(fmt.Sprintf("k%04d", i)))
			}
			b.DeleteRange([]byte("k0500"), []byte("k1000"))
			if err := d.Apply(b, false); err != nil {
				t.Fatal(err)
			}
			if err := d.Compact(nil, nil); err != nil {
				t.Fatal(err)
			}
			p, tb := rawEntries(t, d)
			t.Logf("with the snapshot open: %d point entries, %d range tombstones", p, tb)
			snap.Close()
			if err := d.Compact(nil, nil); err != nil {
				t.Fatal(err)
			}
			p, tb = rawEntries(t, d)
			m := d.Metrics()
			t.Logf("after the snapshot closed and Compact(nil, nil): %d point entries, %d range tombstones; levels %+v", p, tb, m.Levels)
			if p != 0 || tb != 0 {
				t.Errorf("every key is deleted and no snapshot is open, yet Compact left %d point entries and %d range tombstones", p, tb)
			}
		})
	}
}

// TestLevelTargetSaturates: with level_ratio=1024 the L5 and L6 targets
// wrapped to 0, so L5 always scored infinite and went first (compaction
// review).
func TestLevelTargetSaturates(t *testing.T) {
	d := &DB{opts: (&Options{LevelMultiplier: 1024}).EnsureDefaults()}
	if err := d.opts.Validate(); err != nil {
		t.Fatal(err)
	}
	for l := 2; l < numLevels; l++ {
		if d.levelTarget(l) < d.levelTarget(l-1) {
			t.Errorf("level targets wrap: L%d %d, L%d %d", l-1, d.levelTarget(l-1), l, d.levelTarget(l))
		}
	}
}

// TestL0FirstAtStopTrigger: with L0 at the stop-writes trigger (all
// writers stalled), the leveled picker must compact L0: it preferred an L1
// whose score was above L0's capped count score, so writers waited for
// L1->L2 work (compaction review).
func TestL0FirstAtStopTrigger(t *testing.T) {
	opts := &Options{FS: vfs.NewMem(), UUID: [16]byte{3}, Journal: JournalOptions{Size: 4 << 20}}
	if err := Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	d, err := Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.mu.Lock()
	defer d.mu.Unlock()
	v := &version{}
	num := uint64(1000)
	for i := 0; i < d.opts.L0StopWritesTrigger; i++ {
		num++
		v.levels[0] = append(v.levels[0], &tableMeta{FileMetadata: &manifest.FileMetadata{FileNum: num, Size: 64 << 20,
			Smallest: []byte("a"), Largest: []byte("z"), SmallestSeq: uint64(i*10 + 1), LargestSeq: uint64(i*10 + 9)}})
	}
	// L1 at 6x its 64 MiB target (one L0 compaction of 20 memtables puts ~20x there).
	for i := 0; i < 48; i++ {
		num++
		v.levels[1] = append(v.levels[1], &tableMeta{FileMetadata: &manifest.FileMetadata{FileNum: num, Size: 8 << 20,
			Smallest: []byte(fmt.Sprintf("k%03d", 2*i)), Largest: []byte(fmt.Sprintf("k%03d", 2*i+1))}})
	}
	saved := d.mu.versions.current
	d.mu.versions.current = v
	defer func() { d.mu.versions.current = saved }()
	c := d.pickLeveledLocked()
	t.Logf("L0 has %d tables (stop trigger %d): picked %v", len(v.levels[0]), d.opts.L0StopWritesTrigger, c)
	if c == nil || c.inputs[0].level != 0 {
		t.Errorf("writers are stalled on L0, but the picker chose %v", c)
	}
}

// TestCompactBottomTableGone: Compact's bottom pass reads a candidate's
// properties with d.mu released; another compaction can rewrite that table
// and remove its file meanwhile. Compact must skip it, not fail with "table
// named by the manifest is missing" (TestReadYourWritesUnderLoad saw that
// once: its workers call Compact concurrently).
func TestCompactBottomTableGone(t *testing.T) {
	opts := &Options{FS: vfs.NewMem(), UUID: [16]byte{12}, Journal: JournalOptions{Size: 16 << 20}}
	d := formatOpenMem(t, opts)
	defer d.Close()
	key := func(i int) []byte { return binary.BigEndian.AppendUint64([]byte("k"), uint64(i)) }
	b := NewBatch()
	for i := range 1000 {
		b.Set(key(i), []byte("value"))
	}
	if err := d.Apply(b, false); err != nil {
		t.Fatal(err)
	}
	if err := d.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	snap := d.NewSnapshot() // keeps the deletions below in the deepest level
	defer snap.Close()
	b = NewBatch()
	for i := range 500 {
		b.Delete(key(i))
	}
	if err := d.Apply(b, false); err != nil {
		t.Fatal(err)
	}
	ran := false
	d.testHookBottomPick = func() {
		d.testHookBottomPick = nil
		ran = true
		if err := d.Compact(nil, nil); err != nil { // rewrites the candidate
			t.Error(err)
		}
	}
	if err := d.Compact(nil, nil); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	if !ran {
		t.Fatal("the bottom pass found no candidate")
	}
	for i := range 1000 {
		_, err := d.Get(key(i))
		if want := i >= 500; (err == nil) != want {
			t.Fatalf("key %d: %v", i, err)
		}
	}
}
