package fs

import (
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/lsm"
)

// TestCheckFindsEveryProblem damages a small filesystem in many ways at once
// and expects Check to report each one.
func TestCheckFindsEveryProblem(t *testing.T) {
	f, db := newTestFS(t, Options{})
	defer f.Close()
	var out fuse.EntryOut
	if st := f.Mkdir(nil, &fuse.MkdirIn{InHeader: fuse.InHeader{NodeId: 1}, Mode: 0o755}, "d", &out); st != fuse.OK {
		t.Fatal(st)
	}
	d := out.NodeId
	var cout fuse.CreateOut
	if st := f.Create(nil, &fuse.CreateIn{InHeader: fuse.InHeader{NodeId: 1}, Mode: 0o644}, "f", &cout); st != fuse.OK {
		t.Fatal(st)
	}
	file := cout.NodeId
	if _, st := f.Write(nil, &fuse.WriteIn{InHeader: fuse.InHeader{NodeId: file}, Fh: cout.Fh}, make([]byte, 5000)); st != fuse.OK {
		t.Fatal(st)
	}
	f.Release(nil, &fuse.ReleaseIn{Fh: cout.Fh})
	if r, err := Check(db); err != nil || !r.OK() {
		t.Fatalf("clean filesystem: %v\n%s", err, r)
	}

	b := lsm.NewBatch()
	b.Set(dentryKey(1, "dangling"), encodeDentry(dentry{Ino: 777, Type: syscall.S_IFREG >> 12}))
	b.Set(dentryKey(d, "wrongtype"), encodeDentry(dentry{Ino: file, Type: syscall.S_IFDIR >> 12}))
	b.Set(blockKey(file, 9), []byte("beyond size"))
	b.Set(blockKey(4242, 0), []byte("orphan block"))
	b.Set(orphanKey(5151), nil)
	b.Set(xattrKey(6161, "user.x"), nil)
	b.Set([]byte("Zzz"), nil)
	b.Set(inodeKey(8080), []byte{1, 2, 3})
	b.Set(inodeKey(1<<40), encodeInode(&inode{Mode: syscall.S_IFREG, Nlink: 0}))
	n, _ := f.getInode(d)
	n.Nlink = 7
	putInode(b, d, &n)
	if err := db.Apply(b, false); err != nil {
		t.Fatal(err)
	}
	r, err := Check(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`dentry 1/"dangling" names missing inode 777`,
		`records type 4`,
		"beyond size",
		"block 0 of missing inode 4242",
		"orphan key of missing inode 5151",
		`xattr "user.x" of missing inode 6161`,
		`key "Zzz" belongs to no family`,
		"inode 8080: fs: corrupt inode value",
		"outside the allocated range",
		"has no links and no orphan key",
		"directory 2: nlink 7, want 2 + 1 subdirectories",
		"directory 1: size 2, want its 3 entries",
		"nlink 1, but 2 dentries name it",
		"stored bytes 5000, blocks hold 5011",
	} {
		if !strings.Contains(r.String(), want) {
			t.Errorf("Check did not report %q:\n%s", want, r)
		}
	}
	if len(r.Problems) < 12 {
		t.Errorf("%d problems:\n%s", len(r.Problems), r)
	}
}

// TestCheckFindsMore: damage Check missed (format review), each alone on a
// fresh filesystem.
func TestCheckFindsMore(t *testing.T) {
	for name, c := range map[string]struct {
		damage func(t *testing.T, f *FS, db *lsm.DB, b *lsm.Batch)
		want   string
	}{
		"named-removed-directory": { // reclaimed at the next mount, its dentry left dangling
			func(t *testing.T, f *FS, db *lsm.DB, b *lsm.Batch) {
				var out fuse.EntryOut
				if st := f.Mkdir(nil, &fuse.MkdirIn{InHeader: fuse.InHeader{NodeId: 1}, Mode: 0o755}, "d", &out); st != fuse.OK {
					t.Fatal(st)
				}
				n, _ := f.getInode(out.NodeId)
				n.Nlink = 0
				putInode(b, out.NodeId, &n)
				b.Set(orphanKey(out.NodeId), nil)
			}, "removed directory 2 is named by 1 dentries"},
		"nul-in-a-name": { // cannot be looked up or removed
			func(t *testing.T, f *FS, db *lsm.DB, b *lsm.Batch) {
				var out fuse.CreateOut
				if st := f.Create(nil, &fuse.CreateIn{InHeader: fuse.InHeader{NodeId: 1}, Mode: 0o644}, "a", &out); st != fuse.OK {
					t.Fatal(st)
				}
				f.Release(nil, &fuse.ReleaseIn{Fh: out.Fh})
				b.Delete(dentryKey(1, "a"))
				b.Set(dentryKey(1, "a\x00b"), encodeDentry(dentry{Ino: out.NodeId, Type: syscall.S_IFREG >> 12}))
			}, `"a\x00b"`},
		"superblock-of-another-filesystem": { // a mount refuses it
			func(t *testing.T, f *FS, db *lsm.DB, b *lsm.Batch) {
				v, _ := db.Get(superKey(superNameSuper))
				sb, _ := decodeSuperblock(v)
				sb.UUID[0] ^= 0xff
				b.Set(superKey(superNameSuper), encodeSuperblock(&sb))
			}, "but the engine's is"},
		"reserved-inode-flags": {
			func(t *testing.T, f *FS, db *lsm.DB, b *lsm.Batch) {
				n, _ := f.getInode(rootIno)
				n.Flags = 0xdeadbeef
				putInode(b, rootIno, &n)
			}, "reserved flags 0xdeadbeef"},
	} {
		t.Run(name, func(t *testing.T) {
			db := newTestDB(t)
			if err := Format(db, FormatOptions{BlockSize: 4096, UUID: [16]byte{9}}); err != nil {
				t.Fatal(err)
			}
			f, err := New(db, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b := lsm.NewBatch()
			c.damage(t, f, db, b)
			if err := db.Apply(b, true); err != nil {
				t.Fatal(err)
			}
			r, err := Check(db)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(r.String(), c.want) {
				t.Errorf("Check did not report %q:\n%s", c.want, r)
			}
		})
	}
}
