package blockcache_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/lsmfs/lsmfs/blockcache"
)

func newCache(t *testing.T, size int64) *blockcache.Cache {
	t.Helper()
	c, err := blockcache.New(size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestNewRejectsBadSize(t *testing.T) {
	for _, n := range []int64{0, -1} {
		if _, err := blockcache.New(n); err == nil {
			t.Errorf("New(%d): want error", n)
		}
	}
}

func TestGetSetMiss(t *testing.T) {
	c := newCache(t, 1<<20)
	if _, ok := c.Get(1, 0); ok {
		t.Fatal("hit in empty cache")
	}
	c.Set(1, 0, []byte("block 1/0"))
	c.Set(1, 4096, []byte("block 1/4096"))
	c.Set(2, 0, []byte("block 2/0"))
	c.Wait()
	for _, tc := range []struct {
		file, off uint64
		want      string
	}{{1, 0, "block 1/0"}, {1, 4096, "block 1/4096"}, {2, 0, "block 2/0"}} {
		b, ok := c.Get(tc.file, tc.off)
		if !ok || string(b) != tc.want {
			t.Errorf("Get(%d, %d) = %q, %v; want %q", tc.file, tc.off, b, ok, tc.want)
		}
	}
	for _, k := range [][2]uint64{{2, 4096}, {3, 0}, {0, 0}, {1, 1}} {
		if b, ok := c.Get(k[0], k[1]); ok {
			t.Errorf("Get(%d, %d) = %q; want miss", k[0], k[1], b)
		}
	}
	m := c.Metrics()
	if m.Hits != 3 || m.Misses != 5 {
		t.Errorf("hits=%d misses=%d; want 3, 5", m.Hits, m.Misses)
	}
	if got, want := m.HitRatio(), 3.0/8; got != want {
		t.Errorf("HitRatio = %v; want %v", got, want)
	}
	if m.KeysAdded != 3 || m.CostAdded != uint64(len("block 1/0block 1/4096block 2/0")+3*blockcache.EntryOverhead) {
		t.Errorf("added %d keys, %d bytes: %v", m.KeysAdded, m.CostAdded, m)
	}
	if m.Used != int64(m.CostAdded) || m.Capacity != 1<<20 {
		t.Errorf("used=%d capacity=%d: %v", m.Used, m.Capacity, m)
	}
	t.Log(m)
}

func TestNilCache(t *testing.T) {
	var c *blockcache.Cache
	c.Set(1, 2, []byte("x"))
	c.Wait()
	if _, ok := c.Get(1, 2); ok {
		t.Fatal("nil cache hit")
	}
	if m := c.Metrics(); m != (blockcache.Metrics{}) {
		t.Fatalf("nil cache metrics %v", m)
	}
	if r := c.Metrics().HitRatio(); r != 0 {
		t.Fatalf("HitRatio = %v", r)
	}
	c.Close()
}

func TestClose(t *testing.T) {
	c, err := blockcache.New(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	c.Set(1, 0, []byte("v"))
	c.Wait()
	if _, ok := c.Get(1, 0); !ok {
		t.Fatal("miss before close")
	}
	c.Close()
	c.Close()
	if _, ok := c.Get(1, 0); ok {
		t.Fatal("hit after close")
	}
	c.Set(1, 0, []byte("v"))
	m := c.Metrics()
	if m.Hits != 1 || m.KeysAdded != 1 || m.Used != 0 {
		t.Fatalf("metrics after close: %v", m)
	}
}

// TestHashCollision plants a value for one key under the hash of another:
// Get must detect that the stored value is not its own.
func TestHashCollision(t *testing.T) {
	c := newCache(t, 1<<20)
	c.SetUnderHash(blockcache.KeyHash(7, 100), 8, 200, []byte("other"))
	c.Wait()
	if b, ok := c.Get(7, 100); ok {
		t.Fatalf("Get returned another key's value %q", b)
	}
	if b, ok := c.Get(8, 200); ok {
		t.Fatalf("Get(8, 200) found %q under a foreign hash", b)
	}
	if m := c.Metrics(); m.Misses != 2 || m.Hits != 0 {
		t.Fatalf("metrics %v", m)
	}
}

// TestKeyHashInjectiveWithinFile checks that offsets of one file never share
// a Ristretto key (the hash is a bijection on the offset).
func TestKeyHashInjectiveWithinFile(t *testing.T) {
	seen := map[uint64]uint64{}
	for _, file := range []uint64{0, 1, 2, 1 << 40} {
		clear(seen)
		for off := uint64(0); off < 1<<16; off += 7 {
			h := blockcache.KeyHash(file, off)
			if prev, ok := seen[h]; ok {
				t.Fatalf("file %d: offsets %d and %d share hash %x", file, prev, off, h)
			}
			seen[h] = off
		}
	}
}

// TestSizeBound fills a small cache with many times its size and checks that
// what it holds stays within the bound, and that Ristretto's accounting adds
// up.
func TestSizeBound(t *testing.T) {
	const size = 256 << 10
	c := newCache(t, size)
	val := bytes.Repeat([]byte{0xab}, 1000)
	for i := range uint64(2000) {
		c.Set(i/16, (i%16)*4096, val)
		if i%64 == 0 {
			c.Wait()
		}
	}
	c.Wait()
	m := c.Metrics()
	t.Log(m)
	if m.Used > size {
		t.Errorf("used %d > capacity %d", m.Used, size)
	}
	if m.Used < size/2 {
		t.Errorf("used %d: cache barely filled", m.Used)
	}
	if got := int64(m.CostAdded - m.CostEvicted); got != m.Used {
		t.Errorf("added-evicted = %d, used = %d", got, m.Used)
	}
	held := 0
	for i := range uint64(2000) {
		if b, ok := c.Get(i/16, (i%16)*4096); ok {
			if !bytes.Equal(b, val) {
				t.Fatalf("wrong value for %d", i)
			}
			held += len(b)
		}
	}
	if held > size {
		t.Errorf("Get found %d bytes > capacity %d", held, size)
	}
	// A value larger than the whole cache is never admitted.
	c.Set(1<<50, 0, make([]byte, size+1))
	c.Wait()
	if _, ok := c.Get(1<<50, 0); ok {
		t.Error("oversized value admitted")
	}
}

// TestConcurrent runs readers and writers together (run with -race).
func TestConcurrent(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	c := newCache(t, 1<<20)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for range 5000 {
				file, off := rng.Uint64N(8), rng.Uint64N(64)*4096
				if b, ok := c.Get(file, off); ok {
					if want := fmt.Sprintf("%d/%d", file, off); string(b) != want {
						t.Errorf("Get(%d, %d) = %q", file, off, b)
						return
					}
					continue
				}
				c.Set(file, off, fmt.Appendf(nil, "%d/%d", file, off))
			}
		}()
	}
	wg.Wait()
	m := c.Metrics()
	if m.Hits+m.Misses != 8*5000 {
		t.Fatalf("counted %d gets: %v", m.Hits+m.Misses, m)
	}
}

func BenchmarkGetHit(b *testing.B) {
	c, err := blockcache.New(64 << 20)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for i := range uint64(1024) {
		c.Set(1, i*4096, make([]byte, 4096))
	}
	c.Wait()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := uint64(0)
		for pb.Next() {
			c.Get(1, (i%1024)*4096)
			i++
		}
	})
}

// TestFootprint fills a cache with small values and checks that the heap it
// holds stays near its configured size: entries are charged EntryOverhead
// beyond their values. Charging the values alone, 256-byte values would
// take about 1.8x the size.
func TestFootprint(t *testing.T) {
	const size = 8 << 20
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	c, err := blockcache.New(size)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 4 * size / 256 {
		c.Set(1, uint64(i), make([]byte, 256))
		if i%1024 == 0 {
			c.Wait()
		}
	}
	c.Wait()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	m := c.Metrics()
	if m.Used < size*3/4 {
		t.Fatalf("cache barely filled: %v", m)
	}
	// The frequency sketch is sized by New, apart from the entries.
	held := int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
	if held > size*5/4 {
		t.Fatalf("a cache of %d bytes holds %d bytes of heap (%d entries)", size, held, m.KeysAdded-m.KeysEvicted)
	}
	t.Logf("a cache of %d bytes holds %d bytes of heap with 256-byte values", size, held)
}
