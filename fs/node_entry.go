package fs

// Operations on directory entries: lookup, creation (mknod, mkdir, symlink,
// link, and the create half of create), removal (unlink, rmdir) and rename.
// Each is one engine batch; its locks are the parent's and, when it exists,
// the child's inode lock, taken together in shard order.

import (
	"errors"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/lsm"
)

// Rename flags (renameat2(2)).
const (
	renameNoReplace = 1 << 0
	renameExchange  = 1 << 1
)

// checkName validates a new entry name.
func checkName(name string) error {
	if len(name) > maxNameLen {
		return syscall.ENAMETOOLONG
	}
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return syscall.EINVAL
	}
	return nil
}

// writable fails with EROFS on a read-only filesystem.
func (f *FS) writable() error {
	if f.opts.ReadOnly {
		return syscall.EROFS
	}
	return nil
}

// stat reads ino's attributes including what its write buffer holds; a
// deleted inode the kernel still holds has its last ones (ghosts.go).
func (f *FS) stat(ino uint64) (inode, error) {
	if f.open.get(ino) == nil {
		return f.getInodeOrGhost(ino)
	}
	h := f.locks.rlock(ino)
	defer h.unlock()
	n, err := f.getInodeOrGhost(ino) // an opendir'ed removed directory is open
	if err != nil {
		return n, err
	}
	if oi := f.open.get(ino); oi != nil {
		oi.overlay(&n, f.opts.WritebackCache)
	}
	return n, nil
}

// getInodeOrGhost is getInode, falling back on the ghost of a deleted inode.
func (f *FS) getInodeOrGhost(ino uint64) (inode, error) {
	n, err := f.getInode(ino)
	if errors.Is(err, syscall.ENOENT) {
		if g, ok := f.ghosts.get(ino, false); ok {
			return g, nil
		}
	}
	return n, err
}

// statLocked is stat for a caller holding ino's lock.
func (f *FS) statLocked(ino uint64) (inode, error) {
	n, err := f.getInode(ino)
	if err != nil {
		return n, err
	}
	if oi := f.open.get(ino); oi != nil {
		oi.overlay(&n, f.opts.WritebackCache)
	}
	return n, nil
}

// Lookup finds name in directory header.NodeId.
func (f *FS) Lookup(cancel <-chan struct{}, header *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	parent := header.NodeId
	if len(name) > maxNameLen {
		return fuse.Status(syscall.ENAMETOOLONG)
	}
	var ino uint64
	switch name {
	case ".":
		ino = parent
	case "..":
		p, err := f.getInode(parent)
		if err != nil {
			return f.errno("lookup", parent, err)
		}
		ino = p.Parent
	default:
		d, err := f.getDentry(parent, name)
		if errors.Is(err, syscall.ENOENT) && f.opts.NegativeTimeout > 0 {
			// A negative entry: the kernel caches the absence.
			*out = fuse.EntryOut{}
			out.SetEntryTimeout(f.opts.NegativeTimeout)
			return fuse.OK
		}
		if err != nil {
			return f.errno("lookup", parent, err)
		}
		ino = d.Ino
	}
	n, err := f.stat(ino)
	if err != nil {
		return f.errno("lookup", ino, err)
	}
	f.fillEntry(ino, &n, out)
	return fuse.OK
}

// Forget drops the ghost of a deleted inode (ghosts.go); lsmfs keeps no
// other per-lookup state. An inode stays alive while it has a name or an
// open handle.
func (f *FS) Forget(nodeid, nlookup uint64) { f.ghosts.forget(nodeid) }

// makeNode creates an inode of the given mode named name in parent, with its
// entry, its inherited ACLs and the parent's update, in one batch. umask is
// the caller's, applied unless the parent has a default ACL.
func (f *FS) makeNode(parent uint64, name string, mode, umask, rdev uint32, caller fuse.Caller, target string) (uint64, inode, error) {
	ino, n, _, err := f.makeNodeOpen(parent, name, mode, umask, rdev, caller, target, false, 0)
	return ino, n, err
}

// makeNodeOpen is makeNode that, with open, also opens the new inode
// (open(2) flags) before its name can be reached: an unlink right after
// the create must find it open (an orphan then), not delete it under the
// handle Create returns.
func (f *FS) makeNodeOpen(parent uint64, name string, mode, umask, rdev uint32, caller fuse.Caller, target string, open bool, flags uint32) (uint64, inode, *openInode, error) {
	if err := f.writable(); err != nil {
		return 0, inode{}, nil, err
	}
	if err := checkName(name); err != nil {
		return 0, inode{}, nil, err
	}
	// Numbered first, so that the new inode is locked with its parent
	// (a number a failed create used is never used again, like any other).
	ino, err := f.allocIno()
	if err != nil {
		return 0, inode{}, nil, err
	}
	h := f.locks.lock(parent, ino)
	defer h.unlock()
	p, err := f.getDir(parent)
	if err != nil {
		return 0, inode{}, nil, err
	}
	if _, err := f.getDentry(parent, name); err == nil {
		return 0, inode{}, nil, syscall.EEXIST
	} else if !errors.Is(err, syscall.ENOENT) {
		return 0, inode{}, nil, err
	}
	mode, access, dflt, err := f.newInodeACL(parent, &p, mode, umask)
	if err != nil {
		return 0, inode{}, nil, err
	}
	n := inode{Mode: mode, Uid: caller.Uid, Gid: caller.Gid, Nlink: 1, Rdev: rdev}
	isDir := n.isDir()
	if p.Mode&syscall.S_ISGID != 0 {
		// BSD group semantics in a setgid directory; subdirectories
		// inherit the bit.
		n.Gid = p.Gid
		if isDir {
			n.Mode |= syscall.S_ISGID
		}
	}
	if isDir {
		if p.Nlink >= maxNlink {
			return 0, inode{}, nil, syscall.EMLINK
		}
		n.Nlink = 2
		n.Parent = parent
		p.Nlink++
	}
	if n.isSymlink() {
		n.Size = uint64(len(target))
	}
	now := f.now()
	n.Atime, n.Mtime, n.Ctime, n.Btime = now, now, now, now
	p.Size++
	p.Mtime, p.Ctime = now, now

	b := lsm.NewBatch()
	b.Set(dentryKey(parent, name), encodeDentry(dentry{Ino: ino, Type: n.dtype()}))
	putNewInodeACL(b, ino, &n, access, dflt)
	putInode(b, ino, &n)
	putInode(b, parent, &p)
	if n.isSymlink() {
		b.Set(symlinkKey(ino), []byte(target))
	}
	f.locks.bumpDir(parent)
	if err := f.db.Apply(b, false); err != nil {
		return 0, inode{}, nil, err
	}
	f.inodes.delta.Add(1)
	var oi *openInode
	if open {
		oi = f.open.acquire(ino, flags)
	}
	return ino, n, oi, nil
}

// Mknod creates a regular file, fifo, socket or device node.
func (f *FS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	mode := in.Mode
	switch mode & syscall.S_IFMT {
	case 0:
		mode |= syscall.S_IFREG
	case syscall.S_IFREG, syscall.S_IFIFO, syscall.S_IFSOCK:
		in.Rdev = 0
	case syscall.S_IFCHR, syscall.S_IFBLK:
	default:
		return fuse.EINVAL
	}
	ino, n, err := f.makeNode(in.NodeId, name, mode&(syscall.S_IFMT|0o7777), in.Umask, in.Rdev, in.Caller, "")
	if err != nil {
		return f.errno("mknod", in.NodeId, err)
	}
	f.fillEntry(ino, &n, out)
	return fuse.OK
}

// Mkdir creates a directory. The caller's umask comes apart from the mode
// (FUSE_DONT_MASK) and is applied unless a default ACL applies instead.
func (f *FS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	ino, n, err := f.makeNode(in.NodeId, name, syscall.S_IFDIR|in.Mode&0o7777, in.Umask, 0, in.Caller, "")
	if err != nil {
		return f.errno("mkdir", in.NodeId, err)
	}
	f.fillEntry(ino, &n, out)
	return fuse.OK
}

// Symlink creates linkName in header.NodeId pointing to pointedTo.
func (f *FS) Symlink(cancel <-chan struct{}, header *fuse.InHeader, pointedTo string, linkName string, out *fuse.EntryOut) fuse.Status {
	if len(pointedTo) > maxSymlinkLen {
		return fuse.Status(syscall.ENAMETOOLONG)
	}
	ino, n, err := f.makeNode(header.NodeId, linkName, syscall.S_IFLNK|0o777, 0, 0, header.Caller, pointedTo)
	if err != nil {
		return f.errno("symlink", header.NodeId, err)
	}
	f.fillEntry(ino, &n, out)
	return fuse.OK
}

// Readlink returns a symlink's target.
func (f *FS) Readlink(cancel <-chan struct{}, header *fuse.InHeader) ([]byte, fuse.Status) {
	v, err := f.db.Get(symlinkKey(header.NodeId))
	if errors.Is(err, lsm.ErrNotFound) {
		if _, err := f.getInode(header.NodeId); err != nil {
			return nil, f.errno("readlink", header.NodeId, err)
		}
		return nil, fuse.EINVAL // not a symlink
	}
	if err != nil {
		return nil, f.errno("readlink", header.NodeId, err)
	}
	return v, fuse.OK
}

// Link adds the name name in in.NodeId for inode in.Oldnodeid. Linking an
// inode with no links left (an O_TMPFILE file; the kernel refuses others)
// takes it out of the orphan list in the same batch.
func (f *FS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	parent, ino := in.NodeId, in.Oldnodeid
	n, err := f.link(parent, ino, name)
	if err != nil {
		return f.errno("link", ino, err)
	}
	f.fillEntry(ino, &n, out)
	return fuse.OK
}

func (f *FS) link(parent, ino uint64, name string) (inode, error) {
	if err := f.writable(); err != nil {
		return inode{}, err
	}
	if err := checkName(name); err != nil {
		return inode{}, err
	}
	h := f.locks.lock(parent, ino)
	defer h.unlock()
	p, err := f.getDir(parent)
	if err != nil {
		return inode{}, err
	}
	n, err := f.getInode(ino)
	if err != nil {
		return inode{}, err
	}
	if _, err := f.getDentry(parent, name); err == nil {
		return inode{}, syscall.EEXIST
	} else if !errors.Is(err, syscall.ENOENT) {
		return inode{}, err
	}
	if n.isDir() {
		return inode{}, syscall.EPERM
	}
	if n.Nlink >= maxNlink {
		return inode{}, syscall.EMLINK
	}
	if oi := f.open.get(ino); n.Nlink == 0 && oi != nil && oi.wb.dirty() {
		// An O_TMPFILE given its name: its data first, so that a crash
		// leaves no name on a file short of what was written before.
		if err := f.flushLocked(oi, false); err != nil {
			return inode{}, err
		}
		if n, err = f.getInode(ino); err != nil {
			return inode{}, err
		}
	}
	now := f.now()
	b := lsm.NewBatch()
	if n.Nlink == 0 {
		b.Delete(orphanKey(ino))
	}
	n.Nlink++
	n.Ctime = now
	p.Size++
	p.Mtime, p.Ctime = now, now
	b.Set(dentryKey(parent, name), encodeDentry(dentry{Ino: ino, Type: n.dtype()}))
	putInode(b, ino, &n)
	putInode(b, parent, &p)
	f.locks.bumpDir(parent)
	if err := f.db.Apply(b, false); err != nil {
		return inode{}, err
	}
	if oi := f.open.get(ino); oi != nil {
		oi.overlay(&n, f.opts.WritebackCache)
	}
	return n, nil
}

// Unlink removes the non-directory name from header.NodeId.
func (f *FS) Unlink(cancel <-chan struct{}, header *fuse.InHeader, name string) fuse.Status {
	return f.errno("unlink", header.NodeId, f.remove(header.NodeId, name, false))
}

// Rmdir removes the empty directory name from header.NodeId.
func (f *FS) Rmdir(cancel <-chan struct{}, header *fuse.InHeader, name string) fuse.Status {
	return f.errno("rmdir", header.NodeId, f.remove(header.NodeId, name, true))
}

// lockEntry locks parent and the inode that name in parent names, and
// returns that entry; it retries if the entry changed before the locks were
// held. On error (ENOENT if there is no such entry) nothing stays locked.
func (f *FS) lockEntry(parent uint64, name string) (dentry, held, error) {
	for {
		d, err := f.getDentry(parent, name)
		if err != nil {
			return dentry{}, held{}, err
		}
		h := f.locks.lock(parent, d.Ino)
		d2, err := f.getDentry(parent, name)
		if err == nil && d2 == d {
			return d, h, nil
		}
		h.unlock()
		if err != nil {
			return dentry{}, held{}, err
		}
	}
}

func (f *FS) remove(parent uint64, name string, dir bool) error {
	if err := f.writable(); err != nil {
		return err
	}
	if len(name) > maxNameLen {
		return syscall.ENAMETOOLONG
	}
	if name == "." || name == ".." {
		return syscall.EINVAL
	}
	d, h, err := f.lockEntry(parent, name)
	if err != nil {
		return err
	}
	defer h.unlock()
	p, err := f.getInode(parent)
	if err != nil {
		return err
	}
	n, err := f.getInode(d.Ino)
	if err != nil {
		return err
	}
	if dir {
		if !n.isDir() {
			return syscall.ENOTDIR
		}
		if err := f.checkEmpty(d.Ino); err != nil {
			return err
		}
	} else if n.isDir() {
		return syscall.EISDIR
	}
	now := f.now()
	b := lsm.NewBatch()
	b.Delete(dentryKey(parent, name))
	p.Size--
	p.Mtime, p.Ctime = now, now
	if dir {
		p.Nlink--
		n.Nlink = 0
	} else {
		n.Nlink--
	}
	n.Ctime = now
	putInode(b, parent, &p)
	dropped, err := f.unlinkInode(b, d.Ino, &n)
	if err != nil {
		return err
	}
	f.locks.bumpDir(parent)
	if dropped {
		// Before the record goes: a getattr without the lock finds one
		// or the other (a ghost is read only where the record is missing).
		f.addGhost(d.Ino, n)
	}
	if err := f.db.Apply(b, false); err != nil {
		return err
	}
	if dropped {
		f.inodes.delta.Add(-1)
	}
	return nil
}

// checkEmpty fails with ENOTEMPTY if directory dir has an entry.
func (f *FS) checkEmpty(dir uint64) error {
	lo, hi := dentryRange(dir)
	it := f.db.NewIter(&lsm.IterOptions{LowerBound: lo, UpperBound: hi})
	nonEmpty := it.First()
	if err := closeIter(it); err != nil {
		return err
	}
	if nonEmpty {
		return syscall.ENOTEMPTY
	}
	return nil
}

// Rename moves oldName in in.NodeId to newName in in.Newdir, replacing a
// compatible target, or swapping the two with RENAME_EXCHANGE.
func (f *FS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName string, newName string) fuse.Status {
	return f.errno("rename", in.NodeId, f.rename(in.NodeId, oldName, in.Newdir, newName, in.Flags))
}

func (f *FS) rename(op uint64, oldName string, np uint64, newName string, flags uint32) error {
	if err := f.writable(); err != nil {
		return err
	}
	if flags&^(renameNoReplace|renameExchange) != 0 || flags == renameNoReplace|renameExchange {
		return syscall.EINVAL
	}
	if len(oldName) > maxNameLen {
		return syscall.ENAMETOOLONG
	}
	if err := checkName(newName); err != nil {
		return err
	}
	if oldName == "." || oldName == ".." {
		return syscall.EINVAL
	}
	if op != np {
		f.renameMu.Lock()
		defer f.renameMu.Unlock()
	}
	for {
		src, err := f.getDentry(op, oldName)
		if err != nil {
			return err
		}
		dst, err := f.getDentry(np, newName)
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			return err
		}
		dstExists := err == nil
		h := f.locks.lock(op, np, src.Ino, dst.Ino)
		src2, err := f.getDentry(op, oldName)
		if err != nil || src2 != src {
			h.unlock()
			if err != nil {
				return err
			}
			continue
		}
		dst2, err := f.getDentry(np, newName)
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			h.unlock()
			return err // not "no target": a target it cannot read
		}
		if (err == nil) != dstExists || dst2 != dst {
			h.unlock()
			continue
		}
		err = f.renameLocked(op, oldName, np, newName, src, dst, dstExists, flags)
		h.unlock()
		return err
	}
}

// renameLocked checks and applies a rename with every inode involved
// locked. Errors come in the order Linux's VFS reports them: EEXIST and
// ENOENT from the flags, then EINVAL for a directory moved under itself
// (ENOTEMPTY for a target that contains the source), then success for two
// names of one inode, then ENOTDIR/EISDIR/ENOTEMPTY about the target.
func (f *FS) renameLocked(op uint64, oldName string, np uint64, newName string, src, dst dentry, dstExists bool, flags uint32) error {
	if flags&renameNoReplace != 0 && dstExists {
		return syscall.EEXIST
	}
	exchange := flags&renameExchange != 0
	if exchange && !dstExists {
		return syscall.ENOENT
	}
	srcDir := src.Type == syscall.S_IFDIR>>12
	dstDir := dstExists && dst.Type == syscall.S_IFDIR>>12
	if op != np {
		// renameMu holds every directory's parent still.
		if srcDir {
			if in, err := f.isAncestor(src.Ino, np); err != nil || in {
				return cmpErr(err, syscall.EINVAL)
			}
		}
		if dstDir {
			if in, err := f.isAncestor(dst.Ino, op); err != nil || in {
				if err == nil && !exchange {
					err = syscall.ENOTEMPTY
				}
				return cmpErr(err, syscall.EINVAL)
			}
		}
	}
	if dstExists && src.Ino == dst.Ino {
		return nil // two names of one inode: nothing to do
	}
	if dstExists && !exchange {
		switch {
		case srcDir && !dstDir:
			return syscall.ENOTDIR
		case !srcDir && dstDir:
			return syscall.EISDIR
		case dstDir:
			if err := f.checkEmpty(dst.Ino); err != nil {
				return err
			}
		}
	}
	pOld, err := f.getDir(op)
	if err != nil {
		return err
	}
	pNew := &pOld
	var pNewRec inode
	if np != op {
		if pNewRec, err = f.getDir(np); err != nil {
			return err
		}
		pNew = &pNewRec
	}
	if dstExists {
		// A rename over a target (or an exchange) must not reach the disk
		// before the data written to the file it moves: the replace-by-
		// rename idiom without fsync (write, rename, close) left an empty
		// target after a crash, neither the old file nor the new. As
		// ext4's auto_da_alloc, write the buffers first; the journal's
		// prefix order does the rest.
		for _, ino := range []uint64{src.Ino, dst.Ino} {
			if oi := f.open.get(ino); oi != nil && oi.wb.dirty() && (ino == src.Ino || exchange) {
				if err := f.flushLocked(oi, false); err != nil {
					return err
				}
			}
		}
	}
	sn, err := f.getInode(src.Ino)
	if err != nil {
		return err
	}
	var dn inode
	if dstExists {
		if dn, err = f.getInode(dst.Ino); err != nil {
			return err
		}
	}

	// A directory moving to another parent adds a link to it (less the
	// one of a directory it replaces there; an exchange of two
	// directories adds none).
	if op != np && srcDir && !(dstExists && dstDir) && pNew.Nlink >= maxNlink {
		return syscall.EMLINK
	}
	if exchange && op != np && dstDir && !srcDir && pOld.Nlink >= maxNlink {
		return syscall.EMLINK
	}
	now := f.now()
	b := lsm.NewBatch()
	dropped := false
	if exchange {
		b.Set(dentryKey(op, oldName), encodeDentry(dst))
		b.Set(dentryKey(np, newName), encodeDentry(src))
		if op != np {
			if srcDir {
				pOld.Nlink--
				pNew.Nlink++
				sn.Parent = np
			}
			if dstDir {
				pNew.Nlink--
				pOld.Nlink++
				dn.Parent = op
			}
		}
		dn.Ctime = now
		putInode(b, dst.Ino, &dn)
	} else {
		b.Delete(dentryKey(op, oldName))
		b.Set(dentryKey(np, newName), encodeDentry(src))
		pOld.Size--
		pNew.Size++
		if srcDir && op != np {
			pOld.Nlink--
			pNew.Nlink++
			sn.Parent = np
		}
		if dstExists {
			pNew.Size--
			if dstDir {
				pNew.Nlink--
				dn.Nlink = 0
			} else {
				dn.Nlink--
			}
			dn.Ctime = now
			if dropped, err = f.unlinkInode(b, dst.Ino, &dn); err != nil {
				return err
			}
		}
	}
	sn.Ctime = now
	putInode(b, src.Ino, &sn)
	pOld.Mtime, pOld.Ctime = now, now
	pNew.Mtime, pNew.Ctime = now, now
	putInode(b, op, &pOld)
	if np != op {
		putInode(b, np, pNew)
	}
	f.locks.bumpDir(op)
	f.locks.bumpDir(np)
	if dropped {
		f.addGhost(dst.Ino, dn) // before the record goes (see remove)
	}
	if err := f.db.Apply(b, false); err != nil {
		return err
	}
	if dropped {
		f.inodes.delta.Add(-1)
	}
	return nil
}

// cmpErr returns err if set, else def.
func cmpErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// isAncestor reports whether directory a is d or one of d's ancestors,
// following parent pointers up to the root.
func (f *FS) isAncestor(a, d uint64) (bool, error) {
	for depth := 0; ; depth++ {
		if d == a {
			return true, nil
		}
		if d == rootIno {
			return false, nil
		}
		if depth > 1<<20 {
			return false, &CorruptError{What: "directory tree", Reason: "parent pointers form a cycle"}
		}
		n, err := f.getInode(d)
		if err != nil {
			return false, err
		}
		d = n.Parent
	}
}
