package fs_test

// Attribute and permission semantics where lsmfs differed from ext4 on
// Linux 6.18 (found by review, each checked on ext4 and on a mount).

import (
	"bytes"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
)

// chown(f, -1, -1) reaches the filesystem as a SETATTR with no valid bits
// (the kernel strips ATTR_MODE/ATTR_KILL_S*ID under KILLPRIV_V2 and sets
// FATTR_KILL_SUIDGID only when ATTR_UID or ATTR_GID is set). On ext4 it
// clears setuid (and setgid with group execute), for root as well.
func TestChownNoIDsClearsSetuid(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	ino, fh := e.mustCreate(1, "f")
	e.release(ino, fh)
	var in fuse.SetAttrIn
	in.NodeId, in.Valid, in.Uid, in.Gid = ino, fuse.FATTR_UID|fuse.FATTR_GID, 1000, 1000
	if _, err := e.setattr(in); err != 0 {
		t.Fatal(err)
	}
	in = fuse.SetAttrIn{}
	in.NodeId, in.Valid, in.Mode = ino, fuse.FATTR_MODE, 0o6755
	if _, err := e.setattr(in); err != 0 {
		t.Fatal(err)
	}
	e.caller = fuse.Caller{Owner: fuse.Owner{Uid: 1000, Gid: 1000}} // the owner
	in = fuse.SetAttrIn{}
	in.NodeId = ino // valid == 0: chown(f, -1, -1)
	a, err := e.setattr(in)
	if err != 0 {
		t.Fatal(err)
	}
	if a.Mode&0o7777 != 0o755 {
		t.Fatalf("chown(-1,-1) by the owner on 06755: mode %#o, want 0755 (as ext4)", a.Mode&0o7777)
	}
}

// open(O_RDONLY|O_TRUNC) truncates on Linux when the caller may write (the
// VFS adds MAY_WRITE for O_TRUNC and, with CAP_ATOMIC_O_TRUNC, sends
// O_TRUNC in OPEN and sets its cached size to 0).
func TestOpenReadOnlyTrunc(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	ino, fh := e.mustCreate(1, "f")
	e.mustWrite(ino, fh, 0, []byte("hello world"))
	e.release(ino, fh)
	fh = e.mustOpen(ino, syscall.O_RDONLY|syscall.O_TRUNC)
	defer e.release(ino, fh)
	if a := e.attr(ino); a.Size != 0 {
		t.Fatalf("size after open(O_RDONLY|O_TRUNC): %d, want 0 (as ext4)", a.Size)
	}
}

// ext4 lists trusted.* names only to CAP_SYS_ADMIN; FUSE's listxattr does
// no filtering, so the filesystem must.
func TestListxattrHidesTrustedFromUsers(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	ino, fh := e.mustCreate(1, "f")
	e.release(ino, fh)
	wantErr(t, "set trusted", e.setxattr(ino, "trusted.overlay.opaque", []byte("y"), 0), 0)
	wantErr(t, "set user", e.setxattr(ino, "user.a", []byte("v"), 0), 0)
	e.caller = fuse.Caller{Owner: fuse.Owner{Uid: 1000, Gid: 1000}}
	list, _, err := e.listxattr(ino, 4096)
	wantErr(t, "listxattr", err, 0)
	if bytes.Contains(list, []byte("trusted.")) {
		t.Fatalf("uid 1000 lists %q, want no trusted.* names (as ext4)", strings.ReplaceAll(string(list), "\x00", " "))
	}
}

// The kernel caps a listxattr reply at XATTR_LIST_MAX (64 KiB) and fails
// with E2BIG beyond it; setxattr must refuse (ENOSPC, as ext4) an xattr
// that takes the name list past that, or the file's xattrs can never be
// listed again (cp -a, rsync -X, tar --xattrs fail on it).
func TestXattrNamesBounded(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	ino, fh := e.mustCreate(1, "f")
	e.release(ino, fh)
	refused := false
	for i := 0; i < 400; i++ {
		name := fmt.Sprintf("user.%04d%s", i, strings.Repeat("x", 240))
		if err := e.setxattr(ino, name, nil, 0); err != 0 {
			refused = true
			break
		}
	}
	// A size probe: the raw API answers ERANGE with the size (go-fuse
	// turns it into the size for a zero-sized request).
	_, n, err := e.listxattr(ino, 0)
	if err != 0 && err != syscall.ERANGE {
		t.Fatal(err)
	}
	if !refused || n > 64<<10 {
		t.Fatalf("400 names of 250 bytes all accepted: list is %d bytes, over XATTR_LIST_MAX (65536)", n)
	}
}

// Every fallocate mode moves mtime and ctime, as on ext4 and XFS (both call
// file_modified()); lsmfs moved only ctime for mode 0 inside the size and
// for KEEP_SIZE.
func TestFallocateMovesMtime(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	ino, fh := e.mustCreate(1, "f")
	e.mustWrite(ino, fh, 0, make([]byte, 8192))
	e.flush(ino, fh)
	for _, mode := range []uint32{0, 1 /* KEEP_SIZE */} {
		b := e.attr(ino)
		wantErr(t, "fallocate", e.fallocate(ino, fh, 0, 4096, mode), 0)
		if a := e.attr(ino); mtimeOf(a) == mtimeOf(b) {
			t.Errorf("fallocate mode %d: mtime unchanged (ext4 moves it)", mode)
		}
	}
	e.release(ino, fh)
}

// Times are stored as int64 nanoseconds (years 1677..2262): a time outside
// is clamped to that range, as ext4 clamps to its own (1901..2446). joinNs
// wrapped: utimensat to 2300-01-01 (touch -d, tar of a file with a
// far-future mtime) stored 1715.
func TestFarTimesDoNotWrap(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	ino, fh := e.mustCreate(1, "f")
	e.release(ino, fh)
	for _, sec := range []int64{10_413_792_000 /* 2300-01-01 */, -9_300_000_000 /* 1675 */} {
		var in fuse.SetAttrIn
		in.NodeId, in.Valid = ino, fuse.FATTR_MTIME
		in.Mtime = uint64(sec)
		a, err := e.setattr(in)
		wantErr(t, "utimens", err, 0)
		if got := int64(a.Mtime); (got < 0) != (sec < 0) {
			t.Errorf("mtime set to %d s: got %d s (wrapped), want it clamped", sec, got)
		}
	}
}
