package fs_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestCrashStatesFS is the crash-state enumeration through the filesystem:
// a seeded workload of creates, appends and overwrites, truncates, renames
// (also over other files), hard links, unlinks (also of open files),
// fsyncs and directory fsyncs runs on an engine over a vfs.RecordingFS. At
// crash points inside the engine's I/O calls, every state of the window
// (each prefix of the pending writes, torn writes, sampled reorderings) is
// opened as a mount would open it (lsm.Open, fs.New, which reclaims
// orphans): fs.Check and the engine's Check must be clean, and every file
// fsynced and untouched since must be intact under its name.
// LSMFS_SEED=N replays a workload; LSMFS_LONG=1 runs longer.
func TestCrashStatesFS(t *testing.T) {
	seed := testSeed(t)
	ops, points := 600, 150
	if os.Getenv("LSMFS_LONG") != "" {
		ops, points = 3000, 600
	}
	runCrashStatesFS(t, seed, ops, points)
}

// csFile is a file of the model, known by its inode.
type csFile struct {
	ino    uint64
	fh     uint64 // 0: not open
	parent uint64
	name   string
	data   []byte
	synced []byte // contents at the last fsync
	// stable: fsynced and untouched since (no write, truncate, rename or
	// unlink began after the fsync returned).
	stable bool
}

// csEngineOptions: small memtables, tables and segments, so that a short
// workload flushes, compacts and rolls segments; flushes move the data of
// fsynced writes to the value log from 16 KiB (the default 1 MiB is more
// than these memtables hold).
func csEngineOptions(fsys vfs.FS) *lsm.Options {
	return &lsm.Options{FS: fsys, UUID: testUUID, MemtableSize: 256 << 10, InMemoryFlushSize: 64 << 10,
		CacheSize: -1, ValueThreshold: 64, VlogSegmentSize: 64 << 10, TargetFileSize: 64 << 10,
		L0CompactionTrigger: 2, MaxManifestSize: 16 << 10, FlushMoveMin: 16 << 10,
		Journal: lsm.JournalOptions{Size: 4 << 20, CommitInterval: time.Hour}}
}

type csRun struct {
	t    *testing.T
	seed uint64
	mu   struct {
		sync.Mutex
		files   map[uint64]*csFile
		every   int
		rng     *rand.Rand
		points  int
		states  int
		failure string
	}
}

// recordingEnv is a filesystem over a RecordingFS (over a MemFS), whose hook
// can check every state a crash could leave.
func recordingEnv(t *testing.T) (*env, *vfs.RecordingFS) {
	t.Helper()
	rec := vfs.NewRecording(vfs.NewMem())
	if err := lsm.Format(testDir, csEngineOptions(rec)); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open(testDir, csEngineOptions(rec))
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	if err := fs.Format(db, fs.FormatOptions{BlockSize: bs, Clock: clock.Now}); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, db: db, clock: clock, opts: fs.Options{Clock: clock.Now, WriteBufferSize: 16 << 10}}
	e.open()
	t.Cleanup(func() {
		rec.SetHook(nil)
		e.close()
	})
	return e, rec
}

func runCrashStatesFS(t *testing.T, seed uint64, nops, points int) {
	rng := rand.New(rand.NewPCG(seed, 5))
	e, rec := recordingEnv(t)

	c := &csRun{t: t, seed: seed}
	c.mu.files = map[uint64]*csFile{}
	c.mu.rng = rand.New(rand.NewPCG(seed, 6))
	// About 1.4 mutating engine calls per operation: spread the points.
	c.mu.every = max(1, nops*14/(10*points))
	dirs := []uint64{1, e.mustMkdir(1, "a"), e.mustMkdir(1, "b")}
	rec.SetHook(c.hook)

	var live []*csFile // files with a name
	next := 0
	newName := func() string { next++; return fmt.Sprintf("f%d", next) }
	// mark updates the model under the lock shared with the hook.
	mark := func(fn func()) {
		c.mu.Lock()
		fn()
		c.mu.Unlock()
	}
	open := func(f *csFile) {
		if f.fh == 0 {
			f.fh = e.mustOpen(f.ino, syscall.O_RDWR)
		}
	}
	removeLive := func(f *csFile) {
		for i, x := range live {
			if x == f {
				live = append(live[:i], live[i+1:]...)
				return
			}
		}
	}
	for step := 0; step < nops && !c.failed(); step++ {
		op := rng.IntN(100)
		if len(live) == 0 {
			op = 0
		}
		switch {
		case op < 15: // create
			parent := dirs[rng.IntN(len(dirs))]
			name := newName()
			ino, fh, errno := e.create(parent, name, 0o644, syscall.O_RDWR)
			wantErr(t, "create", errno, 0)
			f := &csFile{ino: ino, fh: fh, parent: parent, name: name}
			mark(func() { c.mu.files[ino] = f })
			live = append(live, f)
		case op < 40: // write: append or overwrite
			f := live[rng.IntN(len(live))]
			open(f)
			off := len(f.data)
			if rng.IntN(3) == 0 {
				off = rng.IntN(len(f.data) + 1)
			}
			data := pattern(1+rng.IntN([]int{100, 3 * bs, 20000}[rng.IntN(3)]), byte(step))
			mark(func() { f.stable = false })
			e.mustWrite(f.ino, f.fh, uint64(off), data)
			if end := off + len(data); end > len(f.data) {
				f.data = append(f.data, make([]byte, end-len(f.data))...)
			}
			copy(f.data[off:], data)
		case op < 48: // truncate
			f := live[rng.IntN(len(live))]
			size := rng.IntN(len(f.data) + bs)
			mark(func() { f.stable = false })
			if f.fh != 0 {
				wantErr(t, "flush", e.flush(f.ino, f.fh), 0)
			}
			wantErr(t, "truncate", e.truncate(f.ino, uint64(size)), 0)
			if size <= len(f.data) {
				f.data = f.data[:size]
			} else {
				f.data = append(f.data, make([]byte, size-len(f.data))...)
			}
		case op < 68: // fsync (the ack makes the file stable)
			f := live[rng.IntN(len(live))]
			open(f)
			wantErr(t, "fsync", e.fsync(f.ino, f.fh), 0)
			mark(func() { f.synced, f.stable = bytes.Clone(f.data), true })
		case op < 76: // rename, to a new name or over another file
			f := live[rng.IntN(len(live))]
			parent, name := dirs[rng.IntN(len(dirs))], newName()
			var victim *csFile
			if rng.IntN(3) == 0 {
				if v := live[rng.IntN(len(live))]; v != f {
					victim, parent, name = v, v.parent, v.name
				}
			}
			mark(func() {
				f.stable = false
				if victim != nil {
					victim.stable = false
				}
			})
			wantErr(t, "rename", e.rename(f.parent, f.name, parent, name, 0), 0)
			f.parent, f.name = parent, name
			if victim != nil {
				removeLive(victim)
				mark(func() { delete(c.mu.files, victim.ino) })
				if victim.fh != 0 {
					e.release(victim.ino, victim.fh)
				}
			}
		case op < 82: // hard link: the original name stays; the link is not tracked
			f := live[rng.IntN(len(live))]
			if _, errno := e.link(f.ino, dirs[rng.IntN(len(dirs))], newName()); errno != 0 {
				t.Fatalf("link: %v", errno)
			}
		case op < 90: // unlink, sometimes of an open file (an orphan until released)
			f := live[rng.IntN(len(live))]
			mark(func() { f.stable = false })
			wantErr(t, "unlink", e.unlink(f.parent, f.name), 0)
			removeLive(f)
			mark(func() { delete(c.mu.files, f.ino) })
			if f.fh != 0 && rng.IntN(2) == 0 {
				e.release(f.ino, f.fh)
			}
		case op < 95: // close
			f := live[rng.IntN(len(live))]
			if f.fh != 0 {
				e.release(f.ino, f.fh)
				f.fh = 0
			}
		default: // fsync a directory
			d := dirs[rng.IntN(len(dirs))]
			fh, errno := e.opendir(d)
			wantErr(t, "opendir", errno, 0)
			in := fuse.FsyncIn{InHeader: e.hdr(d), Fh: fh}
			wantErr(t, "fsyncdir", errno2(e.raw.FsyncDir(nil, &in)), 0)
			e.releasedir(d, fh)
		}
	}
	rec.SetHook(nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.failure != "" {
		t.Fatalf("seed %d: %s", seed, c.mu.failure)
	}
	t.Logf("crash points %d, crash states checked %d (%d engine calls)", c.mu.points, c.mu.states, rec.Calls())
	if c.mu.points < points/4 {
		t.Errorf("only %d crash points", c.mu.points)
	}
}

func errno2(s fuse.Status) syscall.Errno { return syscall.Errno(s) }

func (c *csRun) failed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.failure != ""
}

// hook crashes at some engine calls and checks every state of the window.
func (c *csRun) hook(ev vfs.Event) {
	c.mu.Lock()
	if c.mu.failure != "" || c.mu.rng.IntN(c.mu.every) != 0 {
		c.mu.Unlock()
		return
	}
	var stable []csFile
	for _, f := range c.mu.files {
		if f.stable {
			stable = append(stable, csFile{ino: f.ino, parent: f.parent, name: f.name, synced: f.synced})
		}
	}
	rng := rand.New(rand.NewPCG(c.mu.rng.Uint64(), 7))
	c.mu.Unlock()

	w := ev.Capture()
	var failure string
	n := w.States(rng, 3, func(desc string, mem *vfs.MemFS) bool {
		if msg := checkCrashState(mem, stable); msg != "" {
			failure = fmt.Sprintf("crash after engine call %d (%s), state %s: %s\n%s", ev.Index, ev.Op, desc, msg, w)
			return false
		}
		return true
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.points++
	c.mu.states += n
	if failure != "" && c.mu.failure == "" {
		c.mu.failure = failure
	}
}

// checkCrashState mounts a crash state as the daemon would and checks it;
// it returns what is wrong, or "". It runs in whatever goroutine made the
// engine call, so it reports instead of failing the test.
func checkCrashState(mem *vfs.MemFS, stable []csFile) string {
	db, err := lsm.Open(testDir, csEngineOptions(mem))
	if err != nil {
		return fmt.Sprintf("engine open: %v", err)
	}
	defer db.Close()
	f, err := fs.New(db, fs.Options{})
	if err != nil {
		return fmt.Sprintf("fs.New: %v", err)
	}
	defer f.Close()
	r, err := fs.Check(db)
	if err != nil || !r.OK() || r.Orphans != 0 {
		return fmt.Sprintf("fsck: %v\n%s", err, r)
	}
	er, err := db.Check()
	if err != nil || !er.OK() {
		return fmt.Sprintf("engine check: %v\n%s", err, er.String())
	}
	raw := f.Raw()
	for _, s := range stable {
		var out fuse.EntryOut
		if st := raw.Lookup(nil, &fuse.InHeader{NodeId: s.parent}, s.name, &out); st != fuse.OK || out.NodeId != s.ino {
			return fmt.Sprintf("fsynced file %d/%s (inode %d): lookup gives inode %d, %v", s.parent, s.name, s.ino, out.NodeId, st)
		}
		if out.Attr.Size != uint64(len(s.synced)) {
			return fmt.Sprintf("fsynced file %d/%s: size %d, fsynced %d", s.parent, s.name, out.Attr.Size, len(s.synced))
		}
		var oo fuse.OpenOut
		if st := raw.Open(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: s.ino}, Flags: syscall.O_RDONLY}, &oo); st != fuse.OK {
			return fmt.Sprintf("open fsynced file %s: %v", s.name, st)
		}
		buf := make([]byte, len(s.synced)+1)
		res, st := raw.Read(nil, &fuse.ReadIn{InHeader: fuse.InHeader{NodeId: s.ino}, Fh: oo.Fh, Size: uint32(len(buf))}, buf)
		var got []byte
		if st == fuse.OK {
			got, st = res.Bytes(make([]byte, len(buf)))
		}
		raw.Release(nil, &fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: s.ino}, Fh: oo.Fh})
		if st != fuse.OK || !bytes.Equal(got, s.synced) {
			return fmt.Sprintf("fsynced file %d/%s: read %d bytes (%v), not the %d fsynced", s.parent, s.name, len(got), st, len(s.synced))
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Sprintf("fs close: %v", err)
	}
	if err := db.Close(); err != nil {
		return fmt.Sprintf("engine close: %v", err)
	}
	return ""
}
