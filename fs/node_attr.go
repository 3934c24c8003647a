package fs

// Attributes: getattr, setattr (chmod, chown, truncate, utimens) and statfs.

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/lsm"
)

// GetAttr returns an inode's attributes, including buffered writes.
func (f *FS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	n, err := f.stat(in.NodeId)
	if err != nil {
		return f.errno("getattr", in.NodeId, err)
	}
	f.fillAttr(in.NodeId, &n, &out.Attr)
	out.SetTimeout(attrTimeout(f.opts.AttrTimeout, &n))
	return fuse.OK
}

// setattrChanges are the FATTR bits that change an inode (and its ctime).
const setattrChanges = fuse.FATTR_MODE | fuse.FATTR_UID | fuse.FATTR_GID | fuse.FATTR_SIZE |
	fuse.FATTR_ATIME | fuse.FATTR_MTIME | fuse.FATTR_CTIME | fuse.FATTR_KILL_SUIDGID

// SetAttr changes mode, owner, size and times. The kernel has checked
// permissions (default_permissions); lsmfs applies the rules it leaves to
// the filesystem: chown of a non-directory clears setuid and setgid (unless
// the same request sets the mode), chmod rewrites the access ACL,
// truncation sets mtime unless told a time, and ctime is set on every
// change (and by chown with both ids -1, as on ext4).
func (f *FS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	ino := in.NodeId
	n, err := f.setattr(ino, in, in.Caller)
	if err != nil {
		return f.errno("setattr", ino, err)
	}
	f.fillAttr(ino, &n, &out.Attr)
	out.SetTimeout(timeout(f.opts.AttrTimeout))
	return fuse.OK
}

func (f *FS) setattr(ino uint64, in *fuse.SetAttrIn, caller fuse.Caller) (inode, error) {
	valid := in.Valid
	if valid&setattrChanges == 0 && valid&^(fuse.FATTR_FH|fuse.FATTR_LOCKOWNER) != 0 {
		return f.stat(ino)
	}
	// An empty request is chown(2) with both ids -1; like ext4, lsmfs
	// still sets ctime (POSIX allows either).
	if err := f.writable(); err != nil {
		return inode{}, err
	}
	h := f.locks.lock(ino)
	defer h.unlock()
	oi := f.open.get(ino)
	if oi == nil {
		return f.setattrLocked(ino, nil, in, caller, false)
	}
	var cut cutBlocks
	if valid&fuse.FATTR_SIZE != 0 {
		cut = f.cut(&oi.wb, in.Size, maxFileSize)
	}
	n, err := f.setattrLocked(ino, oi, in, caller, cut.kill)
	f.settleCut(&oi.wb, cut, err)
	return n, err
}

// setattrLocked is setattr with ino's lock held; oi is its open inode, if
// any, and cutKill whether the truncation's cut of oi's buffer left a
// write's removal of privileges to it.
func (f *FS) setattrLocked(ino uint64, oi *openInode, in *fuse.SetAttrIn, caller fuse.Caller, cutKill bool) (inode, error) {
	valid := in.Valid
	if oi != nil {
		// Attributes change on a clean record: no buffered size or
		// mtime may land after (and undo) this change.
		if err := f.flushLocked(oi, false); err != nil {
			return inode{}, err
		}
	}
	n, err := f.getInode(ino)
	if err != nil {
		return inode{}, err
	}
	now := f.now()
	b := lsm.NewBatch()
	if valid&fuse.FATTR_MODE != 0 {
		n.Mode = n.Mode&syscall.S_IFMT | in.Mode&0o7777
		if err := f.chmodACL(b, ino, &n, n.Mode); err != nil {
			return inode{}, err
		}
	}
	if valid&fuse.FATTR_UID != 0 {
		n.Uid = in.Uid
	}
	if valid&fuse.FATTR_GID != 0 {
		n.Gid = in.Gid
	}
	chown := valid&(fuse.FATTR_UID|fuse.FATTR_GID) != 0
	// chown(f, -1, -1) arrives with no bits at all (the kernel drops the
	// ATTR_MODE it computed to clear setuid, and sends FATTR_KILL_SUIDGID
	// only with an id). So does the kernel's remove-privileges step before
	// a write, also for root when only a capability goes: clear the bits
	// for any caller but root. (A non-owner's chown(-1, -1) of a setuid
	// file fails in the kernel, so from a non-owner this is a write's
	// step: answering with the bits cleared keeps the kernel from caching
	// the old mode for an hour while the write's KILL_SUIDGID clears it.)
	noIDs := valid&^(fuse.FATTR_FH|fuse.FATTR_LOCKOWNER|fuse.FATTR_CTIME) == 0 && caller.Uid != 0
	if !n.isDir() && (chown || noIDs || valid&(fuse.FATTR_KILL_SUIDGID|fuse.FATTR_SIZE) != 0) {
		killMode := (chown || noIDs) && valid&fuse.FATTR_MODE == 0 || valid&fuse.FATTR_KILL_SUIDGID != 0 || cutKill
		if err := f.killPrivs(b, ino, &n, killMode); err != nil {
			return inode{}, err
		}
	}
	if valid&fuse.FATTR_SIZE != 0 {
		switch {
		case n.isDir():
			return inode{}, syscall.EISDIR
		case !n.isReg():
			return inode{}, syscall.EINVAL
		case in.Size > maxFileSize:
			return inode{}, syscall.EFBIG
		}
		if err := f.truncate(b, ino, &n, in.Size); err != nil {
			return inode{}, err
		}
		n.Mtime = now
	}
	if valid&fuse.FATTR_ATIME != 0 {
		if valid&fuse.FATTR_ATIME_NOW != 0 {
			n.Atime = now
		} else {
			n.Atime = joinNs(in.Atime, in.Atimensec)
		}
	}
	if valid&fuse.FATTR_MTIME != 0 {
		if valid&fuse.FATTR_MTIME_NOW != 0 {
			n.Mtime = now
		} else {
			n.Mtime = joinNs(in.Mtime, in.Mtimensec)
		}
	}
	if valid&fuse.FATTR_CTIME != 0 {
		n.Ctime = joinNs(in.Ctime, in.Ctimensec)
	} else {
		n.Ctime = now
	}
	putInode(b, ino, &n)
	if err := f.db.Apply(b, false); err != nil {
		return inode{}, err
	}
	if valid&fuse.FATTR_ATIME != 0 {
		f.atimes.drop(ino, atimeEntry{}, true) // the time set replaces a read's
	}
	return n, nil
}

// StatFs reports the space of the filesystem holding the engine and the
// number of inodes. lsmfs has no inode table, so the free inode count is an
// estimate: free bytes over the bytes an empty file costs (about 512 with
// its entry and engine overhead).
func (f *FS) StatFs(cancel <-chan struct{}, in *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	total, free, avail, err := f.db.DiskUsage()
	if err != nil {
		return f.errno("statfs", in.NodeId, err)
	}
	const unit = 4096
	used := f.inodeCount()
	*out = fuse.StatfsOut{
		Bsize: uint32(f.bs), // the preferred I/O size
		// Frsize is the unit of the block counts.
		Frsize:  unit,
		Blocks:  total / unit,
		Bfree:   free / unit,
		Bavail:  avail / unit, // without the engine's space reserve
		Ffree:   avail / 512,
		NameLen: maxNameLen,
	}
	out.Files = used + out.Ffree
	return fuse.OK
}
