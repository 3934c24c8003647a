package lsm_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestCrashStates enumerates crash states (CrashMonkey/B3 style): a seeded
// random workload runs on a RecordingFS; at many crash points, taken inside
// the engine's own I/O calls (a journal force, a value-log write, a table
// write in a flush, a manifest switch), every state the recorder can give —
// the durable state plus each prefix of the pending writes, each pending
// write torn, and sampled reorderings — must reopen without error and hold
// every batch acknowledged as durable and no partial batch: exactly the
// state after some batch k, with k between the last acknowledged batch and
// the last one started. Each batch writes "!seq" = its number, which names
// k. LSMFS_SEED=N replays a workload; LSMFS_LONG=1 runs longer.
func TestCrashStates(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("LSMFS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seed = n
	}
	batches, points := 600, 120
	if raceEnabled {
		batches, points = 150, 30
	}
	if os.Getenv("LSMFS_LONG") != "" {
		batches, points = 4000, 1000
	}
	t.Logf("seed %d (replay with LSMFS_SEED=%d)", seed, seed)
	c := newCrashRun(t, seed)
	c.run(batches, points)
}

type crashBatch struct {
	n   int
	ops []crashOp
}

type crashOp struct {
	kind       byte // 's' set, 'd' delete, 'r' delete range
	key, value string
}

func (b *crashBatch) apply(m model) {
	for _, op := range b.ops {
		switch op.kind {
		case 's':
			m[op.key] = op.value
		case 'd':
			delete(m, op.key)
		case 'r':
			for k := range m {
				if k >= op.key && k < op.value {
					delete(m, k)
				}
			}
		}
	}
	m["!seq"] = strconv.Itoa(b.n)
}

type crashRun struct {
	t    *testing.T
	seed uint64
	rng  *rand.Rand
	rec  *vfs.RecordingFS
	opts *lsm.Options

	// mu guards the model, shared with the hook (which runs in whatever
	// goroutine makes the engine's I/O call). Never held across an engine
	// call.
	mu struct {
		sync.Mutex
		durable   model        // state after batch durableN
		durableN  int          // last batch acknowledged durable
		pending   []crashBatch // batches durableN+1 ..., started
		hookRng   *rand.Rand
		every     int
		points    int // crash points checked
		states    int // crash states checked
		maxWindow int
		failed    bool
	}
}

func newCrashRun(t *testing.T, seed uint64) *crashRun {
	c := &crashRun{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 1))}
	c.mu.durable = model{}
	c.mu.hookRng = rand.New(rand.NewPCG(seed, 2))
	c.rec = vfs.NewRecording(vfs.NewMem())
	c.opts = &lsm.Options{
		FS: c.rec, UUID: [16]byte{0xc7, 0x5a},
		MemtableSize: 256 << 10, InMemoryFlushSize: 64 << 10,
		MemtablePolicy: allPolicies[seed%4], Compaction: allStyles[(seed/4)%2],
		ValueThreshold: 100, VlogSegmentSize: 64 << 10, VlogCleanThreshold: 0.6,
		// Flushes move the values synchronous batches kept inline from
		// any size, 16 KiB, or (as by default) 1 MiB, which these
		// memtables never reach.
		FlushMoveMin:   []int64{1, 16 << 10, 0}[(seed/8)%3],
		TargetFileSize: 64 << 10, L0CompactionTrigger: 2, LBaseMaxBytes: 256 << 10,
		MaxManifestSize: 8 << 10, CacheSize: -1, BlockSize: 1 << 10,
		Journal: lsm.JournalOptions{Size: 4 << 20, CommitInterval: time.Hour, MaxFrameBytes: 64 << 10},
	}
	t.Logf("policy %s, compaction %s, flush move min %d", c.opts.MemtablePolicy, c.opts.Compaction, c.opts.FlushMoveMin)
	return c
}

func (c *crashRun) run(batches, points int) {
	t := c.t
	if err := lsm.Format("/db", c.opts); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open("/db", c.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.rec.SetHook(nil)
		if db != nil {
			db.Close()
		}
	}()
	// Calibrate: about 2 mutating calls per batch; spread the crash
	// points over the run.
	c.mu.every = max(1, batches*2/points)
	c.rec.SetHook(c.hook)
	keys := make([]string, 400)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%04d", i)
	}
	for n := 1; n <= batches && !c.failedNow(); n++ {
		b := crashBatch{n: n}
		lb := lsm.NewBatch()
		for j := 0; j < 1+c.rng.IntN(6); j++ {
			k := keys[c.rng.IntN(len(keys))]
			switch p := c.rng.IntN(10); {
			case p < 7:
				size := []int{5, 40, 300, 1500}[c.rng.IntN(4)]
				v := fmt.Sprintf("%d.%d:%s", n, j, strings.Repeat("x", size))
				b.ops = append(b.ops, crashOp{'s', k, v})
				lb.Set([]byte(k), []byte(v))
			case p < 9:
				b.ops = append(b.ops, crashOp{'d', k, ""})
				lb.Delete([]byte(k))
			default:
				end := fmt.Sprintf("k%04d", min(len(keys), c.rng.IntN(len(keys))+1+c.rng.IntN(20)))
				if end <= k {
					continue
				}
				b.ops = append(b.ops, crashOp{'r', k, end})
				lb.DeleteRange([]byte(k), []byte(end))
			}
		}
		lb.Set([]byte("!seq"), []byte(strconv.Itoa(n)))
		c.mu.Lock()
		c.mu.pending = append(c.mu.pending, b)
		c.mu.Unlock()
		sync := c.rng.IntN(4) == 0
		if err := db.Apply(lb, sync); err != nil {
			t.Fatalf("apply batch %d: %v", n, err)
		}
		if sync {
			c.acked(n)
		}
		switch p := c.rng.IntN(100); {
		case p < 5:
			if err := db.SyncJournal(); err != nil {
				t.Fatalf("sync: %v", err)
			}
			c.acked(n)
		case p < 7:
			if err := db.Flush(); err != nil {
				t.Fatalf("flush: %v", err)
			}
		case p < 8:
			if _, err := db.CleanValueLog(); err != nil {
				t.Fatalf("clean value log: %v", err)
			}
		case p < 9:
			if err := db.Compact(nil, nil); err != nil {
				t.Fatalf("compact: %v", err)
			}
		}
	}
	c.rec.SetHook(nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Logf("crash points %d, crash states checked %d (largest window %d pending writes; %d calls); flushes moved %d bytes",
		c.mu.points, c.mu.states, c.mu.maxWindow, c.rec.Calls(), db.Metrics().Vlog.FlushMoved)
	if !c.mu.failed && c.mu.points < points/4 {
		t.Errorf("only %d crash points", c.mu.points)
	}
}

func (c *crashRun) failedNow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.failed
}

// acked records that batches up to n are durable.
func (c *crashRun) acked(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.mu.pending) > 0 && c.mu.pending[0].n <= n {
		c.mu.pending[0].apply(c.mu.durable)
		c.mu.durableN = c.mu.pending[0].n
		c.mu.pending = c.mu.pending[1:]
	}
}

// hook runs after every mutating call of the engine; every so often it
// crashes there and checks every state of the window.
func (c *crashRun) hook(e vfs.Event) {
	c.mu.Lock()
	if c.mu.failed || c.mu.hookRng.IntN(c.mu.every) != 0 {
		c.mu.Unlock()
		return
	}
	durable := c.mu.durable.clone()
	durableN := c.mu.durableN
	pending := append([]crashBatch(nil), c.mu.pending...)
	rng := rand.New(rand.NewPCG(c.mu.hookRng.Uint64(), 3))
	c.mu.Unlock()

	w := e.Capture()
	// Every model state a crash may leave: after durableN, and after each
	// started batch.
	states := []model{durable}
	m := durable
	for _, b := range pending {
		m = m.clone()
		b.apply(m)
		states = append(states, m)
	}
	var failure string
	n := w.States(rng, 4, func(desc string, mem *vfs.MemFS) bool {
		if msg := c.checkState(mem, durableN, states); msg != "" {
			failure = fmt.Sprintf("crash after call %d (%s), state %s: %s\n%s", e.Index, e.Op, desc, msg, w)
			return false
		}
		return true
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.points++
	c.mu.states += n
	c.mu.maxWindow = max(c.mu.maxWindow, w.Len())
	if failure != "" && !c.mu.failed {
		c.mu.failed = true
		c.t.Errorf("seed %d: %s", c.seed, failure)
	}
}

// checkState opens the engine on a crash state and compares it with the
// model states it may equal. It returns what is wrong, or "".
func (c *crashRun) checkState(mem *vfs.MemFS, durableN int, states []model) string {
	o := *c.opts
	o.FS = mem
	db, err := lsm.Open("/db", &o)
	if err != nil {
		return fmt.Sprintf("open: %v", err)
	}
	defer db.Close()
	got := model{}
	it := db.NewIter(nil)
	for ok := it.First(); ok; ok = it.Next() {
		got[string(it.Key())] = string(it.Value())
	}
	err = it.Error()
	it.Close()
	if err != nil {
		return fmt.Sprintf("scan: %v", err)
	}
	k := 0
	if s, ok := got["!seq"]; ok {
		if k, err = strconv.Atoi(s); err != nil {
			return fmt.Sprintf("!seq = %q", s)
		}
	}
	if k < durableN || k > durableN+len(states)-1 {
		return fmt.Sprintf("recovered batch %d, but batches up to %d were acknowledged durable and %d started", k, durableN, durableN+len(states)-1)
	}
	if want := states[k-durableN]; !sameState(got, want) {
		return fmt.Sprintf("recovered batch %d is partial or damaged: %s", k, diffStates(got, want))
	}
	if err := db.Close(); err != nil {
		return fmt.Sprintf("close: %v", err)
	}
	return ""
}
