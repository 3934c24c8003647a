package fs

import (
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/lsm"
)

func newLimitsFS(t *testing.T) *FS {
	f, _ := newTestFS(t, Options{FlushAge: -1})
	t.Cleanup(func() { f.Close() })
	return f
}

func limitsMkdir(t *testing.T, f *FS, parent uint64, name string) (uint64, fuse.Status) {
	var out fuse.EntryOut
	st := f.Mkdir(nil, &fuse.MkdirIn{InHeader: fuse.InHeader{NodeId: parent}, Mode: 0o755}, name, &out)
	return out.NodeId, st
}

func setNlink(t *testing.T, f *FS, ino uint64, nlink uint32) {
	n, err := f.getInode(ino)
	if err != nil {
		t.Fatal(err)
	}
	n.Nlink = nlink
	b := lsm.NewBatch()
	putInode(b, ino, &n)
	if err := f.db.Apply(b, false); err != nil {
		t.Fatal(err)
	}
}

// A directory at maxNlink takes no new subdirectory: mkdir says EMLINK,
// and so must a rename that moves a directory into it (as ext4_rename
// does), instead of raising its link count past maxNlink.
func TestLimitsRenameDirIntoFullParent(t *testing.T) {
	f := newLimitsFS(t)
	a, st := limitsMkdir(t, f, 1, "a")
	if st != fuse.OK {
		t.Fatal(st)
	}
	b, _ := limitsMkdir(t, f, 1, "b")
	if _, st := limitsMkdir(t, f, b, "sub"); st != fuse.OK {
		t.Fatal(st)
	}
	setNlink(t, f, a, maxNlink)
	if _, st := limitsMkdir(t, f, a, "x"); st != fuse.Status(syscall.EMLINK) {
		t.Fatalf("mkdir in a full directory: %v, want EMLINK", st)
	}
	st = f.Rename(nil, &fuse.RenameIn{InHeader: fuse.InHeader{NodeId: b}, Newdir: a}, "sub", "sub")
	n, _ := f.getInode(a)
	if st != fuse.Status(syscall.EMLINK) {
		t.Fatalf("rename of a directory into a full directory: %v, want EMLINK (nlink now %d, max %d)", st, n.Nlink, maxNlink)
	}
}

// The inode counter must not wrap: past the end of the 64-bit space it
// would hand out 0 (a negative entry to the kernel) and then 1, the root,
// whose record a create would overwrite; the reservation written on the
// way wraps too, so a remount would reuse every number.
func TestLimitsInodeCounterEnd(t *testing.T) {
	f := newLimitsFS(t)
	f.alloc.next, f.alloc.bound = ^uint64(0)-1, ^uint64(0)-1
	var got []uint64
	for i := 0; i < 4; i++ {
		ino, err := f.allocIno()
		if err != nil {
			break // refusing (ENOSPC) is the right answer
		}
		got = append(got, ino)
	}
	for _, ino := range got {
		if ino == 0 || ino == rootIno {
			t.Fatalf("inode numbers handed out at the counter's end: %v", got)
		}
	}
}

// link at maxNlink: EMLINK (checked correct; kept as a guard).
func TestLimitsLinkAtMax(t *testing.T) {
	f := newLimitsFS(t)
	var out fuse.CreateOut
	if st := f.Create(nil, &fuse.CreateIn{InHeader: fuse.InHeader{NodeId: 1}, Mode: 0o644}, "f", &out); st != fuse.OK {
		t.Fatal(st)
	}
	setNlink(t, f, out.NodeId, maxNlink)
	var eo fuse.EntryOut
	if st := f.Link(nil, &fuse.LinkIn{InHeader: fuse.InHeader{NodeId: 1}, Oldnodeid: out.NodeId}, "g", &eo); st != fuse.Status(syscall.EMLINK) {
		t.Fatalf("link at maxNlink: %v", st)
	}
}
