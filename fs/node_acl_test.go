package fs_test

import (
	"bytes"
	"encoding/binary"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
)

// aclEnt is one ACL entry for aclValue.
type aclEnt struct {
	tag, perm uint16
	id        uint32
}

const (
	tagUserObj  = 0x01
	tagUser     = 0x02
	tagGroupObj = 0x04
	tagGroup    = 0x08
	tagMask     = 0x10
	tagOther    = 0x20
	noID        = 0xffffffff
)

// aclValue encodes entries in the kernel's posix_acl_xattr format.
func aclValue(ents ...aclEnt) []byte {
	v := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range ents {
		v = binary.LittleEndian.AppendUint16(v, e.tag)
		v = binary.LittleEndian.AppendUint16(v, e.perm)
		v = binary.LittleEndian.AppendUint32(v, e.id)
	}
	return v
}

func newACLEnv(t *testing.T) *env {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	e.fs.EnableACL()
	return e
}

func (e *env) mustGetACL(ino uint64, name string) []byte {
	e.t.Helper()
	v, _, err := e.getxattr(ino, name, 4096)
	if err != 0 {
		e.t.Fatalf("getxattr %d %s: %v", ino, name, err)
	}
	return v
}

func wantMode(t *testing.T, e *env, ino uint64, want uint32) {
	t.Helper()
	if got := e.attr(ino).Mode & 0o7777; got != want {
		t.Fatalf("inode %d: mode %#o, want %#o", ino, got, want)
	}
}

func TestACLAccess(t *testing.T) {
	e := newACLEnv(t)
	ino, fh := e.mustCreate(1, "f")
	e.release(ino, fh)
	wantMode(t, e, ino, 0o644)

	// A named user makes the ACL more than the mode: stored, and the
	// group class of the mode becomes the mask.
	full := aclValue(aclEnt{tagUserObj, 6, noID}, aclEnt{tagUser, 4, 1000}, aclEnt{tagGroupObj, 4, noID},
		aclEnt{tagMask, 6, noID}, aclEnt{tagOther, 0, noID})
	wantErr(t, "set access ACL", e.setxattr(ino, "system.posix_acl_access", full, 0), 0)
	wantMode(t, e, ino, 0o660)
	if got := e.mustGetACL(ino, "system.posix_acl_access"); !bytes.Equal(got, full) {
		t.Fatalf("ACL read back %x, want %x", got, full)
	}

	// chmod rewrites owner, mask and other.
	var in fuse.SetAttrIn
	in.NodeId, in.Valid, in.Mode = ino, fuse.FATTR_MODE, 0o751
	if _, err := e.setattr(in); err != 0 {
		t.Fatal(err)
	}
	want := aclValue(aclEnt{tagUserObj, 7, noID}, aclEnt{tagUser, 4, 1000}, aclEnt{tagGroupObj, 4, noID},
		aclEnt{tagMask, 5, noID}, aclEnt{tagOther, 1, noID})
	if got := e.mustGetACL(ino, "system.posix_acl_access"); !bytes.Equal(got, want) {
		t.Fatalf("ACL after chmod %x, want %x", got, want)
	}

	// An ACL that says no more than a mode only sets the mode.
	minimal := aclValue(aclEnt{tagUserObj, 7, noID}, aclEnt{tagGroupObj, 4, noID}, aclEnt{tagOther, 4, noID})
	wantErr(t, "set minimal ACL", e.setxattr(ino, "system.posix_acl_access", minimal, 0), 0)
	wantMode(t, e, ino, 0o744)
	_, _, err := e.getxattr(ino, "system.posix_acl_access", 4096)
	wantErr(t, "minimal ACL not stored", err, syscall.ENODATA)

	// Bad ACLs, and default ACLs on a file.
	wantErr(t, "no mask", e.setxattr(ino, "system.posix_acl_access",
		aclValue(aclEnt{tagUserObj, 7, noID}, aclEnt{tagUser, 4, 1}, aclEnt{tagGroupObj, 4, noID}, aclEnt{tagOther, 4, noID}), 0),
		syscall.EINVAL)
	wantErr(t, "bad version", e.setxattr(ino, "system.posix_acl_access", []byte{1, 0, 0, 0}, 0), syscall.EINVAL)
	wantErr(t, "default on a file", e.setxattr(ino, "system.posix_acl_default", full, 0), syscall.EACCES)

	// Setting an ACL as a caller outside the group clears setgid.
	in.Valid, in.Mode = fuse.FATTR_MODE, 0o2755
	if _, err := e.setattr(in); err != 0 {
		t.Fatal(err)
	}
	sx := fuse.SetXAttrIn{InHeader: e.hdr(ino), Size: uint32(len(full)), SetXAttrFlags: fuse.SETXATTR_ACL_KILL_SGID}
	wantErr(t, "set with kill sgid", errno(e.raw.SetXAttr(nil, &sx, "system.posix_acl_access", full)), 0)
	wantMode(t, e, ino, 0o660)

	e.check()
	e.remount()
	e.fs.EnableACL()
	if got := e.mustGetACL(ino, "system.posix_acl_access"); !bytes.Equal(got, full) {
		t.Fatalf("ACL after remount %x, want %x", got, full)
	}
	wantErr(t, "remove", e.removexattr(ino, "system.posix_acl_access"), 0)
	wantMode(t, e, ino, 0o660)
	e.check()
}

func TestACLInheritance(t *testing.T) {
	e := newACLEnv(t)
	dir := e.mustMkdir(1, "d")
	def := aclValue(aclEnt{tagUserObj, 7, noID}, aclEnt{tagUser, 7, 1000}, aclEnt{tagGroupObj, 5, noID},
		aclEnt{tagMask, 7, noID}, aclEnt{tagOther, 5, noID})
	wantErr(t, "set default ACL", e.setxattr(dir, "system.posix_acl_default", def, 0), 0)

	// A file: the default ACL limited by the create mode; umask ignored.
	in := fuse.CreateIn{InHeader: e.hdr(dir), Mode: 0o666, Umask: 0o077, Flags: syscall.O_RDWR}
	var out fuse.CreateOut
	if st := e.raw.Create(nil, &in, "f", &out); !st.Ok() {
		t.Fatal(st)
	}
	e.release(out.NodeId, out.Fh)
	wantMode(t, e, out.NodeId, 0o664)
	want := aclValue(aclEnt{tagUserObj, 6, noID}, aclEnt{tagUser, 7, 1000}, aclEnt{tagGroupObj, 5, noID},
		aclEnt{tagMask, 6, noID}, aclEnt{tagOther, 4, noID})
	if got := e.mustGetACL(out.NodeId, "system.posix_acl_access"); !bytes.Equal(got, want) {
		t.Fatalf("inherited access ACL %x, want %x", got, want)
	}
	_, _, err := e.getxattr(out.NodeId, "system.posix_acl_default", 4096)
	wantErr(t, "file has no default ACL", err, syscall.ENODATA)

	// A subdirectory inherits the default ACL as both.
	mk := fuse.MkdirIn{InHeader: e.hdr(dir), Mode: 0o777, Umask: 0o077}
	var eo fuse.EntryOut
	if st := e.raw.Mkdir(nil, &mk, "sub", &eo); !st.Ok() {
		t.Fatal(st)
	}
	wantMode(t, e, eo.NodeId, 0o775)
	if got := e.mustGetACL(eo.NodeId, "system.posix_acl_default"); !bytes.Equal(got, def) {
		t.Fatalf("inherited default ACL %x, want %x", got, def)
	}
	if got := e.mustGetACL(eo.NodeId, "system.posix_acl_access"); !bytes.Equal(got, def) {
		t.Fatalf("subdirectory access ACL %x, want %x", got, def)
	}

	// Symlinks inherit nothing; outside the directory the umask applies.
	ln, err := e.symlink(dir, "target", "ln")
	wantErr(t, "symlink", err, 0)
	_, _, err = e.getxattr(ln, "system.posix_acl_access", 4096)
	wantErr(t, "symlink has no ACL", err, syscall.ENODATA)
	in = fuse.CreateIn{InHeader: e.hdr(1), Mode: 0o666, Umask: 0o027, Flags: syscall.O_RDWR}
	if st := e.raw.Create(nil, &in, "g", &out); !st.Ok() {
		t.Fatal(st)
	}
	e.release(out.NodeId, out.Fh)
	wantMode(t, e, out.NodeId, 0o640)
	mn := fuse.MknodIn{InHeader: e.hdr(1), Mode: syscall.S_IFIFO | 0o666, Umask: 0o022}
	if st := e.raw.Mknod(nil, &mn, "fifo", &eo); !st.Ok() {
		t.Fatal(st)
	}
	wantMode(t, e, eo.NodeId, 0o644)

	// Removing the default ACL stops inheritance.
	wantErr(t, "remove default", e.removexattr(dir, "system.posix_acl_default"), 0)
	in = fuse.CreateIn{InHeader: e.hdr(dir), Mode: 0o666, Umask: 0o022, Flags: syscall.O_RDWR}
	if st := e.raw.Create(nil, &in, "h", &out); !st.Ok() {
		t.Fatal(st)
	}
	e.release(out.NodeId, out.Fh)
	wantMode(t, e, out.NodeId, 0o644)
	e.check()
}

// FuzzParseACL: the ACL decoder never panics, and what it accepts
// re-encodes to the same bytes.
func FuzzParseACL(f *testing.F) {
	f.Add(aclValue(aclEnt{tagUserObj, 7, noID}, aclEnt{tagGroupObj, 4, noID}, aclEnt{tagOther, 4, noID}))
	f.Add(aclValue(aclEnt{tagUserObj, 6, noID}, aclEnt{tagUser, 4, 1000}, aclEnt{tagGroupObj, 4, noID},
		aclEnt{tagGroup, 2, 50}, aclEnt{tagMask, 6, noID}, aclEnt{tagOther, 0, noID}))
	f.Add([]byte{2, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, v []byte) {
		fs.CheckACLRoundTrip(t, v)
	})
}
