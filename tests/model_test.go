package tests

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The model-based test drives a directory with random system calls (create,
// write at random offsets, truncate, rename, link, unlink, mkdir, rmdir,
// symlink, chmod, set/get/remove/list xattr, readdir, stat, remount) and
// checks every result against an in-memory model of POSIX semantics: return
// codes, stat fields, bytes, directory listings and xattrs. Paths come from a
// small namespace so that operations collide. TestModelHost runs the same
// stream on the host filesystem to keep the model honest; TestModel runs it
// on lsmfs.

// mnode is an inode of the model.
type mnode struct {
	id       int
	kind     uint32 // syscall.S_IFREG, S_IFDIR or S_IFLNK
	perm     uint32
	data     []byte            // regular file
	target   string            // symlink; always dangling (see modelOp)
	xattrs   map[string][]byte // user.*
	nlink    int               // names (files and symlinks)
	children map[string]*mnode // directory
	parent   *mnode            // directory
}

func (n *mnode) isDir() bool { return n.kind == syscall.S_IFDIR }

func (n *mnode) subdirs() int {
	c := 0
	for _, ch := range n.children {
		if ch.isDir() {
			c++
		}
	}
	return c
}

// isAncestor reports whether a is a proper ancestor of directory d.
func isAncestor(a, d *mnode) bool {
	for p := d.parent; p != nil; p = p.parent {
		if p == a {
			return true
		}
	}
	return false
}

// childToward returns the child of a on the path down to d (a is an
// ancestor of d).
func childToward(a, d *mnode) *mnode {
	for c := d; c != nil; c = c.parent {
		if c.parent == a {
			return c
		}
	}
	return nil
}

type model struct {
	root   *mnode
	nextID int
	umask  uint32
}

func newModel(umask uint32) *model {
	m := &model{umask: umask}
	m.root = m.newNode(syscall.S_IFDIR, 0o755)
	return m
}

func (m *model) newNode(kind, perm uint32) *mnode {
	m.nextID++
	n := &mnode{id: m.nextID, kind: kind, perm: perm, xattrs: map[string][]byte{}}
	if kind == syscall.S_IFDIR {
		n.children = map[string]*mnode{}
	} else {
		n.nlink = 1
	}
	return n
}

// parent resolves all but the last component of p: the directory and the
// last name, or an errno.
func (m *model) parent(p string) (*mnode, string, syscall.Errno) {
	comps := strings.Split(p, "/")
	dir := m.root
	for _, c := range comps[:len(comps)-1] {
		n, ok := dir.children[c]
		switch {
		case !ok:
			return nil, "", syscall.ENOENT
		case n.kind == syscall.S_IFLNK:
			return nil, "", syscall.ENOENT // every symlink dangles
		case !n.isDir():
			return nil, "", syscall.ENOTDIR
		}
		dir = n
	}
	return dir, comps[len(comps)-1], 0
}

// lookup resolves p without following a final symlink.
func (m *model) lookup(p string) (*mnode, syscall.Errno) {
	dir, name, e := m.parent(p)
	if e != 0 {
		return nil, e
	}
	n, ok := dir.children[name]
	if !ok {
		return nil, syscall.ENOENT
	}
	return n, 0
}

// follow resolves p following a final symlink (which dangles).
func (m *model) follow(p string) (*mnode, syscall.Errno) {
	n, e := m.lookup(p)
	if e == 0 && n.kind == syscall.S_IFLNK {
		return nil, syscall.ENOENT
	}
	return n, e
}

// unlinkName drops name from dir and returns the node if it is gone.
func unlinkName(dir *mnode, name string) *mnode {
	n := dir.children[name]
	delete(dir.children, name)
	if !n.isDir() {
		n.nlink--
	}
	if n.isDir() || n.nlink == 0 {
		return n
	}
	return nil
}

// forget drops the inode number of a node that is gone: the filesystem may
// give it to a new file (lsmfs does not, ext4 does).
func (r *modelRunner) forget(n *mnode) {
	if n == nil {
		return
	}
	if ino, ok := r.inos[n.id]; ok {
		delete(r.idOf, ino)
		delete(r.inos, n.id)
	}
}

// modelOp is one operation with its arguments.
type modelOp struct {
	kind     string
	path, to string
	off, n   int64
	perm     uint32
	name     string
	value    []byte
	flags    int
}

func (o modelOp) String() string {
	s := o.kind + " " + o.path
	if o.to != "" {
		s += " -> " + o.to
	}
	switch o.kind {
	case "write":
		s += fmt.Sprintf(" off=%d n=%d", o.off, o.n)
	case "truncate":
		s += fmt.Sprintf(" size=%d", o.off)
	case "create", "mkdir", "chmod":
		s += fmt.Sprintf(" perm=%o", o.perm)
	case "setxattr", "getxattr", "removexattr":
		s += fmt.Sprintf(" %s len=%d flags=%d", o.name, len(o.value), o.flags)
	}
	return s
}

// modelRunner runs ops on a real directory and on the model.
type modelRunner struct {
	t       *testing.T
	root    string
	remount func() // nil: remount is a no-op
	m       *model
	rng     *rand.Rand
	inos    map[int]uint64 // model id -> inode number seen
	idOf    map[uint64]int
	history []string
	seed    uint64
	stats   map[string]int // "op errno" -> count
}

var modelNames = []string{"a", "b", "c", "d", "e"}

// randPath picks an existing path most of the time, else a random one.
func (r *modelRunner) randPath() string {
	if r.rng.IntN(10) < 6 {
		var paths []string
		var walk func(n *mnode, prefix string)
		walk = func(n *mnode, prefix string) {
			for name, c := range n.children {
				p := prefix + name
				paths = append(paths, p)
				if c.isDir() {
					walk(c, p+"/")
				}
			}
		}
		walk(r.m.root, "")
		if len(paths) > 0 {
			sort.Strings(paths)
			p := paths[r.rng.IntN(len(paths))]
			if r.rng.IntN(4) == 0 {
				p += "/" + modelNames[r.rng.IntN(len(modelNames))]
			}
			return p
		}
	}
	depth := 1 + r.rng.IntN(3)
	comps := make([]string, depth)
	for i := range comps {
		comps[i] = modelNames[r.rng.IntN(len(modelNames))]
	}
	return strings.Join(comps, "/")
}

// newPath picks, half the time, a name that does not exist in an existing
// directory (so that creations succeed often), else randPath.
func (r *modelRunner) newPath() string {
	if r.rng.IntN(2) == 0 {
		return r.randPath()
	}
	dirs := []string{""}
	var walk func(n *mnode, prefix string)
	walk = func(n *mnode, prefix string) {
		for name, c := range n.children {
			if c.isDir() {
				dirs = append(dirs, prefix+name+"/")
				walk(c, prefix+name+"/")
			}
		}
	}
	walk(r.m.root, "")
	sort.Strings(dirs)
	return dirs[r.rng.IntN(len(dirs))] + modelNames[r.rng.IntN(len(modelNames))]
}

func (r *modelRunner) randOp() modelOp {
	o := modelOp{path: r.randPath()}
	switch k := r.rng.IntN(100); {
	case k < 10:
		o.kind, o.perm = "create", 0o600|uint32(r.rng.IntN(0o200))
		o.path = r.newPath()
	case k < 22:
		o.kind = "write"
		o.off = int64(r.rng.IntN(200 << 10))
		o.n = int64(r.rng.IntN(70 << 10))
		if r.rng.IntN(3) == 0 {
			o.off, o.n = int64(r.rng.IntN(5000)), int64(r.rng.IntN(300))
		}
	case k < 27:
		o.kind, o.off = "truncate", int64(r.rng.IntN(300<<10))
	case k < 33:
		o.kind = "read"
	case k < 40:
		o.kind = "stat"
	case k < 48:
		o.kind, o.to = "rename", r.newPath()
	case k < 53:
		o.kind, o.to = "link", r.newPath()
	case k < 59:
		o.kind = "unlink"
	case k < 66:
		o.kind, o.perm = "mkdir", 0o700|uint32(r.rng.IntN(0o100))
		o.path = r.newPath()
	case k < 71:
		o.kind = "rmdir"
	case k < 74:
		o.kind, o.to = "symlink", fmt.Sprintf("nowhere/%d", r.rng.IntN(1000))
		o.path = r.newPath()
	case k < 75:
		o.kind = "readlink"
	case k < 78:
		o.kind = "chmod"
		o.perm = 0o600 | uint32(r.rng.IntN(0o200))
	case k < 84:
		o.kind = "setxattr"
		o.name = fmt.Sprintf("user.x%d", r.rng.IntN(4))
		o.value = content(int64(r.rng.IntN(1000)), r.rng.IntN(1000))
		o.flags = []int{0, 0, unix.XATTR_CREATE, unix.XATTR_REPLACE}[r.rng.IntN(4)]
	case k < 87:
		o.kind, o.name = "getxattr", fmt.Sprintf("user.x%d", r.rng.IntN(4))
	case k < 89:
		o.kind, o.name = "removexattr", fmt.Sprintf("user.x%d", r.rng.IntN(4))
	case k < 91:
		o.kind = "listxattr"
	case k < 98:
		o.kind = "readdir"
		if r.rng.IntN(3) == 0 {
			o.path = "."
		}
	case k < 99:
		o.kind = "check"
	default:
		o.kind = "remount"
	}
	return o
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}

func (r *modelRunner) fail(format string, args ...any) {
	r.t.Helper()
	start := max(0, len(r.history)-25)
	r.t.Fatalf("seed %d (replay with LSMFS_SEED=%d), op %d: %s\nlast ops:\n  %s", r.seed, r.seed, len(r.history),
		fmt.Sprintf(format, args...), strings.Join(r.history[start:], "\n  "))
}

func (r *modelRunner) abs(p string) string { return filepath.Join(r.root, p) }

// step runs one op on the directory and the model and compares.
func (r *modelRunner) step(o modelOp) {
	r.t.Helper()
	r.history = append(r.history, o.String())
	got, want := r.real(o), r.modelApply(o)
	r.stats[fmt.Sprintf("%s %v", o.kind, got)]++
	if got != want {
		r.fail("%v: got %v (%d), model says %v (%d)", o, got, got, want, want)
	}
	if got == 0 {
		r.compareResult(o)
	}
}

// real runs o on the directory and returns its errno.
func (r *modelRunner) real(o modelOp) syscall.Errno {
	p := r.abs(o.path)
	switch o.kind {
	case "create":
		fd, err := unix.Open(p, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, o.perm)
		if err == nil {
			unix.Close(fd)
		}
		return errnoOf(err)
	case "write":
		fd, err := unix.Open(p, unix.O_WRONLY, 0)
		if err != nil {
			return errnoOf(err)
		}
		defer unix.Close(fd)
		buf := content(int64(len(r.history)), int(o.n))
		n, err := unix.Pwrite(fd, buf, o.off)
		if err == nil && n != len(buf) {
			r.fail("%v: short write %d", o, n)
		}
		return errnoOf(err)
	case "truncate":
		return errnoOf(unix.Truncate(p, o.off))
	case "read", "stat", "readlink", "getxattr", "listxattr", "readdir", "check":
		return r.probe(o)
	case "rename":
		return errnoOf(unix.Rename(p, r.abs(o.to)))
	case "link":
		return errnoOf(unix.Link(p, r.abs(o.to)))
	case "unlink":
		return errnoOf(unix.Unlink(p))
	case "mkdir":
		return errnoOf(unix.Mkdir(p, o.perm))
	case "rmdir":
		return errnoOf(unix.Rmdir(p))
	case "symlink":
		return errnoOf(unix.Symlink(o.to, p))
	case "chmod":
		return errnoOf(unix.Chmod(p, o.perm))
	case "setxattr":
		return errnoOf(unix.Setxattr(p, o.name, o.value, o.flags))
	case "removexattr":
		return errnoOf(unix.Removexattr(p, o.name))
	case "remount":
		if r.remount != nil {
			r.remount()
		}
		return 0
	}
	r.fail("unknown op %q", o.kind)
	return 0
}

// probe runs a read-only op and returns its errno; compareResult compares
// what it returned.
func (r *modelRunner) probe(o modelOp) syscall.Errno {
	p := r.abs(o.path)
	var err error
	switch o.kind {
	case "read":
		var fd int
		fd, err = unix.Open(p, unix.O_RDONLY, 0)
		if err == nil {
			unix.Close(fd)
		}
	case "stat":
		var st unix.Stat_t
		err = unix.Lstat(p, &st)
	case "readlink":
		_, err = unix.Readlink(p, make([]byte, 256))
	case "getxattr":
		_, err = unix.Getxattr(p, o.name, make([]byte, 64<<10))
	case "listxattr":
		_, err = unix.Listxattr(p, make([]byte, 64<<10))
	case "readdir":
		var fd int
		fd, err = unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err == nil {
			unix.Close(fd)
		}
	}
	return errnoOf(err)
}

// modelApply applies o to the model and returns the errno POSIX (Linux)
// gives.
func (r *modelRunner) modelApply(o modelOp) syscall.Errno {
	m := r.m
	switch o.kind {
	case "create", "mkdir", "symlink":
		dir, name, e := m.parent(o.path)
		if e != 0 {
			return e
		}
		if _, ok := dir.children[name]; ok {
			return syscall.EEXIST
		}
		var n *mnode
		switch o.kind {
		case "create":
			n = m.newNode(syscall.S_IFREG, o.perm&^m.umask)
		case "mkdir":
			n = m.newNode(syscall.S_IFDIR, o.perm&^m.umask)
			n.parent = dir
		default:
			n = m.newNode(syscall.S_IFLNK, 0o777)
			n.target = o.to
		}
		dir.children[name] = n
		return 0
	case "write":
		n, e := m.follow(o.path)
		switch {
		case e != 0:
			return e
		case n.isDir():
			return syscall.EISDIR
		}
		if o.n == 0 {
			return 0 // a write of nothing does not extend the file
		}
		if end := o.off + o.n; int64(len(n.data)) < end {
			n.data = append(n.data, make([]byte, end-int64(len(n.data)))...)
		}
		copy(n.data[o.off:], content(int64(len(r.history)), int(o.n)))
		return 0
	case "truncate":
		n, e := m.follow(o.path)
		switch {
		case e != 0:
			return e
		case n.isDir():
			return syscall.EISDIR
		}
		if int64(len(n.data)) > o.off {
			n.data = n.data[:o.off]
		} else {
			n.data = append(n.data, make([]byte, o.off-int64(len(n.data)))...)
		}
		return 0
	case "read":
		_, e := m.follow(o.path)
		return e
	case "stat":
		_, e := m.lookup(o.path)
		return e
	case "readlink":
		n, e := m.lookup(o.path)
		if e == 0 && n.kind != syscall.S_IFLNK {
			return syscall.EINVAL
		}
		return e
	case "rename":
		return r.modelRename(o)
	case "link":
		old, e := m.lookup(o.path)
		if e != 0 {
			return e
		}
		dir, name, e := m.parent(o.to)
		if e != 0 {
			return e
		}
		if _, ok := dir.children[name]; ok {
			return syscall.EEXIST
		}
		if old.isDir() {
			return syscall.EPERM
		}
		dir.children[name] = old
		old.nlink++
		return 0
	case "unlink":
		dir, name, e := m.parent(o.path)
		if e != 0 {
			return e
		}
		n, ok := dir.children[name]
		switch {
		case !ok:
			return syscall.ENOENT
		case n.isDir():
			return syscall.EISDIR
		}
		r.forget(unlinkName(dir, name))
		return 0
	case "rmdir":
		dir, name, e := m.parent(o.path)
		if e != 0 {
			return e
		}
		n, ok := dir.children[name]
		switch {
		case !ok:
			return syscall.ENOENT
		case !n.isDir():
			return syscall.ENOTDIR
		case len(n.children) > 0:
			return syscall.ENOTEMPTY
		}
		r.forget(unlinkName(dir, name))
		return 0
	case "chmod":
		n, e := m.follow(o.path)
		if e == 0 {
			n.perm = o.perm
		}
		return e
	case "setxattr":
		n, e := m.follow(o.path)
		if e != 0 {
			return e
		}
		_, exists := n.xattrs[o.name]
		switch {
		case o.flags == unix.XATTR_CREATE && exists:
			return syscall.EEXIST
		case o.flags == unix.XATTR_REPLACE && !exists:
			return syscall.ENODATA
		}
		n.xattrs[o.name] = append([]byte(nil), o.value...)
		return 0
	case "getxattr", "removexattr":
		n, e := m.follow(o.path)
		if e != 0 {
			return e
		}
		if _, ok := n.xattrs[o.name]; !ok {
			return syscall.ENODATA
		}
		if o.kind == "removexattr" {
			delete(n.xattrs, o.name)
		}
		return 0
	case "listxattr":
		_, e := m.follow(o.path)
		return e
	case "readdir":
		if o.path == "." {
			return 0
		}
		n, e := m.follow(o.path)
		if e == 0 && !n.isDir() {
			return syscall.ENOTDIR
		}
		return e
	case "check", "remount":
		return 0
	}
	r.fail("unknown op %q", o.kind)
	return 0
}

// modelRename follows the order of Linux's do_renameat2 and vfs_rename.
func (r *modelRunner) modelRename(o modelOp) syscall.Errno {
	m := r.m
	odir, oname, e := m.parent(o.path)
	if e != 0 {
		return e
	}
	ndir, nname, e := m.parent(o.to)
	if e != 0 {
		return e
	}
	old, ok := odir.children[oname]
	if !ok {
		return syscall.ENOENT
	}
	target, exists := ndir.children[nname]
	if odir != ndir {
		if odir == ndir.parent || isAncestor(odir, ndir) {
			if old == childToward(odir, ndir) {
				return syscall.EINVAL // the source is an ancestor of the target
			}
		} else if ndir == odir.parent || isAncestor(ndir, odir) {
			if exists && target == childToward(ndir, odir) {
				return syscall.ENOTEMPTY // the target is an ancestor of the source
			}
		}
	}
	if exists && target == old {
		return 0 // the same inode: nothing happens
	}
	if exists {
		switch {
		case old.isDir() && !target.isDir():
			return syscall.ENOTDIR
		case !old.isDir() && target.isDir():
			return syscall.EISDIR
		case target.isDir() && len(target.children) > 0:
			return syscall.ENOTEMPTY
		}
		r.forget(unlinkName(ndir, nname))
	}
	delete(odir.children, oname)
	ndir.children[nname] = old
	if old.isDir() {
		old.parent = ndir
	}
	return 0
}

// compareResult compares what a successful op returned, or the state it
// left, with the model.
func (r *modelRunner) compareResult(o modelOp) {
	r.t.Helper()
	switch o.kind {
	case "read", "write", "truncate":
		r.compareNode(o.path)
	case "stat", "create", "mkdir", "symlink", "chmod", "link", "setxattr", "removexattr":
		r.compareNode(o.path)
		if o.kind == "link" {
			r.compareNode(o.to)
		}
	case "rename":
		r.compareNode(o.to)
		if _, e := r.m.lookup(o.path); e == 0 {
			r.compareNode(o.path) // renamed onto a hard link of itself
		}
	case "readlink":
		n, _ := r.m.lookup(o.path)
		if got, err := os.Readlink(r.abs(o.path)); err != nil || got != n.target {
			r.fail("%v: readlink = %q, %v; want %q", o, got, err, n.target)
		}
	case "getxattr":
		n, _ := r.m.follow(o.path)
		buf := make([]byte, 64<<10)
		sz, err := unix.Getxattr(r.abs(o.path), o.name, buf)
		if err != nil || !bytes.Equal(buf[:sz], n.xattrs[o.name]) {
			r.fail("%v: getxattr = %d bytes, %v; want %d bytes", o, sz, err, len(n.xattrs[o.name]))
		}
	case "listxattr":
		r.compareNode(o.path)
	case "readdir":
		r.compareDir(o.path)
	case "check", "remount":
		r.compareAll()
	}
}

// compareNode compares lstat, contents and xattrs of path with the model.
func (r *modelRunner) compareNode(path string) {
	r.t.Helper()
	n, e := r.m.lookup(path)
	var st unix.Stat_t
	err := unix.Lstat(r.abs(path), &st)
	if errnoOf(err) != e {
		r.fail("lstat %s: %v; model says %v", path, err, e)
	}
	if e != 0 {
		return
	}
	want := struct {
		mode  uint32
		size  int64
		nlink uint64
	}{mode: n.kind | n.perm}
	switch n.kind {
	case syscall.S_IFREG:
		want.size, want.nlink = int64(len(n.data)), uint64(n.nlink)
	case syscall.S_IFLNK:
		want.mode = syscall.S_IFLNK | 0o777
		want.size, want.nlink = int64(len(n.target)), uint64(n.nlink)
	case syscall.S_IFDIR:
		want.size, want.nlink = st.Size, uint64(2+n.subdirs())
	}
	if st.Mode != want.mode || st.Size != want.size || st.Nlink != want.nlink {
		r.fail("lstat %s: mode %o size %d nlink %d; model says mode %o size %d nlink %d",
			path, st.Mode, st.Size, st.Nlink, want.mode, want.size, want.nlink)
	}
	if ino, ok := r.inos[n.id]; ok && ino != st.Ino {
		r.fail("lstat %s: inode %d, was %d for the same file", path, st.Ino, ino)
	}
	if id, ok := r.idOf[st.Ino]; ok && id != n.id {
		r.fail("lstat %s: inode %d belongs to another file", path, st.Ino)
	}
	r.inos[n.id], r.idOf[st.Ino] = st.Ino, n.id
	if n.kind == syscall.S_IFREG {
		b, err := os.ReadFile(r.abs(path))
		if err != nil || !bytes.Equal(b, n.data) {
			r.fail("read %s: %d bytes, %v; model has %d bytes (first difference at %d)", path, len(b), err, len(n.data), firstDiff(b, n.data))
		}
	}
	if n.kind != syscall.S_IFLNK {
		got := userXattrs(r.t, r.abs(path))
		if len(got) != len(n.xattrs) {
			r.fail("xattrs of %s: %d names, model has %d", path, len(got), len(n.xattrs))
		}
		for k, v := range n.xattrs {
			if g, ok := got[k]; !ok || g != string(v) {
				r.fail("xattr %s of %s: present %v, %d bytes; model has %d bytes", k, path, ok, len(g), len(v))
			}
		}
	}
}

// compareDir compares a directory listing with the model.
func (r *modelRunner) compareDir(path string) {
	r.t.Helper()
	var n *mnode
	if path == "." {
		n = r.m.root
	} else {
		n, _ = r.m.follow(path)
	}
	entries, err := os.ReadDir(r.abs(path))
	if err != nil {
		r.fail("readdir %s: %v", path, err)
	}
	var got, want []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	for name := range n.children {
		want = append(want, name)
	}
	sort.Strings(want)
	if strings.Join(got, "/") != strings.Join(want, "/") {
		r.fail("readdir %s: %q; model has %q", path, got, want)
	}
}

// compareAll compares the whole tree.
func (r *modelRunner) compareAll() {
	r.t.Helper()
	var walk func(n *mnode, prefix string)
	walk = func(n *mnode, prefix string) {
		dir := strings.TrimSuffix(prefix, "/")
		if dir == "" {
			dir = "."
		}
		r.compareDir(dir)
		for name, c := range n.children {
			r.compareNode(prefix + name)
			if c.isDir() {
				walk(c, prefix+name+"/")
			}
		}
	}
	walk(r.m.root, "")
}

func runModel(t *testing.T, root string, remount func()) {
	seed := testSeed(t)
	ops := 3000
	if long() {
		ops = 100000
	}
	umask := unix.Umask(0)
	unix.Umask(umask)
	r := &modelRunner{
		t: t, root: root, remount: remount, seed: seed,
		m:    newModel(uint32(umask)),
		rng:  rand.New(rand.NewPCG(seed, 2)),
		inos: map[int]uint64{}, idOf: map[uint64]int{}, stats: map[string]int{},
	}
	for range ops {
		r.step(r.randOp())
	}
	r.compareAll()
	var lines []string
	for k, n := range r.stats {
		lines = append(lines, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(lines)
	t.Logf("%d operations (result counts):\n  %s", ops, strings.Join(lines, "\n  "))
}

// TestModelHost runs the model test on the host filesystem (no FUSE): a
// failure here is a bug in the model, not in lsmfs.
func TestModelHost(t *testing.T) {
	runModel(t, t.TempDir(), nil)
}

// TestModel runs the model test on lsmfs, with remounts.
func TestModel(t *testing.T) {
	f := newFS(t, fsOptions{})
	root := f.path("model")
	must(t, os.Mkdir(root, 0o755))
	runModel(t, root, f.remount)
}
