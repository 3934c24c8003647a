package sstable_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/lsmfs/lsmfs/blockcache"
	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/sstable"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// Benchmarks on 1M entries shaped like lsmfs data-block keys: 'B' + inode
// (8 bytes, big-endian) + block index (8 bytes), 100-byte values of which
// half is random and half repeats (LZ4 saves roughly a third). Run with
//
//	go test -run '^$' -bench . -benchtime 2s ./lsm/internal/sstable/

const benchEntries = 1 << 20

func benchKey(dst []byte, i int) []byte {
	dst = append(dst[:0], 'B')
	dst = binary.BigEndian.AppendUint64(dst, uint64(i/1024))
	return binary.BigEndian.AppendUint64(dst, uint64(i%1024))
}

func benchValue(rng *rand.Rand, dst []byte) []byte {
	dst = dst[:0]
	for range 50 {
		dst = append(dst, byte(rng.Uint32()))
	}
	for range 50 {
		dst = append(dst, 'v')
	}
	return dst
}

func writeBenchTable(b *testing.B, fs vfs.FS, name string, opts sstable.WriterOptions) *sstable.Meta {
	f, err := fs.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	w := sstable.NewWriter(f, opts)
	rng := rand.New(rand.NewPCG(1, 1))
	var k, v []byte
	for i := range benchEntries {
		k = benchKey(k, i)
		v = benchValue(rng, v)
		if err := w.Add(base.MakeInternalKey(k, uint64(i+1), base.KindSet), v); err != nil {
			b.Fatal(err)
		}
	}
	m, err := w.Close()
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func BenchmarkWrite1M(b *testing.B) {
	for _, comp := range []bool{true, false} {
		b.Run(fmt.Sprintf("lz4=%v", comp), func(b *testing.B) {
			opts := sstable.DefaultWriterOptions()
			opts.DisableCompression = !comp
			b.SetBytes(benchEntries * (17 + 8 + 100))
			b.ReportAllocs()
			var m *sstable.Meta
			start := cpuTime()
			for b.Loop() {
				m = writeBenchTable(b, vfs.NewMem(), "w.sst", opts)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchEntries), "ns/entry")
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N*benchEntries), "cpu-ns/entry")
			b.ReportMetric(float64(m.Size)/(1<<20), "table-MiB")
		})
	}
}

// cpuTime is the CPU time (user + system) the process has used. The
// benchmarks report it per op next to wall time: on a shared, loaded machine
// it is the steadier figure.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// measureCPU starts a CPU-time measurement; the returned func reports
// cpu-ns/op (call it right after the b.Loop loop).
func measureCPU(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	}
}

// benchTables are written once per block size into a temporary directory.
var benchTables struct {
	sync.Mutex
	dir   string
	paths map[int]string
}

func benchTable(b *testing.B, blockSize int) (string, int64) {
	benchTables.Lock()
	defer benchTables.Unlock()
	if benchTables.dir == "" {
		dir, err := os.MkdirTemp("", "sstable-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchTables.dir, benchTables.paths = dir, map[int]string{}
	}
	p, ok := benchTables.paths[blockSize]
	if !ok {
		p = filepath.Join(benchTables.dir, fmt.Sprintf("%d.sst", blockSize))
		opts := sstable.DefaultWriterOptions()
		opts.BlockSize = blockSize
		writeBenchTable(b, vfs.Default, p, opts)
		benchTables.paths[blockSize] = p
	}
	fi, err := os.Stat(p)
	if err != nil {
		b.Fatal(err)
	}
	return p, fi.Size()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchTables.dir != "" {
		os.RemoveAll(benchTables.dir)
	}
	os.Exit(code)
}

func openBenchTable(b *testing.B, blockSize int, cache *blockcache.Cache) *sstable.Reader {
	return openBenchTableStats(b, blockSize, cache, nil)
}

func openBenchTableStats(b *testing.B, blockSize int, cache *blockcache.Cache, stats *sstable.ReaderStats) *sstable.Reader {
	p, size := benchTable(b, blockSize)
	f, err := vfs.Default.Open(p)
	if err != nil {
		b.Fatal(err)
	}
	r, err := sstable.Open(f, size, sstable.ReaderOptions{Cache: cache, FileNum: uint64(blockSize), Stats: stats})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkSeekGE seeks to random existing keys, with no cache (every seek
// reads, verifies, decompresses and checks a block from the OS page cache)
// and with a warm cache holding the whole table.
func BenchmarkSeekGE(b *testing.B) {
	for _, bs := range []int{4 << 10, 8 << 10, 16 << 10} {
		for _, withCache := range []bool{false, true} {
			b.Run(fmt.Sprintf("block=%dK/cache=%v", bs>>10, withCache), func(b *testing.B) {
				var cache *blockcache.Cache
				if withCache {
					var err error
					if cache, err = blockcache.New(1 << 30); err != nil {
						b.Fatal(err)
					}
					defer cache.Close()
				}
				stats := new(sstable.ReaderStats)
				r := openBenchTableStats(b, bs, cache, stats)
				defer r.Close()
				it := r.NewIter()
				defer it.Close()
				if withCache {
					for ok := it.First(); ok; ok = it.Next() {
					}
					cache.Wait()
				}
				rng := rand.New(rand.NewPCG(2, 2))
				var k []byte
				b.ReportAllocs()
				b.ResetTimer()
				report := measureCPU(b)
				for b.Loop() {
					k = benchKey(k, rng.IntN(benchEntries))
					if !it.SeekGE(k) || string(it.Key().UserKey) != string(k) {
						b.Fatalf("SeekGE(%x) = %s, %v", k, it.Key(), it.Error())
					}
				}
				report()
				b.ReportMetric(float64(r.Size())/(1<<20), "table-MiB")
				b.ReportMetric(float64(r.Properties().IndexSize)/(1<<10), "index-KiB")
				if withCache {
					b.ReportMetric(float64(stats.CacheMisses.Load())/float64(stats.CacheHits.Load()+stats.CacheMisses.Load()), "miss-ratio")
				}
			})
		}
	}
}

// BenchmarkGet is what a point lookup costs the engine per table: bloom
// probe, a pooled iterator, one seek.
func BenchmarkGet(b *testing.B) {
	for _, present := range []bool{true, false} {
		b.Run(fmt.Sprintf("present=%v", present), func(b *testing.B) {
			cache, err := blockcache.New(1 << 30)
			if err != nil {
				b.Fatal(err)
			}
			defer cache.Close()
			r := openBenchTable(b, 8<<10, cache)
			defer r.Close()
			rng := rand.New(rand.NewPCG(3, 3))
			var k []byte
			b.ReportAllocs()
			b.ResetTimer()
			report := measureCPU(b)
			for b.Loop() {
				i := rng.IntN(benchEntries)
				k = benchKey(k, i)
				if !present {
					k = append(k, 0)
				}
				if !r.MayContain(k) {
					continue
				}
				it := r.NewIter()
				it.SeekGE(k)
				it.Close()
			}
			report()
		})
	}
}

// BenchmarkScan iterates over the whole table.
func BenchmarkScan(b *testing.B) {
	for _, dir := range []string{"forward", "backward"} {
		b.Run(dir, func(b *testing.B) {
			r := openBenchTable(b, 8<<10, nil)
			defer r.Close()
			b.ReportAllocs()
			b.ResetTimer()
			start := cpuTime()
			for b.Loop() {
				it := r.NewIter()
				n := 0
				if dir == "forward" {
					for ok := it.First(); ok; ok = it.Next() {
						n++
					}
				} else {
					for ok := it.Last(); ok; ok = it.Prev() {
						n++
					}
				}
				if err := it.Close(); err != nil || n != benchEntries {
					b.Fatalf("scanned %d: %v", n, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchEntries), "ns/entry")
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N*benchEntries), "cpu-ns/entry")
		})
	}
}
