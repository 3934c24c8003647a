package fs_test

import (
	"bytes"
	"strings"
	"syscall"
	"testing"

	"github.com/lsmfs/lsmfs/fs"
)

func TestXattrs(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	ino, fh := e.mustCreate(1, "f")
	e.release(ino, fh)

	_, _, err := e.getxattr(ino, "user.a", 100)
	wantErr(t, "get missing", err, syscall.ENODATA)
	wantErr(t, "remove missing", e.removexattr(ino, "user.a"), syscall.ENODATA)
	wantErr(t, "replace missing", e.setxattr(ino, "user.a", []byte("x"), 2), syscall.ENODATA)
	wantErr(t, "set", e.setxattr(ino, "user.a", []byte("value"), 0), 0)
	wantErr(t, "create existing", e.setxattr(ino, "user.a", []byte("x"), 1), syscall.EEXIST)
	wantErr(t, "replace", e.setxattr(ino, "user.a", []byte("value2"), 2), 0)
	wantErr(t, "create", e.setxattr(ino, "user.b", nil, 1), 0)
	large := bytes.Repeat([]byte("L"), 8<<10+123)
	wantErr(t, "large", e.setxattr(ino, "trusted.large", large, 0), 0)

	// Size probe with an empty buffer, then a too-small buffer.
	_, n, err := e.getxattr(ino, "user.a", 0)
	if n != 6 || (err != 0 && err != syscall.ERANGE) {
		t.Fatalf("size probe: %d %v", n, err)
	}
	_, _, err = e.getxattr(ino, "user.a", 3)
	wantErr(t, "small buffer", err, syscall.ERANGE)
	v, _, err := e.getxattr(ino, "user.a", 100)
	if err != 0 || string(v) != "value2" {
		t.Fatalf("get: %q %v", v, err)
	}
	v, _, err = e.getxattr(ino, "user.b", 100)
	if err != 0 || len(v) != 0 {
		t.Fatalf("empty value: %q %v", v, err)
	}
	v, _, err = e.getxattr(ino, "trusted.large", 64<<10)
	if err != 0 || !bytes.Equal(v, large) {
		t.Fatalf("large value: %d bytes %v", len(v), err)
	}
	list, n, err := e.listxattr(ino, 0)
	if n != uint32(len("trusted.large\x00user.a\x00user.b\x00")) {
		t.Fatalf("list size probe: %d %v %q", n, err, list)
	}
	_, _, err = e.listxattr(ino, 5)
	wantErr(t, "list small buffer", err, syscall.ERANGE)
	list, _, err = e.listxattr(ino, 1000)
	if err != 0 || string(list) != "trusted.large\x00user.a\x00user.b\x00" {
		t.Fatalf("list %q %v", list, err)
	}

	wantErr(t, "long name", e.setxattr(ino, "user."+strings.Repeat("n", 251), nil, 0), syscall.ERANGE)
	wantErr(t, "too large", e.setxattr(ino, "user.big", make([]byte, 64<<10+1), 0), syscall.E2BIG)
	wantErr(t, "acl", e.setxattr(ino, "system.posix_acl_access", []byte{2}, 0), syscall.EOPNOTSUPP)
	wantErr(t, "unknown namespace", e.setxattr(ino, "foo.bar", nil, 0), syscall.EOPNOTSUPP)
	_, _, err = e.getxattr(99999, "user.a", 10)
	wantErr(t, "missing inode", err, syscall.ENOENT)
	e.check()

	wantErr(t, "remove", e.removexattr(ino, "user.a"), 0)
	_, _, err = e.getxattr(ino, "user.a", 100)
	wantErr(t, "get removed", err, syscall.ENODATA)
	e.check()
	// Unlink deletes the xattrs with the inode.
	wantErr(t, "unlink", e.unlink(1, "f"), 0)
	if r := mustCheck(t, e); r.Xattrs != 0 {
		t.Fatalf("xattrs left after unlink: %s", r)
	}
}

func TestManyXattrsDeletedByRange(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	d := e.mustMkdir(1, "d")
	for i := 0; i < 40; i++ {
		wantErr(t, "set", e.setxattr(d, "user.x"+strings.Repeat("y", i), []byte{byte(i)}, 0), 0)
	}
	e.check()
	wantErr(t, "rmdir", e.rmdir(1, "d"), 0)
	if r := mustCheck(t, e); r.Xattrs != 0 {
		t.Fatalf("xattrs left: %s", r)
	}
}
