package fs

// Extended attributes: one key per (inode, name), the inode record counting
// them (so unlink knows whether there are any to delete) and taking the
// ctime of every change.

import (
	"errors"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/lsm"
)

// setxattr(2) flags.
const (
	xattrCreate  = 1
	xattrReplace = 2
)

// maxXattrValue is the largest value (XATTR_SIZE_MAX).
const maxXattrValue = 64 << 10

// checkXattrName accepts the user, trusted and security namespaces. POSIX
// ACLs (system.posix_acl_*) are set through setACL; other system.* names
// are refused with EOPNOTSUPP.
func checkXattrName(name string) error {
	if name == "" || len(name) > maxNameLen {
		return syscall.ERANGE
	}
	for _, ns := range []string{"user.", "trusted.", "security."} {
		if strings.HasPrefix(name, ns) && len(name) > len(ns) {
			return nil
		}
	}
	return syscall.EOPNOTSUPP
}

// GetXAttr reads one xattr; with a buffer too small (or empty: a size
// probe) it returns the size with ERANGE, which go-fuse turns into the size
// for a probe.
func (f *FS) GetXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	ino := header.NodeId
	if len(attr) > maxNameLen {
		return 0, fuse.ERANGE
	}
	v, err := f.db.Get(xattrKey(ino, attr))
	if errors.Is(err, lsm.ErrNotFound) {
		if _, err := f.getInode(ino); err != nil {
			return 0, f.errno("getxattr", ino, err)
		}
		return 0, fuse.ENODATA
	}
	if err != nil {
		return 0, f.errno("getxattr", ino, err)
	}
	if len(dest) < len(v) {
		return uint32(len(v)), fuse.ERANGE
	}
	copy(dest, v)
	return uint32(len(v)), fuse.OK
}

// ListXAttr lists the names, each followed by a NUL.
func (f *FS) ListXAttr(cancel <-chan struct{}, header *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	ino := header.NodeId
	if _, err := f.getInode(ino); err != nil {
		return 0, f.errno("listxattr", ino, err)
	}
	lo, hi := xattrRange(ino)
	it := f.db.NewIter(&lsm.IterOptions{LowerBound: lo, UpperBound: hi})
	var list []byte
	for ok := it.First(); ok; ok = it.Next() {
		_, name, err := decodeXattrKey(it.Key())
		if err != nil {
			it.Close()
			return 0, f.errno("listxattr", ino, err)
		}
		if header.Caller.Uid != 0 && strings.HasPrefix(name, "trusted.") {
			continue // as ext4: listed to CAP_SYS_ADMIN only (approximated by uid 0)
		}
		list = append(append(list, name...), 0)
	}
	if err := closeIter(it); err != nil {
		return 0, f.errno("listxattr", ino, err)
	}
	if len(dest) < len(list) {
		return uint32(len(list)), fuse.ERANGE
	}
	copy(dest, list)
	return uint32(len(list)), fuse.OK
}

// SetXAttr creates or replaces an xattr (XATTR_CREATE: EEXIST if present;
// XATTR_REPLACE: ENODATA if absent).
func (f *FS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	return f.errno("setxattr", in.NodeId, f.setXattr(in.NodeId, attr, data, in.Flags, in.SetXAttrFlags))
}

func (f *FS) setXattr(ino uint64, name string, value []byte, flags, extFlags uint32) error {
	if err := f.writable(); err != nil {
		return err
	}
	if isACLName(name) {
		if !f.aclEnabled() {
			// As on a filesystem mounted without ACL support: the
			// kernel would not enforce them.
			return syscall.EOPNOTSUPP
		}
		if flags&^(xattrCreate|xattrReplace) != 0 {
			return syscall.EINVAL
		}
		return f.setACL(ino, name, value, flags, extFlags&fuse.SETXATTR_ACL_KILL_SGID != 0)
	}
	if err := checkXattrName(name); err != nil {
		return err
	}
	if len(value) > maxXattrValue {
		return syscall.E2BIG
	}
	if flags&^(xattrCreate|xattrReplace) != 0 {
		return syscall.EINVAL
	}
	h := f.locks.lock(ino)
	defer h.unlock()
	if oi := f.open.get(ino); oi != nil && name == xattrCapability {
		// The flush of earlier writes removes capabilities (killPrivs):
		// it must not remove one set after them.
		if err := f.flushLocked(oi, false); err != nil {
			return err
		}
	}
	n, err := f.getInode(ino)
	if err != nil {
		return err
	}
	k := xattrKey(ino, name)
	_, err = f.db.Get(k)
	exists := err == nil
	if err != nil && !errors.Is(err, lsm.ErrNotFound) {
		return err
	}
	switch {
	case exists && flags&xattrCreate != 0:
		return syscall.EEXIST
	case !exists && flags&xattrReplace != 0:
		return syscall.ENODATA
	}
	if !exists && (int(n.Nxattr)+1)*(maxNameLen+1) > maxXattrList {
		size, err := f.xattrListSize(ino)
		if err != nil {
			return err
		}
		if size+len(name)+1 > maxXattrList {
			return syscall.ENOSPC
		}
	}
	b := lsm.NewBatch()
	b.Set(k, value)
	if !exists {
		n.Nxattr++
	}
	n.Ctime = f.now()
	putInode(b, ino, &n)
	return f.db.Apply(b, false)
}

// RemoveXAttr deletes an xattr (ENODATA if absent).
func (f *FS) RemoveXAttr(cancel <-chan struct{}, header *fuse.InHeader, attr string) fuse.Status {
	return f.errno("removexattr", header.NodeId, f.removeXattr(header.NodeId, attr))
}

func (f *FS) removeXattr(ino uint64, name string) error {
	if err := f.writable(); err != nil {
		return err
	}
	if len(name) > maxNameLen {
		return syscall.ERANGE
	}
	h := f.locks.lock(ino)
	defer h.unlock()
	n, err := f.getInode(ino)
	if err != nil {
		return err
	}
	k := xattrKey(ino, name)
	if _, err := f.db.Get(k); errors.Is(err, lsm.ErrNotFound) {
		return syscall.ENODATA
	} else if err != nil {
		return err
	}
	b := lsm.NewBatch()
	b.Delete(k)
	n.Nxattr--
	n.Ctime = f.now()
	putInode(b, ino, &n)
	return f.db.Apply(b, false)
}

// maxXattrList is the longest name list listxattr can return
// (XATTR_LIST_MAX): the kernel fails with E2BIG past it.
const maxXattrList = 64 << 10

// xattrListSize is the length of ino's listxattr reply.
func (f *FS) xattrListSize(ino uint64) (int, error) {
	lo, hi := xattrRange(ino)
	it := f.db.NewIter(&lsm.IterOptions{LowerBound: lo, UpperBound: hi})
	size := 0
	for ok := it.First(); ok; ok = it.Next() {
		_, name, err := decodeXattrKey(it.Key())
		if err != nil {
			it.Close()
			return 0, err
		}
		size += len(name) + 1
	}
	return size, closeIter(it)
}
