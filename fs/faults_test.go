package fs_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"log/slog"
	"strings"
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// faultEnv is a filesystem over an engine over an ErrorFS over a MemFS.
func faultEnv(t *testing.T, o *lsm.Options, mem *vfs.MemFS) (*env, *vfs.ErrorFS) {
	t.Helper()
	return faultEnvOpts(t, o, mem, fs.Options{WriteBufferSize: 16 << 10})
}

// faultEnvOpts is faultEnv with the filesystem's options (the clock is
// the env's).
func faultEnvOpts(t *testing.T, o *lsm.Options, mem *vfs.MemFS, fo fs.Options) (*env, *vfs.ErrorFS) {
	t.Helper()
	efs := vfs.NewErrorFS(mem, nil)
	o.FS = efs
	if err := lsm.Format(testDir, o); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open(testDir, o)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	if err := fs.Format(db, fs.FormatOptions{BlockSize: bs, Clock: clock.Now}); err != nil {
		t.Fatal(err)
	}
	fo.Clock = clock.Now
	e := &env{t: t, mem: mem, db: db, clock: clock, opts: fo}
	e.open()
	t.Cleanup(func() {
		// After injected failures, closing reports them: expected.
		efs.Enable(false)
		e.fs.Close()
		e.db.Close()
	})
	return e, efs
}

// remountAfterCrash reopens engine and filesystem on what survives a power
// loss now, without injection, and checks both.
func remountAfterCrash(t *testing.T, mem *vfs.MemFS, o lsm.Options) *env {
	t.Helper()
	clone := mem.CrashClone()
	o.FS = clone
	db, err := lsm.Open(testDir, &o)
	if err != nil {
		t.Fatalf("remount: %v", err)
	}
	c := &env{t: t, mem: clone, db: db, clock: &fakeClock{now: time.Unix(1_800_000_000, 0)}}
	c.opts = fs.Options{Clock: c.clock.Now}
	c.open()
	t.Cleanup(c.close)
	r := mustCheck(t, c)
	if r.Orphans != 0 {
		t.Fatalf("orphans after remount: %s", r)
	}
	if er, err := db.Check(); err != nil || !er.OK() {
		t.Fatalf("engine check after remount: %v\n%s", err, er.String())
	}
	return c
}

// TestErrorInjectionFS runs seeded workloads through the filesystem while
// the ErrorFS fails random engine I/O (EIO and ENOSPC on reads, writes and
// forces, short writes). No operation may panic; every failure reaches the
// caller as EIO or ENOSPC; once the engine failed (fail-stop) every write
// gets EIO; an ENOSPC is not sticky; and after a power loss and a remount
// without injection, fsck is clean and every fsynced, untouched file is
// intact. LSMFS_SEED=N replays one seed.
func TestErrorInjectionFS(t *testing.T) {
	var seeds []uint64
	if s := os.Getenv("LSMFS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, n)
	} else {
		base := uint64(time.Now().UnixNano())
		for i := uint64(0); i < 16; i++ {
			seeds = append(seeds, base+i)
		}
	}
	totals := map[string]int{}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			for k, v := range injectionFS(t, seed) {
				totals[k] += v
			}
		})
	}
	t.Logf("%d seeded runs: %v", len(seeds), totals)
}

func injectionFS(t *testing.T, seed uint64) map[string]int {
	rng := rand.New(rand.NewPCG(seed, 9))
	mem := vfs.NewMem()
	o := csEngineOptions(nil)
	e, efs := faultEnv(t, o, mem)
	p := []float64{0.002, 0.005, 0.02}[rng.IntN(3)]
	efs.SetInjector(vfs.Seeded(seed, p, nil))
	stats := map[string]int{}

	type file struct {
		ino, fh      uint64
		name         string
		data, synced []byte
		stable       bool
	}
	var files []*file
	failStop := false // the engine had failed before the current operation
	// result checks one operation's errno: 0, EIO or ENOSPC only; EIO for
	// every write once the engine had failed before it began. It reports
	// whether the op succeeded.
	result := func(what string, errno syscall.Errno, write bool) bool {
		switch errno {
		case 0:
			if failStop && write {
				t.Fatalf("seed %d: %s succeeded after the engine failed (%s)", seed, what, e.db.Metrics().BackgroundError)
			}
			stats["ok"]++
			return true
		case syscall.EIO:
			stats["EIO"]++
		case syscall.ENOSPC:
			if failStop && write {
				t.Fatalf("seed %d: %s: ENOSPC after the engine failed; want EIO", seed, what)
			}
			stats["ENOSPC"]++
		default:
			t.Fatalf("seed %d: %s: errno %v; want 0, EIO or ENOSPC", seed, what, errno)
		}
		return false
	}
	for step := 0; step < 300; step++ {
		failStop = e.db.Metrics().BackgroundError != ""
		op := rng.IntN(10)
		if len(files) == 0 {
			op = 0
		}
		switch {
		case op < 2:
			name := fmt.Sprint("f", step)
			ino, fh, errno := e.create(1, name, 0o644, syscall.O_RDWR)
			if result("create", errno, true) {
				files = append(files, &file{ino: ino, fh: fh, name: name})
			}
		case op < 5:
			f := files[rng.IntN(len(files))]
			if f.fh == 0 {
				continue
			}
			data := pattern(1+rng.IntN(6000), byte(step))
			f.stable = false
			// A write may land in the write buffer and succeed even
			// after the engine failed; its flush (or fsync) fails.
			errno := e.write(f.ino, f.fh, uint64(len(f.data)), data)
			if result("write", errno, false) {
				f.data = append(f.data, data...)
			} else {
				// What reached the file is unknown now: forget it.
				f.data = nil
				f.fh = 0
			}
		case op < 7:
			f := files[rng.IntN(len(files))]
			if f.fh == 0 {
				continue
			}
			if result("fsync", e.fsync(f.ino, f.fh), true) && f.data != nil {
				f.synced, f.stable = bytes.Clone(f.data), true
			}
		case op < 8:
			i := rng.IntN(len(files))
			f := files[i]
			f.stable = false
			if result("unlink", e.unlink(1, f.name), true) {
				files = append(files[:i], files[i+1:]...)
			}
		case op < 9:
			f := files[rng.IntN(len(files))]
			name := fmt.Sprint("r", step)
			f.stable = false
			if result("rename", e.rename(1, f.name, 1, name, 0), true) {
				f.name = name
			}
		default:
			f := files[rng.IntN(len(files))]
			in := fuse.GetAttrIn{InHeader: e.hdr(f.ino)}
			var out fuse.AttrOut
			result("getattr", errno(e.raw.GetAttr(nil, &in, &out)), false)
			if f.fh != 0 {
				_, errno := e.read(f.ino, f.fh, 0, 100)
				result("read", errno, false)
			}
		}
	}
	efs.Enable(false)
	stats["injected"] += int(efs.Injected())
	if failStop {
		stats["fail-stop runs"]++
	}
	c := remountAfterCrash(t, mem, *csEngineOptions(nil))
	for _, f := range files {
		if !f.stable {
			continue
		}
		out, errno := c.lookup(1, f.name)
		if errno != 0 || out.NodeId != f.ino {
			t.Fatalf("seed %d: fsynced %s after remount: %v", seed, f.name, errno)
		}
		fh := c.mustOpen(f.ino, syscall.O_RDONLY)
		got := c.mustRead(f.ino, fh, 0, len(f.synced)+1)
		c.release(f.ino, fh)
		if !bytes.Equal(got, f.synced) {
			t.Fatalf("seed %d: fsynced %s after remount: %d bytes, want %d", seed, f.name, len(got), len(f.synced))
		}
		stats["fsynced files checked"]++
	}
	return stats
}

// TestNoSpaceFS fills a size-limited device through the filesystem: the
// writer sees ENOSPC (not EIO); rm works when full; space comes back and
// writes succeed again; fsck is clean, also after a remount.
func TestNoSpaceFS(t *testing.T) {
	mem := vfs.NewMem()
	mem.SetCapacity(40 << 20)
	o := csEngineOptions(nil)
	o.SpaceReserve = 0 // the default: 1% of the device
	o.VlogSegmentSize = 1 << 20
	var logBuf syncBuffer
	o.Logger = slog.New(slog.NewTextHandler(&logBuf, nil))
	e, _ := faultEnv(t, o, mem)

	chunk := pattern(64<<10, 3)
	var names []string
	var first syscall.Errno
	for i := 0; i < 1000 && first == 0; i++ {
		name := fmt.Sprint("big", i)
		ino, fh, err := e.create(1, name, 0o644, syscall.O_RDWR)
		if err != 0 {
			first = err
			break
		}
		names = append(names, name)
		for off := 0; off < 1<<20 && first == 0; off += len(chunk) {
			first = e.write(ino, fh, uint64(off), chunk)
		}
		if first == 0 {
			first = e.fsync(ino, fh)
		}
		e.release(ino, fh)
	}
	if first != syscall.ENOSPC {
		t.Fatalf("filling the device: errno %v, want ENOSPC", first)
	}
	_, free, _ := mem.Usage("/")
	t.Logf("ENOSPC after %d files of 1 MiB (free %d bytes)", len(names), free)
	// Still full: a new file's data fails with ENOSPC; metadata reads work.
	ino, fh, errno := e.create(1, "more", 0o644, syscall.O_RDWR)
	if errno == 0 {
		errno = e.write(ino, fh, 0, chunk)
		if errno == 0 {
			errno = e.fsync(ino, fh)
		}
		e.release(ino, fh)
	}
	if errno != syscall.ENOSPC {
		t.Fatalf("write when full: %v, want ENOSPC", errno)
	}
	e.names(1)
	// rm works when full.
	for _, name := range names[:len(names)*3/4] {
		if errno := e.unlink(1, name); errno != 0 {
			t.Fatalf("unlink %s when full: %v", name, errno)
		}
	}
	// Space comes back.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ino, fh, errno = e.create(1, "after", 0o644, syscall.O_RDWR|syscall.O_TRUNC)
		if errno == 0 {
			errno = e.write(ino, fh, 0, chunk)
			if errno == 0 {
				errno = e.fsync(ino, fh)
			}
			e.release(ino, fh)
		}
		if errno != syscall.ENOSPC || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if errno != 0 {
		_, free, _ := mem.Usage("/")
		t.Fatalf("write after rm: %v (free %d)\n%s\nengine log:\n%s", errno, free, mem, logBuf.String())
	}
	e.check()
	c := remountAfterCrash(t, mem, *o)
	out, errno := c.lookup(1, "after")
	if errno != 0 || out.Attr.Size != uint64(len(chunk)) {
		t.Fatalf("after remount: %v %+v", errno, out.Attr)
	}
}

// syncBuffer is a strings.Builder safe for concurrent writers (a log).
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
