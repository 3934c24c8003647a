package lsm

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestFlushMovesInlineValues drives synchronous batches (which keep their
// large values inline, in the journal and the memtable) against a map,
// with flushes, compactions, cleaning, reopens and crashes. After each
// flush of at least FlushMoveMin of such values, the flush's tables hold
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
	d := formatOpenMem(t, opts)
	defer func() { d.Close() }()
	rng := rand.New(rand.NewPCG(seed, 42))
	model := map[string][]byte{}
	key := blockKeyOf
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
		var err error
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
// they held at least FlushMoveMin of inline values; then the new tables
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
	if inline < uint64(d.opts.FlushMoveMin) {
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
	d := formatOpenMem(t, opts)
	defer d.Close()
	key := blockKeyOf
	val := func(i int) []byte {
		v := make([]byte, 4096)
		binary.BigEndian.PutUint64(v, uint64(i))
		return v
	}
	const n = 400 // 1.6 MiB (at least FlushMoveMin): the flush's writer rolls segments of 64 KiB
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

// TestSmallFlushKeepsInline: a flush with less than FlushMoveMin of values
// kept inline leaves them in its tables (no segment of a few values).
func TestSmallFlushKeepsInline(t *testing.T) {
	opts := &Options{FS: vfs.NewMem(), UUID: [16]byte{9}, ValueThreshold: 1024, Journal: JournalOptions{Size: 16 << 20}}
	d := formatOpenMem(t, opts)
	defer d.Close()
	key := blockKeyOf
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

// TestFailedFlushDropsItsSegments: a flush that fails (ENOSPC in the middle
// of its value-log writes, after some of its segments were sealed) removes
// every segment it made. Flush retries it at once (one attempt on a full
// disk); afterwards every segment on disk holds a live value, and a reopen
// finds everything.
func TestFailedFlushDropsItsSegments(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem, nil)
	opts := &Options{FS: efs, UUID: [16]byte{10}, ValueThreshold: 1024, VlogSegmentSize: 64 << 10,
		SpaceReserve: -1, Journal: JournalOptions{Size: 16 << 20}}
	d := formatOpenMem(t, opts)
	defer func() { d.Close() }()
	key := blockKeyOf
	val := func(i int) []byte {
		v := make([]byte, 4096)
		binary.BigEndian.PutUint64(v, uint64(i))
		return v
	}
	const n = 400
	for i := range n {
		b := NewBatch()
		b.Set(key(i), val(i))
		if err := d.Apply(b, true); err != nil {
			t.Fatal(err)
		}
	}
	var writes int
	efs.SetInjector(vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpWrite && strings.HasSuffix(op.Path, ".vlog") {
			if writes++; writes == 8 { // a few segments in: some sealed
				return vfs.ENOSPC
			}
		}
		return nil
	}))
	if err := d.Flush(); err != nil {
		t.Fatal(err)
	}
	efs.SetInjector(nil)
	if writes < 8 {
		t.Fatalf("%d value-log writes: the injected failure did not happen", writes)
	}
	d.mu.Lock()
	active := d.vlogActive.Load()
	var sealed []uint64
	for seg := range d.mu.versions.vlog {
		sealed = append(sealed, seg)
	}
	d.mu.Unlock()
	for _, seg := range sealed {
		d.mu.Lock()
		sg := d.mu.versions.vlog[seg]
		d.mu.Unlock()
		if dead, err := d.segmentDead(seg, sg); err != nil || dead {
			t.Errorf("segment %d: dead %v (%v): a failed flush left it", seg, dead, err)
		}
	}
	names, err := mem.List("/db")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if num, ok := fileNum(name, ".vlog"); ok && num != active && !slices.Contains(sealed, num) {
			t.Errorf("%s on disk, not a known segment", name)
		}
	}
	for _, reopen := range []bool{false, true} {
		if reopen {
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if d, err = Open("/db", opts); err != nil {
				t.Fatal(err)
			}
		}
		for i := range n {
			if got, err := d.Get(key(i)); err != nil || string(got) != string(val(i)) {
				t.Fatalf("reopened %v: key %d: %v", reopen, i, err)
			}
		}
	}
}

// TestRetiredSegmentNotSealedAgain: a segment the cleaner retires before
// any manifest edit recorded its seal. The deletion's edit must carry the
// seal too; otherwise the next edit (a flush's) records the seal after the
// deletion, and the manifest names a segment whose file is gone: the next
// open fails.
func TestRetiredSegmentNotSealedAgain(t *testing.T) {
	opts := &Options{FS: vfs.NewMem(), UUID: [16]byte{11}, ValueThreshold: 100, VlogSegmentSize: 64 << 10,
		Journal: JournalOptions{Size: 16 << 20}}
	d := formatOpenMem(t, opts)
	defer func() { d.Close() }()
	key := blockKeyOf
	v := make([]byte, 1024)
	for i := range 100 { // 100 KiB: the active segment rolls once
		b := NewBatch()
		b.Set(key(i), v)
		if err := d.Apply(b, false); err != nil {
			t.Fatal(err)
		}
	}
	b := NewBatch()
	b.DeleteRange(key(0), key(100))
	if err := d.Apply(b, false); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	pending := len(d.mu.pendingSeals)
	d.mu.Unlock()
	if pending == 0 {
		t.Fatal("no sealed segment waits for an edit")
	}
	retired, err := d.retireDeadSegments(100)
	if err != nil {
		t.Fatal(err)
	}
	if retired == 0 {
		t.Fatal("the dead sealed segment was not retired")
	}
	b = NewBatch()
	b.Set([]byte("x"), []byte("y"))
	if err := d.Apply(b, false); err != nil {
		t.Fatal(err)
	}
	if err := d.Flush(); err != nil { // an edit after the deletion
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if d, err = Open("/db", opts); err != nil {
		t.Fatalf("reopen: %v", err)
	}
}

// formatOpenMem formats and opens a DB at /db of opts.FS.
func formatOpenMem(t *testing.T, opts *Options) *DB {
	t.Helper()
	if err := Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	d, err := Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// blockKeyOf is a data-block key of one file, block i.
func blockKeyOf(i int) []byte { return binary.BigEndian.AppendUint64([]byte("B"), uint64(i)) }
