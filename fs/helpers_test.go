package fs_test

import (
	"bytes"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

const testDir = "/db"

// fakeClock is a settable clock that ticks 1µs per reading, so every change
// gets a distinct time.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Microsecond)
	return c.now
}

// tb is what env needs of a test: satisfied by *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Fatal(args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
}

// env is a filesystem over an engine on a MemFS, driven by raw FUSE calls.
type env struct {
	t     tb
	mem   *vfs.MemFS
	db    *lsm.DB
	fs    *fs.FS
	raw   fuse.RawFileSystem
	opts  fs.Options
	clock *fakeClock
	// caller is the identity of requests (root unless changed).
	caller fuse.Caller
}

var testUUID = [16]byte{'l', 's', 'm', 'f', 's', '-', 't', 'e', 's', 't'}

// engineOptions: small memtables and journal, no cache, and value
// separation from 64 bytes (with small segments), so that most file data
// takes the value-log path in every fs test, the crash test included.
func engineOptions(mem *vfs.MemFS) *lsm.Options {
	return &lsm.Options{FS: mem, UUID: testUUID, MemtableSize: 4 << 20, CacheSize: -1,
		ValueThreshold: 64, VlogSegmentSize: 256 << 10,
		Journal: lsm.JournalOptions{Size: 4 << 20}}
}

func newEnv(t tb, o fs.Options, fo fs.FormatOptions) *env {
	t.Helper()
	e := &env{t: t, mem: vfs.NewMem(), clock: &fakeClock{now: time.Unix(1_700_000_000, 0)}}
	if err := lsm.Format(testDir, engineOptions(e.mem)); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open(testDir, engineOptions(e.mem))
	if err != nil {
		t.Fatal(err)
	}
	e.db = db
	if fo.Clock == nil {
		fo.Clock = e.clock.Now
	}
	if err := fs.Format(db, fo); err != nil {
		t.Fatal(err)
	}
	if o.Clock == nil {
		o.Clock = e.clock.Now
	}
	e.opts = o
	e.open()
	t.Cleanup(e.close)
	return e
}

func (e *env) open() {
	e.t.Helper()
	if e.opts.FlushAge == 0 {
		// No background flusher unless a test asks for one: it would
		// flush at times no seed replays (fault injection, crash states).
		e.opts.FlushAge = -1
	}
	f, err := fs.New(e.db, e.opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.fs, e.raw = f, f.Raw()
}

func (e *env) close() {
	if e.fs != nil {
		if err := e.fs.Close(); err != nil {
			e.t.Errorf("fs.Close: %v", err)
		}
		e.fs = nil
	}
	if e.db != nil {
		if err := e.db.Close(); err != nil {
			e.t.Errorf("db.Close: %v", err)
		}
		e.db = nil
	}
}

// remount closes the FS and the engine and opens both again on the same
// MemFS, as an unmount and mount would.
func (e *env) remount() {
	e.t.Helper()
	e.close()
	db, err := lsm.Open(testDir, engineOptions(e.mem))
	if err != nil {
		e.t.Fatal(err)
	}
	e.db = db
	e.open()
}

// check runs fs.Check and fails on any problem.
func (e *env) check() {
	e.t.Helper()
	r, err := fs.Check(e.db)
	if err != nil {
		e.t.Fatalf("Check: %v", err)
	}
	if !r.OK() {
		e.t.Fatalf("Check found problems:\n%s", r)
	}
}

func (e *env) hdr(ino uint64) fuse.InHeader {
	return fuse.InHeader{NodeId: ino, Caller: e.caller}
}

func errno(s fuse.Status) syscall.Errno { return syscall.Errno(s) }

func (e *env) lookup(parent uint64, name string) (fuse.EntryOut, syscall.Errno) {
	h := e.hdr(parent)
	var out fuse.EntryOut
	st := e.raw.Lookup(nil, &h, name, &out)
	if st == fuse.OK && out.NodeId == 0 {
		return out, syscall.ENOENT // negative entry
	}
	return out, errno(st)
}

func (e *env) mustLookup(parent uint64, name string) uint64 {
	e.t.Helper()
	out, err := e.lookup(parent, name)
	if err != 0 {
		e.t.Fatalf("lookup %d/%q: %v", parent, name, err)
	}
	return out.NodeId
}

func (e *env) getattr(ino uint64) (fuse.Attr, syscall.Errno) {
	in := fuse.GetAttrIn{InHeader: e.hdr(ino)}
	var out fuse.AttrOut
	st := e.raw.GetAttr(nil, &in, &out)
	return out.Attr, errno(st)
}

// forgottenGetattr is getattr's errno for ino once the kernel has forgotten
// the node (as it does when nothing holds an unlinked node any more): a
// deleted inode's attributes stay answerable until then (ghosts.go).
func (e *env) forgottenGetattr(ino uint64) syscall.Errno {
	e.raw.Forget(ino, 1)
	_, err := e.getattr(ino)
	return err
}

func (e *env) attr(ino uint64) fuse.Attr {
	e.t.Helper()
	a, err := e.getattr(ino)
	if err != 0 {
		e.t.Fatalf("getattr %d: %v", ino, err)
	}
	return a
}

func (e *env) mkdir(parent uint64, name string, mode uint32) (uint64, syscall.Errno) {
	in := fuse.MkdirIn{InHeader: e.hdr(parent), Mode: mode}
	var out fuse.EntryOut
	st := e.raw.Mkdir(nil, &in, name, &out)
	return out.NodeId, errno(st)
}

func (e *env) mustMkdir(parent uint64, name string) uint64 {
	e.t.Helper()
	ino, err := e.mkdir(parent, name, 0o755)
	if err != 0 {
		e.t.Fatalf("mkdir %d/%q: %v", parent, name, err)
	}
	return ino
}

func (e *env) mknod(parent uint64, name string, mode, rdev uint32) (uint64, syscall.Errno) {
	in := fuse.MknodIn{InHeader: e.hdr(parent), Mode: mode, Rdev: rdev}
	var out fuse.EntryOut
	st := e.raw.Mknod(nil, &in, name, &out)
	return out.NodeId, errno(st)
}

func (e *env) create(parent uint64, name string, mode uint32, flags uint32) (ino, fh uint64, err syscall.Errno) {
	in := fuse.CreateIn{InHeader: e.hdr(parent), Mode: mode, Flags: flags}
	var out fuse.CreateOut
	st := e.raw.Create(nil, &in, name, &out)
	return out.NodeId, out.Fh, errno(st)
}

func (e *env) mustCreate(parent uint64, name string) (ino, fh uint64) {
	e.t.Helper()
	ino, fh, err := e.create(parent, name, 0o644, syscall.O_RDWR)
	if err != 0 {
		e.t.Fatalf("create %d/%q: %v", parent, name, err)
	}
	return ino, fh
}

func (e *env) open_(ino uint64, flags uint32) (uint64, syscall.Errno) {
	in := fuse.OpenIn{InHeader: e.hdr(ino), Flags: flags}
	var out fuse.OpenOut
	st := e.raw.Open(nil, &in, &out)
	return out.Fh, errno(st)
}

func (e *env) mustOpen(ino uint64, flags uint32) uint64 {
	e.t.Helper()
	fh, err := e.open_(ino, flags)
	if err != 0 {
		e.t.Fatalf("open %d: %v", ino, err)
	}
	return fh
}

func (e *env) write(ino, fh, off uint64, data []byte) syscall.Errno {
	in := fuse.WriteIn{InHeader: e.hdr(ino), Fh: fh, Offset: off, Size: uint32(len(data))}
	n, st := e.raw.Write(nil, &in, data)
	if st == fuse.OK && int(n) != len(data) {
		e.t.Fatalf("short write: %d of %d", n, len(data))
	}
	return errno(st)
}

func (e *env) mustWrite(ino, fh, off uint64, data []byte) {
	e.t.Helper()
	if err := e.write(ino, fh, off, data); err != 0 {
		e.t.Fatalf("write %d at %d: %v", ino, off, err)
	}
}

func (e *env) read(ino, fh, off uint64, size int) ([]byte, syscall.Errno) {
	in := fuse.ReadIn{InHeader: e.hdr(ino), Fh: fh, Offset: off, Size: uint32(size)}
	// go-fuse hands Read a reused buffer: stale bytes must not show
	// through holes or past short blocks.
	buf := bytes.Repeat([]byte{0xa5}, size)
	res, st := e.raw.Read(nil, &in, buf)
	if st != fuse.OK {
		return nil, errno(st)
	}
	b, st := res.Bytes(make([]byte, size))
	return bytes.Clone(b), errno(st)
}

func (e *env) mustRead(ino, fh, off uint64, size int) []byte {
	e.t.Helper()
	b, err := e.read(ino, fh, off, size)
	if err != 0 {
		e.t.Fatalf("read %d at %d: %v", ino, off, err)
	}
	return b
}

func (e *env) flush(ino, fh uint64) syscall.Errno {
	in := fuse.FlushIn{InHeader: e.hdr(ino), Fh: fh}
	return errno(e.raw.Flush(nil, &in))
}

func (e *env) fsync(ino, fh uint64) syscall.Errno {
	in := fuse.FsyncIn{InHeader: e.hdr(ino), Fh: fh}
	return errno(e.raw.Fsync(nil, &in))
}

func (e *env) release(ino, fh uint64) {
	e.flush(ino, fh)
	in := fuse.ReleaseIn{InHeader: e.hdr(ino), Fh: fh}
	e.raw.Release(nil, &in)
}

func (e *env) unlink(parent uint64, name string) syscall.Errno {
	h := e.hdr(parent)
	return errno(e.raw.Unlink(nil, &h, name))
}

func (e *env) rmdir(parent uint64, name string) syscall.Errno {
	h := e.hdr(parent)
	return errno(e.raw.Rmdir(nil, &h, name))
}

func (e *env) rename(op uint64, oldName string, np uint64, newName string, flags uint32) syscall.Errno {
	in := fuse.RenameIn{InHeader: e.hdr(op), Newdir: np, Flags: flags}
	return errno(e.raw.Rename(nil, &in, oldName, newName))
}

func (e *env) link(ino, parent uint64, name string) (fuse.EntryOut, syscall.Errno) {
	in := fuse.LinkIn{InHeader: e.hdr(parent), Oldnodeid: ino}
	var out fuse.EntryOut
	st := e.raw.Link(nil, &in, name, &out)
	return out, errno(st)
}

func (e *env) symlink(parent uint64, target, name string) (uint64, syscall.Errno) {
	h := e.hdr(parent)
	var out fuse.EntryOut
	st := e.raw.Symlink(nil, &h, target, name, &out)
	return out.NodeId, errno(st)
}

func (e *env) readlink(ino uint64) (string, syscall.Errno) {
	h := e.hdr(ino)
	b, st := e.raw.Readlink(nil, &h)
	return string(b), errno(st)
}

func (e *env) setattr(in fuse.SetAttrIn) (fuse.Attr, syscall.Errno) {
	in.InHeader = e.hdr(in.NodeId)
	var out fuse.AttrOut
	st := e.raw.SetAttr(nil, &in, &out)
	return out.Attr, errno(st)
}

func (e *env) truncate(ino, size uint64) syscall.Errno {
	var in fuse.SetAttrIn
	in.NodeId, in.Valid, in.Size = ino, fuse.FATTR_SIZE, size
	_, err := e.setattr(in)
	return err
}

func (e *env) setxattr(ino uint64, name string, value []byte, flags uint32) syscall.Errno {
	in := fuse.SetXAttrIn{InHeader: e.hdr(ino), Size: uint32(len(value)), Flags: flags}
	return errno(e.raw.SetXAttr(nil, &in, name, value))
}

func (e *env) getxattr(ino uint64, name string, size int) ([]byte, uint32, syscall.Errno) {
	h := e.hdr(ino)
	buf := make([]byte, size)
	n, st := e.raw.GetXAttr(nil, &h, name, buf)
	if st != fuse.OK {
		return nil, n, errno(st)
	}
	return buf[:n], n, 0
}

func (e *env) listxattr(ino uint64, size int) ([]byte, uint32, syscall.Errno) {
	h := e.hdr(ino)
	buf := make([]byte, size)
	n, st := e.raw.ListXAttr(nil, &h, buf)
	if st != fuse.OK {
		return nil, n, errno(st)
	}
	return buf[:n], n, 0
}

func (e *env) removexattr(ino uint64, name string) syscall.Errno {
	h := e.hdr(ino)
	return errno(e.raw.RemoveXAttr(nil, &h, name))
}

func (e *env) opendir(ino uint64) (uint64, syscall.Errno) {
	in := fuse.OpenIn{InHeader: e.hdr(ino)}
	var out fuse.OpenOut
	st := e.raw.OpenDir(nil, &in, &out)
	return out.Fh, errno(st)
}

func (e *env) releasedir(ino, fh uint64) {
	in := fuse.ReleaseIn{InHeader: e.hdr(ino), Fh: fh}
	e.raw.ReleaseDir(&in)
}

// readdirAt reads one buffer of entries (bufSize bytes) at off.
func (e *env) readdirAt(ino, fh, off uint64, bufSize int, plus bool) ([]fuse.DirEntry, []fuse.EntryOut, syscall.Errno) {
	in := fuse.ReadIn{InHeader: e.hdr(ino), Fh: fh, Offset: off, Size: uint32(bufSize)}
	out := fuse.NewDirEntryList(make([]byte, bufSize), off)
	var st fuse.Status
	if plus {
		st = e.raw.ReadDirPlus(nil, &in, out)
	} else {
		st = e.raw.ReadDir(nil, &in, out)
	}
	if st != fuse.OK {
		return nil, nil, errno(st)
	}
	if plus {
		ents, outs, err := fuse.ParseDirLookupEntries(out.Bytes())
		if err != nil {
			e.t.Fatal(err)
		}
		return ents, outs, 0
	}
	ents, err := fuse.ParseDirEntries(out.Bytes())
	if err != nil {
		e.t.Fatal(err)
	}
	return ents, nil, 0
}

// readdir lists a directory (with "." and "..") through one handle.
func (e *env) readdir(ino uint64) []fuse.DirEntry {
	e.t.Helper()
	fh, err := e.opendir(ino)
	if err != 0 {
		e.t.Fatalf("opendir %d: %v", ino, err)
	}
	defer e.releasedir(ino, fh)
	var all []fuse.DirEntry
	off := uint64(0)
	for {
		ents, _, err := e.readdirAt(ino, fh, off, 512, false)
		if err != 0 {
			e.t.Fatalf("readdir %d: %v", ino, err)
		}
		if len(ents) == 0 {
			return all
		}
		all = append(all, ents...)
		off = ents[len(ents)-1].Off
	}
}

// names lists a directory's entry names, without "." and "..".
func (e *env) names(ino uint64) []string {
	e.t.Helper()
	var out []string
	for _, d := range e.readdir(ino) {
		if d.Name != "." && d.Name != ".." {
			out = append(out, d.Name)
		}
	}
	return out
}

func (e *env) fallocate(ino, fh, off, length uint64, mode uint32) syscall.Errno {
	in := fuse.FallocateIn{InHeader: e.hdr(ino), Fh: fh, Offset: off, Length: length, Mode: mode}
	return errno(e.raw.Fallocate(nil, &in))
}

func (e *env) lseek(ino, fh, off uint64, whence uint32) (uint64, syscall.Errno) {
	in := fuse.LseekIn{InHeader: e.hdr(ino), Fh: fh, Offset: off, Whence: whence}
	var out fuse.LseekOut
	st := e.raw.Lseek(nil, &in, &out)
	return out.Offset, errno(st)
}

func (e *env) statfs() fuse.StatfsOut {
	e.t.Helper()
	h := e.hdr(1)
	var out fuse.StatfsOut
	if st := e.raw.StatFs(nil, &h, &out); st != fuse.OK {
		e.t.Fatalf("statfs: %v", st)
	}
	return out
}

func wantErr(t testing.TB, what string, got, want syscall.Errno) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got errno %d (%v), want %d (%v)", what, int(got), got, int(want), want)
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7+i/251)
	}
	return b
}
