package fs_test

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

func ctimeOf(a fuse.Attr) int64 { return int64(a.Ctime)*1e9 + int64(a.Ctimensec) }
func mtimeOf(a fuse.Attr) int64 { return int64(a.Mtime)*1e9 + int64(a.Mtimensec) }
func atimeOf(a fuse.Attr) int64 { return int64(a.Atime)*1e9 + int64(a.Atimensec) }

func TestChmodChown(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	ino, fh := e.mustCreate(1, "f")
	e.release(ino, fh)
	before := e.attr(ino)
	var in fuse.SetAttrIn
	in.NodeId, in.Valid, in.Mode = ino, fuse.FATTR_MODE, 0o4755
	a, err := e.setattr(in)
	if err != 0 || a.Mode != syscall.S_IFREG|0o4755 || ctimeOf(a) <= ctimeOf(before) || mtimeOf(a) != mtimeOf(before) {
		t.Fatalf("chmod: %v %+v", err, a)
	}
	// chown of a non-directory clears setuid; setgid without group execute
	// (mandatory locking) stays.
	in = fuse.SetAttrIn{}
	in.NodeId, in.Valid, in.Uid, in.Gid = ino, fuse.FATTR_UID|fuse.FATTR_GID, 7, 8
	a, _ = e.setattr(in)
	if a.Uid != 7 || a.Gid != 8 || a.Mode&0o7777 != 0o755 {
		t.Fatalf("chown: %+v", a)
	}
	in = fuse.SetAttrIn{}
	in.NodeId, in.Valid, in.Mode = ino, fuse.FATTR_MODE, 0o2644
	e.setattr(in)
	in = fuse.SetAttrIn{}
	in.NodeId, in.Valid, in.Gid = ino, fuse.FATTR_GID, 9
	if a, _ = e.setattr(in); a.Mode&0o7777 != 0o2644 {
		t.Fatalf("chown cleared setgid without group exec: %#o", a.Mode)
	}
	// Directories keep their bits.
	d := e.mustMkdir(1, "d")
	in = fuse.SetAttrIn{}
	in.NodeId, in.Valid, in.Mode = d, fuse.FATTR_MODE, 0o3777
	e.setattr(in)
	in = fuse.SetAttrIn{}
	in.NodeId, in.Valid, in.Uid = d, fuse.FATTR_UID, 5
	if a, _ = e.setattr(in); a.Mode != syscall.S_IFDIR|0o3777 || a.Uid != 5 {
		t.Fatalf("chown dir: %+v", a)
	}
	// FATTR_KILL_SUIDGID (CAP_HANDLE_KILLPRIV_V2).
	in = fuse.SetAttrIn{}
	in.NodeId, in.Valid, in.Mode = ino, fuse.FATTR_MODE, 0o6775
	e.setattr(in)
	in = fuse.SetAttrIn{}
	in.NodeId, in.Valid = ino, fuse.FATTR_KILL_SUIDGID
	if a, _ = e.setattr(in); a.Mode&0o7777 != 0o775 {
		t.Fatalf("kill suidgid: %#o", a.Mode)
	}
	e.check()
}

func TestUtimens(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	ino, fh := e.mustCreate(1, "f")
	e.release(ino, fh)
	before := e.attr(ino)
	// Explicit times; ctime moves to now.
	var in fuse.SetAttrIn
	in.NodeId, in.Valid = ino, fuse.FATTR_ATIME|fuse.FATTR_MTIME
	in.Atime, in.Atimensec, in.Mtime, in.Mtimensec = 1000, 5, 2000, 6
	a, err := e.setattr(in)
	if err != 0 || atimeOf(a) != 1000*1e9+5 || mtimeOf(a) != 2000*1e9+6 || ctimeOf(a) <= ctimeOf(before) {
		t.Fatalf("utimens: %v %+v", err, a)
	}
	// UTIME_OMIT for atime (bit absent), UTIME_NOW for mtime.
	in = fuse.SetAttrIn{}
	in.NodeId, in.Valid = ino, fuse.FATTR_MTIME|fuse.FATTR_MTIME_NOW
	b, _ := e.setattr(in)
	if atimeOf(b) != atimeOf(a) || mtimeOf(b) <= ctimeOf(a) || mtimeOf(b) != ctimeOf(b) {
		t.Fatalf("UTIME_NOW/OMIT: %+v", b)
	}
	// Times before the epoch survive.
	in = fuse.SetAttrIn{}
	in.NodeId, in.Valid = ino, fuse.FATTR_MTIME
	in.Mtime, in.Mtimensec = uint64(^uint64(0)), 500_000_000 // -1s + 0.5s
	if c, _ := e.setattr(in); int64(c.Mtime) != -1 || c.Mtimensec != 500_000_000 {
		t.Fatalf("pre-epoch mtime: %d %d", int64(c.Mtime), c.Mtimensec)
	}
	// Explicit ctime (writeback cache).
	in = fuse.SetAttrIn{}
	in.NodeId, in.Valid, in.Ctime = ino, fuse.FATTR_CTIME, 42
	if c, _ := e.setattr(in); c.Ctime != 42 {
		t.Fatalf("explicit ctime: %+v", c)
	}
	e.check()
}

func TestTimesOnChanges(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	ino, fh := e.mustCreate(1, "f")
	a0 := e.attr(ino)
	e.mustWrite(ino, fh, 0, []byte("data"))
	a1 := e.attr(ino)
	if mtimeOf(a1) <= mtimeOf(a0) || ctimeOf(a1) <= ctimeOf(a0) {
		t.Fatalf("write did not move mtime/ctime: %+v -> %+v", a0, a1)
	}
	e.release(ino, fh)
	if a := e.attr(ino); mtimeOf(a) != mtimeOf(a1) {
		t.Fatalf("flush changed mtime: %d -> %d", mtimeOf(a1), mtimeOf(a))
	}
	// Link, xattr and rename change ctime only.
	for i, op := range []func(){
		func() { e.link(ino, 1, "g") },
		func() { e.setxattr(ino, "user.a", []byte("v"), 0) },
		func() { e.rename(1, "g", 1, "h", 0) },
		func() { e.unlink(1, "h") },
	} {
		b := e.attr(ino)
		op()
		a := e.attr(ino)
		if ctimeOf(a) <= ctimeOf(b) || mtimeOf(a) != mtimeOf(b) {
			t.Fatalf("op %d: ctime %d->%d mtime %d->%d", i, ctimeOf(b), ctimeOf(a), mtimeOf(b), mtimeOf(a))
		}
	}
	// Truncate moves mtime even to the same size.
	b := e.attr(ino)
	e.truncate(ino, b.Size)
	if a := e.attr(ino); mtimeOf(a) <= mtimeOf(b) {
		t.Fatal("truncate did not move mtime")
	}
	e.check()
}

func TestStatfs(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	e.mem.SetCapacity(1 << 30)
	for i := 0; i < 5; i++ {
		ino, fh := e.mustCreate(1, string(rune('a'+i)))
		e.release(ino, fh)
	}
	// Wait for the background inode count (New's snapshot holds the root).
	deadline := time.Now().Add(5 * time.Second)
	var s fuse.StatfsOut
	for {
		s = e.statfs()
		if s.Files-s.Ffree == 6 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if s.Files-s.Ffree != 6 || s.Blocks != (1<<30)/4096 || s.Bfree > s.Blocks || s.NameLen != 255 || s.Frsize != 4096 || s.Bsize != uint32(e.fs.BlockSize()) {
		t.Fatalf("statfs %+v", s)
	}
	// Bavail, what df shows as available, leaves out the engine's space
	// reserve (writes that add data are refused within it), as ext4's
	// leaves out root's reserved blocks; Bfree counts it.
	reserve := uint64(e.db.Options().SpaceReserve)
	if d := s.Bfree - s.Bavail; reserve == 0 || d < reserve/4096 || d > reserve/4096+1 {
		t.Fatalf("Bfree %d - Bavail %d = %d blocks, want the reserve's %d bytes", s.Bfree, s.Bavail, d, reserve)
	}
	// Full: nothing is available until writes are accepted again.
	total, free, _ := e.mem.Usage("/")
	e.mem.SetCapacity(int64(total-free) + int64(reserve)/2)
	b := lsm.NewBatch()
	b.Set([]byte("x"), make([]byte, 1<<20))
	for i := 0; i < 100; i++ {
		if err := e.db.Apply(b, true); err != nil {
			break
		}
	}
	if s = e.statfs(); s.Bavail != 0 || s.Bfree == 0 {
		t.Fatalf("full: Bfree %d Bavail %d, want Bavail 0 with the reserve free", s.Bfree, s.Bavail)
	}
}

func TestFormatAndNew(t *testing.T) {
	mem := vfs.NewMem()
	if err := lsm.Format(testDir, engineOptions(mem)); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open(testDir, engineOptions(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := fs.New(db, fs.Options{}); !errors.Is(err, fs.ErrNotFormatted) {
		t.Fatalf("New on an empty engine: %v", err)
	}
	if err := fs.Format(db, fs.FormatOptions{BlockSize: 3000}); err == nil || !strings.Contains(err.Error(), "block size") {
		t.Fatalf("bad block size: %v", err)
	}
	if err := fs.Format(db, fs.FormatOptions{RootUID: 5, RootGID: 6, RootMode: 0o700}); err != nil {
		t.Fatal(err)
	}
	if err := fs.Format(db, fs.FormatOptions{}); !errors.Is(err, fs.ErrFormatted) {
		t.Fatalf("second Format: %v", err)
	}
	f, err := fs.New(db, fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.BlockSize() != fs.DefaultBlockSize {
		t.Fatalf("block size %d", f.BlockSize())
	}
	in := fuse.GetAttrIn{InHeader: fuse.InHeader{NodeId: 1}}
	var out fuse.AttrOut
	if st := f.GetAttr(nil, &in, &out); st != fuse.OK || out.Mode != syscall.S_IFDIR|0o700 || out.Uid != 5 || out.Gid != 6 || out.Nlink != 2 {
		t.Fatalf("root: %v %+v", st, out)
	}
	if out.Timeout() != fs.DefaultAttrTimeout {
		t.Fatalf("attr timeout %v", out.Timeout())
	}
	mo := f.MountOptions()
	if mo.MaxWrite != 1<<20 || mo.Options[0] != "default_permissions" || mo.ExtraCapabilities&fuse.CAP_WRITEBACK_CACHE != 0 || !mo.DisableSplice {
		t.Fatalf("mount options %+v", mo)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

func TestNewRefusesOtherEngineUUID(t *testing.T) {
	mem := vfs.NewMem()
	if err := lsm.Format(testDir, engineOptions(mem)); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open(testDir, engineOptions(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := fs.Format(db, fs.FormatOptions{UUID: [16]byte{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.New(db, fs.Options{}); err == nil || !strings.Contains(err.Error(), "UUID") {
		t.Fatalf("New with a foreign UUID: %v", err)
	}
}

func TestReadOnly(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	ino, fh := e.mustCreate(1, "f")
	e.release(ino, fh)
	if err := e.fs.Close(); err != nil {
		t.Fatal(err)
	}
	e.opts.ReadOnly = true
	e.open()
	_, err := e.mkdir(1, "d", 0o755)
	wantErr(t, "mkdir", err, syscall.EROFS)
	wantErr(t, "unlink", e.unlink(1, "f"), syscall.EROFS)
	wantErr(t, "setxattr", e.setxattr(ino, "user.x", nil, 0), syscall.EROFS)
	wantErr(t, "truncate", e.truncate(ino, 0), syscall.EROFS)
	fh = e.mustOpen(ino, syscall.O_RDONLY)
	e.release(ino, fh)
	if !slicesEqual(e.fs.MountOptions().Options, []string{"default_permissions", "ro"}) {
		t.Fatalf("read-only mount options %v", e.fs.MountOptions().Options)
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

func TestOptions(t *testing.T) {
	var o fs.Options
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.EntryTimeout != time.Hour || o.WriteBufferSize != 4<<20 {
		t.Fatalf("defaults %+v", o)
	}
	if s := o.String(); !strings.Contains(s, "write_buffer_size=4194304") {
		t.Fatalf("String: %s", s)
	}
	o.WriteBufferSize = 1
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "write buffer size") {
		t.Fatalf("Validate: %v", err)
	}
}
