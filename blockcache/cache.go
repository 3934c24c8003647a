package blockcache

import (
	"fmt"
	"sync/atomic"

	"github.com/dgraph-io/ristretto/v2"
)

// Cache is a byte-bounded cache of immutable byte slices keyed by
// (file number, offset). See the package documentation.
type Cache struct {
	rc       *ristretto.Cache[uint64, *entry]
	maxBytes int64

	hits   atomic.Uint64
	misses atomic.Uint64

	closed atomic.Bool
	// final holds Ristretto's figures as of Close (Ristretto zeroes them).
	final atomic.Pointer[Metrics]
}

// entry is what Ristretto stores: the value and the key it belongs to, so a
// hash collision is detected instead of returning another key's bytes.
type entry struct {
	file, off uint64
	b         []byte
}

// EntryOverhead is the cost an entry adds to its value's length: the heap
// it takes beyond the value (TestFootprint).
const EntryOverhead = 208

// Tuning (not part of any format).
const (
	// avgEntryBytes is the expected size of a cached value, used to size
	// Ristretto's frequency sketch: SSTable blocks are ~8 KiB decompressed,
	// value-log values ~4 KiB file blocks.
	avgEntryBytes = 4 << 10
	// countersPerEntry follows Ristretto's advice of 10 counters per item
	// the cache can hold.
	countersPerEntry = 10
	minCounters      = 1 << 10
	bufferItems      = 64
)

// New returns a cache holding at most about maxBytes bytes of values.
func New(maxBytes int64) (*Cache, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("blockcache: size must be positive, got %d", maxBytes)
	}
	counters := max(maxBytes/avgEntryBytes*countersPerEntry, minCounters)
	rc, err := ristretto.NewCache(&ristretto.Config[uint64, *entry]{
		NumCounters:        counters,
		MaxCost:            maxBytes,
		BufferItems:        bufferItems,
		Metrics:            true,
		IgnoreInternalCost: true,
	})
	if err != nil {
		return nil, fmt.Errorf("blockcache: new cache of %d bytes: %w", maxBytes, err)
	}
	return &Cache{rc: rc, maxBytes: maxBytes}, nil
}

// mix64 is the SplitMix64 finalizer, a bijection on uint64.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// keyHash maps (file, off) to Ristretto's key; for a fixed file it is a
// bijection on off.
func keyHash(file, off uint64) uint64 { return mix64(off ^ mix64(file)) }

// Get returns the value stored for (file, off). The slice is shared and must
// not be modified. A nil or closed cache always misses.
func (c *Cache) Get(file, off uint64) ([]byte, bool) {
	if c == nil || c.closed.Load() {
		return nil, false
	}
	e, ok := c.rc.Get(keyHash(file, off))
	if !ok || e == nil || e.file != file || e.off != off {
		c.misses.Add(1)
		return nil, false
	}
	c.hits.Add(1)
	return e.b, true
}

// Set offers b as the value for (file, off), at a cost of len(b) bytes. The
// cache may drop or reject it. b must not be modified afterwards, by the
// caller or anyone else. On a nil or closed cache Set does nothing.
func (c *Cache) Set(file, off uint64, b []byte) {
	if c == nil || c.closed.Load() {
		return
	}
	c.rc.Set(keyHash(file, off), &entry{file: file, off: off, b: b}, int64(len(b))+EntryOverhead)
}

// Wait blocks until every Set issued before it has been applied or rejected.
// Tests use it; the engine does not need it.
func (c *Cache) Wait() {
	if c == nil || c.closed.Load() {
		return
	}
	c.rc.Wait()
}

// Metrics is a snapshot of the cache's counters.
type Metrics struct {
	// Hits and Misses count Get calls (this package's own counters; a hash
	// collision detected by Get counts as a miss).
	Hits, Misses uint64
	// Capacity is the configured size in bytes; Used the cost of the values
	// currently held.
	Capacity, Used int64
	// KeysAdded and KeysEvicted count admitted and evicted values;
	// CostAdded and CostEvicted their bytes.
	KeysAdded, KeysEvicted uint64
	CostAdded, CostEvicted uint64
	// SetsDropped counts Sets lost to a full buffer under contention;
	// SetsRejected those refused by the admission policy.
	SetsDropped, SetsRejected uint64
}

// HitRatio is Hits / (Hits + Misses), or 0 before any Get.
func (m Metrics) HitRatio() float64 {
	if n := m.Hits + m.Misses; n > 0 {
		return float64(m.Hits) / float64(n)
	}
	return 0
}

func (m Metrics) String() string {
	return fmt.Sprintf("hits=%d misses=%d hit-ratio=%.3f used=%d/%d added=%d (%d B) evicted=%d (%d B) dropped=%d rejected=%d",
		m.Hits, m.Misses, m.HitRatio(), m.Used, m.Capacity, m.KeysAdded, m.CostAdded,
		m.KeysEvicted, m.CostEvicted, m.SetsDropped, m.SetsRejected)
}

// Metrics returns the current counters. On a nil cache it returns zeros;
// after Close, the figures as of Close.
func (c *Cache) Metrics() Metrics {
	if c == nil {
		return Metrics{}
	}
	if f := c.final.Load(); f != nil {
		m := *f
		m.Hits, m.Misses = c.hits.Load(), c.misses.Load()
		return m
	}
	return c.snapshot()
}

func (c *Cache) snapshot() Metrics {
	rm := c.rc.Metrics
	return Metrics{
		Hits:         c.hits.Load(),
		Misses:       c.misses.Load(),
		Capacity:     c.maxBytes,
		Used:         c.rc.MaxCost() - c.rc.RemainingCost(),
		KeysAdded:    rm.KeysAdded(),
		KeysEvicted:  rm.KeysEvicted(),
		CostAdded:    rm.CostAdded(),
		CostEvicted:  rm.CostEvicted(),
		SetsDropped:  rm.SetsDropped(),
		SetsRejected: rm.SetsRejected(),
	}
}

// Close releases the cache's goroutines and memory. It must not run
// concurrently with Get or Set; calling it twice is harmless. Afterwards Get
// misses and Set does nothing.
func (c *Cache) Close() {
	if c == nil || !c.closed.CompareAndSwap(false, true) {
		return
	}
	m := c.snapshot()
	m.Used = 0
	c.final.Store(&m)
	c.rc.Close()
}
