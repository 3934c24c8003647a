package fs_test

// BenchmarkBlockSize measures the data block size fixed at Format, on the
// workloads it trades off: sequential 1 MiB writes and reads (larger blocks:
// fewer keys), 4 KiB random writes (with an fsync every 32) and reads
// (smaller blocks: less read-modify-write and less to read), and small-file
// creates (4 KiB files, stored short whatever the block size). The engine
// runs on a MemFS by default (CPU and engine costs only) or, with
// LSMFS_BENCH_DISK=1, in a temporary directory on the disk.
//
//	go test ./fs -run XXX -bench BlockSize -benchtime 2s
//
// engine-B/op is the bytes of batches the engine received per operation.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

func newBenchEnv(b *testing.B, blockSize int) *env {
	e := &env{t: b, clock: &fakeClock{}}
	var fsys vfs.FS
	dir := testDir
	if os.Getenv("LSMFS_BENCH_DISK") == "1" {
		fsys, dir = vfs.Default, b.TempDir()+"/db"
	} else {
		mem := vfs.NewMem()
		e.mem, fsys = mem, mem
	}
	lo := &lsm.Options{FS: fsys, UUID: testUUID}
	if err := lsm.Format(dir, lo); err != nil {
		b.Fatal(err)
	}
	db, err := lsm.Open(dir, lo)
	if err != nil {
		b.Fatal(err)
	}
	e.db = db
	if err := fs.Format(db, fs.FormatOptions{BlockSize: blockSize}); err != nil {
		b.Fatal(err)
	}
	e.opts = fs.Options{}
	e.open()
	b.Cleanup(e.close)
	return e
}

const benchFileSize = 64 << 20

// fillFile writes a benchFileSize file and flushes it.
func fillFile(e *env, name string) (uint64, uint64) {
	ino, fh := e.mustCreate(1, name)
	buf := pattern(1<<20, 1)
	for off := 0; off < benchFileSize; off += len(buf) {
		e.mustWrite(ino, fh, uint64(off), buf)
	}
	e.fsync(ino, fh)
	return ino, fh
}

func BenchmarkBlockSize(b *testing.B) {
	for _, size := range []int{4 << 10, 16 << 10, 64 << 10, 128 << 10} {
		b.Run(fmt.Sprintf("bs=%dK", size>>10), func(b *testing.B) {
			b.Run("seqwrite-1M", func(b *testing.B) {
				e := newBenchEnv(b, size)
				ino, fh := e.mustCreate(1, "f")
				buf := pattern(1<<20, 3)
				b.SetBytes(int64(len(buf)))
				user := e.db.Metrics().UserBytes
				b.ResetTimer()
				off := uint64(0)
				for i := 0; i < b.N; i++ {
					if off == benchFileSize {
						e.truncate(ino, 0)
						off = 0
					}
					e.mustWrite(ino, fh, off, buf)
					off += uint64(len(buf))
				}
				e.fsync(ino, fh)
				b.StopTimer()
				b.ReportMetric(float64(e.db.Metrics().UserBytes-user)/float64(b.N), "engine-B/op")
			})
			b.Run("seqread-1M", func(b *testing.B) {
				e := newBenchEnv(b, size)
				ino, fh := fillFile(e, "f")
				b.SetBytes(1 << 20)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					e.mustRead(ino, fh, uint64(i%(benchFileSize>>20))<<20, 1<<20)
				}
			})
			b.Run("randwrite-4K", func(b *testing.B) {
				e := newBenchEnv(b, size)
				ino, fh := fillFile(e, "f")
				rng := rand.New(rand.NewPCG(1, 2))
				buf := pattern(4<<10, 5)
				b.SetBytes(int64(len(buf)))
				user := e.db.Metrics().UserBytes
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					e.mustWrite(ino, fh, uint64(rng.IntN(benchFileSize/len(buf)))*uint64(len(buf)), buf)
					if i%32 == 31 {
						e.fsync(ino, fh)
					}
				}
				e.fsync(ino, fh)
				b.StopTimer()
				b.ReportMetric(float64(e.db.Metrics().UserBytes-user)/float64(b.N), "engine-B/op")
			})
			b.Run("randread-4K", func(b *testing.B) {
				e := newBenchEnv(b, size)
				ino, fh := fillFile(e, "f")
				rng := rand.New(rand.NewPCG(3, 4))
				b.SetBytes(4 << 10)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					e.mustRead(ino, fh, uint64(rng.IntN(benchFileSize>>12))<<12, 4<<10)
				}
			})
			b.Run("create-4K", func(b *testing.B) {
				e := newBenchEnv(b, size)
				buf := pattern(4<<10, 7)
				dirs := make([]uint64, 100)
				for i := range dirs {
					dirs[i] = e.mustMkdir(1, fmt.Sprint("d", i))
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					ino, fh, err := e.create(dirs[i%len(dirs)], fmt.Sprint("f", i), 0o644, syscall.O_WRONLY)
					if err != 0 {
						b.Fatal(err)
					}
					e.mustWrite(ino, fh, 0, buf)
					e.release(ino, fh)
				}
			})
		})
	}
}

// TestBlockSizeTable prints the BenchmarkBlockSize workloads as one markdown
// table: each round runs every workload at every block size back to back,
// so a noisy neighbour hits all sizes alike, and the table shows medians.
// Opt-in: LSMFS_BLOCKSIZE_TABLE=1 (add LSMFS_BENCH_DISK=1 for the disk).
func TestBlockSizeTable(t *testing.T) {
	if os.Getenv("LSMFS_BLOCKSIZE_TABLE") != "1" {
		t.Skip("set LSMFS_BLOCKSIZE_TABLE=1")
	}
	sizes := []int{4 << 10, 16 << 10, 64 << 10, 128 << 10}
	type workload struct {
		name string
		ops  int
		run  func(e *env, ops int) // the timed part
		prep func(e *env)
	}
	var ino, fh uint64
	buf1M, buf4K := pattern(1<<20, 3), pattern(4<<10, 5)
	workloads := []workload{
		{"sequential write 1 MiB (MiB/s)", 256, func(e *env, ops int) {
			for i := 0; i < ops; i++ {
				e.mustWrite(ino, fh, uint64(i)<<20, buf1M)
			}
			e.fsync(ino, fh)
		}, func(e *env) { ino, fh = e.mustCreate(1, "w") }},
		{"sequential read 1 MiB (MiB/s)", 256, func(e *env, ops int) {
			for i := 0; i < ops; i++ {
				e.mustRead(ino, fh, uint64(i%(benchFileSize>>20))<<20, 1<<20)
			}
		}, func(e *env) { ino, fh = fillFile(e, "r") }},
		{"random write 4 KiB, fsync/32 (IOPS)", 4096, func(e *env, ops int) {
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < ops; i++ {
				e.mustWrite(ino, fh, uint64(rng.IntN(benchFileSize>>12))<<12, buf4K)
				if i%32 == 31 {
					e.fsync(ino, fh)
				}
			}
		}, func(e *env) { ino, fh = fillFile(e, "rw") }},
		{"random read 4 KiB (IOPS)", 20000, func(e *env, ops int) {
			rng := rand.New(rand.NewPCG(3, 4))
			for i := 0; i < ops; i++ {
				e.mustRead(ino, fh, uint64(rng.IntN(benchFileSize>>12))<<12, 4<<10)
			}
		}, func(e *env) { ino, fh = fillFile(e, "rr") }},
		{"create 4 KiB files (files/s)", 5000, func(e *env, ops int) {
			for i := 0; i < ops; i++ {
				ino, fh, err := e.create(1, fmt.Sprint("f", i), 0o644, syscall.O_WRONLY)
				if err != 0 {
					t.Fatal(err)
				}
				e.mustWrite(ino, fh, 0, buf4K)
				e.release(ino, fh)
			}
		}, func(e *env) {}},
	}
	const rounds = 5
	res := make([][][]float64, len(workloads)) // [workload][size][round]
	for w := range workloads {
		res[w] = make([][]float64, len(sizes))
	}
	for r := 0; r < rounds; r++ {
		for w, wl := range workloads {
			for s, size := range sizes {
				e := newTableEnv(t, size)
				wl.prep(e)
				start := time.Now()
				wl.run(e, wl.ops)
				el := time.Since(start).Seconds()
				res[w][s] = append(res[w][s], float64(wl.ops)/el) // MiB/s: 1 MiB per op
				e.close()
			}
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "| workload |")
	for _, s := range sizes {
		fmt.Fprintf(&out, " %d KiB |", s>>10)
	}
	fmt.Fprintf(&out, "\n|---|")
	for range sizes {
		fmt.Fprintf(&out, "---:|")
	}
	out.WriteString("\n")
	for w, wl := range workloads {
		fmt.Fprintf(&out, "| %s |", wl.name)
		for s := range sizes {
			v := res[w][s]
			sort.Float64s(v)
			fmt.Fprintf(&out, " %.0f |", v[len(v)/2])
		}
		out.WriteString("\n")
	}
	t.Logf("median of %d interleaved rounds (disk=%v):\n%s", rounds, os.Getenv("LSMFS_BENCH_DISK") == "1", out.String())
}

func newTableEnv(t *testing.T, blockSize int) *env {
	e := &env{t: t, clock: &fakeClock{}}
	var fsys vfs.FS
	dir := testDir
	if os.Getenv("LSMFS_BENCH_DISK") == "1" {
		fsys, dir = vfs.Default, t.TempDir()+"/db"
	} else {
		mem := vfs.NewMem()
		e.mem, fsys = mem, mem
	}
	lo := &lsm.Options{FS: fsys, UUID: testUUID}
	if err := lsm.Format(dir, lo); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open(dir, lo)
	if err != nil {
		t.Fatal(err)
	}
	e.db = db
	if err := fs.Format(db, fs.FormatOptions{BlockSize: blockSize}); err != nil {
		t.Fatal(err)
	}
	e.opts = fs.Options{}
	e.open()
	return e
}

// BenchmarkSmallFiles measures the daemon's side of the harness's small-file
// rows without the kernel: per file, a readdirplus entry, an open, 4 KiB
// read and release, and an unlink (with the GETATTR of the parent the
// kernel sends before each, and the FORGET after). 2,000 files in 10 directories are created
// before each pass, outside the timer.
//
//	go test ./fs -run XXX -bench SmallFiles -cpuprofile cpu.out
func BenchmarkSmallFiles(b *testing.B) {
	const dirs, files = 10, 2000
	e := newBenchEnv(b, 0)
	data := pattern(4096, 1)
	pass := 0
	for _, step := range []string{"readdirplus", "read", "unlink"} {
		b.Run(step, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				pass++
				top := e.mustMkdir(1, fmt.Sprintf("t%d", pass))
				ds := make([]uint64, dirs)
				inos := make([]uint64, files)
				for d := range ds {
					ds[d] = e.mustMkdir(top, fmt.Sprintf("d%d", d))
				}
				for k := range inos {
					ino, fh := e.mustCreate(ds[k%dirs], fmt.Sprintf("f%d", k))
					e.mustWrite(ino, fh, 0, data)
					e.release(ino, fh)
					inos[k] = ino
				}
				b.StartTimer()
				switch step {
				case "readdirplus":
					for _, d := range ds {
						fh, _ := e.opendir(d)
						for off := uint64(0); ; {
							ents, _, err := e.readdirAt(d, fh, off, 4096, true)
							if err != 0 || len(ents) == 0 {
								break
							}
							off = ents[len(ents)-1].Off
						}
						e.releasedir(d, fh)
					}
				case "read":
					for _, ino := range inos {
						var oo fuse.OpenOut
						if st := e.raw.Open(nil, &fuse.OpenIn{InHeader: e.hdr(ino), Flags: syscall.O_RDONLY}, &oo); st != fuse.OK {
							b.Fatal(st)
						}
						if _, err := e.read(ino, oo.Fh, 0, 4096); err != 0 {
							b.Fatal(err)
						}
						e.release(ino, oo.Fh)
					}
				case "unlink":
					for k := range inos {
						e.getattr(ds[k%dirs])
						if err := e.unlink(ds[k%dirs], fmt.Sprintf("f%d", k)); err != 0 {
							b.Fatal(err)
						}
						e.raw.Forget(inos[k], 1)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*files), "ns/file")
		})
	}
}
