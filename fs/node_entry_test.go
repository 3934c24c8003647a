package fs_test

import (
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
)

func TestCreateLookupGetattr(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	e.caller = fuse.Caller{Owner: fuse.Owner{Uid: 1000, Gid: 100}}
	root := e.attr(1)
	ino, fh := e.mustCreate(1, "a")
	e.release(ino, fh)
	a := e.attr(ino)
	if a.Mode != syscall.S_IFREG|0o644 || a.Uid != 1000 || a.Gid != 100 || a.Nlink != 1 || a.Size != 0 {
		t.Fatalf("attr %+v", a)
	}
	if got := e.mustLookup(1, "a"); got != ino {
		t.Fatalf("lookup: %d, want %d", got, ino)
	}
	r := e.attr(1)
	if r.Size != root.Size+1 || r.Mtime*1e9+uint64(r.Mtimensec) <= root.Mtime*1e9+uint64(root.Mtimensec) {
		t.Fatalf("parent not updated: before %+v after %+v", root, r)
	}
	_, _, err := e.create(1, "a", 0o644, syscall.O_RDWR)
	wantErr(t, "create existing", err, syscall.EEXIST)
	_, err = e.lookup(1, "missing")
	wantErr(t, "lookup missing", err, syscall.ENOENT)
	_, err = e.lookup(1, strings.Repeat("x", 256))
	wantErr(t, "lookup long", err, syscall.ENAMETOOLONG)
	_, _, err = e.create(1, strings.Repeat("x", 256), 0o644, 0)
	wantErr(t, "create long", err, syscall.ENAMETOOLONG)
	if _, _, err := e.create(1, strings.Repeat("x", 255), 0o644, 0); err != 0 {
		t.Fatalf("create 255-byte name: %v", err)
	}
	_, _, err = e.create(ino, "x", 0o644, 0)
	wantErr(t, "create in file", err, syscall.ENOTDIR)
	e.check()
}

func TestNegativeLookup(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	h := fuse.InHeader{NodeId: 1}
	var out fuse.EntryOut
	if st := e.raw.Lookup(nil, &h, "nope", &out); st != fuse.OK || out.NodeId != 0 || out.EntryTimeout() != fs.DefaultNegativeTimeout {
		t.Fatalf("negative entry: %v %+v", st, out)
	}
	e2 := newEnv(t, fs.Options{NegativeTimeout: -1}, fs.FormatOptions{})
	if st := e2.raw.Lookup(nil, &h, "nope", &out); st != fuse.ENOENT {
		t.Fatalf("without negative caching: %v", st)
	}
}

func TestMkdirRmdir(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	d := e.mustMkdir(1, "d")
	if a := e.attr(d); a.Mode != syscall.S_IFDIR|0o755 || a.Nlink != 2 {
		t.Fatalf("dir attr %+v", a)
	}
	if a := e.attr(1); a.Nlink != 3 {
		t.Fatalf("root nlink %d, want 3", a.Nlink)
	}
	_, err := e.mkdir(1, "d", 0o755)
	wantErr(t, "mkdir existing", err, syscall.EEXIST)
	sub := e.mustMkdir(d, "sub")
	ino, fh := e.mustCreate(d, "f")
	e.release(ino, fh)
	wantErr(t, "rmdir non-empty", e.rmdir(1, "d"), syscall.ENOTEMPTY)
	wantErr(t, "rmdir file", e.rmdir(d, "f"), syscall.ENOTDIR)
	wantErr(t, "unlink dir", e.unlink(d, "sub"), syscall.EISDIR)
	wantErr(t, "rmdir missing", e.rmdir(d, "nope"), syscall.ENOENT)
	if a := e.attr(d); a.Nlink != 3 || a.Size != 2 {
		t.Fatalf("d: nlink %d size %d, want 3 and 2", a.Nlink, a.Size)
	}
	if err := e.rmdir(d, "sub"); err != 0 {
		t.Fatal(err)
	}
	if err := e.forgottenGetattr(sub); err != syscall.ENOENT {
		t.Fatalf("removed dir getattr: %v", err)
	}
	if err := e.unlink(d, "f"); err != 0 {
		t.Fatal(err)
	}
	if err := e.rmdir(1, "d"); err != 0 {
		t.Fatal(err)
	}
	if a := e.attr(1); a.Nlink != 2 || a.Size != 0 {
		t.Fatalf("root: nlink %d size %d", a.Nlink, a.Size)
	}
	e.check()
}

func TestMknodTypes(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	for _, c := range []struct {
		name string
		mode uint32
		rdev uint32
	}{
		{"fifo", syscall.S_IFIFO | 0o600, 0},
		{"sock", syscall.S_IFSOCK | 0o600, 0},
		{"chr", syscall.S_IFCHR | 0o600, 0x0103},
		{"blk", syscall.S_IFBLK | 0o600, 0x0801},
		{"reg", syscall.S_IFREG | 0o600, 0},
	} {
		ino, err := e.mknod(1, c.name, c.mode, c.rdev)
		if err != 0 {
			t.Fatalf("mknod %s: %v", c.name, err)
		}
		if a := e.attr(ino); a.Mode != c.mode || a.Rdev != c.rdev {
			t.Fatalf("%s: mode %#o rdev %#x", c.name, a.Mode, a.Rdev)
		}
	}
	_, err := e.mknod(1, "dir", syscall.S_IFDIR|0o700, 0)
	wantErr(t, "mknod dir", err, syscall.EINVAL)
	ents := e.readdir(1)
	types := map[string]uint32{}
	for _, d := range ents {
		types[d.Name] = d.Mode
	}
	if types["fifo"] != syscall.S_IFIFO || types["chr"] != syscall.S_IFCHR || types["sock"] != syscall.S_IFSOCK {
		t.Fatalf("readdir types %v", types)
	}
	e.check()
}

func TestSetgidDirectory(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	d := e.mustMkdir(1, "sg")
	var in fuse.SetAttrIn
	in.NodeId, in.Valid, in.Mode, in.Gid = d, fuse.FATTR_MODE|fuse.FATTR_GID, 0o2775, 50
	if _, err := e.setattr(in); err != 0 {
		t.Fatal(err)
	}
	e.caller = fuse.Caller{Owner: fuse.Owner{Uid: 1000, Gid: 100}}
	f, fh := e.mustCreate(d, "f")
	e.release(f, fh)
	sub := e.mustMkdir(d, "sub")
	if a := e.attr(f); a.Gid != 50 || a.Uid != 1000 {
		t.Fatalf("file in setgid dir: uid %d gid %d", a.Uid, a.Gid)
	}
	if a := e.attr(sub); a.Gid != 50 || a.Mode&syscall.S_ISGID == 0 {
		t.Fatalf("dir in setgid dir: gid %d mode %#o", a.Gid, a.Mode)
	}
	e.check()
}

func TestSymlink(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	ino, err := e.symlink(1, "../target/x", "l")
	if err != 0 {
		t.Fatal(err)
	}
	if a := e.attr(ino); a.Mode != syscall.S_IFLNK|0o777 || a.Size != uint64(len("../target/x")) {
		t.Fatalf("symlink attr %+v", a)
	}
	if s, err := e.readlink(ino); err != 0 || s != "../target/x" {
		t.Fatalf("readlink %q %v", s, err)
	}
	_, err = e.readlink(1)
	wantErr(t, "readlink dir", err, syscall.EINVAL)
	_, err = e.symlink(1, strings.Repeat("a", 4096), "long")
	wantErr(t, "symlink long target", err, syscall.ENAMETOOLONG)
	_, err = e.symlink(1, "x", "l")
	wantErr(t, "symlink existing", err, syscall.EEXIST)
	if err := e.unlink(1, "l"); err != 0 {
		t.Fatal(err)
	}
	e.check()
}

func TestHardLinks(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	d := e.mustMkdir(1, "d")
	ino, fh := e.mustCreate(1, "a")
	e.mustWrite(ino, fh, 0, []byte("hello"))
	e.release(ino, fh)
	out, err := e.link(ino, d, "b")
	if err != 0 || out.NodeId != ino || out.Nlink != 2 {
		t.Fatalf("link: %v %+v", err, out)
	}
	if _, err := e.link(ino, 1, "c"); err != 0 {
		t.Fatal(err)
	}
	if a := e.attr(ino); a.Nlink != 3 {
		t.Fatalf("nlink %d, want 3", a.Nlink)
	}
	_, err = e.link(ino, 1, "a")
	wantErr(t, "link over existing", err, syscall.EEXIST)
	_, err = e.link(d, 1, "dlink")
	wantErr(t, "link dir", err, syscall.EPERM)
	e.check()
	if err := e.unlink(1, "a"); err != 0 {
		t.Fatal(err)
	}
	if a := e.attr(ino); a.Nlink != 2 {
		t.Fatalf("nlink %d, want 2", a.Nlink)
	}
	// Renaming one link over another of the same inode changes nothing.
	if err := e.rename(1, "c", d, "b", 0); err != 0 {
		t.Fatal(err)
	}
	if a := e.attr(ino); a.Nlink != 2 {
		t.Fatalf("nlink after same-inode rename %d, want 2", a.Nlink)
	}
	fh = e.mustOpen(ino, syscall.O_RDONLY)
	if got := e.mustRead(ino, fh, 0, 100); string(got) != "hello" {
		t.Fatalf("read through link: %q", got)
	}
	e.release(ino, fh)
	e.check()
	e.unlink(1, "c")
	e.unlink(d, "b")
	if err := e.forgottenGetattr(ino); err != syscall.ENOENT {
		t.Fatalf("inode survives its last unlink: %v", err)
	}
	e.check()
}

func TestRename(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	a := e.mustMkdir(1, "a")
	b := e.mustMkdir(1, "b")
	ab := e.mustMkdir(a, "ab")
	f, fh := e.mustCreate(a, "f")
	e.release(f, fh)

	// Across directories.
	if err := e.rename(a, "f", b, "g", 0); err != 0 {
		t.Fatal(err)
	}
	if _, err := e.lookup(a, "f"); err != syscall.ENOENT {
		t.Fatalf("old name: %v", err)
	}
	if e.mustLookup(b, "g") != f {
		t.Fatal("new name")
	}
	// Directory into another: nlinks of both parents change.
	if err := e.rename(a, "ab", b, "ab", 0); err != 0 {
		t.Fatal(err)
	}
	if e.attr(a).Nlink != 2 || e.attr(b).Nlink != 3 {
		t.Fatalf("nlinks a=%d b=%d", e.attr(a).Nlink, e.attr(b).Nlink)
	}
	// The moved directory's ".." follows it.
	if out, _ := e.lookup(ab, ".."); out.NodeId != b {
		t.Fatalf(".. of moved dir = %d, want %d", out.NodeId, b)
	}
	e.check()

	// Loops.
	wantErr(t, "dir into itself", e.rename(1, "b", b, "x", 0), syscall.EINVAL)
	wantErr(t, "dir into its child", e.rename(1, "b", ab, "x", 0), syscall.EINVAL)

	// Over existing targets.
	x, fh := e.mustCreate(1, "x")
	e.release(x, fh)
	wantErr(t, "file over dir", e.rename(1, "x", 1, "a", 0), syscall.EISDIR)
	wantErr(t, "dir over file", e.rename(1, "a", 1, "x", 0), syscall.ENOTDIR)
	wantErr(t, "dir over non-empty dir", e.rename(1, "a", 1, "b", 0), syscall.ENOTEMPTY)
	wantErr(t, "noreplace", e.rename(b, "g", 1, "x", 1), syscall.EEXIST)
	wantErr(t, "missing source", e.rename(1, "nope", 1, "y", 0), syscall.ENOENT)
	wantErr(t, "exchange with missing", e.rename(1, "x", 1, "nope", 2), syscall.ENOENT)
	wantErr(t, "both flags", e.rename(1, "x", 1, "y", 3), syscall.EINVAL)
	wantErr(t, "long name", e.rename(1, "x", 1, strings.Repeat("n", 256), 0), syscall.ENAMETOOLONG)

	if err := e.rename(b, "g", 1, "x", 0); err != 0 {
		t.Fatal(err)
	}
	if err := e.forgottenGetattr(x); err != syscall.ENOENT {
		t.Fatalf("replaced file still exists: %v", err)
	}
	// Empty directory over empty directory.
	e.mustMkdir(1, "e1")
	e2 := e.mustMkdir(1, "e2")
	if err := e.rename(1, "e1", 1, "e2", 0); err != 0 {
		t.Fatal(err)
	}
	if err := e.forgottenGetattr(e2); err != syscall.ENOENT {
		t.Fatalf("replaced dir still exists: %v", err)
	}
	e.check()

	// Exchange a file and a directory across directories.
	if err := e.rename(1, "x", b, "ab", 2); err != 0 {
		t.Fatal(err)
	}
	if e.mustLookup(1, "x") != ab || e.mustLookup(b, "ab") != f {
		t.Fatal("exchange did not swap")
	}
	if out, _ := e.lookup(ab, ".."); out.NodeId != 1 {
		t.Fatalf(".. of exchanged dir = %d", out.NodeId)
	}
	if e.attr(1).Nlink != 6 || e.attr(b).Nlink != 2 {
		t.Fatalf("nlinks after exchange: root %d b %d", e.attr(1).Nlink, e.attr(b).Nlink)
	}
	e.check()
	// Exchange that would put a directory inside itself.
	wantErr(t, "exchange loop", e.rename(1, "b", b, "ab", 2), syscall.EINVAL)
	e.check()
}

func TestRenameOverOpenFile(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	src, fh := e.mustCreate(1, "src")
	e.release(src, fh)
	dst, dfh := e.mustCreate(1, "dst")
	e.mustWrite(dst, dfh, 0, []byte("dst data"))
	if err := e.rename(1, "src", 1, "dst", 0); err != 0 {
		t.Fatal(err)
	}
	if a := e.attr(dst); a.Nlink != 0 || a.Size != 8 {
		t.Fatalf("overwritten open file: %+v", a)
	}
	if got := e.mustRead(dst, dfh, 0, 100); string(got) != "dst data" {
		t.Fatalf("read overwritten open file: %q", got)
	}
	e.check()
	e.release(dst, dfh)
	if err := e.forgottenGetattr(dst); err != syscall.ENOENT {
		t.Fatalf("orphan survives release: %v", err)
	}
	e.check()
}

func TestNamesSorted(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	for _, n := range []string{"c", "a", "b"} {
		ino, fh := e.mustCreate(1, n)
		e.release(ino, fh)
	}
	if got := e.names(1); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("names %v", got)
	}
}
