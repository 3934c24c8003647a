package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sizes of the workloads.
type sizes struct {
	files, dirs, fileSize int
	writers, perWriter    int
	seqBytes              int64
	randReads, randWrites int
	tree                  string // directory tarred for untar
}

var (
	fullSizes  = sizes{20000, 100, 4096, 16, 200, 1 << 30, 20000, 8192, ""}
	quickSizes = sizes{2000, 20, 4096, 16, 20, 64 << 20, 2000, 1024, ""}
)

// A workload row: key, what it reports, and what one operation is (the
// denominator of requests per operation).
type rowDef struct {
	key, label, unit, per string
	// seconds: the value is a time (lower is better); otherwise a rate.
	seconds bool
}

var rows = []rowDef{
	{"create", "create %d × 4 KiB files in %d dirs", "files/s", "file", false},
	{"stat", "stat all, caches dropped", "ops/s", "file", false},
	{"readdir", "readdir all", "entries/s", "entry", false},
	{"read", "read all", "files/s", "file", false},
	{"unlink", "unlink all", "files/s", "file", false},
	{"fsync16", "16 writers × %d files, write+fsync", "files/s", "file", false},
	{"seqwrite", "sequential write %s + fsync", "MiB/s", "MiB", false},
	{"seqread", "sequential read %s, caches dropped", "MiB/s", "MiB", false},
	{"randread", "4 KiB random read, O_DIRECT", "IOPS", "read", false},
	{"randwrite", "4 KiB random write, fsync every 32", "IOPS", "write", false},
	{"untar", "untar %s", "s", "entry", true},
	{"find", `find \| wc -l`, "s", "entry", true}, // the pipe escaped for the markdown table
	{"du", "du -s", "s", "entry", true},
	{"rm", "rm -rf", "s", "entry", true},
}

// stepResult is one workload on one system in one round.
type stepResult struct {
	value float64 // rate, or seconds
	ops   int     // operations (denominator of requests/op)
	note  string  // instead of a value (e.g. O_DIRECT refused)
	reqs  counts  // FUSE requests during the step (FUSE systems)
	cpu   time.Duration
	// rbytes and wbytes are what the serving process read from and wrote
	// to storage (read_bytes, write_bytes).
	rbytes, wbytes uint64
	// dbytes is what the host's block device wrote for the step, the
	// step's dirty pages included (synced after the timed part).
	dbytes uint64
	// peak is the serving process's VmHWM at the end of the step.
	peak uint64
}

// env is what a round needs besides the system.
type env struct {
	sz         sizes
	tarPath    string
	tarEntries int
	seed       uint64
	// hook, when set, brackets each timed step (profiling).
	hook func(s *system, key string, start bool)
	// dev counts the host device's writes.
	dev hostDevice
}

// runRound runs every workload, in order, on s and returns the results by
// row key. The workloads build on each other: create → stat → readdir →
// read → unlink use the same tree.
func runRound(s *system, e *env, only map[string]bool) (map[string]stepResult, error) {
	res := make(map[string]stepResult)
	step := func(key string, pre func() error, body func() (float64, int, error), post func() error) error {
		if only != nil && !only[key] {
			return nil
		}
		if pre != nil {
			if err := pre(); err != nil {
				return fmt.Errorf("%s: %s: setup: %w", s.name, key, err)
			}
		}
		var c0 counts
		if s.counts != nil {
			var err error
			if c0, err = s.counts(); err != nil {
				return fmt.Errorf("%s: counts: %w", s.name, err)
			}
		}
		d0 := e.dev.written()
		cpu0 := s.cpuTime()
		r0, w0 := s.ioBytes()
		if e.hook != nil {
			e.hook(s, key, true)
		}
		v, n, err := body()
		if e.hook != nil {
			e.hook(s, key, false)
		}
		r1, w1 := s.ioBytes()
		r := stepResult{value: v, ops: n, cpu: s.cpuTime() - cpu0, rbytes: r1 - r0, wbytes: w1 - w0, peak: s.peakRSS()}
		r.dbytes = e.dev.written() - d0
		var note *noteErr
		if errors.As(err, &note) {
			r.note, err = note.msg, nil
		}
		if err != nil {
			return fmt.Errorf("%s: %s: %w", s.name, key, err)
		}
		if s.counts != nil {
			c1, err := s.counts()
			if err != nil {
				return fmt.Errorf("%s: counts: %w", s.name, err)
			}
			r.reqs = c1.sub(c0)
		}
		res[key] = r
		fmt.Fprintf(os.Stderr, "  %-11s %-10s %s\n", s.name, key, r.show())
		if post != nil {
			if err := post(); err != nil {
				return fmt.Errorf("%s: %s: cleanup: %w", s.name, key, err)
			}
		}
		return nil
	}
	sz := e.sz
	root := s.root
	tree := filepath.Join(root, "tree")
	var paths, dirs []string
	for d := range sz.dirs {
		dirs = append(dirs, filepath.Join(tree, fmt.Sprintf("d%03d", d)))
	}
	for i := range sz.files {
		paths = append(paths, filepath.Join(dirs[i%sz.dirs], fmt.Sprintf("f%06d", i)))
	}
	block := bytes.Repeat([]byte("lsmfs bench\n"), 1+sz.fileSize/12)[:sz.fileSize]
	syncAll := func() error { syscall.Sync(); return nil }
	drop := func() error { dropCaches(); return nil }

	steps := []func() error{
		func() error {
			return step("create", syncAll, func() (float64, int, error) {
				t := time.Now()
				if err := os.Mkdir(tree, 0o755); err != nil {
					return 0, 0, err
				}
				for _, d := range dirs {
					if err := os.Mkdir(d, 0o755); err != nil {
						return 0, 0, err
					}
				}
				for _, p := range paths {
					if err := writeFile(p, block, false); err != nil {
						return 0, 0, err
					}
				}
				return rate(len(paths), t), len(paths), nil
			}, nil)
		},
		func() error {
			return step("stat", drop, func() (float64, int, error) {
				t := time.Now()
				var st unix.Stat_t
				for _, p := range paths {
					if err := unix.Lstat(p, &st); err != nil {
						return 0, 0, fmt.Errorf("lstat %s: %w", p, err)
					}
				}
				return rate(len(paths), t), len(paths), nil
			}, nil)
		},
		func() error {
			return step("readdir", nil, func() (float64, int, error) {
				t := time.Now()
				n := 0
				for _, d := range dirs {
					f, err := os.Open(d)
					if err != nil {
						return 0, 0, err
					}
					names, err := f.Readdirnames(-1)
					f.Close()
					if err != nil {
						return 0, 0, err
					}
					n += len(names)
				}
				if n != len(paths) {
					return 0, 0, fmt.Errorf("listed %d entries, want %d", n, len(paths))
				}
				return rate(n, t), n, nil
			}, nil)
		},
		func() error {
			return step("read", nil, func() (float64, int, error) {
				buf := make([]byte, 64<<10)
				t := time.Now()
				for _, p := range paths {
					n, err := readFile(p, buf)
					if err != nil {
						return 0, 0, err
					}
					if n != len(block) {
						return 0, 0, fmt.Errorf("%s: read %d bytes, want %d", p, n, len(block))
					}
				}
				return rate(len(paths), t), len(paths), nil
			}, nil)
		},
		func() error {
			return step("unlink", nil, func() (float64, int, error) {
				t := time.Now()
				for _, p := range paths {
					if err := unix.Unlink(p); err != nil {
						return 0, 0, fmt.Errorf("unlink %s: %w", p, err)
					}
				}
				for _, d := range dirs {
					if err := unix.Rmdir(d); err != nil {
						return 0, 0, err
					}
				}
				return rate(len(paths), t), len(paths), unix.Rmdir(tree)
			}, nil)
		},
		func() error {
			wdir := filepath.Join(root, "writers")
			return step("fsync16", func() error {
				for w := range sz.writers {
					if err := os.MkdirAll(filepath.Join(wdir, fmt.Sprint(w)), 0o755); err != nil {
						return err
					}
				}
				syscall.Sync()
				return nil
			}, func() (float64, int, error) {
				t := time.Now()
				var wg sync.WaitGroup
				errs := make([]error, sz.writers)
				for w := range sz.writers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range sz.perWriter {
							p := filepath.Join(wdir, fmt.Sprint(w), fmt.Sprintf("f%04d", i))
							if err := writeFile(p, block, true); err != nil {
								errs[w] = err
								return
							}
						}
					}()
				}
				wg.Wait()
				n := sz.writers * sz.perWriter
				return rate(n, t), n, errors.Join(errs...)
			}, func() error { return os.RemoveAll(wdir) })
		},
		func() error {
			return step("seqwrite", syncAll, func() (float64, int, error) {
				t := time.Now()
				if err := seqWrite(filepath.Join(root, "big"), sz.seqBytes); err != nil {
					return 0, 0, err
				}
				return mibps(sz.seqBytes, t), int(sz.seqBytes >> 20), nil
			}, nil)
		},
		func() error {
			return step("seqread", drop, func() (float64, int, error) {
				t := time.Now()
				n, err := seqRead(filepath.Join(root, "big"))
				if err == nil && n != sz.seqBytes {
					err = fmt.Errorf("read %d bytes, want %d", n, sz.seqBytes)
				}
				return mibps(n, t), int(n >> 20), err
			}, nil)
		},
		func() error {
			return step("randread", drop, func() (float64, int, error) {
				return randRead(filepath.Join(root, "big"), sz.seqBytes, sz.randReads, e.seed)
			}, nil)
		},
		func() error {
			return step("randwrite", syncAll, func() (float64, int, error) {
				return randWrite(filepath.Join(root, "big"), sz.seqBytes, sz.randWrites, e.seed+1)
			}, func() error { return os.Remove(filepath.Join(root, "big")) })
		},
		func() error {
			return step("untar", func() error {
				syscall.Sync()
				return os.Mkdir(filepath.Join(root, "untar"), 0o755)
			}, func() (float64, int, error) {
				t := time.Now()
				err := run("tar", "-xf", e.tarPath, "-C", filepath.Join(root, "untar"))
				return time.Since(t).Seconds(), e.tarEntries, err
			}, nil)
		},
		func() error {
			return step("find", nil, func() (float64, int, error) {
				t := time.Now()
				n, err := countLines("find", filepath.Join(root, "untar"))
				if err == nil && n < e.tarEntries {
					err = fmt.Errorf("find listed %d entries, the tar has %d", n, e.tarEntries)
				}
				return time.Since(t).Seconds(), n, err
			}, nil)
		},
		func() error {
			return step("du", nil, func() (float64, int, error) {
				t := time.Now()
				err := run("du", "-s", filepath.Join(root, "untar"))
				return time.Since(t).Seconds(), e.tarEntries, err
			}, nil)
		},
		func() error {
			return step("rm", nil, func() (float64, int, error) {
				t := time.Now()
				err := run("rm", "-rf", filepath.Join(root, "untar"))
				return time.Since(t).Seconds(), e.tarEntries, err
			}, nil)
		},
	}
	for _, f := range steps {
		if err := f(); err != nil {
			return res, err
		}
	}
	return res, nil
}

// noteErr ends a step with a note in its cell instead of a value.
type noteErr struct{ msg string }

func (e *noteErr) Error() string { return e.msg }

func (r stepResult) show() string {
	if r.note != "" {
		return r.note
	}
	s := fmt.Sprintf("%.4g", r.value)
	if r.reqs.ops != nil && r.ops > 0 {
		s += fmt.Sprintf("  (%.2f req/op)", float64(r.reqs.total())/float64(r.ops))
	}
	return s
}

func rate(n int, t time.Time) float64 { return float64(n) / time.Since(t).Seconds() }

func mibps(n int64, t time.Time) float64 {
	return float64(n) / (1 << 20) / time.Since(t).Seconds()
}

// dropCaches writes back dirty data and drops the page cache, dentries and
// inodes of every filesystem. For a FUSE mount the kernel forgets its
// dentries and inodes too (FORGET goes to the daemon) and the next access
// looks them up again: the stat row's requests per operation show it (one
// LOOKUP per file). The daemons' own caches (lsmfs's block cache and
// memtable) are theirs and stay.
func dropCaches() {
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		fmt.Fprintln(os.Stderr, "drop caches:", err)
	}
}

// writeFile creates p with data, as a small-file writer does: open(O_CREAT|
// O_TRUNC), write, [fsync], close.
func writeFile(p string, data []byte, fsync bool) error {
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	if _, err := unix.Write(fd, data); err != nil {
		unix.Close(fd)
		return fmt.Errorf("write %s: %w", p, err)
	}
	if fsync {
		if err := unix.Fsync(fd); err != nil {
			unix.Close(fd)
			return fmt.Errorf("fsync %s: %w", p, err)
		}
	}
	if err := unix.Close(fd); err != nil {
		return fmt.Errorf("close %s: %w", p, err)
	}
	return nil
}

// readFile reads p to its end and returns the byte count.
func readFile(p string, buf []byte) (int, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", p, err)
	}
	defer unix.Close(fd)
	total := 0
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			return total, fmt.Errorf("read %s: %w", p, err)
		}
		if n == 0 {
			return total, nil
		}
		total += n
	}
}

func seqWrite(p string, size int64) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for off := int64(0); off < size; off += int64(len(buf)) {
		buf[0], buf[1] = byte(off>>20), byte(off>>28) // no two chunks alike
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func seqRead(p string) (int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		k, err := f.Read(buf)
		n += int64(k)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// alignedBuf returns a page-aligned buffer (O_DIRECT).
func alignedBuf(n int) ([]byte, func(), error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, nil, err
	}
	return b, func() { unix.Munmap(b) }, nil
}

// randRead does n 4 KiB reads at random aligned offsets of p, with O_DIRECT.
// A system refusing O_DIRECT (EINVAL at open or read) gets a note.
func randRead(p string, size int64, n int, seed uint64) (float64, int, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EINVAL) {
		return 0, 0, &noteErr{"EINVAL: O_DIRECT refused at open"}
	}
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(fd)
	buf, free, err := alignedBuf(4096)
	if err != nil {
		return 0, 0, err
	}
	defer free()
	rng := rand.New(rand.NewPCG(seed, 7))
	blocks := size / 4096
	t := time.Now()
	for i := range n {
		off := rng.Int64N(blocks) * 4096
		k, err := unix.Pread(fd, buf, off)
		if errors.Is(err, unix.EINVAL) {
			return 0, 0, &noteErr{"EINVAL: O_DIRECT read refused"}
		}
		if err != nil {
			return 0, 0, fmt.Errorf("pread %d (%d): %w", off, i, err)
		}
		if k != 4096 {
			return 0, 0, fmt.Errorf("pread %d: %d bytes", off, k)
		}
	}
	return rate(n, t), n, nil
}

// randWrite does n 4 KiB writes at random aligned offsets of p, with an
// fsync after every 32nd and at the end.
func randWrite(p string, size int64, n int, seed uint64) (float64, int, error) {
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(fd)
	buf := bytes.Repeat([]byte{0xa5}, 4096)
	rng := rand.New(rand.NewPCG(seed, 9))
	blocks := size / 4096
	t := time.Now()
	for i := range n {
		buf[0] = byte(i)
		if _, err := unix.Pwrite(fd, buf, rng.Int64N(blocks)*4096); err != nil {
			return 0, 0, err
		}
		if (i+1)%32 == 0 || i == n-1 {
			if err := unix.Fsync(fd); err != nil {
				return 0, 0, err
			}
		}
	}
	return rate(n, t), n, nil
}

func run(name string, args ...string) error {
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v: %s", name, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// countLines runs name args and counts its output lines (| wc -l).
func countLines(name string, args ...string) (int, error) {
	cmd := exec.Command(name, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	n := 0
	r := bufio.NewReaderSize(out, 1<<16)
	for {
		_, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			break
		}
		n++
	}
	if err := cmd.Wait(); err != nil {
		return n, fmt.Errorf("%s: %v: %s", name, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return n, nil
}
