package fs_test

// A model-based test: a rapid state machine drives the raw FUSE operations
// and an in-memory POSIX tree in step, comparing errno, attributes, listings,
// xattrs and bytes, with fs.Check clean after every step. Remount steps
// close everything, reopen the engine and the FS, and compare again.
//
// Replay a failure with the -rapid.seed (or -rapid.failfile) rapid prints;
// -rapid.checks=N runs more sequences.

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"pgregory.net/rapid"

	"github.com/lsmfs/lsmfs/fs"
)

// mnode is a file in the model.
type mnode struct {
	ino      uint64
	mode     uint32 // type and permission bits
	uid, gid uint32
	data     []byte
	target   string
	xattrs   map[string][]byte
	children map[string]*mnode // directories
	parent   *mnode            // directories
	links    int               // names (non-directories)
	removed  bool              // a directory removed while open
	opens    int
}

func (n *mnode) isDir() bool { return n.mode&syscall.S_IFMT == syscall.S_IFDIR }
func (n *mnode) isReg() bool { return n.mode&syscall.S_IFMT == syscall.S_IFREG }

func (n *mnode) nlink() uint32 {
	if !n.isDir() {
		return uint32(n.links)
	}
	if n.removed {
		return 0
	}
	c := uint32(2)
	for _, ch := range n.children {
		if ch.isDir() {
			c++
		}
	}
	return c
}

func (n *mnode) size() uint64 {
	switch n.mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return uint64(len(n.children))
	case syscall.S_IFLNK:
		return uint64(len(n.target))
	case syscall.S_IFREG:
		return uint64(len(n.data))
	}
	return 0
}

// gone reports whether the node has no name and no open handle left.
func (n *mnode) gone() bool {
	if n.opens > 0 {
		return false
	}
	return n.isDir() && n.removed || !n.isDir() && n.links == 0
}

type mhandle struct {
	node *mnode
	fh   uint64
	dir  bool
}

type machine struct {
	e       *env
	root    *mnode
	live    map[uint64]*mnode // inodes with a name or a handle
	used    map[uint64]bool   // every inode number handed out
	handles []mhandle
}

var modelNames = []string{"a", "b", "c", "d", "e", strings.Repeat("L", 256)}

func kill(mode uint32) uint32 {
	mode &^= syscall.S_ISUID
	if mode&syscall.S_IXGRP != 0 {
		mode &^= syscall.S_ISGID
	}
	return mode
}

type entry struct {
	dir  *mnode
	name string
	node *mnode
}

// dirs lists the reachable directories, in inode order.
func (m *machine) dirs() []*mnode {
	var out []*mnode
	var walk func(d *mnode)
	walk = func(d *mnode) {
		out = append(out, d)
		for _, name := range sortedNames(d) {
			if ch := d.children[name]; ch.isDir() {
				walk(ch)
			}
		}
	}
	walk(m.root)
	return out
}

// entries lists every name, in tree order.
func (m *machine) entries(keep func(*mnode) bool) []entry {
	var out []entry
	for _, d := range m.dirs() {
		for _, name := range sortedNames(d) {
			if ch := d.children[name]; keep == nil || keep(ch) {
				out = append(out, entry{d, name, ch})
			}
		}
	}
	return out
}

func sortedNames(d *mnode) []string {
	names := make([]string, 0, len(d.children))
	for n := range d.children {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (m *machine) nodes() []*mnode {
	var out []*mnode
	for _, n := range m.live {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ino < out[j].ino })
	return out
}

func (m *machine) drop(n *mnode) {
	if n.gone() {
		delete(m.live, n.ino)
	}
}

func (m *machine) isAncestor(a, d *mnode) bool {
	for ; d != nil; d = d.parent {
		if d == a {
			return true
		}
		if d == m.root {
			return false
		}
	}
	return false
}

func (m *machine) newNode(t *rapid.T, ino uint64, mode uint32, dir *mnode) *mnode {
	if m.used[ino] {
		t.Fatalf("inode number %d handed out twice", ino)
	}
	m.used[ino] = true
	n := &mnode{ino: ino, mode: mode, uid: m.e.caller.Uid, gid: m.e.caller.Gid, xattrs: map[string][]byte{}}
	if dir.mode&syscall.S_ISGID != 0 {
		n.gid = dir.gid
		if n.isDir() {
			n.mode |= syscall.S_ISGID
		}
	}
	if n.isDir() {
		n.children = map[string]*mnode{}
		n.parent = dir
	} else {
		n.links = 1
	}
	m.live[ino] = n
	return n
}

func want(t *rapid.T, what string, got, want syscall.Errno) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: errno %d (%v), model says %d (%v)", what, int(got), got, int(want), want)
	}
}

func (m *machine) drawCaller(t *rapid.T) {
	m.e.caller = fuse.Caller{Owner: fuse.Owner{
		Uid: rapid.SampledFrom([]uint32{0, 0, 1000}).Draw(t, "uid"),
		Gid: rapid.SampledFrom([]uint32{0, 100}).Draw(t, "gid"),
	}}
}

// makeExpect is the model's errno for creating name in dir.
func makeExpect(dir *mnode, name string) syscall.Errno {
	if len(name) > 255 {
		return syscall.ENAMETOOLONG
	}
	if dir.children[name] != nil {
		return syscall.EEXIST
	}
	return 0
}

func (m *machine) create(t *rapid.T) {
	dir := rapid.SampledFrom(m.dirs()).Draw(t, "dir")
	name := rapid.SampledFrom(modelNames).Draw(t, "name")
	mode := rapid.SampledFrom([]uint32{0o644, 0o600, 0o755, 0o4755, 0o2755}).Draw(t, "mode")
	m.drawCaller(t)
	ino, fh, err := m.e.create(dir.ino, name, mode, syscall.O_RDWR)
	want(t, "create", err, makeExpect(dir, name))
	if err != 0 {
		return
	}
	n := m.newNode(t, ino, syscall.S_IFREG|mode, dir)
	dir.children[name] = n
	n.opens++
	m.handles = append(m.handles, mhandle{node: n, fh: fh})
}

func (m *machine) mkdir(t *rapid.T) {
	dir := rapid.SampledFrom(m.dirs()).Draw(t, "dir")
	name := rapid.SampledFrom(modelNames).Draw(t, "name")
	mode := rapid.SampledFrom([]uint32{0o755, 0o700, 0o2775, 0o1777}).Draw(t, "mode")
	m.drawCaller(t)
	ino, err := m.e.mkdir(dir.ino, name, mode)
	want(t, "mkdir", err, makeExpect(dir, name))
	if err == 0 {
		dir.children[name] = m.newNode(t, ino, syscall.S_IFDIR|mode, dir)
	}
}

func (m *machine) mknod(t *rapid.T) {
	dir := rapid.SampledFrom(m.dirs()).Draw(t, "dir")
	name := rapid.SampledFrom(modelNames).Draw(t, "name")
	typ := rapid.SampledFrom([]uint32{syscall.S_IFIFO, syscall.S_IFSOCK, syscall.S_IFCHR}).Draw(t, "type")
	m.drawCaller(t)
	ino, err := m.e.mknod(dir.ino, name, typ|0o640, 0)
	want(t, "mknod", err, makeExpect(dir, name))
	if err == 0 {
		dir.children[name] = m.newNode(t, ino, typ|0o640, dir)
	}
}

func (m *machine) symlink(t *rapid.T) {
	dir := rapid.SampledFrom(m.dirs()).Draw(t, "dir")
	name := rapid.SampledFrom(modelNames).Draw(t, "name")
	target := rapid.SampledFrom([]string{"a", "../b/c", strings.Repeat("t", 300)}).Draw(t, "target")
	m.drawCaller(t)
	ino, err := m.e.symlink(dir.ino, target, name)
	want(t, "symlink", err, makeExpect(dir, name))
	if err == 0 {
		n := m.newNode(t, ino, syscall.S_IFLNK|0o777, dir)
		n.target = target
		dir.children[name] = n
	}
}

func (m *machine) link(t *rapid.T) {
	src := m.entries(nil)
	if len(src) == 0 {
		return
	}
	s := rapid.SampledFrom(src).Draw(t, "src")
	dir := rapid.SampledFrom(m.dirs()).Draw(t, "dir")
	name := rapid.SampledFrom(modelNames).Draw(t, "name")
	exp := makeExpect(dir, name)
	if exp == 0 && s.node.isDir() {
		exp = syscall.EPERM
	}
	out, err := m.e.link(s.node.ino, dir.ino, name)
	want(t, "link", err, exp)
	if err == 0 {
		s.node.links++
		dir.children[name] = s.node
		if out.NodeId != s.node.ino || out.Nlink != s.node.nlink() {
			t.Fatalf("link reply %+v, model nlink %d", out, s.node.nlink())
		}
	}
}

// unlinkNode removes one name of n (already taken out of its directory).
func (m *machine) unlinkNode(n *mnode) {
	if n.isDir() {
		n.removed = true
	} else {
		n.links--
	}
	m.drop(n)
}

func (m *machine) remove(t *rapid.T) {
	dir := rapid.SampledFrom(m.dirs()).Draw(t, "dir")
	name := rapid.SampledFrom(modelNames).Draw(t, "name")
	rmdir := rapid.Bool().Draw(t, "rmdir")
	n := dir.children[name]
	var exp syscall.Errno
	switch {
	case len(name) > 255:
		exp = syscall.ENAMETOOLONG
	case n == nil:
		exp = syscall.ENOENT
	case rmdir && !n.isDir():
		exp = syscall.ENOTDIR
	case rmdir && len(n.children) > 0:
		exp = syscall.ENOTEMPTY
	case !rmdir && n.isDir():
		exp = syscall.EISDIR
	}
	var err syscall.Errno
	if rmdir {
		err = m.e.rmdir(dir.ino, name)
	} else {
		err = m.e.unlink(dir.ino, name)
	}
	want(t, fmt.Sprintf("remove(rmdir=%v) %q", rmdir, name), err, exp)
	if err == 0 {
		delete(dir.children, name)
		m.unlinkNode(n)
	}
}

func (m *machine) rename(t *rapid.T) {
	dirs := m.dirs()
	d1 := rapid.SampledFrom(dirs).Draw(t, "d1")
	n1 := rapid.SampledFrom(modelNames).Draw(t, "n1")
	d2 := rapid.SampledFrom(dirs).Draw(t, "d2")
	n2 := rapid.SampledFrom(modelNames).Draw(t, "n2")
	flags := rapid.SampledFrom([]uint32{0, 0, 1, 2}).Draw(t, "flags")
	src, dst := d1.children[n1], d2.children[n2]
	exp := func() syscall.Errno {
		switch {
		case len(n1) > 255 || len(n2) > 255:
			return syscall.ENAMETOOLONG
		case src == nil:
			return syscall.ENOENT
		case flags == 1 && dst != nil:
			return syscall.EEXIST
		case flags == 2 && dst == nil:
			return syscall.ENOENT
		}
		if d1 != d2 {
			if src.isDir() && m.isAncestor(src, d2) {
				return syscall.EINVAL
			}
			if dst != nil && dst.isDir() && m.isAncestor(dst, d1) {
				if flags == 2 {
					return syscall.EINVAL
				}
				return syscall.ENOTEMPTY
			}
		}
		if dst == src {
			return 0
		}
		if dst != nil && flags != 2 {
			switch {
			case src.isDir() && !dst.isDir():
				return syscall.ENOTDIR
			case !src.isDir() && dst.isDir():
				return syscall.EISDIR
			case dst.isDir() && len(dst.children) > 0:
				return syscall.ENOTEMPTY
			}
		}
		return 0
	}()
	err := m.e.rename(d1.ino, n1, d2.ino, n2, flags)
	want(t, fmt.Sprintf("rename %d/%q -> %d/%q flags %d", d1.ino, n1, d2.ino, n2, flags), err, exp)
	if err != 0 || dst == src {
		return
	}
	if flags == 2 {
		d1.children[n1], d2.children[n2] = dst, src
		if src.isDir() {
			src.parent = d2
		}
		if dst.isDir() {
			dst.parent = d1
		}
		return
	}
	delete(d1.children, n1)
	if dst != nil {
		m.unlinkNode(dst)
	}
	d2.children[n2] = src
	if src.isDir() {
		src.parent = d2
	}
}

func (m *machine) open(t *rapid.T) {
	files := m.entries((*mnode).isReg)
	if len(files) == 0 {
		return
	}
	f := rapid.SampledFrom(files).Draw(t, "file")
	trunc := rapid.IntRange(0, 4).Draw(t, "trunc") == 0
	flags := uint32(syscall.O_RDWR)
	if trunc {
		flags |= syscall.O_TRUNC
	}
	fh, err := m.e.open_(f.node.ino, flags)
	want(t, "open", err, 0)
	if trunc {
		f.node.data = nil
	}
	f.node.opens++
	m.handles = append(m.handles, mhandle{node: f.node, fh: fh})
}

func (m *machine) opendir(t *rapid.T) {
	d := rapid.SampledFrom(m.dirs()).Draw(t, "dir")
	fh, err := m.e.opendir(d.ino)
	want(t, "opendir", err, 0)
	d.opens++
	m.handles = append(m.handles, mhandle{node: d, fh: fh, dir: true})
}

func (m *machine) close(t *rapid.T) {
	if len(m.handles) == 0 {
		return
	}
	i := rapid.IntRange(0, len(m.handles)-1).Draw(t, "handle")
	m.closeHandle(i)
}

func (m *machine) closeHandle(i int) {
	h := m.handles[i]
	m.handles = slices.Delete(m.handles, i, i+1)
	if h.dir {
		m.e.releasedir(h.node.ino, h.fh)
	} else {
		m.e.release(h.node.ino, h.fh)
	}
	h.node.opens--
	m.drop(h.node)
}

func (m *machine) fileHandle(t *rapid.T) (mhandle, bool) {
	var fhs []mhandle
	for _, h := range m.handles {
		if !h.dir {
			fhs = append(fhs, h)
		}
	}
	if len(fhs) == 0 {
		return mhandle{}, false
	}
	return rapid.SampledFrom(fhs).Draw(t, "fh"), true
}

func (m *machine) write(t *rapid.T) {
	h, ok := m.fileHandle(t)
	if !ok {
		return
	}
	off := rapid.IntRange(0, 3*bs).Draw(t, "off")
	n := rapid.IntRange(1, 2*bs).Draw(t, "len")
	data := pattern(n, byte(rapid.IntRange(0, 255).Draw(t, "seed")))
	m.drawCaller(t)
	want(t, "write", m.e.write(h.node.ino, h.fh, uint64(off), data), 0)
	if end := off + n; end > len(h.node.data) {
		h.node.data = append(h.node.data, make([]byte, end-len(h.node.data))...)
	}
	copy(h.node.data[off:], data)
	if m.e.caller.Uid != 0 {
		h.node.mode = kill(h.node.mode)
	}
}

func (m *machine) read(t *rapid.T) {
	h, ok := m.fileHandle(t)
	if !ok {
		return
	}
	off := rapid.IntRange(0, 4*bs).Draw(t, "off")
	n := rapid.IntRange(0, 3*bs).Draw(t, "len")
	got, err := m.e.read(h.node.ino, h.fh, uint64(off), n)
	want(t, "read", err, 0)
	var exp []byte
	if off < len(h.node.data) {
		exp = h.node.data[off:min(off+n, len(h.node.data))]
	}
	if !bytes.Equal(got, exp) {
		t.Fatalf("read ino %d %d@%d: got %d bytes, model %d (or different bytes)", h.node.ino, n, off, len(got), len(exp))
	}
}

func (m *machine) fsync(t *rapid.T) {
	h, ok := m.fileHandle(t)
	if !ok {
		return
	}
	want(t, "fsync", m.e.fsync(h.node.ino, h.fh), 0)
}

// pickNode draws a live node: a named one or the root.
func (m *machine) pickNode(t *rapid.T) *mnode {
	nodes := []*mnode{m.root}
	for _, e := range m.entries(nil) {
		nodes = append(nodes, e.node)
	}
	return rapid.SampledFrom(nodes).Draw(t, "node")
}

func (m *machine) truncate(t *rapid.T) {
	files := m.entries((*mnode).isReg)
	if len(files) == 0 {
		return
	}
	n := rapid.SampledFrom(files).Draw(t, "file").node
	size := rapid.IntRange(0, 3*bs).Draw(t, "size")
	want(t, "truncate", m.e.truncate(n.ino, uint64(size)), 0)
	if size < len(n.data) {
		n.data = n.data[:size]
	} else {
		n.data = append(n.data, make([]byte, size-len(n.data))...)
	}
}

func (m *machine) chmod(t *rapid.T) {
	n := m.pickNode(t)
	mode := rapid.SampledFrom([]uint32{0o644, 0o755, 0o4755, 0o2755, 0o2644, 0o1777, 0o000}).Draw(t, "mode")
	var in fuse.SetAttrIn
	in.NodeId, in.Valid, in.Mode = n.ino, fuse.FATTR_MODE, mode
	_, err := m.e.setattr(in)
	want(t, "chmod", err, 0)
	n.mode = n.mode&syscall.S_IFMT | mode
}

func (m *machine) chown(t *rapid.T) {
	n := m.pickNode(t)
	uid := rapid.SampledFrom([]uint32{0, 1000, 2000}).Draw(t, "uid")
	gid := rapid.SampledFrom([]uint32{0, 100, 200}).Draw(t, "gid")
	var in fuse.SetAttrIn
	in.NodeId, in.Valid, in.Uid, in.Gid = n.ino, fuse.FATTR_UID|fuse.FATTR_GID, uid, gid
	_, err := m.e.setattr(in)
	want(t, "chown", err, 0)
	n.uid, n.gid = uid, gid
	if !n.isDir() {
		n.mode = kill(n.mode)
	}
}

var modelXattrs = []string{"user.a", "user.b", "trusted.c"}

func (m *machine) setxattr(t *rapid.T) {
	n := m.pickNode(t)
	name := rapid.SampledFrom(modelXattrs).Draw(t, "xattr")
	value := []byte(rapid.SampledFrom([]string{"", "v", strings.Repeat("x", 9000)}).Draw(t, "value"))
	flags := rapid.SampledFrom([]uint32{0, 1, 2}).Draw(t, "flags")
	_, exists := n.xattrs[name]
	var exp syscall.Errno
	switch {
	case flags == 1 && exists:
		exp = syscall.EEXIST
	case flags == 2 && !exists:
		exp = syscall.ENODATA
	}
	want(t, "setxattr", m.e.setxattr(n.ino, name, value, flags), exp)
	if exp == 0 {
		n.xattrs[name] = value
	}
}

func (m *machine) removexattr(t *rapid.T) {
	n := m.pickNode(t)
	name := rapid.SampledFrom(modelXattrs).Draw(t, "xattr")
	var exp syscall.Errno
	if _, ok := n.xattrs[name]; !ok {
		exp = syscall.ENODATA
	}
	want(t, "removexattr", m.e.removexattr(n.ino, name), exp)
	delete(n.xattrs, name)
}

func (m *machine) stat(t *rapid.T) {
	m.compareNode(t, m.pickNode(t))
}

func (m *machine) readdir(t *rapid.T) {
	m.compareDir(t, rapid.SampledFrom(m.dirs()).Draw(t, "dir"))
}

func (m *machine) lookup(t *rapid.T) {
	dir := rapid.SampledFrom(m.dirs()).Draw(t, "dir")
	name := rapid.SampledFrom(modelNames).Draw(t, "name")
	out, err := m.e.lookup(dir.ino, name)
	n := dir.children[name]
	switch {
	case len(name) > 255:
		want(t, "lookup", err, syscall.ENAMETOOLONG)
	case n == nil:
		want(t, "lookup", err, syscall.ENOENT)
	default:
		want(t, "lookup", err, 0)
		if out.NodeId != n.ino {
			t.Fatalf("lookup %q: ino %d, model %d", name, out.NodeId, n.ino)
		}
		m.compareAttr(t, n, out.Attr)
	}
}

func (m *machine) remount(t *rapid.T) {
	for len(m.handles) > 0 {
		m.closeHandle(len(m.handles) - 1)
	}
	m.e.remount()
	m.compareAll(t)
}

func (m *machine) compareAttr(t *rapid.T, n *mnode, a fuse.Attr) {
	t.Helper()
	if a.Ino != n.ino || a.Mode != n.mode || a.Nlink != n.nlink() || a.Size != n.size() || a.Uid != n.uid || a.Gid != n.gid {
		t.Fatalf("ino %d: attr mode=%#o nlink=%d size=%d uid=%d gid=%d; model mode=%#o nlink=%d size=%d uid=%d gid=%d",
			n.ino, a.Mode, a.Nlink, a.Size, a.Uid, a.Gid, n.mode, n.nlink(), n.size(), n.uid, n.gid)
	}
}

func (m *machine) compareNode(t *rapid.T, n *mnode) {
	t.Helper()
	a, err := m.e.getattr(n.ino)
	want(t, "getattr", err, 0)
	m.compareAttr(t, n, a)
	list, _, err := m.e.listxattr(n.ino, 1<<16)
	want(t, "listxattr", err, 0)
	var names []string
	for name := range n.xattrs {
		names = append(names, name)
	}
	sort.Strings(names)
	var wantList []byte
	for _, name := range names {
		if m.e.caller.Uid != 0 && strings.HasPrefix(name, "trusted.") {
			continue // listed to root only, as on ext4
		}
		wantList = append(append(wantList, name...), 0)
		v, _, err := m.e.getxattr(n.ino, name, 1<<16)
		want(t, "getxattr", err, 0)
		if !bytes.Equal(v, n.xattrs[name]) {
			t.Fatalf("ino %d xattr %q: %d bytes, model %d", n.ino, name, len(v), len(n.xattrs[name]))
		}
	}
	if !bytes.Equal(list, wantList) {
		t.Fatalf("ino %d: listxattr %q, model %q", n.ino, list, wantList)
	}
	switch {
	case n.isReg():
		fh, err := m.e.open_(n.ino, syscall.O_RDONLY)
		want(t, "open", err, 0)
		got, err := m.e.read(n.ino, fh, 0, len(n.data)+10)
		m.e.release(n.ino, fh)
		want(t, "read", err, 0)
		if !bytes.Equal(got, n.data) {
			t.Fatalf("ino %d: contents differ (%d bytes, model %d)", n.ino, len(got), len(n.data))
		}
	case n.mode&syscall.S_IFMT == syscall.S_IFLNK:
		target, err := m.e.readlink(n.ino)
		want(t, "readlink", err, 0)
		if target != n.target {
			t.Fatalf("ino %d: target %q, model %q", n.ino, target, n.target)
		}
	}
}

func (m *machine) compareDir(t *rapid.T, d *mnode) {
	t.Helper()
	ents := m.e.readdir(d.ino)
	want := []fuse.DirEntry{
		{Name: ".", Ino: d.ino, Mode: syscall.S_IFDIR, Off: 1},
		{Name: "..", Ino: d.parent.ino, Mode: syscall.S_IFDIR, Off: 2},
	}
	for _, name := range sortedNames(d) {
		ch := d.children[name]
		want = append(want, fuse.DirEntry{Name: name, Ino: ch.ino, Mode: ch.mode & syscall.S_IFMT, Off: uint64(len(want) + 1)})
	}
	if !slices.Equal(ents, want) {
		t.Fatalf("readdir %d:\n got %v\nwant %v", d.ino, ents, want)
	}
}

func (m *machine) compareAll(t *rapid.T) {
	for _, d := range m.dirs() {
		m.compareDir(t, d)
	}
	for _, n := range m.nodes() {
		m.compareNode(t, n)
	}
}

func (m *machine) checkInvariants(t *rapid.T) {
	r, err := fs.Check(m.e.db)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("Check:\n%s", r)
	}
	if r.Inodes != len(m.live) {
		t.Fatalf("Check counts %d inodes, model %d", r.Inodes, len(m.live))
	}
}

func TestModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := newEnv(t, fs.Options{WriteBufferSize: rapid.SampledFrom([]int{4 << 10, 64 << 10, 4 << 20}).Draw(t, "wbuf")},
			fs.FormatOptions{BlockSize: bs})
		root := &mnode{ino: 1, mode: syscall.S_IFDIR | 0o755, xattrs: map[string][]byte{}, children: map[string]*mnode{}}
		root.parent = root
		m := &machine{e: e, root: root, live: map[uint64]*mnode{1: root}, used: map[uint64]bool{1: true}}
		actions := map[string]func(*rapid.T){
			"create": m.create, "mkdir": m.mkdir, "mknod": m.mknod, "symlink": m.symlink,
			"link": m.link, "remove": m.remove, "rename": m.rename,
			"open": m.open, "opendir": m.opendir, "close": m.close,
			"write": m.write, "read": m.read, "fsync": m.fsync, "truncate": m.truncate,
			"chmod": m.chmod, "chown": m.chown, "setxattr": m.setxattr, "removexattr": m.removexattr,
			"stat": m.stat, "readdir": m.readdir, "lookup": m.lookup, "remount": m.remount,
		}
		names := make([]string, 0, len(actions))
		for k := range actions {
			names = append(names, k)
		}
		sort.Strings(names)
		steps := rapid.IntRange(1, 150).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			name := rapid.SampledFrom(names).Draw(t, "action")
			actions[name](t)
			m.checkInvariants(t)
		}
		m.compareAll(t)
		for len(m.handles) > 0 {
			m.closeHandle(len(m.handles) - 1)
		}
		m.checkInvariants(t)
	})
}
