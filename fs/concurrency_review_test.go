package fs_test

// Concurrency review tests (locks, open table, ghosts, write buffers).

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// withDeadline runs fn and fails with a goroutine dump if it has not
// returned within d (a hang: deadlock or livelock).
func withDeadline(t *testing.T, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
		t.Fatalf("hang: not done after %v (goroutines dumped above)", d)
	}
}

// TestGhostDirOpenGetattr: a directory removed while the kernel still
// holds it (a process's cwd) answers getattr with its ghost, but once the
// process opens it (opendir succeeds on the ghost), getattr says ENOENT:
// stat sees the inode in the open table and reads the record only.
func TestGhostDirOpenGetattr(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{BlockSize: bs})
	d := e.mustMkdir(1, "d")
	if err := e.rmdir(1, "d"); err != 0 {
		t.Fatal(err)
	}
	if _, err := e.getattr(d); err != 0 {
		t.Fatalf("getattr of removed cwd before opendir: %v (want its ghost)", err)
	}
	fh, err := e.opendir(d)
	if err != 0 {
		t.Fatalf("opendir of removed cwd: %v", err)
	}
	_, gerr := e.getattr(d)
	e.releasedir(d, fh)
	if gerr != 0 {
		t.Fatalf("getattr of removed cwd while opendir'ed: %v, want nlink-0 attributes as before opendir", gerr)
	}
}

// TestGhostBeforeRecordGoes: getattr of a directory the kernel holds (cwd)
// racing with its rmdir must never say ENOENT: the record is deleted by
// the Apply and the ghost added only after it.
func TestGhostBeforeRecordGoes(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{BlockSize: bs})
	var bad atomic.Int64
	for i := 0; i < 3000 && bad.Load() == 0; i++ {
		name := fmt.Sprint("d", i)
		d := e.mustMkdir(1, name)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					in := fuse.GetAttrIn{InHeader: fuse.InHeader{NodeId: d}}
					if st := e.raw.GetAttr(nil, &in, &fuse.AttrOut{}); st == fuse.ENOENT {
						bad.Add(1)
						return
					}
				}
			}()
		}
		if err := e.rmdir(1, name); err != 0 {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Microsecond)
		close(stop)
		wg.Wait()
	}
	if n := bad.Load(); n > 0 {
		t.Fatalf("getattr of a held, just-removed directory returned ENOENT (%d times): ghost added after the record is gone", n)
	}
}

// TestCreateUnlinkRace: Create makes the inode under the parent's
// lock but enters it in the open table later, under the child's lock only.
// An unlink in between sees it not open and deletes it: Create then
// returns a handle on an inode that does not exist.
func TestCreateUnlinkRace(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{BlockSize: bs})
	var lost atomic.Int64
	var firstErr atomic.Value
	for i := 0; i < 2000 && lost.Load() == 0; i++ {
		name := fmt.Sprint("f", i)
		var wg sync.WaitGroup
		var created atomic.Bool
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !created.Load() {
				h := fuse.InHeader{NodeId: 1}
				if e.raw.Unlink(nil, &h, name) == fuse.OK {
					return
				}
			}
		}()
		in := fuse.CreateIn{InHeader: fuse.InHeader{NodeId: 1}, Mode: 0o644, Flags: syscall.O_RDWR}
		var out fuse.CreateOut
		st := e.raw.Create(nil, &in, name, &out)
		created.Store(true)
		wg.Wait()
		if st != fuse.OK {
			t.Fatal(st)
		}
		win := fuse.WriteIn{InHeader: fuse.InHeader{NodeId: out.NodeId}, Fh: out.Fh}
		if _, st := e.raw.Write(nil, &win, []byte("hello")); st != fuse.OK {
			lost.Add(1)
			firstErr.CompareAndSwap(nil, fmt.Sprintf("write on a fresh handle: %v", st))
		}
		fin := fuse.FlushIn{InHeader: fuse.InHeader{NodeId: out.NodeId}, Fh: out.Fh}
		if st := e.raw.Flush(nil, &fin); st != fuse.OK {
			lost.Add(1)
			firstErr.CompareAndSwap(nil, fmt.Sprintf("flush on a fresh handle: %v", st))
		}
		e.raw.Release(nil, &fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: out.NodeId}, Fh: out.Fh})
	}
	if lost.Load() > 0 {
		t.Fatalf("create racing unlink: %d failures, first: %v", lost.Load(), firstErr.Load())
	}
	e.check()
}

// TestTotalFlushKeepsEarlierWrites: a small write to a file whose
// buffer already holds acknowledged writes triggers a flush because *other*
// files' buffers push the total past WriteBufferTotal. That flush fails
// (ENOSPC) and writeLocked discards the whole buffer, the earlier writes
// included, and records no lost-write error: fsync then says success and the
// data is gone.
func TestTotalFlushKeepsEarlierWrites(t *testing.T) {
	mem := vfs.NewMem()
	o := engineOptions(mem)
	e, efs := faultEnv(t, o, mem)
	// faultEnv opened with WriteBufferSize 16K and the default total; reopen
	// with a small total.
	e.fs.Close()
	e.opts = fs.Options{Clock: e.clock.Now, WriteBufferSize: 16 << 10, WriteBufferTotal: 16 << 10}
	e.open()

	a, fa := e.mustCreate(1, "a")
	b, fb := e.mustCreate(1, "b")
	old := pattern(bs, 7)
	e.mustWrite(a, fa, 0, old) // acknowledged, buffered
	// Another file's buffer takes the total to the bound.
	for off := 0; off < 16<<10-bs; off += bs {
		e.mustWrite(b, fb, uint64(off), pattern(bs, 9))
	}
	t.Logf("buffered: %d", e.fs.Buffered())
	// The disk is full for a moment: this small write to a makes it flush
	// (the total is past its bound) and fail.
	efs.SetInjector(vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpWrite {
			return vfs.ENOSPC
		}
		return nil
	}))
	err := e.write(a, fa, uint64(bs), []byte("x"))
	efs.SetInjector(nil)
	t.Logf("second write: %v", err)
	// Space is back. fsync must either store the first write or report
	// that it was lost.
	if err := e.fsync(a, fa); err != 0 {
		t.Logf("fsync reports %v: the loss is reported", err)
		return
	}
	got := e.mustRead(a, fa, 0, bs)
	if !bytes.Equal(got, old) {
		t.Fatalf("acknowledged write lost silently: fsync OK, read %d bytes, first %q... want %d bytes of the first write", len(got), got[:min(8, len(got))], len(old))
	}
	_ = errors.New
}

// TestNoDeadlock: many goroutines doing two-inode operations in
// every combination (rename incl. exchange and directories across parents,
// link, unlink, rmdir, setattr truncate, copy_file_range both ways, write,
// fsync, fallocate, opendir/readdirplus) with the background flusher on. A
// lock-order bug hangs; the deadline dumps the goroutines.
func TestNoDeadlock(t *testing.T) {
	e := newEnv(t, fs.Options{WriteBufferSize: 16 << 10, FlushAge: 2 * time.Millisecond}, fs.FormatOptions{BlockSize: bs})
	dirs := []uint64{1}
	for i := 0; i < 3; i++ {
		dirs = append(dirs, e.mustMkdir(1, fmt.Sprint("d", i)))
	}
	names := []string{"a", "b", "c"}
	// Long-lived open files for copy_file_range.
	type of struct{ ino, fh uint64 }
	var files []of
	for i := 0; i < 4; i++ {
		ino, fh := e.mustCreate(1, fmt.Sprint("f", i))
		files = append(files, of{ino, fh})
	}
	const workers, steps = 8, 600
	withDeadline(t, 120*time.Second, func() {
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), 99))
				h := func(ino uint64) fuse.InHeader { return fuse.InHeader{NodeId: ino} }
				pick := func() uint64 { return dirs[rng.IntN(len(dirs))] }
				for i := 0; i < steps; i++ {
					dir, name := pick(), names[rng.IntN(len(names))]
					switch rng.IntN(12) {
					case 0:
						in := fuse.CreateIn{InHeader: h(dir), Mode: 0o644, Flags: syscall.O_RDWR}
						var out fuse.CreateOut
						if e.raw.Create(nil, &in, name, &out) == fuse.OK {
							e.raw.Write(nil, &fuse.WriteIn{InHeader: h(out.NodeId), Fh: out.Fh}, pattern(bs+7, byte(i)))
							e.raw.Release(nil, &fuse.ReleaseIn{InHeader: h(out.NodeId), Fh: out.Fh})
						}
					case 1:
						in := fuse.MkdirIn{InHeader: h(dir), Mode: 0o755}
						e.raw.Mkdir(nil, &in, name, &fuse.EntryOut{})
					case 2, 3:
						in := fuse.RenameIn{InHeader: h(dir), Newdir: pick(), Flags: uint32(rng.IntN(3))}
						e.raw.Rename(nil, &in, name, names[rng.IntN(len(names))])
					case 4:
						hd := h(dir)
						var out fuse.EntryOut
						if e.raw.Lookup(nil, &hd, name, &out) == fuse.OK && out.NodeId != 0 {
							in := fuse.LinkIn{InHeader: h(pick()), Oldnodeid: out.NodeId}
							e.raw.Link(nil, &in, names[rng.IntN(len(names))], &fuse.EntryOut{})
							sin := fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{InHeader: h(out.NodeId), Valid: fuse.FATTR_SIZE, Size: uint64(rng.IntN(2 * bs))}}
							e.raw.SetAttr(nil, &sin, &fuse.AttrOut{})
						}
					case 5:
						hd := h(dir)
						e.raw.Unlink(nil, &hd, name)
					case 6:
						hd := h(dir)
						e.raw.Rmdir(nil, &hd, name)
					case 7:
						s, d := files[rng.IntN(len(files))], files[rng.IntN(len(files))]
						in := fuse.CopyFileRangeIn{InHeader: h(d.ino), FhIn: s.fh, OffIn: uint64(rng.IntN(bs)), FhOut: d.fh, OffOut: uint64(rng.IntN(4 * bs)), Len: uint64(rng.IntN(3 * bs))}
						e.raw.CopyFileRange(nil, &in)
					case 8:
						f := files[rng.IntN(len(files))]
						e.raw.Write(nil, &fuse.WriteIn{InHeader: h(f.ino), Fh: f.fh, Offset: uint64(rng.IntN(4 * bs))}, pattern(rng.IntN(2*bs)+1, byte(i)))
						if rng.IntN(4) == 0 {
							e.raw.Fsync(nil, &fuse.FsyncIn{InHeader: h(f.ino), Fh: f.fh})
						}
					case 9:
						f := files[rng.IntN(len(files))]
						sin := fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{InHeader: h(f.ino), Valid: fuse.FATTR_SIZE, Size: uint64(rng.IntN(4 * bs))}}
						e.raw.SetAttr(nil, &sin, &fuse.AttrOut{})
						e.raw.Fallocate(nil, &fuse.FallocateIn{InHeader: h(f.ino), Fh: f.fh, Offset: uint64(rng.IntN(bs)), Length: uint64(bs), Mode: 3})
					case 10:
						in := fuse.OpenIn{InHeader: h(dir)}
						var out fuse.OpenOut
						if e.raw.OpenDir(nil, &in, &out) == fuse.OK {
							rin := fuse.ReadIn{InHeader: h(dir), Fh: out.Fh, Size: 4096}
							e.raw.ReadDirPlus(nil, &rin, fuse.NewDirEntryList(make([]byte, 4096), 0))
							e.raw.ReleaseDir(&fuse.ReleaseIn{InHeader: h(dir), Fh: out.Fh})
						}
					case 11:
						hd := h(dir)
						var out fuse.EntryOut
						if e.raw.Lookup(nil, &hd, name, &out) == fuse.OK && out.NodeId != 0 {
							e.raw.SetXAttr(nil, &fuse.SetXAttrIn{InHeader: h(out.NodeId)}, "security.capability", []byte("c"))
							e.raw.GetAttr(nil, &fuse.GetAttrIn{InHeader: h(out.NodeId)}, &fuse.AttrOut{})
						}
					}
				}
			}(w)
		}
		wg.Wait()
	})
	for _, f := range files {
		e.release(f.ino, f.fh)
	}
	e.check()
}
