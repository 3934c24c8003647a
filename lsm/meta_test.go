package lsm_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// The metamorphic test runs a seeded stream of operations against the engine
// (under randomized options, on a MemFS) and against a map, and compares
// every read. Crashes reopen from the MemFS's synced state; the recovered
// state must be the durable state plus a prefix of the batches applied since.
//
// Reproduce a failure with LSMFS_META_SEED=<seed>; run longer with
// LSMFS_LONG=1 or LSMFS_META_OPS=<n> and LSMFS_META_RUNS=<n>. A failing run
// writes its options and op log to a file named in the failure message.

type model map[string]string

func (m model) clone() model {
	c := make(model, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func (m model) sortedKeys(lo, hi string) []string {
	var keys []string
	for k := range m {
		if (lo == "" || k >= lo) && (hi == "" || k < hi) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

type pendingBatch struct {
	apply func(model)
}

type metaRun struct {
	t    *testing.T
	rng  *rand.Rand
	seed uint64
	fs   *vfs.MemFS
	opts *lsm.Options
	db   *lsm.DB
	log  []string

	cur model // state as applied
	// durable is the state known durable; pending the batches applied since
	// (a crash keeps durable plus a prefix of pending).
	durable model
	pending []pendingBatch

	snaps []metaSnap
	keys  []string
	stats map[string]int
	// nospace, if set, fails writes of value-log segments and tables with
	// ENOSPC (TestMetamorphicNoSpace).
	nospace *noSpaceInjector
}

// noSpaceInjector fails a share p of the writes to value-log segments and
// tables with ENOSPC (half of them short), except while off.
type noSpaceInjector struct {
	mu       sync.Mutex
	rng      *rand.Rand
	p        float64
	off      atomic.Bool
	injected int
}

func (n *noSpaceInjector) MaybeError(op vfs.Op) error {
	if n.off.Load() || op.Kind != vfs.OpWrite || !strings.HasSuffix(op.Path, ".vlog") && !strings.HasSuffix(op.Path, ".sst") {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.rng.Float64() >= n.p {
		return nil
	}
	n.injected++
	return []error{vfs.ENOSPC, vfs.ShortENOSPC}[n.rng.IntN(2)]
}

// noSpace reports whether err is an ENOSPC that the run's injection may
// cause: ErrNoSpace, never fail-stop. The operation must have had no
// effect.
func (r *metaRun) noSpace(what string, err error) bool {
	if r.nospace == nil || !errors.Is(err, lsm.ErrNoSpace) || errors.Is(err, lsm.ErrFailed) {
		return false
	}
	r.stats[what+" ENOSPC"]++
	r.logf("%s: ENOSPC", what)
	return true
}

type metaSnap struct {
	s *lsm.Snapshot
	m model
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func TestMetamorphic(t *testing.T) { metamorphic(t, false) }

// TestMetamorphicNoSpace is TestMetamorphic while a share of the writes to
// value-log segments and tables fail with ENOSPC: a batch, flush,
// compaction, sync or cleaning that gets ErrNoSpace (never fail-stop) has
// no effect on what reads see or on what a crash keeps.
func TestMetamorphicNoSpace(t *testing.T) { metamorphic(t, true) }

func metamorphic(t *testing.T, nospace bool) {
	ops, runs := 3000, 8
	if os.Getenv("LSMFS_LONG") != "" {
		ops, runs = 50000, 40
	}
	if raceEnabled {
		ops /= 4
	}
	ops = envInt("LSMFS_META_OPS", ops)
	runs = envInt("LSMFS_META_RUNS", runs)
	if s := os.Getenv("LSMFS_META_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		runMetaMode(t, seed, ops, nospace)
		return
	}
	// Runs cycle through every memtable policy x compaction style; the
	// seed picks everything else.
	base := uint64(time.Now().UnixNano())
	for i := 0; i < runs; i++ {
		seed := base + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runMetaMode(t, seed, ops, nospace) })
	}
}

var (
	allPolicies = []lsm.MemtablePolicy{lsm.PolicyNone, lsm.PolicyBasic, lsm.PolicyEager, lsm.PolicyAdaptive}
	allStyles   = []lsm.CompactionStyle{lsm.CompactionLeveled, lsm.CompactionTiered}
)

func randomOptions(rng *rand.Rand, fs vfs.FS) *lsm.Options {
	pick := func(xs ...int) int { return xs[rng.IntN(len(xs))] }
	o := &lsm.Options{
		FS:                       fs,
		UUID:                     [16]byte{0xab, byte(rng.IntN(256))},
		MemtableSize:             int64(pick(256<<10, 512<<10, 1<<20)),
		MemtablePolicy:           allPolicies[rng.IntN(4)],
		AdaptiveThreshold:        []float64{0.05, 0.3, 0.9}[rng.IntN(3)],
		Compaction:               allStyles[rng.IntN(2)],
		TierRatio:                []float64{1, 2, 4}[rng.IntN(3)],
		ValueThreshold:           pick(-1, 64, 512, 0),
		VlogSegmentSize:          int64(pick(64<<10, 256<<10)),
		VlogCleanThreshold:       []float64{0.3, 0.5, 0.9}[rng.IntN(3)],
		FlushMoveMin:             int64(pick(0, 1, 16<<10, 128<<10)),
		MaxMemtables:             pick(2, 3, 4),
		CacheSize:                int64(pick(-1, 1<<20, 8<<20)),
		BlockSize:                pick(1<<10, 4<<10, 16<<10),
		BloomBitsPerKey:          pick(-1, 10),
		DisableCompression:       rng.IntN(2) == 0,
		TargetFileSize:           int64(pick(64<<10, 256<<10, 1<<20)),
		L0CompactionTrigger:      pick(1, 2, 4),
		LBaseMaxBytes:            int64(pick(256<<10, 1<<20)),
		LevelMultiplier:          pick(2, 4, 10),
		MaxConcurrentCompactions: pick(1, 2, 3),
		Journal: lsm.JournalOptions{
			Size:               int64(pick(4<<20, 16<<20)),
			CommitInterval:     time.Hour, // only syncs make batches durable
			MaxFrameBytes:      pick(64<<10, 1<<20),
			DisableCompression: rng.IntN(2) == 0,
		},
	}
	o.L0StopWritesTrigger = o.L0CompactionTrigger + pick(2, 8)
	o.InMemoryFlushSize = o.MemtableSize / int64(pick(1, 2, 4))
	return o
}

func runMetaMode(t *testing.T, seed uint64, nops int, nospace bool) {
	r := &metaRun{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x5bd1e995)), fs: vfs.NewMem(),
		cur: model{}, durable: model{}, stats: map[string]int{}}
	r.opts = randomOptions(r.rng, r.fs)
	if nospace {
		r.nospace = &noSpaceInjector{rng: rand.New(rand.NewPCG(seed, 0x0e05)), p: []float64{0.01, 0.05, 0.2}[r.rng.IntN(3)]}
		r.opts.FS = vfs.NewErrorFS(r.fs, r.nospace)
		r.logf("ENOSPC on %.2f of value-log and table writes", r.nospace.p)
	}
	// Consecutive seeds cover every policy x style combination.
	r.opts.MemtablePolicy = allPolicies[seed%4]
	r.opts.Compaction = allStyles[(seed/4)%2]
	r.logf("options %+v", *r.opts)
	nkeys := []int{50, 300, 2000}[r.rng.IntN(3)]
	for i := 0; i < nkeys; i++ {
		r.keys = append(r.keys, fmt.Sprintf("k%0*d", 1+r.rng.IntN(6), r.rng.IntN(100000)))
	}
	if err := lsm.Format("/db", r.opts); err != nil {
		t.Fatal(err)
	}
	r.open()
	defer func() {
		if r.db != nil {
			r.db.Close()
		}
	}()
	defer func() {
		if t.Failed() {
			path := filepath.Join(os.TempDir(), fmt.Sprintf("lsm-meta-%d.ops", seed))
			os.WriteFile(path, []byte(strings.Join(r.log, "\n")+"\n"), 0o644)
			t.Logf("op log: %s; reproduce with LSMFS_META_SEED=%d", path, seed)
		}
		if r.db != nil {
			r.collect()
		}
		t.Logf("seed %d, policy %s, compaction %s, value threshold %d: %v", seed, r.opts.MemtablePolicy, r.opts.Compaction, r.opts.ValueThreshold, r.stats)
	}()
	for i := 0; i < nops; i++ {
		r.step(i)
		if t.Failed() {
			break
		}
	}
	if !t.Failed() {
		r.checkAll("final")
	}
}

func (r *metaRun) logf(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf(format, args...))
}

func (r *metaRun) fatalf(format string, args ...any) {
	r.t.Helper()
	msg := fmt.Sprintf(format, args...)
	r.logf("FAIL: %s", msg)
	r.t.Errorf("seed %d: %s", r.seed, msg)
}

func (r *metaRun) open() {
	db, err := lsm.Open("/db", r.opts)
	if err != nil {
		r.logf("FAIL: open: %v", err)
		r.t.Fatalf("seed %d: open: %v", r.seed, err)
	}
	r.db = db
}

func (r *metaRun) key() string { return r.keys[r.rng.IntN(len(r.keys))] }

func (r *metaRun) value() string {
	n := []int{0, 8, 100, 1000, 8000}[r.rng.IntN(5)]
	return fmt.Sprintf("%d:%s", r.rng.Uint32(), strings.Repeat("v", n))
}

func (r *metaRun) step(i int) {
	r.t.Helper()
	switch p := r.rng.IntN(100); {
	case p < 45:
		r.batch()
	case p < 60:
		r.get()
	case p < 70:
		r.iterate()
	case p < 75:
		r.snapshotOp()
	case p < 78:
		r.stats["flush"]++
		r.logf("flush")
		if err := r.db.Flush(); err != nil && !r.noSpace("flush", err) {
			r.fatalf("flush: %v", err)
		}
	case p < 80:
		r.compact()
	case p < 81:
		r.reopen()
	case p < 82:
		r.crash()
	case p < 84:
		r.stats["clean-vlog"]++
		r.logf("clean value log")
		if _, err := r.db.CleanValueLog(); err != nil && !r.noSpace("clean value log", err) {
			r.fatalf("clean value log: %v", err)
		}
	case p < 88:
		r.stats["sync"]++
		r.logf("sync")
		if err := r.db.SyncJournal(); err != nil {
			if !r.noSpace("sync", err) {
				r.fatalf("sync: %v", err)
			}
			break
		}
		r.markDurable()
	default:
		r.get()
	}
}

func (r *metaRun) markDurable() {
	r.durable = r.cur.clone()
	r.pending = nil
}

func (r *metaRun) batch() {
	r.stats["batch"]++
	b := lsm.NewBatch()
	n := 1 + r.rng.IntN(8)
	var desc []string
	var fns []func(model)
	for j := 0; j < n; j++ {
		switch p := r.rng.IntN(10); {
		case p < 6:
			k, v := r.key(), r.value()
			b.Set([]byte(k), []byte(v))
			desc = append(desc, fmt.Sprintf("set %s (%d)", k, len(v)))
			fns = append(fns, func(m model) { m[k] = v })
		case p < 9:
			k := r.key()
			b.Delete([]byte(k))
			desc = append(desc, "del "+k)
			fns = append(fns, func(m model) { delete(m, k) })
		default:
			lo, hi := r.key(), r.key()
			if lo > hi {
				lo, hi = hi, lo
			}
			b.DeleteRange([]byte(lo), []byte(hi))
			desc = append(desc, fmt.Sprintf("delrange [%s,%s)", lo, hi))
			fns = append(fns, func(m model) {
				for k := range m {
					if k >= lo && k < hi {
						delete(m, k)
					}
				}
			})
		}
	}
	sync := r.rng.IntN(4) == 0
	r.logf("batch sync=%v: %s", sync, strings.Join(desc, "; "))
	if err := r.db.Apply(b, sync); err != nil {
		if !r.noSpace("batch", err) {
			r.fatalf("apply: %v", err)
		}
		return
	}
	apply := func(m model) {
		for _, f := range fns {
			f(m)
		}
	}
	apply(r.cur)
	if sync {
		r.markDurable()
	} else {
		r.pending = append(r.pending, pendingBatch{apply: apply})
	}
}

func (r *metaRun) get() {
	r.stats["get"]++
	k := r.key()
	want, ok := r.cur[k]
	got, err := r.db.Get([]byte(k))
	r.logf("get %s", k)
	switch {
	case err != nil && !errors.Is(err, lsm.ErrNotFound):
		r.fatalf("get %s: %v", k, err)
	case ok && err != nil:
		r.fatalf("get %s: %v, want value of %d bytes", k, err, len(want))
	case !ok && err == nil:
		r.fatalf("get %s: found %d bytes, want not found", k, len(got))
	case ok && string(got) != want:
		r.fatalf("get %s: wrong value (%d bytes, want %d)", k, len(got), len(want))
	}
}

type iterLike interface {
	SeekGE([]byte) bool
	SeekLT([]byte) bool
	First() bool
	Last() bool
	Next() bool
	Prev() bool
	Key() []byte
	Value() []byte
	Error() error
	Close() error
}

// checkIter walks it and a model iterator with the same random moves.
func (r *metaRun) checkIter(what string, it iterLike, m model, lo, hi string) {
	keys := m.sortedKeys(lo, hi)
	pos := -1 // index into keys; -1 or len = invalid
	valid := func() bool { return pos >= 0 && pos < len(keys) }
	var moves []string
	for n := 0; n < 30 && !r.t.Failed(); n++ {
		var ok bool
		var mv string
		switch p := r.rng.IntN(8); {
		case p == 0:
			mv, ok = "first", it.First()
			pos = 0
		case p == 1:
			mv, ok = "last", it.Last()
			pos = len(keys) - 1
		case p == 2:
			k := r.key()
			mv, ok = "seekge "+k, it.SeekGE([]byte(k))
			pos = sort.SearchStrings(keys, k)
		case p == 3:
			k := r.key()
			mv, ok = "seeklt "+k, it.SeekLT([]byte(k))
			pos = sort.SearchStrings(keys, k) - 1
		case p < 6:
			if !valid() {
				continue
			}
			mv, ok = "next", it.Next()
			pos++
		default:
			if !valid() {
				continue
			}
			mv, ok = "prev", it.Prev()
			pos--
		}
		moves = append(moves, mv)
		if ok != valid() {
			r.fatalf("%s [%q,%q) after %v: valid=%v want %v (err %v)", what, lo, hi, moves, ok, valid(), it.Error())
			return
		}
		if ok && (string(it.Key()) != keys[pos] || string(it.Value()) != m[keys[pos]]) {
			r.fatalf("%s [%q,%q) after %v: at %q (value %.16q, %d bytes, iterator error %v) want %q (value %.16q, %d bytes)", what, lo, hi, moves,
				it.Key(), it.Value(), len(it.Value()), it.Error(), keys[pos], m[keys[pos]], len(m[keys[pos]]))
			return
		}
		if !ok {
			pos = -1
		}
	}
	if err := it.Error(); err != nil {
		r.fatalf("%s: iterator error %v", what, err)
	}
}

func (r *metaRun) randomBounds() (string, string) {
	lo, hi := "", ""
	if r.rng.IntN(2) == 0 {
		lo = r.key()
	}
	if r.rng.IntN(2) == 0 {
		hi = r.key()
	}
	if lo != "" && hi != "" && lo > hi {
		lo, hi = hi, lo
	}
	return lo, hi
}

func iterOpts(lo, hi string) *lsm.IterOptions {
	o := &lsm.IterOptions{}
	if lo != "" {
		o.LowerBound = []byte(lo)
	}
	if hi != "" {
		o.UpperBound = []byte(hi)
	}
	return o
}

func (r *metaRun) iterate() {
	r.stats["iter"]++
	lo, hi := r.randomBounds()
	r.logf("iter [%q,%q)", lo, hi)
	it := r.db.NewIter(iterOpts(lo, hi))
	r.checkIter("iter", it, r.cur, lo, hi)
	if err := it.Close(); err != nil {
		r.fatalf("iter close: %v", err)
	}
}

func (r *metaRun) snapshotOp() {
	r.stats["snapshot"]++
	switch {
	case len(r.snaps) < 3 && r.rng.IntN(2) == 0:
		r.logf("snapshot new")
		r.snaps = append(r.snaps, metaSnap{s: r.db.NewSnapshot(), m: r.cur.clone()})
	case len(r.snaps) > 0 && r.rng.IntN(3) == 0:
		i := r.rng.IntN(len(r.snaps))
		r.logf("snapshot close %d", i)
		r.snaps[i].s.Close()
		r.snaps = append(r.snaps[:i], r.snaps[i+1:]...)
	case len(r.snaps) > 0:
		s := r.snaps[r.rng.IntN(len(r.snaps))]
		k := r.key()
		r.logf("snapshot read %s", k)
		want, ok := s.m[k]
		got, err := s.s.Get([]byte(k))
		if (err == nil) != ok || (ok && string(got) != want) {
			r.fatalf("snapshot get %s: %q %v, want %q %v", k, got, err, want, ok)
		}
		lo, hi := r.randomBounds()
		it := s.s.NewIter(iterOpts(lo, hi))
		r.checkIter("snapshot iter", it, s.m, lo, hi)
		it.Close()
	}
}

func (r *metaRun) compact() {
	r.stats["compact"]++
	lo, hi := r.randomBounds()
	r.logf("compact [%q,%q]", lo, hi)
	var a, b []byte
	if lo != "" {
		a = []byte(lo)
	}
	if hi != "" {
		b = []byte(hi)
	}
	if err := r.db.Compact(a, b); err != nil {
		if !r.noSpace("compact", err) {
			r.fatalf("compact: %v", err)
		}
		return
	}
	// A flush made everything durable.
	r.markDurable()
}

// collect adds the engine's counters to the run's stats before a close.
func (r *metaRun) collect() {
	m := r.db.Metrics()
	r.stats["m:inmem-compactions"] += int(m.InMemoryCompactions)
	r.stats["m:inmem-merges"] += int(m.InMemoryMerges)
	r.stats["m:inmem-dropped"] += int(m.InMemoryDropped)
	r.stats["m:flushes"] += int(m.Flushes)
	r.stats["m:compactions"] += int(m.Compactions)
	r.stats["m:moves"] += int(m.Moves)
	r.stats["m:vlog-cleaned"] += int(m.Vlog.Cleaned)
	r.stats["m:vlog-rewritten-kb"] += int(m.Vlog.Rewritten >> 10)
	r.stats["m:flush-moved-kb"] += int(m.Vlog.FlushMoved >> 10)
}

func (r *metaRun) closeSnaps() {
	for _, s := range r.snaps {
		s.s.Close()
	}
	r.snaps = nil
}

func (r *metaRun) reopen() {
	r.stats["reopen"]++
	r.logf("reopen")
	if r.nospace != nil {
		r.nospace.off.Store(true)
		defer r.nospace.off.Store(false)
	}
	r.closeSnaps()
	r.collect()
	if err := r.db.Close(); err != nil {
		r.fatalf("close: %v", err)
	}
	r.db = nil
	r.open()
	r.markDurable()
	r.checkAll("after reopen")
}

func (r *metaRun) crash() {
	r.stats["crash"]++
	r.logf("crash (%d pending batches)", len(r.pending))
	crashed := r.fs.CrashClone()
	r.closeSnaps()
	r.collect()
	r.db.Close() // the old instance keeps writing to the old MemFS
	r.db = nil
	r.fs = crashed
	r.opts.FS = crashed
	if r.nospace != nil {
		r.opts.FS = vfs.NewErrorFS(crashed, r.nospace)
		r.nospace.off.Store(true) // Open and the checks below
		defer r.nospace.off.Store(false)
	}
	r.open()
	// The recovered state is durable + pending[:k] for some k.
	state := r.scan()
	m := r.durable.clone()
	k := -1
	if sameState(state, m) {
		k = 0
	}
	for i, p := range r.pending {
		p.apply(m)
		if sameState(state, m) {
			k = i + 1
		}
	}
	if k < 0 {
		mm := r.db.Metrics()
		r.t.Logf("after the crash: %s; journal checkpoint %d durable %d last %d", mm.String(), mm.Journal.CheckpointLSN, mm.Journal.DurableLSN, mm.Journal.LastLSN)
		r.fatalf("crash: recovered state (%d keys) is not durable state (%d keys) plus a prefix of %d pending batches; against all of them: %s",
			len(state), len(r.durable), len(r.pending), diffStates(state, m))
		return
	}
	r.logf("crash kept %d of %d pending batches", k, len(r.pending))
	m = r.durable.clone()
	for _, p := range r.pending[:k] {
		p.apply(m)
	}
	r.cur = m
	r.markDurable()
	r.checkAll("after crash")
}

func (r *metaRun) scan() model {
	m := model{}
	it := r.db.NewIter(nil)
	for ok := it.First(); ok; ok = it.Next() {
		m[string(it.Key())] = string(it.Value())
	}
	if err := it.Error(); err != nil {
		r.fatalf("scan: %v", err)
	}
	it.Close()
	return m
}

// diffStates describes how got differs from want, briefly.
func diffStates(got, want model) string {
	var d []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			d = append(d, "missing "+k)
		} else if g != v {
			d = append(d, fmt.Sprintf("wrong %s (%.12s, want %.12s)", k, g, v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			d = append(d, fmt.Sprintf("extra %s (%.12s, %d bytes)", k, v, len(v)))
		}
	}
	sort.Strings(d)
	if len(d) > 12 {
		d = append(d[:12], fmt.Sprintf("... %d more", len(d)-12))
	}
	return strings.Join(d, "; ")
}

func sameState(a, b model) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func (r *metaRun) checkAll(when string) {
	got := r.scan()
	if !sameState(got, r.cur) {
		var diff []string
		for k, v := range r.cur {
			if g, ok := got[k]; !ok {
				diff = append(diff, "missing "+k)
			} else if !bytes.Equal([]byte(g), []byte(v)) {
				diff = append(diff, "wrong "+k)
			}
		}
		for k := range got {
			if _, ok := r.cur[k]; !ok {
				diff = append(diff, "extra "+k)
			}
		}
		sort.Strings(diff)
		if len(diff) > 10 {
			diff = diff[:10]
		}
		r.fatalf("%s: scan differs from model: %v", when, diff)
	}
	for _, k := range r.cur.sortedKeys("", "") {
		v, err := r.db.Get([]byte(k))
		if err != nil || string(v) != r.cur[k] {
			r.fatalf("%s: get %s: %v", when, k, err)
			return
		}
	}
}
