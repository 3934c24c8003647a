package lsm

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestFlushMovesInlineValues drives synchronous batches (which keep their
// large values inline, in the journal and the memtable) against a map,
// with flushes, compactions, cleaning, reopens and crashes. After each
// flush of at least flushMoveMin of such values, the flush's tables hold
// none of them inline: it moved them to the value log. Segments of 64 KiB
// make flushes roll theirs.
func TestFlushMovesInlineValues(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { testFlushMovesInlineValues(t, seed) })
	}
}

func testFlushMovesInlineValues(t *testing.T, seed uint64) {
	fs := vfs.NewMem()
	opts := &Options{FS: fs, UUID: [16]byte{7}, ValueThreshold: 1024, VlogSegmentSize: 64 << 10,
		VlogCleanThreshold: 0.5, Journal: JournalOptions{Size: 16 << 20}}
	if err := Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	d, err := Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { d.Close() }()
	rng := rand.New(rand.NewPCG(seed, 42))
	model := map[string][]byte{}
	key := func(i int) []byte { return binary.BigEndian.AppendUint64([]byte("B"), uint64(i)) }
	check := func(when string) {
		t.Helper()
		for i := range 300 {
			got, err := d.Get(key(i))
			want, ok := model[string(key(i))]
			switch {
			case !ok && err != ErrNotFound:
				t.Fatalf("%s: key %d: %v, want not found", when, i, err)
			case ok && (err != nil || string(got) != string(want)):
				t.Fatalf("%s: key %d: %d bytes, %v; want %d bytes", when, i, len(got), err, len(want))
			}
		}
	}
	reopen := func(crash bool) {
		t.Helper()
		o := *opts
		if crash {
			o.FS = fs.CrashClone()
		}
		d.Close()
		fs = o.FS.(*vfs.MemFS)
		opts = &o
		if d, err = Open("/db", opts); err != nil {
			t.Fatal(err)
		}
	}
	moves := 0
	for step := range 800 {
		b := NewBatch()
		for range 1 + rng.IntN(12) { // at most 48 KiB: kept inline
			i := rng.IntN(300)
			switch r := rng.IntN(10); {
			case r == 0:
				b.Delete(key(i))
				delete(model, string(key(i)))
			default:
				n := 4096
				if r == 1 {
					n = 100 // inline in tables, whatever the flush
				}
				v := make([]byte, n)
				for j := range v {
					v[j] = byte(rng.Uint32())
				}
				b.Set(key(i), v)
				model[string(key(i))] = v
			}
		}
		if err := d.Apply(b, true); err != nil {
			t.Fatal(err)
		}
		switch step % 200 {
		case 120:
			if flushChecked(t, d, d.Flush) {
				moves++
			}
			check(fmt.Sprintf("step %d, flushed", step))
		case 140:
			reopen(true) // the batches since the flush come from the journal
			check(fmt.Sprintf("step %d, after a crash", step))
		case 170:
			if err := d.Compact(nil, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := d.CleanValueLog(); err != nil {
				t.Fatal(err)
			}
			check(fmt.Sprintf("step %d, compacted and cleaned", step))
		case 199:
			reopen(false)
			check(fmt.Sprintf("step %d, reopened", step))
		}
	}
	if moves < 4 {
		t.Fatalf("%d of 4 flushes moved values", moves)
	}
	check("end")
}

// flushChecked runs flush (which flushes the memtables) and reports whether
// they held at least flushMoveMin of inline values; then the new tables
// must hold none inline, FlushMoved must have grown, and the cleaner must
// be free to clean every segment again.
func flushChecked(t *testing.T, d *DB, flush func() error) bool {
	t.Helper()
	d.mu.Lock()
	inline := d.mu.mem.mutable.inlineLarge
	for _, m := range d.mu.mem.queue {
		inline += m.inlineLarge
	}
	before := map[uint64]bool{}
	for n := range d.mu.versions.files {
		before[n] = true
	}
	d.mu.Unlock()
	moved := d.Metrics().Vlog.FlushMoved
	if err := flush(); err != nil {
		t.Fatal(err)
	}
	if inline < flushMoveMin {
		return false
	}
	if got := d.Metrics().Vlog.FlushMoved; got <= moved {
		t.Fatalf("a flush of %d bytes of inline values moved none", inline)
	}
	d.mu.Lock()
	if floor := d.mu.flushVlogFloor; floor != 0 {
		t.Errorf("flushVlogFloor %d after the flush ended: the cleaner would skip segments for good", floor)
	}
	var tables []uint64
	for n := range d.mu.versions.files {
		if !before[n] {
			tables = append(tables, n)
		}
	}
	d.mu.Unlock()
	for _, n := range tables {
		rd, release, err := d.tableCache.get(n)
		if err != nil {
			t.Fatal(err)
		}
		it := rd.NewIter()
		for ok := it.First(); ok; ok = it.Next() {
			if it.Key().Kind() == base.KindSet && len(it.Value()) >= d.opts.ValueThreshold {
				t.Errorf("table %d holds %s with a %d-byte value inline", n, it.Key(), len(it.Value()))
			}
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		release()
	}
	return true
}

// TestCleanerLeavesFlushSegments: while a flush has moved values to
// segments of its own but its tables are not in the tree yet, those
// records have no pointer anywhere. The cleaner's pass over sealed
// segments (here retireDeadSegments, which retires a segment no key reads)
// must leave them alone, or the flush installs pointers into a removed
// segment.
func TestCleanerLeavesFlushSegments(t *testing.T) {
	opts := &Options{FS: vfs.NewMem(), UUID: [16]byte{8}, ValueThreshold: 1024, VlogSegmentSize: 64 << 10,
		Journal: JournalOptions{Size: 16 << 20}}
	if err := Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	d, err := Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	key := func(i int) []byte { return binary.BigEndian.AppendUint64([]byte("B"), uint64(i)) }
	val := func(i int) []byte {
		v := make([]byte, 4096)
		binary.BigEndian.PutUint64(v, uint64(i))
		return v
	}
	const n = 400 // 1.6 MiB (at least flushMoveMin): the flush's writer rolls segments of 64 KiB
	for i := range n {
		b := NewBatch()
		b.Set(key(i), val(i))
		if err := d.Apply(b, true); err != nil {
			t.Fatal(err)
		}
	}
	ran := false
	d.testHookFlushMoved = func() {
		d.testHookFlushMoved = nil
		ran = true
		d.mu.Lock()
		floor := d.mu.flushVlogFloor
		sealed := 0
		for seg := range d.mu.versions.vlog {
			if seg >= floor {
				sealed++
			}
		}
		d.mu.Unlock()
		if floor == 0 || sealed == 0 {
			t.Errorf("flush moving values: floor %d, %d of its segments sealed; want both", floor, sealed)
		}
		if _, err := d.retireDeadSegments(100); err != nil {
			t.Error(err)
		}
	}
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("the flush moved no value")
	}
	for i := range n {
		if got, err := d.Get(key(i)); err != nil || string(got) != string(val(i)) {
			t.Fatalf("key %d after the flush: %v", i, err)
		}
	}
}

// TestSmallFlushKeepsInline: a flush with less than flushMoveMin of values
// kept inline leaves them in its tables (no segment of a few values).
func TestSmallFlushKeepsInline(t *testing.T) {
	opts := &Options{FS: vfs.NewMem(), UUID: [16]byte{9}, ValueThreshold: 1024, Journal: JournalOptions{Size: 16 << 20}}
	if err := Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	d, err := Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	key := func(i int) []byte { return binary.BigEndian.AppendUint64([]byte("B"), uint64(i)) }
	val := make([]byte, 4096)
	for i := range 16 { // 64 KiB
		binary.BigEndian.PutUint64(val, uint64(i))
		b := NewBatch()
		b.Set(key(i), val)
		if err := d.Apply(b, true); err != nil {
			t.Fatal(err)
		}
	}
	before := d.Metrics().Vlog
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	after := d.Metrics().Vlog
	if after.FlushMoved != 0 || after.Segments != before.Segments {
		t.Fatalf("a flush of 64 KiB of inline values moved %d bytes, segments %d -> %d; want none", after.FlushMoved, before.Segments, after.Segments)
	}
	for i := range 16 {
		if got, err := d.Get(key(i)); err != nil || binary.BigEndian.Uint64(got) != uint64(i) {
			t.Fatalf("key %d: %v", i, err)
		}
	}
}
