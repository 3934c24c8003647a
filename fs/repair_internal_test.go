package fs

import (
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/lsm"
)

// TestRepair damages a small filesystem in every way Repair fixes (and two
// it does not), runs Repair, and expects Check to report only what Repair
// must leave; a second Repair changes nothing.
func TestRepair(t *testing.T) {
	f, db := newTestFS(t, Options{})
	var out fuse.EntryOut
	if st := f.Mkdir(nil, &fuse.MkdirIn{InHeader: fuse.InHeader{NodeId: 1}, Mode: 0o755}, "d", &out); st != fuse.OK {
		t.Fatal(st)
	}
	d := out.NodeId
	var cout fuse.CreateOut
	if st := f.Create(nil, &fuse.CreateIn{InHeader: fuse.InHeader{NodeId: d}, Mode: 0o644}, "f", &cout); st != fuse.OK {
		t.Fatal(st)
	}
	file := cout.NodeId
	if _, st := f.Write(nil, &fuse.WriteIn{InHeader: fuse.InHeader{NodeId: file}, Fh: cout.Fh}, make([]byte, 5000)); st != fuse.OK {
		t.Fatal(st)
	}
	f.Release(nil, &fuse.ReleaseIn{Fh: cout.Fh})
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if r, err := Check(db); err != nil || !r.OK() {
		t.Fatalf("clean filesystem: %v\n%s", err, r)
	}

	now := int64(1_700_000_000e9)
	reg := func(nlink uint32, size uint64) []byte {
		return encodeInode(&inode{Mode: syscall.S_IFREG | 0o644, Nlink: nlink, Size: size, Mtime: now})
	}
	dir := func(parent uint64) []byte {
		return encodeInode(&inode{Mode: syscall.S_IFDIR | 0o755, Nlink: 2, Parent: parent, Mtime: now})
	}
	b := lsm.NewBatch()
	b.Set(dentryKey(1, "dangling"), encodeDentry(dentry{Ino: 777, Type: syscall.S_IFREG >> 12}))
	b.Set(dentryKey(d, "wrongtype"), encodeDentry(dentry{Ino: file, Type: syscall.S_IFDIR >> 12}))
	b.Set(dentryKey(900, "in-missing-dir"), encodeDentry(dentry{Ino: file, Type: syscall.S_IFREG >> 12}))
	b.Set(blockKey(file, 9), []byte("beyond size"))
	b.Set(blockKey(4242, 0), []byte("block of a missing inode"))
	b.Set(orphanKey(5151), nil)
	b.Set(orphanKey(file), nil) // file has names
	b.Set(xattrKey(6161, "user.x"), nil)
	b.Set(symlinkKey(6262), []byte("target"))
	b.Set([]byte("Zzz"), nil)               // left: no family
	b.Set(inodeKey(8080), []byte{1, 2, 3})  // left: undecodable
	b.Set(inodeKey(1<<40), reg(0, 0))       // unlinked, no orphan key: reclaimed
	b.Set(inodeKey(3000), reg(1, 3))        // no name: lost+found
	b.Set(blockKey(3000, 0), []byte("abc")) //
	b.Set(inodeKey(3001), reg(0, 0))        // an orphan: reclaimed
	b.Set(orphanKey(3001), nil)             //
	b.Set(inodeKey(3002), dir(3003))        // a parent loop: one name cut, lost+found
	b.Set(inodeKey(3003), dir(3002))        //
	b.Set(dentryKey(3002, "b"), encodeDentry(dentry{Ino: 3003, Type: syscall.S_IFDIR >> 12}))
	b.Set(dentryKey(3003, "a"), encodeDentry(dentry{Ino: 3002, Type: syscall.S_IFDIR >> 12}))
	b.Set(dentryKey(1, "second-name-of-d"), encodeDentry(dentry{Ino: d, Type: syscall.S_IFDIR >> 12}))
	n, _ := f.getInode(d)
	n.Nlink = 7
	putInode(b, d, &n)
	fi, _ := f.getInode(file)
	fi.Stored = 1
	fi.Nxattr = 3
	putInode(b, file, &fi)
	if err := db.Apply(b, true); err != nil {
		t.Fatal(err)
	}
	before, err := Check(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before:\n%s", before)

	changes, err := Repair(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("repair:\n  %s", strings.Join(changes, "\n  "))
	after, err := Check(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after:\n%s", after)
	left := strings.Join(after.Problems, "\n")
	if len(after.Problems) != 2 || !strings.Contains(left, `key "Zzz" belongs to no family`) || !strings.Contains(left, "inode 8080") {
		t.Fatalf("after repair, want only the two unrepairable problems:\n%s", after)
	}
	for _, want := range []string{
		`removed dentry 1/"dangling"`,
		`dentry 2/"wrongtype": type set`,
		`removed dentry 900/"in-missing-dir"`,
		"removed block 9 of inode 3",
		"removed block 0 of missing inode 4242",
		"removed orphan key of missing inode 5151",
		"removed orphan key of inode 3: it has a name",
		`removed xattr "user.x" of missing inode 6161`,
		"removed symlink target of missing inode 6262",
		"reclaimed unlinked inode without an orphan key 1099511627776",
		"reclaimed orphan inode 3001",
		"created /lost+found",
		"linked unreachable inode 3000 into /lost+found/#3000",
		`removed dentry 3003/"a": directory 3002 is in a parent loop`,
		"linked unreachable inode 3002",
		`removed dentry 1/"second-name-of-d": directory 2 has another name`,
		"inode 2: nlink 7 -> 2",
		"inode 3: nlink 1 -> 2",
		"inode 3: stored bytes 1 -> 5000",
		"inode 3: xattr count 3 -> 0",
	} {
		if !strings.Contains(strings.Join(changes, "\n"), want) {
			t.Errorf("repair did not say %q", want)
		}
	}
	again, err := Repair(db)
	if err != nil || len(again) != 0 {
		t.Fatalf("second repair: %v: %v", err, again)
	}
	// The repaired tree serves: lost+found lists the lost inodes.
	f2, err := New(db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	var lf fuse.EntryOut
	if st := f2.Lookup(nil, &fuse.InHeader{NodeId: 1}, "lost+found", &lf); st != fuse.OK {
		t.Fatalf("lookup lost+found: %v", st)
	}
	var e fuse.EntryOut
	if st := f2.Lookup(nil, &fuse.InHeader{NodeId: lf.NodeId}, "#3000", &e); st != fuse.OK || e.Attr.Size != 3 || e.Attr.Nlink != 1 {
		t.Fatalf("lookup lost+found/#3000: %v %+v", st, e.Attr)
	}
	// The loop's other directory stays under the one that went to
	// lost+found, by its name.
	var l, b2 fuse.EntryOut
	if st := f2.Lookup(nil, &fuse.InHeader{NodeId: lf.NodeId}, "#3002", &l); st != fuse.OK {
		t.Fatalf("lookup lost+found/#3002: %v", st)
	}
	if st := f2.Lookup(nil, &fuse.InHeader{NodeId: l.NodeId}, "b", &b2); st != fuse.OK || b2.NodeId != 3003 {
		t.Fatalf("lookup lost+found/#3002/b: %v, inode %d; want 3003", st, b2.NodeId)
	}
}
