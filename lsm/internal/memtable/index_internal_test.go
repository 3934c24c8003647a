package memtable

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

// indexSizes are the point indexes the tests run with: the default, and one
// that fills after a few keys, so that Get takes the list for keys the index
// refused.
var indexSizes = []struct {
	name string
	keys int // 0: the default
}{{"default", 0}, {"full", 20}}

func newTestMemtable(capacity uint32, indexKeys int) *Memtable {
	m := New(capacity)
	if indexKeys > 0 {
		m.index = newPointIndex(indexKeys)
	}
	return m
}

// TestPointIndexMatchesModel: Get, answered from the index where it can be,
// matches a model of every version at random snapshots, including versions
// newer than the snapshot (the index holds the newest) and deletions; with
// the versions added in order (as the engine adds them), and shuffled (an
// older version added after a newer one must not take its slot).
func TestPointIndexMatchesModel(t *testing.T) {
	for _, sz := range indexSizes {
		for _, shuffled := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/shuffled=%v", sz.name, shuffled), func(t *testing.T) {
				seed := rand.Uint64()
				t.Logf("seed %d", seed)
				rng := rand.New(rand.NewPCG(seed, 11))
				m := newTestMemtable(4<<20, sz.keys)
				type version struct {
					k    string
					seq  base.SeqNum
					kind base.Kind
					v    string
				}
				var adds []version
				for i := range 20000 {
					ver := version{fmt.Sprintf("k%05d", rng.IntN(2000)), base.SeqNum(i + 1), base.KindSet, fmt.Sprint(i)}
					if rng.IntN(4) == 0 {
						ver.kind, ver.v = base.KindDelete, ""
					}
					adds = append(adds, ver)
				}
				if shuffled {
					rng.Shuffle(len(adds), func(i, j int) { adds[i], adds[j] = adds[j], adds[i] })
				}
				model := map[string][]version{}
				for _, ver := range adds {
					if err := m.Add(base.MakeInternalKey([]byte(ver.k), ver.seq, ver.kind), []byte(ver.v)); err != nil {
						t.Fatal(err)
					}
					model[ver.k] = append(model[ver.k], ver)
				}
				if full := m.index.full.Load(); full != (sz.keys > 0) {
					t.Fatalf("index full = %v", full)
				}
				for range 20000 {
					k := fmt.Sprintf("k%05d", rng.IntN(2100)) // some never written
					snap := base.SeqNum(rng.IntN(len(adds) + 10))
					var want *version
					for i, ver := range model[k] {
						if ver.seq <= snap && (want == nil || ver.seq > want.seq) {
							want = &model[k][i]
						}
					}
					got, v, ok := m.Get([]byte(k), snap)
					switch {
					case ok != (want != nil):
						t.Fatalf("Get(%s, %d): found %v, want %v", k, snap, ok, want != nil)
					case ok && (got.Seq() != want.seq || got.Kind() != want.kind || string(v) != want.v):
						t.Fatalf("Get(%s, %d) = %v %q, want seq %d kind %d %q", k, snap, got, v, want.seq, want.kind, want.v)
					}
				}
			})
		}
	}
}

// TestPointIndexRacingWriter: readers Get at the sequence number the writer
// published after each Add (as the engine publishes a batch once it is in
// the memtable) while the writer adds new versions of a few keys; each must
// see exactly the newest version at or below that number. Run with -race.
func TestPointIndexRacingWriter(t *testing.T) {
	const keys, adds = 64, 40000
	key := func(k int) []byte { return binary.BigEndian.AppendUint64([]byte{'I'}, uint64(k)) }
	for _, sz := range indexSizes {
		t.Run(sz.name, func(t *testing.T) {
			m := newTestMemtable(8<<20, sz.keys)
			var visible atomic.Uint64
			var wg sync.WaitGroup
			stop := make(chan struct{})
			var bad atomic.Int64
			for r := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(r), 3))
					for {
						select {
						case <-stop:
							return
						default:
						}
						snap := visible.Load()
						k := rng.IntN(keys)
						// Add i has seq i+1 and writes key i%keys, value i.
						_, v, ok := m.Get(key(k), snap)
						if snap < uint64(k)+1 {
							if ok {
								bad.Add(1)
							}
							continue
						}
						last := snap - 1 - (snap-1-uint64(k))%keys
						if !ok || binary.BigEndian.Uint64(v) != last {
							bad.Add(1)
						}
					}
				}()
			}
			for i := range adds {
				v := binary.BigEndian.AppendUint64(nil, uint64(i))
				if err := m.Add(base.MakeInternalKey(key(i%keys), base.SeqNum(i+1), base.KindSet), v); err != nil {
					t.Fatal(err)
				}
				visible.Store(uint64(i + 1))
			}
			close(stop)
			wg.Wait()
			if n := bad.Load(); n > 0 {
				t.Fatalf("%d lookups did not see the newest visible version", n)
			}
		})
	}
}

// BenchmarkGet looks up random keys of an 8 MiB memtable of inode-like keys
// (the size of the engine's active segment): "list" is the skiplist search
// the index replaces, "index" the index. Keys are drawn at random, so most
// nodes a search visits are cache misses, as on a mount, where the kernel's
// work between two requests evicts them.
func BenchmarkGet(b *testing.B) {
	key := func(i int) []byte { return binary.BigEndian.AppendUint64([]byte{'I'}, uint64(i)) }
	m := New(8 << 20)
	n := 0
	for ; ; n++ {
		if err := m.Add(base.MakeInternalKey(key(n), base.SeqNum(n+1), base.KindSet), make([]byte, 24)); err != nil {
			break
		}
	}
	for _, mode := range []string{"list", "index"} {
		b.Run(mode, func(b *testing.B) {
			idx := m.index
			if mode == "list" {
				m.index = &pointIndex{slots: make([]atomic.Uint64, 1)}
				m.index.full.Store(true)
			}
			defer func() { m.index = idx }()
			rng := rand.New(rand.NewPCG(1, 2))
			b.ResetTimer()
			for range b.N {
				if _, _, ok := m.Get(key(rng.IntN(n)), base.MaxSeqNum); !ok {
					b.Fatal("missing key")
				}
			}
			b.ReportMetric(float64(n), "keys")
			b.ReportMetric(float64(idx.used), "indexed")
		})
	}
}

// BenchmarkAddSegment fills 8 MiB segments (the engine's active segment) with
// inode-like entries, new keys and updates of earlier ones in random order,
// with the index ("index") and with an index that takes nothing ("none"): the
// index's cost on the write path.
func BenchmarkAddSegment(b *testing.B) {
	key := func(i uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'I'}, i) }
	for _, mode := range []string{"none", "index"} {
		b.Run(mode, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			none := &pointIndex{slots: make([]atomic.Uint64, 1)}
			none.full.Store(true)
			fresh := func() *Memtable {
				m := New(8 << 20)
				if mode == "none" {
					m.index = none
				}
				return m
			}
			m := fresh()
			val := make([]byte, 24)
			b.ResetTimer()
			for i := range b.N {
				k := key(rng.Uint64N(200_000)) // about half of a segment's adds are updates
				if err := m.Add(base.MakeInternalKey(k, base.SeqNum(i+1), base.KindSet), val); err != nil {
					b.StopTimer()
					m = fresh()
					b.StartTimer()
				}
			}
		})
	}
}
