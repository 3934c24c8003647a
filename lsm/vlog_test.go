package lsm_test

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/lsmfs/lsmfs/lsm"
)

// blockKey is shaped like fs/'s data keys: 'B' + ino + block index.
func blockKey(ino, blk uint64) []byte {
	k := []byte{'B'}
	k = binary.BigEndian.AppendUint64(k, ino)
	return binary.BigEndian.AppendUint64(k, blk)
}

// fillBlock fills b with bytes derived from (pass, ino, blk), so a read can
// tell which write it sees.
func fillBlock(b []byte, pass, ino, blk uint64) {
	rng := rand.New(rand.NewPCG(pass<<32|ino, blk))
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
}

func dirSize(t testing.TB, dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// TestValueLogReclaimsOverwrites overwrites the same data five times (as a
// file rewritten in 16 KiB blocks), compacts and cleans the value log, and
// checks that the data directory (minus the preallocated journal) is back
// under 1.5x the live data, with every byte right: 1 GiB of live data (5 GiB
// written; 128 MiB under -race).
func TestValueLogReclaimsOverwrites(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1.25 GiB to disk; -short skips it")
	}
	live := int64(1 << 30)
	if raceEnabled {
		live = 128 << 20 // 1 GiB takes three minutes under the race detector
	}
	const blockSize = 16 << 10
	dir := filepath.Join(t.TempDir(), "db")
	opts := &lsm.Options{UUID: [16]byte{5}, VlogSegmentSize: 32 << 20}
	if err := lsm.Format(dir, opts); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	const files = 8
	blocks := uint64(live / blockSize / files)
	buf := make([]byte, blockSize)
	b := lsm.NewBatch()
	for pass := uint64(1); pass <= 5; pass++ {
		for ino := uint64(100); ino < 100+files; ino++ {
			for blk := uint64(0); blk < blocks; blk++ {
				fillBlock(buf, pass, ino, blk)
				b.Set(blockKey(ino, blk), buf)
				if b.Len() >= 1<<20 {
					if err := db.Apply(b, false); err != nil {
						t.Fatal(err)
					}
					b.Reset()
				}
			}
		}
	}
	if err := db.Apply(b, true); err != nil {
		t.Fatal(err)
	}
	journal := int64(256 << 20)
	before := dirSize(t, dir) - journal
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	cleaned, err := db.CleanValueLog()
	if err != nil {
		t.Fatal(err)
	}
	after := dirSize(t, dir) - journal
	m := db.Metrics()
	t.Logf("live %d MiB; data directory (without the journal) %d MiB before cleaning, %d MiB after (%.2fx); %d segments cleaned, %d MiB rewritten; %s",
		live>>20, before>>20, after>>20, float64(after)/float64(live), cleaned, m.Vlog.Rewritten>>20, m.String())
	if float64(after) > 1.5*float64(live) {
		t.Errorf("data directory %d MiB > 1.5x the %d MiB of live data", after>>20, live>>20)
	}
	// Every byte right, after a reopen too.
	check := func(when string) {
		want := make([]byte, blockSize)
		for ino := uint64(100); ino < 100+files; ino++ {
			for blk := uint64(0); blk < blocks; blk++ {
				got, err := db.Get(blockKey(ino, blk))
				fillBlock(want, 5, ino, blk)
				if err != nil || string(got) != string(want) {
					t.Fatalf("%s: block %d of file %d: err %v, equal %v", when, blk, ino, err, string(got) == string(want))
				}
			}
		}
	}
	check("after cleaning")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = lsm.Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	check("after reopen")
}

// hotSet writes n values of size bytes (separated into the value log) and
// reads them all twice to warm the cache.
func hotSet(t testing.TB, n, size int, cacheSize int64) *lsm.DB {
	dir := filepath.Join(t.TempDir(), "db")
	opts := &lsm.Options{UUID: [16]byte{6}, CacheSize: cacheSize}
	if err := lsm.Format(dir, opts); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, size)
	for i := 0; i < n; i++ {
		fillBlock(buf, 1, 7, uint64(i))
		b := lsm.NewBatch()
		b.Set(blockKey(7, uint64(i)), buf)
		if err := db.Apply(b, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	for pass := 0; pass < 2; pass++ {
		for i := 0; i < n; i++ {
			if _, err := db.Get(blockKey(7, uint64(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	return db
}

// TestHotSetServedFromCache: once a working set that fits in cache_size is
// warm, reads hit the cache (> 95%) and read nothing from the value log or
// the tables' files.
func TestHotSetServedFromCache(t *testing.T) {
	db := hotSet(t, 2048, 16<<10, 128<<20) // 32 MiB of values
	defer db.Close()
	db.WaitCache() // the warm-up's Sets applied: a buffered one would count as a disk read
	m0 := db.Metrics()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		if _, err := db.Get(blockKey(7, rng.Uint64N(2048))); err != nil {
			t.Fatal(err)
		}
	}
	m1 := db.Metrics()
	hits := m1.Cache.Hits - m0.Cache.Hits
	misses := m1.Cache.Misses - m0.Cache.Misses
	ratio := float64(hits) / float64(hits+misses)
	t.Logf("after warm-up: %d hits, %d misses (%.4f); value-log disk reads %d, table blocks read %d",
		hits, misses, ratio, m1.Vlog.DiskReads-m0.Vlog.DiskReads, m1.TableBlocksRead-m0.TableBlocksRead)
	if ratio < 0.95 {
		t.Errorf("hit ratio %.3f < 0.95", ratio)
	}
	if n := m1.Vlog.DiskReads - m0.Vlog.DiskReads; n != 0 {
		t.Errorf("%d value-log reads from disk after warm-up", n)
	}
	if n := m1.TableBlocksRead - m0.TableBlocksRead; n != 0 {
		t.Errorf("%d table blocks read from disk after warm-up", n)
	}
}

// BenchmarkHotSetRead reads a warm 32 MiB working set of 16 KiB values from
// a 128 MiB cache and reports the hit ratio and disk reads per op.
func BenchmarkHotSetRead(b *testing.B) {
	db := hotSet(b, 2048, 16<<10, 128<<20)
	defer db.Close()
	m0 := db.Metrics()
	rng := rand.New(rand.NewPCG(3, 4))
	b.SetBytes(16 << 10)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := db.Get(blockKey(7, rng.Uint64N(2048))); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	m1 := db.Metrics()
	hits := m1.Cache.Hits - m0.Cache.Hits
	misses := m1.Cache.Misses - m0.Cache.Misses
	b.ReportMetric(float64(hits)/float64(hits+misses), "hit-ratio")
	b.ReportMetric(float64(m1.Vlog.DiskReads-m0.Vlog.DiskReads)/float64(b.N), "vlog-disk-reads/op")
	b.ReportMetric(float64(m1.TableBlocksRead-m0.TableBlocksRead)/float64(b.N), "table-disk-reads/op")
}

func TestOptionsEffective(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	if err := lsm.Format(dir, &lsm.Options{UUID: [16]byte{9}}); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	o := db.Options()
	if o.Journal.Path != filepath.Join(dir, "journal") || o.UUID != [16]byte{9} || o.MemtableSize != 64<<20 || o.ValueThreshold != 4<<10 {
		t.Fatalf("effective options: journal %q uuid %x memtable %d threshold %d", o.Journal.Path, o.UUID, o.MemtableSize, o.ValueThreshold)
	}
	if m := db.Metrics(); m.PeakMemtableBytes == 0 || m.PeakMemtableBytes < m.MemtableBytes {
		t.Fatalf("peak memtable %d, current %d", m.PeakMemtableBytes, m.MemtableBytes)
	}
}

// TestGetNoCache: GetNoCache reads value-log values right without adding
// them to the cache, and what it returns is the caller's: changing it
// changes neither the cache nor a later read.
func TestGetNoCache(t *testing.T) {
	db := hotSet(t, 0, 0, 64<<20)
	defer db.Close()
	const n = 256
	buf := make([]byte, 4096)
	for i := range uint64(n) {
		fillBlock(buf, 1, 9, i)
		b := lsm.NewBatch()
		b.Set(blockKey(9, i), buf)
		if err := db.Apply(b, false); err != nil {
			t.Fatal(err)
		}
	}
	want := make([]byte, len(buf))
	read := func(get func([]byte) ([]byte, error), scribble bool) {
		t.Helper()
		for i := range uint64(n) {
			v, err := get(blockKey(9, i))
			fillBlock(want, 1, 9, i)
			if err != nil || string(v) != string(want) {
				t.Fatalf("block %d: %v", i, err)
			}
			if scribble {
				clear(v)
			}
		}
	}
	m0 := db.Metrics().Cache
	read(db.GetNoCache, true)
	db.WaitCache() // the cache admits asynchronously
	if m := db.Metrics().Cache; m.KeysAdded != m0.KeysAdded {
		t.Fatalf("GetNoCache added %d values to the cache", m.KeysAdded-m0.KeysAdded)
	}
	read(db.Get, false)
	db.WaitCache()
	if m := db.Metrics().Cache; m.KeysAdded < m0.KeysAdded+n/2 {
		t.Fatalf("Get added only %d of %d values to the cache", m.KeysAdded-m0.KeysAdded, n)
	}
	read(db.GetNoCache, true) // cache hits now: copies
	read(db.Get, false)
}
