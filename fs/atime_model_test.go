package fs_test

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
)

func (c *fakeClock) peek() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now.UnixNano()
}

// TestAtimeModel checks access times against a model through random
// sequences of reads (plain, O_NOATIME, of buffered writes), writes,
// flushes, chmod, utimens, listings, clock jumps (past a day too),
// flusher passes and remounts, under each policy. After every step each
// file's and the root's atime must be the model's: moved by a read exactly
// when the policy says (to a time within the read), set by utimens, and
// otherwise unchanged, across the flusher and remounts. Seeded: replay
// with LSMFS_SEED.
func TestAtimeModel(t *testing.T) {
	seed := testSeed(t)
	for run := range uint64(24) {
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			atimeModelRun(t, seed+run)
		})
	}
}

func atimeModelRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xa71e))
	o := fs.Options{Atime: []fs.AtimePolicy{fs.AtimeRelative, fs.AtimeStrict, fs.AtimeNever}[rng.IntN(3)], NoDirAtime: rng.IntN(3) == 0}
	e := newEnv(t, o, fs.FormatOptions{})
	t.Logf("seed %d: atime %v, nodiratime %v", seed, o.Atime, o.NoDirAtime)
	type file struct {
		ino   uint64
		fh    uint64 // an O_RDWR handle, 0 if none
		dirty bool   // writes buffered through fh
		atime int64  // the model's
	}
	files := make([]*file, 3)
	for i := range files {
		ino, fh := e.mustCreate(1, fmt.Sprintf("f%d", i))
		e.mustWrite(ino, fh, 0, []byte("start"))
		e.release(ino, fh)
		files[i] = &file{ino: ino, atime: atimeOf(e.attr(ino))}
	}
	rootAtime := atimeOf(e.attr(1))
	// due reports whether a read over [t0, t1] must move atime a of a node
	// whose attributes were at, and whether the answer is certain.
	due := func(at fuse.Attr, a, t0, t1 int64, dir bool) (bool, bool) {
		switch {
		case o.Atime == fs.AtimeNever, dir && o.NoDirAtime:
			return false, true
		case o.Atime == fs.AtimeStrict:
			return true, true
		}
		m, c := mtimeOf(at), ctimeOf(at)
		if a <= m || a <= c {
			return true, true
		}
		lo, hi := t0-a >= int64(24*time.Hour), t1-a >= int64(24*time.Hour)
		return lo, lo == hi
	}
	// afterRead checks a node read over [t0, t1] and returns its new
	// model atime.
	afterRead := func(what string, ino uint64, before fuse.Attr, a, t0, t1 int64, dir, counts bool) int64 {
		t.Helper()
		got := atimeOf(e.attr(ino))
		d, sure := due(before, a, t0, t1, dir)
		switch {
		case !counts || sure && !d:
			if got != a {
				t.Fatalf("%s of %d: atime %d -> %d, want unchanged", what, ino, a, got)
			}
		case sure && d:
			if got < t0 || got > t1 {
				t.Fatalf("%s of %d: atime %d -> %d, want a time within the read [%d, %d]", what, ino, a, got, t0, t1)
			}
		default:
			if got != a && (got < t0 || got > t1) {
				t.Fatalf("%s of %d: atime %d -> %d", what, ino, a, got)
			}
		}
		return got
	}
	for step := 0; step < 300; step++ {
		f := files[rng.IntN(len(files))]
		op := rng.IntN(12)
		if testing.Verbose() {
			t.Logf("step %d: op %d on %d (fh %d, dirty %v, buffered %d)", step, op, f.ino, f.fh, f.dirty, e.fs.Buffered())
		}
		switch {
		case op < 3: // read through a new read-only handle
			flags := uint32(syscall.O_RDONLY)
			if rng.IntN(4) == 0 {
				flags |= syscall.O_NOATIME
			}
			before := e.attr(f.ino)
			t0 := e.clock.peek()
			fh := e.mustOpen(f.ino, flags)
			e.mustRead(f.ino, fh, 0, 8)
			t1 := e.clock.peek()
			// Buffered writes: relatime waits for their flush; the
			// others count the read.
			counts := flags&syscall.O_NOATIME == 0 && !(f.dirty && o.Atime == fs.AtimeRelative)
			f.atime = afterRead("read", f.ino, before, f.atime, t0, t1, false, counts)
			e.release(f.ino, fh) // with a FLUSH, as close(2) without FOPEN_NOFLUSH
			f.dirty = false
		case op < 5: // write through the file's read-write handle
			if f.fh == 0 {
				f.fh = e.mustOpen(f.ino, syscall.O_RDWR)
			}
			e.mustWrite(f.ino, f.fh, uint64(rng.IntN(8192)), []byte("data"))
			f.dirty = true
		case op == 5: // flush or close the handle
			if f.fh != 0 {
				if rng.IntN(2) == 0 {
					e.flush(f.ino, f.fh)
				} else {
					e.release(f.ino, f.fh)
					f.fh = 0
				}
				f.dirty = false
			}
		case op == 6: // chmod (ctime; flushes the buffer)
			var in fuse.SetAttrIn
			in.NodeId, in.Valid, in.Mode = f.ino, fuse.FATTR_MODE, uint32(0o600+rng.IntN(0o100))
			if _, err := e.setattr(in); err != 0 {
				t.Fatal(err)
			}
			f.dirty = false
		case op == 7: // utimens: an explicit atime, past or future
			var in fuse.SetAttrIn
			v := e.clock.peek() + int64(rng.IntN(200)-100)*int64(time.Hour)
			in.NodeId, in.Valid = f.ino, fuse.FATTR_ATIME
			in.Atime, in.Atimensec = uint64(v/1e9), uint32(v%1e9)
			if _, err := e.setattr(in); err != 0 {
				t.Fatal(err)
			}
			f.atime, f.dirty = v, false
		case op == 8: // list the root
			before := e.attr(1)
			t0 := e.clock.peek()
			e.readdir(1)
			t1 := e.clock.peek()
			rootAtime = afterRead("readdir", 1, before, rootAtime, t0, t1, true, true)
		case op == 9: // the clock jumps, past a day at times
			e.clock.advance(time.Duration(rng.IntN(30)) * time.Hour)
		case op == 10:
			e.fs.WriteAtimes()
		default: // remount, handles closed first
			if rng.IntN(3) != 0 {
				continue
			}
			for _, g := range files {
				if g.fh != 0 {
					e.release(g.ino, g.fh)
					g.fh, g.dirty = 0, false
				}
			}
			e.remount()
		}
		for _, g := range files {
			if got := atimeOf(e.attr(g.ino)); got != g.atime {
				t.Fatalf("step %d: file %d: atime %d, model %d", step, g.ino, got, g.atime)
			}
		}
		if got := atimeOf(e.attr(1)); got != rootAtime {
			t.Fatalf("step %d: root: atime %d, model %d", step, got, rootAtime)
		}
	}
	for _, g := range files {
		if g.fh != 0 {
			e.release(g.ino, g.fh)
		}
	}
	e.remount()
	for _, g := range files {
		if got := atimeOf(e.attr(g.ino)); got != g.atime {
			t.Fatalf("after the last remount: file %d: atime %d, model %d", g.ino, got, g.atime)
		}
	}
	e.check()
}
