package lsm_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// Fail-stop and ENOSPC (space.go), with errors injected by vfs.ErrorFS.

func faultOptions(fs vfs.FS) *lsm.Options {
	return &lsm.Options{
		FS: fs, UUID: [16]byte{0xfa, 0x17},
		MemtableSize: 256 << 10, InMemoryFlushSize: 64 << 10,
		ValueThreshold: 100, VlogSegmentSize: 64 << 10,
		TargetFileSize: 64 << 10, L0CompactionTrigger: 2, LBaseMaxBytes: 256 << 10,
		CacheSize: -1, SpaceReserve: -1,
		// Flushes move what synchronous batches kept inline from 16 KiB,
		// so that faults also hit their segments (the default 1 MiB is
		// more than these memtables hold).
		FlushMoveMin: 16 << 10,
		Journal:      lsm.JournalOptions{Size: 4 << 20, CommitInterval: time.Hour},
	}
}

func openFault(t *testing.T, fs vfs.FS, o *lsm.Options) *lsm.DB {
	t.Helper()
	if o == nil {
		o = faultOptions(fs)
	}
	db, err := lsm.Open("/db", o)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func put(db *lsm.DB, k, v string, sync bool) error {
	b := lsm.NewBatch()
	b.Set([]byte(k), []byte(v))
	return db.Apply(b, sync)
}

func scanAll(t *testing.T, db *lsm.DB) model {
	t.Helper()
	m := model{}
	it := db.NewIter(nil)
	for ok := it.First(); ok; ok = it.Next() {
		m[string(it.Key())] = string(it.Value())
	}
	if err := it.Error(); err != nil {
		t.Fatalf("scan: %v", err)
	}
	it.Close()
	return m
}

// TestFailStop fails one force (or write) of each kind of engine file and
// checks fail-stop: the batch that met the failure and every later write
// fail with ErrFailed (and EIO), reads go on, and a reopen after a crash
// holds exactly the batches acknowledged before, plus possibly the one that
// failed.
func TestFailStop(t *testing.T) {
	for _, c := range []struct {
		name  string
		match vfs.Match
		// flush: the failure is met by a flush, not by the batch.
		flush bool
		// big: values large enough for a synchronous batch to separate
		// them (small synchronous batches keep values in the tree).
		big bool
	}{
		{"journal force", vfs.And(vfs.Kinds(vfs.OpSync), vfs.PathContains("journal")), false, false},
		{"journal write", vfs.And(vfs.Kinds(vfs.OpWrite), vfs.PathContains("journal")), false, false},
		{"value-log force", vfs.And(vfs.Kinds(vfs.OpSync), vfs.PathContains(".vlog")), false, true},
		{"table write", vfs.And(vfs.Kinds(vfs.OpWrite), vfs.PathContains(".sst")), true, false},
		{"table force", vfs.And(vfs.Kinds(vfs.OpSync), vfs.PathContains(".sst")), true, false},
		{"manifest force", vfs.And(vfs.Kinds(vfs.OpSync), vfs.PathContains("MANIFEST")), true, false},
		{"directory force", vfs.Kinds(vfs.OpSyncDir), true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			efs := vfs.NewErrorFS(mem, nil)
			if err := lsm.Format("/db", faultOptions(efs)); err != nil {
				t.Fatal(err)
			}
			db := openFault(t, efs, nil)
			defer db.Close()
			durable := model{}
			for i := 0; i < 50; i++ {
				k, v := fmt.Sprintf("k%03d", i), fmt.Sprintf("v%d%s", i, strings.Repeat("x", i*10))
				if err := put(db, k, v, true); err != nil {
					t.Fatal(err)
				}
				durable[k] = v
			}
			inj := vfs.OnIndex(0, vfs.EIO, c.match)
			efs.SetInjector(inj)
			var failed error
			failedKey := ""
			for i := 0; i < 2000 && failed == nil; i++ {
				k, v := fmt.Sprintf("n%04d", i), strings.Repeat("y", 200)
				if c.big {
					v = strings.Repeat("y", 80<<10)
				}
				failed = put(db, k, v, true)
				if failed == nil {
					durable[k] = v
				} else {
					failedKey = k
				}
				if c.flush && failed == nil && i%50 == 49 {
					if err := db.Flush(); err != nil {
						failed = err
						failedKey = ""
					}
				}
			}
			if fired, op := inj.Fired(); !fired {
				t.Fatalf("no %s happened", c.name)
			} else {
				t.Logf("injected EIO into %s: %v", op, failed)
			}
			if !errors.Is(failed, lsm.ErrFailed) || !errors.Is(failed, syscall.EIO) {
				t.Fatalf("the affected operation got %v, want ErrFailed wrapping EIO", failed)
			}
			// Every later write fails, synced or not, deletions too.
			for _, sync := range []bool{false, true} {
				if err := put(db, "later", "x", sync); !errors.Is(err, lsm.ErrFailed) {
					t.Fatalf("write after the failure (sync=%v): %v", sync, err)
				}
			}
			b := lsm.NewBatch()
			b.Delete([]byte("k001"))
			if err := db.Apply(b, false); !errors.Is(err, lsm.ErrFailed) {
				t.Fatalf("delete after the failure: %v", err)
			}
			if err := db.Flush(); !errors.Is(err, lsm.ErrFailed) {
				t.Fatalf("flush after the failure: %v", err)
			}
			// Reads go on.
			efs.SetInjector(nil)
			for k, v := range durable {
				got, err := db.Get([]byte(k))
				if err != nil || string(got) != v {
					t.Fatalf("read %s after the failure: %q, %v", k, got, err)
				}
			}
			scanAll(t, db)
			db.Close()

			// A crash now, and a reopen: the durable state, plus maybe the
			// batch that failed (its bytes may have reached the disk).
			db2 := openFault(t, mem.CrashClone(), nil)
			defer db2.Close()
			got := scanAll(t, db2)
			delete(got, failedKey)
			if !sameState(got, durable) {
				t.Fatalf("after reopen: %s", diffStates(got, durable))
			}
			if err := put(db2, "after", "reopen", true); err != nil {
				t.Fatalf("write after reopen: %v", err)
			}
		})
	}
}

// TestErrorInjectionSeeded runs a workload while an ErrorFS fails random
// reads, writes and forces (EIO, ENOSPC, short writes). Nothing may panic;
// every write error must be ErrFailed (fail-stop) or ErrNoSpace (nothing
// written); the engine must stay usable after ErrNoSpace; and after the
// injection stops, a crash and a reopen must give the state after some
// batch between the last one acknowledged durable and the last one applied.
func TestErrorInjectionSeeded(t *testing.T) {
	runs := 24
	if testing.Short() || raceEnabled {
		runs = 6
	}
	base := uint64(time.Now().UnixNano())
	var failStops, noSpaces, injected int64
	for r := 0; r < runs; r++ {
		seed := base + uint64(r)
		fs, ns, inj := injectionRun(t, seed)
		failStops += fs
		noSpaces += ns
		injected += inj
		if t.Failed() {
			t.Fatalf("seed %d failed (replay: change base to %d - %d)", seed, seed, r)
		}
	}
	t.Logf("%d seeded runs: %d errors injected; %d runs ended fail-stop; %d batches refused with ENOSPC", runs, injected, failStops, noSpaces)
}

func injectionRun(t *testing.T, seed uint64) (failStop, noSpace, injected int64) {
	rng := rand.New(rand.NewPCG(seed, 11))
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem, nil)
	o := faultOptions(efs)
	if err := lsm.Format("/db", o); err != nil {
		t.Fatal(err)
	}
	db := openFault(t, efs, o)
	// Mostly ENOSPC on value-log and table writes (not sticky), some EIO
	// anywhere.
	p := []float64{0.002, 0.01, 0.03}[rng.IntN(3)]
	efs.SetInjector(vfs.Seeded(seed, p, nil))

	durable := model{}
	durableN := 0
	var pending []crashBatch // applied since durableN
	failed := false
	keys := 200
	n := 0
	for i := 0; i < 600; i++ {
		n++
		b := crashBatch{n: n}
		lb := lsm.NewBatch()
		for j := 0; j < 1+rng.IntN(4); j++ {
			k := fmt.Sprintf("k%03d", rng.IntN(keys))
			if rng.IntN(5) == 0 {
				b.ops = append(b.ops, crashOp{'d', k, ""})
				lb.Delete([]byte(k))
				continue
			}
			v := fmt.Sprintf("%d:%s", n, strings.Repeat("z", []int{3, 150, 2000}[rng.IntN(3)]))
			b.ops = append(b.ops, crashOp{'s', k, v})
			lb.Set([]byte(k), []byte(v))
		}
		lb.Set([]byte("!seq"), []byte(strconv.Itoa(n)))
		sync := rng.IntN(3) == 0
		err := db.Apply(lb, sync)
		switch {
		case err == nil:
			pending = append(pending, b)
			if sync {
				for _, pb := range pending {
					pb.apply(durable)
				}
				durableN, pending = n, nil
			}
		case errors.Is(err, lsm.ErrFailed):
			if !failed {
				failed = true
				failStop = 1
				pending = append(pending, b) // may have reached the journal
			}
		case errors.Is(err, lsm.ErrNoSpace) && errors.Is(err, syscall.ENOSPC):
			noSpace++
		default:
			t.Errorf("seed %d: batch %d: error %v is neither fail-stop nor ENOSPC", seed, n, err)
			return
		}
		if rng.IntN(20) == 0 {
			db.Get([]byte(fmt.Sprintf("k%03d", rng.IntN(keys)))) // may fail: injected read errors
		}
		if rng.IntN(100) == 0 {
			db.Flush()
		}
	}
	efs.Enable(false)
	injected = efs.Injected()
	db.Close()

	db2, err := lsm.Open("/db", faultOptions(mem.CrashClone()))
	if err != nil {
		t.Errorf("seed %d: reopen: %v", seed, err)
		return
	}
	defer db2.Close()
	got := scanAll(t, db2)
	k := 0
	if s, ok := got["!seq"]; ok {
		k, _ = strconv.Atoi(s)
	}
	m := durable.clone()
	if k != durableN {
		found := false
		for _, b := range pending {
			b.apply(m)
			if b.n == k {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("seed %d: recovered batch %d; acknowledged durable up to %d, applied after: %d batches", seed, k, durableN, len(pending))
			return
		}
	}
	if !sameState(got, m) {
		t.Errorf("seed %d: recovered batch %d, state differs: %s", seed, k, diffStates(got, m))
	}
	return failStop, noSpace, injected
}

// TestNoSpace fills a size-limited MemFS until writes fail with ENOSPC, and
// checks that deletions still work when full, that they free space, and
// that writes then succeed again. The engine's reserve (default) makes it
// refuse writes before the device is full, so that the deletions find room.
func TestNoSpace(t *testing.T) {
	mem := vfs.NewMem()
	mem.SetCapacity(24 << 20)
	o := faultOptions(mem)
	o.SpaceReserve = 0
	o.ValueThreshold = 512
	o.VlogSegmentSize = 1 << 20
	if err := lsm.Format("/db", o); err != nil {
		t.Fatal(err)
	}
	db := openFault(t, mem, o)
	defer db.Close()
	value := func(i int) string { return fmt.Sprintf("%06d%s", i, strings.Repeat("v", 4000)) }
	var err error
	n := 0
	for ; n < 100000; n++ {
		if err = put(db, fmt.Sprintf("k%06d", n), value(n), n%10 == 0); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, lsm.ErrNoSpace) || errors.Is(err, lsm.ErrFailed) {
		t.Fatalf("after %d writes: %v, want ErrNoSpace", n, err)
	}
	_, free, _ := mem.Usage("/")
	t.Logf("full after %d values of 4 KiB: %v (free %d bytes)", n, err, free)
	// Still full: a write fails again; reads work.
	if err := put(db, "more", value(0), true); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write when full: %v", err)
	}
	if v, err := db.Get([]byte("k000001")); err != nil || string(v) != value(1) {
		t.Fatalf("read when full: %v", err)
	}
	// rm works when full.
	b := lsm.NewBatch()
	b.DeleteRange([]byte("k000000"), []byte(fmt.Sprintf("k%06d", n*3/4)))
	if err := db.Apply(b, true); err != nil {
		t.Fatalf("delete when full: %v", err)
	}
	// ... and frees space: writes succeed again.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err = put(db, "after", value(7), true)
		if err == nil || !errors.Is(err, syscall.ENOSPC) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		_, free, _ := mem.Usage("/")
		t.Fatalf("write after freeing space: %v (free %d)\n%s", err, free, mem)
	}
	for i := 0; i < 100; i++ {
		if err := put(db, fmt.Sprintf("again%03d", i), value(i), false); err != nil {
			t.Fatalf("write %d after freeing space: %v", i, err)
		}
	}
	if v, err := db.Get([]byte(fmt.Sprintf("k%06d", n-1))); err != nil || string(v) != value(n-1) {
		t.Fatalf("a kept value: %v", err)
	}
	if _, err := db.Get([]byte("k000001")); !errors.Is(err, lsm.ErrNotFound) {
		t.Fatalf("a deleted value: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	db = openFault(t, mem, o)
	if v, err := db.Get([]byte("again099")); err != nil || string(v) != value(99) {
		t.Fatalf("after reopen: %v", err)
	}
}

// TestNoSpaceFilledByOthers fills the device behind the engine's back (the
// data directory shares a filesystem): a value-log append meets ENOSPC
// itself. The writer gets ErrNoSpace, nothing is sticky, and writes succeed
// once the other file is removed.
func TestNoSpaceFilledByOthers(t *testing.T) {
	mem := vfs.NewMem()
	mem.SetCapacity(32 << 20)
	o := faultOptions(mem)
	o.SpaceReserve = 1 << 20
	o.ValueThreshold = 512
	if err := lsm.Format("/db", o); err != nil {
		t.Fatal(err)
	}
	db := openFault(t, mem, o)
	defer db.Close()
	v := strings.Repeat("o", 3000)
	for i := 0; i < 100; i++ {
		if err := put(db, fmt.Sprintf("k%03d", i), v, i%10 == 0); err != nil {
			t.Fatal(err)
		}
	}
	_, free, _ := mem.Usage("/")
	filler, err := mem.Create("/filler")
	if err != nil {
		t.Fatal(err)
	}
	if err := filler.Truncate(int64(free) - 2048); err != nil {
		t.Fatal(err)
	}
	filler.Close()
	n := 0
	for ; n < 1000; n++ {
		if err = put(db, fmt.Sprintf("n%03d", n), v, true); err != nil {
			break
		}
	}
	if !errors.Is(err, lsm.ErrNoSpace) || errors.Is(err, lsm.ErrFailed) {
		t.Fatalf("after %d writes on a full device: %v, want ErrNoSpace", n, err)
	}
	t.Logf("after %d writes: %v", n, err)
	if got, err := db.Get([]byte("k099")); err != nil || string(got) != v {
		t.Fatalf("read on a full device: %v", err)
	}
	if err := mem.Remove("/filler"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err = put(db, "after", v, true)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("write after the space was freed: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openFault(t, mem.CrashClone(), o)
	if got, err := db.Get([]byte("after")); err != nil || string(got) != v {
		t.Fatalf("after reopen: %v", err)
	}
}

// TestFlushNoSpaceRetried makes table writes fail with ENOSPC for a while:
// flushes fail and are retried, writers that would wait for them get
// ErrNoSpace instead of stalling forever, nothing becomes sticky, and once
// the writes go through again (space freed) everything works.
func TestFlushNoSpaceRetried(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem, nil)
	o := faultOptions(efs)
	o.ValueThreshold = -1
	if err := lsm.Format("/db", o); err != nil {
		t.Fatal(err)
	}
	db := openFault(t, efs, o)
	defer db.Close()
	efs.SetInjector(vfs.Randomly(1, 1, vfs.ENOSPC, vfs.And(vfs.Kinds(vfs.OpWrite, vfs.OpCreate), vfs.PathContains(".sst"))))
	v := strings.Repeat("w", 1000)
	var err error
	n := 0
	start := time.Now()
	for ; n < 5000; n++ {
		if err = put(db, fmt.Sprintf("k%05d", n), v, false); err != nil {
			break
		}
	}
	if !errors.Is(err, lsm.ErrNoSpace) || errors.Is(err, lsm.ErrFailed) {
		t.Fatalf("after %d writes: %v, want ErrNoSpace", n, err)
	}
	t.Logf("writes refused after %d batches (%s): %v", n, time.Since(start).Round(time.Millisecond), err)
	if err := db.Flush(); !errors.Is(err, lsm.ErrNoSpace) {
		t.Fatalf("flush without space: %v", err)
	}
	// Deletions go in while there is memtable room.
	b := lsm.NewBatch()
	b.Delete([]byte("k00000"))
	if err := db.Apply(b, true); err != nil && !errors.Is(err, lsm.ErrNoSpace) {
		t.Fatalf("delete: %v", err)
	}
	// Space comes back.
	efs.SetInjector(nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		err = put(db, "back", v, true)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("write once tables can be written again: %v", err)
	}
	if err := db.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if got, err := db.Get([]byte(fmt.Sprintf("k%05d", n-1))); err != nil || string(got) != v {
		t.Fatalf("last acknowledged write: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openFault(t, mem, o)
	if got, err := db.Get([]byte("back")); err != nil || string(got) != v {
		t.Fatalf("after reopen: %v", err)
	}
}

// TestJournalFullNoSpace fills the journal ring while flushes (which free it
// at the next checkpoint) fail with ENOSPC: writers must get ErrNoSpace, not
// wait for ring space forever; once tables can be written again, the ring
// is checkpointed and writes go on.
func TestJournalFullNoSpace(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem, nil)
	o := faultOptions(efs)
	o.ValueThreshold = -1
	o.MemtableSize = 64 << 20 // the 4 MiB ring fills long before the memtable
	o.InMemoryFlushSize = 1 << 20
	o.Journal.MaxFrameBytes = 64 << 10
	if err := lsm.Format("/db", o); err != nil {
		t.Fatal(err)
	}
	db := openFault(t, efs, o)
	defer db.Close()
	efs.SetInjector(vfs.Randomly(1, 1, vfs.ENOSPC, vfs.And(vfs.Kinds(vfs.OpWrite, vfs.OpCreate), vfs.PathContains(".sst"))))
	rnd := rand.New(rand.NewPCG(1, 1))
	vb := make([]byte, 32<<10)
	for i := range vb {
		vb[i] = byte(rnd.Uint32()) // incompressible: frames take their size in the ring
	}
	v := string(vb)
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 10000; i++ {
			if err := put(db, fmt.Sprintf("k%05d", i), v, i%8 == 0); err != nil {
				done <- fmt.Errorf("after %d writes: %w", i, err)
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if !errors.Is(err, lsm.ErrNoSpace) || errors.Is(err, lsm.ErrFailed) {
			t.Fatalf("writes into a full journal ring: %v, want ErrNoSpace", err)
		}
		t.Logf("%v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("a writer waits for journal space forever while flushes cannot be written")
	}
	efs.SetInjector(nil)
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for {
		if err = put(db, "after", v, true); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("write once tables can be written: %v", err)
	}
	for i := 0; i < 300; i++ {
		if err := put(db, fmt.Sprintf("again%03d", i), v, false); err != nil {
			t.Fatalf("write %d after: %v", i, err)
		}
	}
}

// twoTableDB formats and opens a DB on an ErrorFS over mem with two L0
// tables and no automatic compaction.
func twoTableDB(t *testing.T, style lsm.CompactionStyle) (*vfs.MemFS, *vfs.ErrorFS, *lsm.Options, *lsm.DB, model) {
	t.Helper()
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem, nil)
	o := faultOptions(efs)
	o.Compaction = style
	o.L0CompactionTrigger = 100
	o.L0StopWritesTrigger = 200
	o.ValueThreshold = 1 << 20 // keep values inline
	if err := lsm.Format("/db", o); err != nil {
		t.Fatal(err)
	}
	db := openFault(t, efs, o)
	want := model{}
	for round := 0; round < 2; round++ {
		for i := 0; i < 200; i++ {
			k, v := fmt.Sprintf("k%04d", i), fmt.Sprintf("v%d-%s", round, strings.Repeat("x", 50))
			if err := put(db, k, v, false); err != nil {
				t.Fatal(err)
			}
			want[k] = v
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	return mem, efs, o, db, want
}

// TestCompactionManifestSyncFailureKeepsTables: a compaction whose manifest
// append is written but whose fsync fails keeps its output tables: the edit
// naming them is in the manifest file, and a reopen without a power loss
// (the page stays in the page cache after a failed fsync on Linux) reads
// it. Removing them made that reopen fail: "table named by the manifest is
// missing".
func TestCompactionManifestSyncFailureKeepsTables(t *testing.T) {
	mem, efs, o, db, want := twoTableDB(t, lsm.CompactionLeveled)
	efs.SetInjector(vfs.OnIndex(0, vfs.EIO, vfs.And(vfs.Kinds(vfs.OpSync), vfs.PathContains("MANIFEST"))))
	err := db.Compact(nil, nil)
	t.Logf("Compact: %v", err)
	if !errors.Is(err, lsm.ErrFailed) {
		t.Fatalf("Compact = %v, want ErrFailed", err)
	}
	efs.SetInjector(nil)
	db.Close()

	o2 := faultOptions(mem)
	o2.ValueThreshold = o.ValueThreshold
	db2, err := lsm.Open("/db", o2)
	if err != nil {
		t.Fatalf("reopen after a failed manifest fsync (no crash): %v", err)
	}
	defer db2.Close()
	if got := scanAll(t, db2); !sameState(got, want) {
		t.Fatalf("after reopen: %s", diffStates(got, want))
	}
}

// TestCompactNoSpaceIsNotFatal: an ENOSPC met by Compact (which the space
// reclaimer calls when the device is full) returns ErrNoSpace and leaves
// the engine writable, under both compaction styles (the tiered style
// failed the engine).
func TestCompactNoSpaceIsNotFatal(t *testing.T) {
	for _, style := range []lsm.CompactionStyle{lsm.CompactionLeveled, lsm.CompactionTiered} {
		t.Run(string(style), func(t *testing.T) {
			_, efs, _, db, _ := twoTableDB(t, style)
			defer db.Close()
			efs.SetInjector(vfs.OnIndex(0, vfs.ENOSPC, vfs.And(vfs.Kinds(vfs.OpWrite), vfs.PathContains(".sst"))))
			err := db.Compact(nil, nil)
			t.Logf("Compact: %v", err)
			efs.SetInjector(nil)
			if !errors.Is(err, lsm.ErrNoSpace) || errors.Is(err, lsm.ErrFailed) {
				t.Errorf("Compact = %v, want ErrNoSpace", err)
			}
			if err := put(db, "after", "x", true); err != nil {
				t.Fatalf("write after ENOSPC in Compact: %v", err)
			}
		})
	}
}

// TestDeletesFreeSpaceOnSmallDevice: on a 96 MiB device (segments of a
// fiftieth of it by default), fill it with large values, keep a few live
// among them, delete the rest: writes must be accepted again. With the
// former fixed 64 MiB segments a sealed segment kept the live values
// beside a dead active one, with no room to move them: deleting 76 MiB
// freed nothing, and writes still failed with ENOSPC 10 s later.
func TestDeletesFreeSpaceOnSmallDevice(t *testing.T) {
	db, mem := openSmallDevice(t)
	if got := db.Options().VlogSegmentSize; got != 1<<20 {
		t.Fatalf("segment size on a 96 MiB device: %d, want 1 MiB", got)
	}
	v := strings.Repeat("f", 256<<10)
	var filled []string
	for i := 0; ; i++ {
		k := fmt.Sprintf("fill%04d", i)
		if i%30 == 10 {
			k = fmt.Sprintf("keep%04d", i)
		}
		if err := put(db, k, v, false); err != nil {
			if !errors.Is(err, lsm.ErrNoSpace) || errors.Is(err, lsm.ErrFailed) {
				t.Fatalf("filling: %v", err)
			}
			break
		}
		if strings.HasPrefix(k, "fill") {
			filled = append(filled, k)
		}
	}
	for _, k := range filled {
		b := lsm.NewBatch()
		b.Delete([]byte(k))
		if err := db.Apply(b, false); err != nil {
			t.Fatalf("delete when full: %v", err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for {
		err = put(db, "after", "x", true)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		_, free, _ := mem.Usage("/")
		t.Fatalf("write 10 s after deleting %d values of 256 KiB: %v (%d bytes free)", len(filled), err, free)
	}
}

// TestCleanerGoesOnWithSmallSegments: after deletions leave many small
// segments (a 96 MiB device: 1 MiB segments) a quarter live, the
// background cleaner goes on until none is left below its threshold,
// without writes to trigger it again: the space comes back.
func TestCleanerGoesOnWithSmallSegments(t *testing.T) {
	db, mem := openSmallDevice(t)
	v := strings.Repeat("c", 256<<10)
	const n = 160 // 40 MiB: four values a segment
	for i := range n {
		if err := put(db, fmt.Sprintf("k%03d", i), v, false); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if i%4 == 0 {
			continue // one value of four stays live
		}
		b := lsm.NewBatch()
		b.Delete([]byte(fmt.Sprintf("k%03d", i)))
		if err := db.Apply(b, false); err != nil {
			t.Fatal(err)
		}
	}
	_, before, _ := mem.Usage("/")
	if err := db.Compact(nil, nil); err != nil { // counts the dead values; starts the cleaner
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var free uint64
	for time.Now().Before(deadline) {
		if _, free, _ = mem.Usage("/"); free >= before+24<<20 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if free < before+24<<20 {
		t.Fatalf("free space %d MiB after the deletes, %d MiB 10 s later; want 24 MiB more (30 MiB dead)", before>>20, free>>20)
	}
	for i := 0; i < n; i += 4 {
		if got, err := db.Get([]byte(fmt.Sprintf("k%03d", i))); err != nil || string(got) != v {
			t.Fatalf("k%03d after cleaning: %v", i, err)
		}
	}
}

// openSmallDevice formats and opens an engine with default options (but
// for the cache and a 16 MiB journal) on a 96 MiB MemFS; the DB is closed
// at cleanup.
func openSmallDevice(t *testing.T) (*lsm.DB, *vfs.MemFS) {
	t.Helper()
	mem := vfs.NewMem()
	mem.SetCapacity(96 << 20)
	o := &lsm.Options{FS: mem, UUID: [16]byte{0x96}, CacheSize: -1,
		Journal: lsm.JournalOptions{Size: 16 << 20, CommitInterval: time.Hour}}
	if err := lsm.Format("/db", o); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open("/db", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, mem
}
