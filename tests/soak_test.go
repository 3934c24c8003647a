package tests

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSoak runs a mixed workload on a mounted lsmfs with 16 workers for
// LSMFS_SOAK (a duration, e.g. 10m; the test is skipped without it). Each
// worker owns a directory and a model of it: it creates, writes, appends,
// overwrites, truncates, reads back and compares, renames, hard-links,
// unlinks, makes directories, lists, stats, sets xattrs and fsyncs. It
// reports the operations done and the errors (any unexpected error or
// mismatch; there must be none), and samples the daemon's resident memory,
// which must not grow (see below). A clean unmount, fsck and a remount with
// a full content check end the run.
func TestSoak(t *testing.T) {
	env := os.Getenv("LSMFS_SOAK")
	if env == "" {
		t.Skip("skipped: opt-in soak test; run with LSMFS_SOAK=10m (a duration)")
	}
	dur, err := time.ParseDuration(env)
	if err != nil {
		t.Fatalf("LSMFS_SOAK=%q: %v", env, err)
	}
	// The run, then the unmount, fsck and remount check: a go test
	// timeout that fires first kills the test binary without its
	// cleanups, leaving the daemon mounted.
	if dl, ok := t.Deadline(); ok && time.Until(dl) < dur+5*time.Minute {
		t.Fatalf("LSMFS_SOAK=%s needs a go test -timeout of at least %s (e.g. -timeout %s)", dur, dur+5*time.Minute, (dur + 20*time.Minute).Round(time.Minute))
	}
	seed := testSeed(t)
	const workers = 16
	// LSMFS_SOAK_OPTS replaces the mount options, e.g. small memtables and
	// cache to make flushes, compactions and cache misses frequent.
	opts := "cache_size=64M,memtable_size=16M"
	if o := os.Getenv("LSMFS_SOAK_OPTS"); o != "" {
		opts = o
	}
	t.Logf("soak: mount options %s", opts)
	f := newFS(t, fsOptions{mountOpts: opts})
	deadline := time.Now().Add(dur)
	var ops, errs atomic.Int64
	var errMu sync.Mutex
	var firstErrs []string
	report := func(format string, args ...any) {
		errs.Add(1)
		errMu.Lock()
		if len(firstErrs) < 20 {
			firstErrs = append(firstErrs, fmt.Sprintf(format, args...))
		}
		errMu.Unlock()
	}
	models := make([]*soakWorker, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		sw := &soakWorker{dir: f.path(fmt.Sprintf("w%02d", w)), rng: rand.New(rand.NewPCG(seed, uint64(w))),
			files: map[string][]byte{}, ops: &ops, fail: report}
		models[w] = sw
		if err := os.Mkdir(sw.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && errs.Load() < 100 {
				sw.step()
			}
		}()
	}
	// Memory samples of the daemon.
	type sample struct {
		at  time.Duration
		rss int64
		ops int64
	}
	var samples []sample
	start := time.Now()
	tick := time.NewTicker(max(dur/60, time.Second))
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
loop:
	for {
		select {
		case <-done:
			break loop
		case <-tick.C:
			samples = append(samples, sample{time.Since(start), daemonRSS(f.pid), ops.Load()})
		}
	}
	tick.Stop()
	elapsed := time.Since(start)
	t.Logf("soak: %d workers, %s: %d operations (%.0f/s), %d errors", workers, elapsed.Round(time.Second), ops.Load(), float64(ops.Load())/elapsed.Seconds(), errs.Load())
	for _, e := range firstErrs {
		t.Errorf("soak error: %s", e)
	}
	// Bounded memory: the peak of the last quarter of the run is within
	// 1.25x + 64 MiB of the peak between the warm-up (the first fifth:
	// caches and memtables fill up) and the half. Peaks, because the Go
	// heap breathes with the garbage collector.
	var trace strings.Builder
	for _, s := range samples {
		fmt.Fprintf(&trace, "\n  %6s %5d MiB %9d ops", s.at.Round(time.Second), s.rss>>20, s.ops)
	}
	t.Logf("daemon RSS samples:%s", trace.String())
	if n := len(samples); n >= 8 {
		peak := func(from, to int) int64 {
			var p int64
			for _, s := range samples[from:to] {
				p = max(p, s.rss)
			}
			return p
		}
		mid, end := peak(n/5, n/2), peak(n*3/4, n)
		t.Logf("daemon RSS: peak %d MiB after warm-up, %d MiB in the last quarter", mid>>20, end>>20)
		if limit := mid*5/4 + 64<<20; end > limit {
			t.Errorf("daemon memory grew: %d MiB in the last quarter, over %d MiB (1.25x + 64 MiB of the %d MiB after warm-up)", end>>20, limit>>20, mid>>20)
		}
	}
	// Everything must survive a clean remount.
	f.remount()
	for _, sw := range models {
		sw.verifyAll(t)
	}
}

// daemonRSS returns the resident memory of pid in bytes (0 if unknown).
func daemonRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// soakWorker is one worker and the model of its directory: path (relative
// to dir) -> contents. Hard links are separate entries sharing contents
// until either is written; the worker writes only through its names, so it
// updates every name of an inode (links lists them).
type soakWorker struct {
	dir   string
	rng   *rand.Rand
	files map[string][]byte
	links [][]string // groups of names of one inode
	subs  []string
	next  int
	ops   *atomic.Int64
	fail  func(format string, args ...any)
}

func (w *soakWorker) pick() string {
	names := make([]string, 0, len(w.files))
	for n := range w.files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names[w.rng.IntN(len(names))]
}

func (w *soakWorker) newName() string {
	w.next++
	d := ""
	if len(w.subs) > 0 && w.rng.IntN(2) == 0 {
		d = w.subs[w.rng.IntN(len(w.subs))] + "/"
	}
	return fmt.Sprintf("%sf%d", d, w.next)
}

// group returns the names sharing p's inode (p included).
func (w *soakWorker) group(p string) []string {
	for _, g := range w.links {
		for _, n := range g {
			if n == p {
				return g
			}
		}
	}
	return []string{p}
}

// forget removes p from its link group.
func (w *soakWorker) forget(p string) {
	for i, g := range w.links {
		if j := slices.Index(g, p); j >= 0 {
			g = slices.Delete(slices.Clone(g), j, j+1)
			if len(g) < 2 {
				w.links = slices.Delete(w.links, i, i+1)
			} else {
				w.links[i] = g
			}
			return
		}
	}
}

func (w *soakWorker) rename(from, to string) {
	for _, g := range w.links {
		for j, n := range g {
			if n == from {
				g[j] = to
			}
		}
	}
}

func (w *soakWorker) set(p string, data []byte) {
	for _, n := range w.group(p) {
		w.files[n] = data
	}
}

func (w *soakWorker) abs(p string) string { return filepath.Join(w.dir, p) }

func (w *soakWorker) check(what string, err error) bool {
	w.ops.Add(1)
	if err != nil {
		w.fail("%s: %v", what, err)
		return false
	}
	return true
}

func (w *soakWorker) step() {
	op := w.rng.IntN(100)
	if len(w.files) == 0 {
		op = 0
	}
	if len(w.files) > 60 && op < 20 {
		op = 80 // keep the live set bounded: unlink instead
	}
	size := func() int { return []int{100, 4000, 40000, 200000}[w.rng.IntN(4)] }
	data := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(w.rng.Uint32())
		}
		return b
	}
	switch {
	case op < 20: // create
		p := w.newName()
		d := data(size())
		if w.check("create "+p, os.WriteFile(w.abs(p), d, 0o644)) {
			w.files[p] = d
		}
	case op < 30: // append
		p := w.pick()
		d := data(size() / 4)
		fh, err := os.OpenFile(w.abs(p), os.O_WRONLY|os.O_APPEND, 0)
		if w.check("open "+p, err) {
			_, err = fh.Write(d)
			err = errors.Join(err, fh.Close())
			if w.check("append "+p, err) {
				w.set(p, append(bytes.Clone(w.files[p]), d...))
			}
		}
	case op < 36: // overwrite in the middle, fsync
		p := w.pick()
		cur := w.files[p]
		off := w.rng.IntN(len(cur) + 1)
		d := data(1 + w.rng.IntN(9000))
		fh, err := os.OpenFile(w.abs(p), os.O_WRONLY, 0)
		if w.check("open "+p, err) {
			_, err = fh.WriteAt(d, int64(off))
			err = errors.Join(err, fh.Sync(), fh.Close())
			if w.check("overwrite "+p, err) {
				nd := bytes.Clone(cur)
				if end := off + len(d); end > len(nd) {
					nd = append(nd, make([]byte, end-len(nd))...)
				}
				copy(nd[off:], d)
				w.set(p, nd)
			}
		}
	case op < 40: // truncate
		p := w.pick()
		n := w.rng.IntN(len(w.files[p]) + 5000)
		if w.check("truncate "+p, os.Truncate(w.abs(p), int64(n))) {
			nd := bytes.Clone(w.files[p])
			if n <= len(nd) {
				nd = nd[:n]
			} else {
				nd = append(nd, make([]byte, n-len(nd))...)
			}
			w.set(p, nd)
		}
	case op < 60: // read back and compare
		p := w.pick()
		b, err := os.ReadFile(w.abs(p))
		if w.check("read "+p, err) && !bytes.Equal(b, w.files[p]) {
			w.fail("read %s: %d bytes differ from the %d written", w.abs(p), len(b), len(w.files[p]))
		}
	case op < 66: // rename, sometimes over another file
		p := w.pick()
		to := w.newName()
		if w.rng.IntN(4) == 0 {
			// Over another file (not a link of p: renaming a name over
			// another name of the same inode does nothing).
			if q := w.pick(); !slices.Contains(w.group(p), q) {
				to = q
			}
		}
		if w.check("rename "+p, os.Rename(w.abs(p), w.abs(to))) {
			if _, ok := w.files[to]; ok {
				w.forget(to)
			}
			w.files[to] = w.files[p]
			delete(w.files, p)
			w.rename(p, to)
		}
	case op < 70: // hard link
		p := w.pick()
		to := w.newName()
		if w.check("link "+p, os.Link(w.abs(p), w.abs(to))) {
			w.files[to] = w.files[p]
			added := false
			for i, g := range w.links {
				if slices.Contains(g, p) {
					w.links[i] = append(g, to)
					added = true
				}
			}
			if !added {
				w.links = append(w.links, []string{p, to})
			}
		}
	case op < 74: // mkdir
		if len(w.subs) < 8 {
			d := fmt.Sprintf("d%d", w.next)
			w.next++
			if w.check("mkdir "+d, os.Mkdir(w.abs(d), 0o755)) {
				w.subs = append(w.subs, d)
			}
		}
	case op < 80: // list and stat
		n := 0
		err := filepath.WalkDir(w.dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				n++
				var st unix.Stat_t
				err = unix.Lstat(p, &st)
			}
			return err
		})
		if w.check("walk", err) && n != len(w.files) {
			w.fail("walk %s: %d files, want %d", w.dir, n, len(w.files))
		}
	case op < 92: // unlink
		p := w.pick()
		if w.check("unlink "+p, os.Remove(w.abs(p))) {
			delete(w.files, p)
			w.forget(p)
		}
	case op < 96: // xattr
		p := w.pick()
		v := data(1 + w.rng.IntN(200))
		if w.check("setxattr "+p, unix.Setxattr(w.abs(p), "user.soak", v, 0)) {
			buf := make([]byte, 256)
			n, err := unix.Getxattr(w.abs(p), "user.soak", buf)
			if w.check("getxattr "+p, err) && !bytes.Equal(buf[:n], v) {
				w.fail("getxattr %s: value differs", p)
			}
		}
	default: // fsync a directory
		d, err := os.Open(w.dir)
		if w.check("open dir", err) {
			w.check("fsync dir", errors.Join(d.Sync(), d.Close()))
		}
	}
}

// verifyAll compares the worker's directory with its model.
func (w *soakWorker) verifyAll(t *testing.T) {
	t.Helper()
	bad := 0
	for p, want := range w.files {
		b, err := os.ReadFile(w.abs(p))
		if err != nil || !bytes.Equal(b, want) {
			if bad++; bad <= 5 {
				t.Errorf("after remount: %s: %d bytes, %v; want %d bytes", w.abs(p), len(b), err, len(want))
			}
		}
	}
}
