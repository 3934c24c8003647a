package main

import (
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// ramFS is the ceiling: a RAM-only FUSE filesystem on go-fuse's raw API (the
// API lsmfs serves), storing nothing durable. It is a plain, naive POSIX
// filesystem: it answers every request the kernel sends (OPEN, FLUSH,
// RELEASE, GETXATTR security.capability, ...) rather than declining any, so
// that its request counts are what a straightforward filesystem pays, and it
// replies with the entry, attribute and negative-entry timeouts and the
// FOPEN_KEEP_CACHE flag lsmfs replies with. The caller mounts it with lsmfs's
// own fuse.MountOptions (serve.go).
//
// One mutex guards everything; node ids are never reused. A node is dropped
// once it has no name, no kernel reference (lookup count) and no open handle.
type ramFS struct {
	fuse.RawFileSystem // ENOSYS for the rest (lseek, locks, fallocate, ...)

	entryTimeout, attrTimeout, negTimeout time.Duration

	// Levers of ceiling variants (serve.go): killpriv handles
	// CAP_HANDLE_KILLPRIV_V2's kill flags; the others answer ENOSYS.
	killpriv, noFlush, noOpen, noOpendir bool
	// noFlushRO sets FOPEN_NOFLUSH on read-only opens; cacheDir sets
	// FOPEN_CACHE_DIR on directory opens.
	noFlushRO, cacheDir bool

	mu      sync.Mutex
	nodes   map[uint64]*ramNode
	nextIno uint64
	handles map[uint64]*ramHandle
	nextFh  uint64
}

const ramPage = 64 << 10

type ramNode struct {
	attr     fuse.Attr
	lookups  uint64
	opens    int
	parent   uint64            // directories: for ".."
	children map[string]uint64 // directories
	pages    []*[ramPage]byte  // regular files; nil pages are holes
	target   []byte            // symlinks
	xattrs   map[string][]byte
}

type ramHandle struct {
	ino  uint64
	list []fuse.DirEntry // directories: the listing taken at offset 0
}

func newRAMFS(entry, attr, neg time.Duration) *ramFS {
	fs := &ramFS{
		RawFileSystem: fuse.NewDefaultRawFileSystem(),
		entryTimeout:  entry, attrTimeout: attr, negTimeout: neg,
		nodes:   make(map[uint64]*ramNode),
		nextIno: fuse.FUSE_ROOT_ID + 1,
		handles: make(map[uint64]*ramHandle),
		nextFh:  1,
	}
	root := &ramNode{children: make(map[string]uint64), parent: fuse.FUSE_ROOT_ID}
	root.attr = fuse.Attr{Ino: fuse.FUSE_ROOT_ID, Mode: syscall.S_IFDIR | 0o755, Nlink: 2}
	fs.touch(root, true, true, true)
	root.lookups = 1
	fs.nodes[fuse.FUSE_ROOT_ID] = root
	return fs
}

func (fs *ramFS) String() string { return "ramfs" }

func (fs *ramFS) touch(n *ramNode, a, m, c bool) {
	now := time.Now()
	s, ns := uint64(now.Unix()), uint32(now.Nanosecond())
	if a {
		n.attr.Atime, n.attr.Atimensec = s, ns
	}
	if m {
		n.attr.Mtime, n.attr.Mtimensec = s, ns
	}
	if c {
		n.attr.Ctime, n.attr.Ctimensec = s, ns
	}
}

func (fs *ramFS) fillAttr(n *ramNode, a *fuse.Attr) {
	*a = n.attr
	a.Blocks = (a.Size + 511) / 512
	a.Blksize = 4096
}

func (fs *ramFS) fillEntry(ino uint64, n *ramNode, out *fuse.EntryOut) {
	n.lookups++
	out.NodeId = ino
	out.Generation = 1
	out.SetEntryTimeout(fs.entryTimeout)
	out.SetAttrTimeout(fs.attrTimeout)
	fs.fillAttr(n, &out.Attr)
}

// reapLocked drops ino once nothing refers to it.
func (fs *ramFS) reapLocked(ino uint64, n *ramNode) {
	if n.attr.Nlink == 0 && n.lookups == 0 && n.opens == 0 && ino != fuse.FUSE_ROOT_ID {
		delete(fs.nodes, ino)
	}
}

func (fs *ramFS) dir(ino uint64) (*ramNode, fuse.Status) {
	n := fs.nodes[ino]
	if n == nil {
		return nil, fuse.ENOENT
	}
	if n.children == nil {
		return nil, fuse.ENOTDIR
	}
	return n, fuse.OK
}

func (fs *ramFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	d, st := fs.dir(h.NodeId)
	if !st.Ok() {
		return st
	}
	var ino uint64
	switch name {
	case ".":
		ino = h.NodeId
	case "..":
		ino = d.parent
	default:
		ino = d.children[name]
	}
	if ino == 0 {
		if fs.negTimeout > 0 {
			*out = fuse.EntryOut{}
			out.SetEntryTimeout(fs.negTimeout)
			return fuse.OK
		}
		return fuse.ENOENT
	}
	fs.fillEntry(ino, fs.nodes[ino], out)
	return fuse.OK
}

func (fs *ramFS) Forget(nodeid, nlookup uint64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if n := fs.nodes[nodeid]; n != nil {
		n.lookups -= min(nlookup, n.lookups)
		fs.reapLocked(nodeid, n)
	}
}

func (fs *ramFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.nodes[in.NodeId]
	if n == nil {
		return fuse.ENOENT
	}
	fs.fillAttr(n, &out.Attr)
	out.SetTimeout(fs.attrTimeout)
	return fuse.OK
}

func (fs *ramFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.nodes[in.NodeId]
	if n == nil {
		return fuse.ENOENT
	}
	if m, ok := in.GetMode(); ok {
		n.attr.Mode = n.attr.Mode&syscall.S_IFMT | m&^syscall.S_IFMT
	}
	if u, ok := in.GetUID(); ok {
		n.attr.Uid = u
	}
	if g, ok := in.GetGID(); ok {
		n.attr.Gid = g
	}
	if in.Valid&fuse.FATTR_KILL_SUIDGID != 0 {
		n.killPriv()
	}
	if sz, ok := in.GetSize(); ok {
		if n.children != nil {
			return fuse.EISDIR
		}
		n.truncate(sz)
		fs.touch(n, false, true, false)
	}
	if t, ok := in.GetATime(); ok {
		n.attr.Atime, n.attr.Atimensec = uint64(t.Unix()), uint32(t.Nanosecond())
	}
	if t, ok := in.GetMTime(); ok {
		n.attr.Mtime, n.attr.Mtimensec = uint64(t.Unix()), uint32(t.Nanosecond())
	}
	fs.touch(n, false, false, true)
	fs.fillAttr(n, &out.Attr)
	out.SetTimeout(fs.attrTimeout)
	return fuse.OK
}

// newChild makes a node named name in parent; the caller holds mu.
func (fs *ramFS) newChild(h *fuse.InHeader, name string, mode, umask uint32, out *fuse.EntryOut) (uint64, *ramNode, fuse.Status) {
	d, st := fs.dir(h.NodeId)
	if !st.Ok() {
		return 0, nil, st
	}
	if _, ok := d.children[name]; ok {
		return 0, nil, fuse.Status(syscall.EEXIST)
	}
	if len(name) > 255 {
		return 0, nil, fuse.Status(syscall.ENAMETOOLONG)
	}
	ino := fs.nextIno
	fs.nextIno++
	// CAP_DONT_MASK (lsmfs's options): the umask arrives apart.
	mode = mode&syscall.S_IFMT | mode&^syscall.S_IFMT&^umask
	n := &ramNode{}
	n.attr = fuse.Attr{Ino: ino, Mode: mode, Nlink: 1}
	n.attr.Uid, n.attr.Gid = h.Uid, h.Gid
	if d.attr.Mode&syscall.S_ISGID != 0 {
		n.attr.Gid = d.attr.Gid
	}
	fs.touch(n, true, true, true)
	fs.touch(d, false, true, true)
	d.children[name] = ino
	fs.nodes[ino] = n
	fs.fillEntry(ino, n, out)
	return ino, n, fuse.OK
}

func (fs *ramFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	_, n, st := fs.newChild(&in.InHeader, name, in.Mode, in.Umask, out)
	if st.Ok() {
		n.attr.Rdev = in.Rdev
		out.Attr.Rdev = in.Rdev
	}
	return st
}

func (fs *ramFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	_, n, st := fs.newChild(&in.InHeader, name, syscall.S_IFDIR|in.Mode, in.Umask, out)
	if !st.Ok() {
		return st
	}
	n.children = make(map[string]uint64)
	n.parent = in.NodeId
	n.attr.Nlink = 2
	out.Attr.Nlink = 2
	fs.nodes[in.NodeId].attr.Nlink++
	return fuse.OK
}

func (fs *ramFS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	_, n, st := fs.newChild(h, name, syscall.S_IFLNK|0o777, 0, out)
	if st.Ok() {
		n.target = []byte(target)
		n.attr.Size = uint64(len(target))
		out.Attr.Size = n.attr.Size
	}
	return st
}

func (fs *ramFS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.nodes[h.NodeId]
	if n == nil {
		return nil, fuse.ENOENT
	}
	if n.attr.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		return nil, fuse.EINVAL
	}
	return n.target, fuse.OK
}

func (fs *ramFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	d, st := fs.dir(in.NodeId)
	if !st.Ok() {
		return st
	}
	n := fs.nodes[in.Oldnodeid]
	if n == nil {
		return fuse.ENOENT
	}
	if _, ok := d.children[name]; ok {
		return fuse.Status(syscall.EEXIST)
	}
	d.children[name] = in.Oldnodeid
	n.attr.Nlink++
	fs.touch(n, false, false, true)
	fs.touch(d, false, true, true)
	fs.fillEntry(in.Oldnodeid, n, out)
	return fuse.OK
}

// unlinkLocked removes name -> ino from d and drops a link of ino.
func (fs *ramFS) unlinkLocked(d *ramNode, name string, ino uint64) {
	n := fs.nodes[ino]
	delete(d.children, name)
	fs.touch(d, false, true, true)
	if n.children != nil {
		n.attr.Nlink = 0
		d.attr.Nlink--
	} else {
		n.attr.Nlink--
	}
	fs.touch(n, false, false, true)
	fs.reapLocked(ino, n)
}

func (fs *ramFS) remove(h *fuse.InHeader, name string, dir bool) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	d, st := fs.dir(h.NodeId)
	if !st.Ok() {
		return st
	}
	ino := d.children[name]
	if ino == 0 {
		return fuse.ENOENT
	}
	n := fs.nodes[ino]
	switch {
	case dir && n.children == nil:
		return fuse.ENOTDIR
	case !dir && n.children != nil:
		return fuse.Status(syscall.EISDIR)
	case dir && len(n.children) > 0:
		return fuse.Status(syscall.ENOTEMPTY)
	}
	fs.unlinkLocked(d, name, ino)
	return fuse.OK
}

func (fs *ramFS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return fs.remove(h, name, false)
}

func (fs *ramFS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return fs.remove(h, name, true)
}

func (fs *ramFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	const (
		noReplace = 1 // RENAME_NOREPLACE
		exchange  = 2 // RENAME_EXCHANGE
	)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	od, st := fs.dir(in.NodeId)
	if !st.Ok() {
		return st
	}
	nd, st := fs.dir(in.Newdir)
	if !st.Ok() {
		return st
	}
	src := od.children[oldName]
	if src == 0 {
		return fuse.ENOENT
	}
	dst := nd.children[newName]
	sn := fs.nodes[src]
	if in.Flags&exchange != 0 {
		if dst == 0 {
			return fuse.ENOENT
		}
		od.children[oldName], nd.children[newName] = dst, src
		dn := fs.nodes[dst]
		if sn.children != nil {
			sn.parent = in.Newdir
		}
		if dn.children != nil {
			dn.parent = in.NodeId
		}
		fs.touch(od, false, true, true)
		fs.touch(nd, false, true, true)
		return fuse.OK
	}
	if dst != 0 {
		if dst == src {
			return fuse.OK
		}
		if in.Flags&noReplace != 0 {
			return fuse.Status(syscall.EEXIST)
		}
		dn := fs.nodes[dst]
		switch {
		case sn.children != nil && dn.children == nil:
			return fuse.ENOTDIR
		case sn.children == nil && dn.children != nil:
			return fuse.Status(syscall.EISDIR)
		case dn.children != nil && len(dn.children) > 0:
			return fuse.Status(syscall.ENOTEMPTY)
		}
		fs.unlinkLocked(nd, newName, dst)
	}
	delete(od.children, oldName)
	nd.children[newName] = src
	if sn.children != nil && in.NodeId != in.Newdir {
		sn.parent = in.Newdir
		od.attr.Nlink--
		nd.attr.Nlink++
	}
	fs.touch(sn, false, false, true)
	fs.touch(od, false, true, true)
	fs.touch(nd, false, true, true)
	return fuse.OK
}

func (fs *ramFS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status { return fuse.OK }

func (fs *ramFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.nodes[h.NodeId]
	if n == nil {
		return 0, fuse.ENOENT
	}
	v, ok := n.xattrs[attr]
	if !ok {
		return 0, fuse.ENOATTR
	}
	if len(dest) == 0 {
		return uint32(len(v)), fuse.OK
	}
	if len(dest) < len(v) {
		return uint32(len(v)), fuse.ERANGE
	}
	return uint32(copy(dest, v)), fuse.OK
}

func (fs *ramFS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.nodes[h.NodeId]
	if n == nil {
		return 0, fuse.ENOENT
	}
	var b []byte
	for k := range n.xattrs {
		b = append(append(b, k...), 0)
	}
	if len(dest) == 0 {
		return uint32(len(b)), fuse.OK
	}
	if len(dest) < len(b) {
		return uint32(len(b)), fuse.ERANGE
	}
	return uint32(copy(dest, b)), fuse.OK
}

func (fs *ramFS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	const (
		xattrCreate  = 1
		xattrReplace = 2
	)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.nodes[in.NodeId]
	if n == nil {
		return fuse.ENOENT
	}
	_, ok := n.xattrs[attr]
	if in.Flags&xattrCreate != 0 && ok {
		return fuse.Status(syscall.EEXIST)
	}
	if in.Flags&xattrReplace != 0 && !ok {
		return fuse.ENOATTR
	}
	if n.xattrs == nil {
		n.xattrs = make(map[string][]byte)
	}
	n.xattrs[attr] = append([]byte(nil), data...)
	fs.touch(n, false, false, true)
	return fuse.OK
}

func (fs *ramFS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.nodes[h.NodeId]
	if n == nil {
		return fuse.ENOENT
	}
	if _, ok := n.xattrs[attr]; !ok {
		return fuse.ENOATTR
	}
	delete(n.xattrs, attr)
	fs.touch(n, false, false, true)
	return fuse.OK
}

// openLocked adds a handle on ino.
func (fs *ramFS) openLocked(ino uint64, n *ramNode) uint64 {
	fh := fs.nextFh
	fs.nextFh++
	fs.handles[fh] = &ramHandle{ino: ino}
	n.opens++
	return fh
}

func (fs *ramFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	ino, n, st := fs.newChild(&in.InHeader, name, syscall.S_IFREG|in.Mode&^syscall.S_IFMT, in.Umask, &out.EntryOut)
	if !st.Ok() {
		return st
	}
	out.Fh = fs.openLocked(ino, n)
	out.OpenFlags = fuse.FOPEN_KEEP_CACHE
	return fuse.OK
}

func (fs *ramFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if fs.noOpen {
		return fuse.ENOSYS
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.nodes[in.NodeId]
	if n == nil {
		return fuse.ENOENT
	}
	if in.Flags&syscall.O_TRUNC != 0 && in.Flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		// CAP_ATOMIC_O_TRUNC: open truncates.
		if fs.killpriv && in.Mode&fuse.OPEN_KILL_SUIDGID != 0 {
			n.killPriv()
		}
		n.truncate(0)
		fs.touch(n, false, true, true)
	}
	out.Fh = fs.openLocked(in.NodeId, n)
	out.OpenFlags = fuse.FOPEN_KEEP_CACHE
	if fs.noFlushRO && in.Flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		out.OpenFlags |= fuse.FOPEN_NOFLUSH
	}
	return fuse.OK
}

func (fs *ramFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.nodes[in.NodeId]
	if n == nil {
		return nil, fuse.ENOENT
	}
	off := in.Offset
	if off >= n.attr.Size {
		return fuse.ReadResultData(nil), fuse.OK
	}
	end := min(off+uint64(len(buf)), n.attr.Size)
	buf = buf[:end-off]
	for done := uint64(0); done < uint64(len(buf)); {
		p, po := (off+done)/ramPage, (off+done)%ramPage
		k := min(uint64(len(buf))-done, ramPage-po)
		if p < uint64(len(n.pages)) && n.pages[p] != nil {
			copy(buf[done:done+k], n.pages[p][po:])
		} else {
			clear(buf[done : done+k])
		}
		done += k
	}
	return fuse.ReadResultData(buf), fuse.OK
}

func (n *ramNode) write(off uint64, data []byte) {
	for done := uint64(0); done < uint64(len(data)); {
		p, po := (off+done)/ramPage, (off+done)%ramPage
		for uint64(len(n.pages)) <= p {
			n.pages = append(n.pages, nil)
		}
		if n.pages[p] == nil {
			n.pages[p] = new([ramPage]byte)
		}
		done += uint64(copy(n.pages[p][po:], data[done:]))
	}
	n.attr.Size = max(n.attr.Size, off+uint64(len(data)))
}

// killPriv clears suid, sgid (with group exec) and file capabilities.
func (n *ramNode) killPriv() {
	n.attr.Mode &^= syscall.S_ISUID
	if n.attr.Mode&syscall.S_IXGRP != 0 {
		n.attr.Mode &^= syscall.S_ISGID
	}
	delete(n.xattrs, "security.capability")
}

func (n *ramNode) truncate(size uint64) {
	if size < n.attr.Size {
		keep := (size + ramPage - 1) / ramPage
		for i := keep; i < uint64(len(n.pages)); i++ {
			n.pages[i] = nil
		}
		if keep < uint64(len(n.pages)) {
			n.pages = n.pages[:keep]
		}
		if po := size % ramPage; po != 0 && size/ramPage < uint64(len(n.pages)) && n.pages[size/ramPage] != nil {
			clear(n.pages[size/ramPage][po:])
		}
	}
	n.attr.Size = size
}

func (fs *ramFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	return fs.Writev(cancel, in, [][]byte{data})
}

func (fs *ramFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.nodes[in.NodeId]
	if n == nil {
		return 0, fuse.ENOENT
	}
	if fs.killpriv && in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0 {
		n.killPriv()
	}
	off := in.Offset
	for _, d := range data {
		n.write(off, d)
		off += uint64(len(d))
	}
	fs.touch(n, false, true, true)
	return uint32(off - in.Offset), fuse.OK
}

func (fs *ramFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	if fs.noFlush {
		return fuse.ENOSYS
	}
	return fuse.OK
}
func (fs *ramFS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status { return fuse.OK }
func (fs *ramFS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return fuse.OK
}

func (fs *ramFS) release(fh uint64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	h := fs.handles[fh]
	if h == nil {
		return
	}
	delete(fs.handles, fh)
	if n := fs.nodes[h.ino]; n != nil {
		n.opens--
		fs.reapLocked(h.ino, n)
	}
}

func (fs *ramFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) { fs.release(in.Fh) }
func (fs *ramFS) ReleaseDir(in *fuse.ReleaseIn)                      { fs.release(in.Fh) }

func (fs *ramFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if fs.noOpendir {
		return fuse.ENOSYS
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, st := fs.dir(in.NodeId)
	if !st.Ok() {
		return st
	}
	out.Fh = fs.openLocked(in.NodeId, n)
	if fs.cacheDir {
		out.OpenFlags = fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE
	}
	return fuse.OK
}

func (fs *ramFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return fs.readDir(in, out, false)
}

func (fs *ramFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return fs.readDir(in, out, true)
}

// readDir lists the snapshot taken at the last read from offset 0; an
// entry's offset cookie is its position in it plus one.
func (fs *ramFS) readDir(in *fuse.ReadIn, out *fuse.DirEntryList, plus bool) fuse.Status {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	h := fs.handles[in.Fh]
	if h == nil && fs.noOpendir {
		h = &ramHandle{ino: in.NodeId} // no handle: list afresh each call
	}
	if h == nil {
		return fuse.EBADF
	}
	d, st := fs.dir(h.ino)
	if !st.Ok() {
		return st
	}
	if in.Offset == 0 || h.list == nil {
		h.list = h.list[:0]
		h.list = append(h.list,
			fuse.DirEntry{Name: ".", Ino: h.ino, Mode: syscall.S_IFDIR},
			fuse.DirEntry{Name: "..", Ino: d.parent, Mode: syscall.S_IFDIR})
		for name, ino := range d.children {
			h.list = append(h.list, fuse.DirEntry{Name: name, Ino: ino, Mode: fs.nodes[ino].attr.Mode})
		}
		sort.Slice(h.list[2:], func(i, j int) bool { return h.list[2+i].Ino < h.list[2+j].Ino })
	}
	for i := in.Offset; i < uint64(len(h.list)); i++ {
		e := h.list[i]
		e.Off = i + 1
		if !plus {
			if !out.AddDirEntry(e) {
				break
			}
			continue
		}
		eo := out.AddDirLookupEntry(e)
		if eo == nil {
			break
		}
		if i < 2 {
			continue // node id 0: the kernel makes no dentry
		}
		if n := fs.nodes[e.Ino]; n != nil && d.children[e.Name] == e.Ino {
			fs.fillEntry(e.Ino, n, eo)
		}
	}
	return fuse.OK
}

func (fs *ramFS) StatFs(cancel <-chan struct{}, in *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	*out = fuse.StatfsOut{Bsize: 4096, Frsize: 4096, Blocks: 1 << 30, Bfree: 1 << 29, Bavail: 1 << 29,
		Files: 1 << 30, Ffree: 1 << 29, NameLen: 255}
	return fuse.OK
}
