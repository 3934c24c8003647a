package fs

// POSIX ACLs. When the kernel negotiates FUSE_POSIX_ACL it enforces ACLs
// itself (it reads system.posix_acl_access and _default with getxattr and
// caches them) and leaves three things to the filesystem, done here:
//
//   - keeping the mode and the access ACL in step: setting an access ACL
//     sets the mode's permission bits from it (and stores no ACL that says
//     no more than the mode), and chmod rewrites the ACL's owner, mask (or
//     group) and other entries;
//   - inheritance: a new inode in a directory with a default ACL gets that
//     ACL, limited by the create mode, as its access ACL (directories also
//     get it as their default ACL), and the umask is not applied; elsewhere
//     the caller's umask is applied here (lsmfs asks for FUSE_DONT_MASK so
//     the kernel sends the mode and umask apart);
//   - clearing setgid when a caller outside the file's group sets an access
//     ACL (the kernel says so with SETXATTR_ACL_KILL_SGID).
//
// Without FUSE_POSIX_ACL (an old kernel) the ACL names are refused with
// EOPNOTSUPP, as on a filesystem mounted without ACL support.

import (
	"errors"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/lsm"
)

// Init is called by go-fuse once the kernel's INIT request is answered and
// before any other request: it records the server (for notifications), the
// kernel's protocol minor and whether the kernel enforces POSIX ACLs.
func (f *FS) Init(s *fuse.Server) {
	f.server.Store(s)
	f.kernelMinor.Store(s.KernelSettings().Minor)
	f.acl.Store(s.KernelSettings().Flags64()&fuse.CAP_POSIX_ACL != 0)
}

// aclEnabled reports whether POSIX ACLs are served.
func (f *FS) aclEnabled() bool { return f.acl.Load() }

// getACL reads and decodes ino's ACL xattr name; nil if it has none. n is
// ino's record, whose xattr count spares the lookup for most inodes.
func (f *FS) getACL(ino uint64, n *inode, name string) (acl, error) {
	if n.Nxattr == 0 {
		return nil, nil
	}
	k := xattrKey(ino, name)
	v, err := f.db.Get(k)
	if errors.Is(err, lsm.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	a, err := parseACL(v)
	if err != nil {
		return nil, &CorruptError{What: "ACL xattr", Key: append([]byte(nil), k...), Reason: err.Error()}
	}
	return a, nil
}

// setACL sets (or, for an ACL with no entries, removes) the ACL xattr name
// of ino, with the mode and setgid rules of the package comment. flags are
// setxattr's XATTR_CREATE/XATTR_REPLACE.
func (f *FS) setACL(ino uint64, name string, value []byte, flags uint32, killSgid bool) error {
	a, err := parseACL(value)
	if err != nil {
		return err
	}
	h := f.locks.lock(ino)
	defer h.unlock()
	n, err := f.getInode(ino)
	if err != nil {
		return err
	}
	if n.isSymlink() {
		return syscall.EOPNOTSUPP
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
	store := a != nil
	if name == xattrACLAccess {
		if a != nil {
			perm, equiv := a.equivMode()
			n.Mode = n.Mode&^0o777 | perm
			store = !equiv
		}
		if killSgid {
			n.Mode &^= syscall.S_ISGID
		}
	} else if !n.isDir() {
		if a == nil {
			return nil
		}
		return syscall.EACCES // only directories have default ACLs
	}
	b := lsm.NewBatch()
	switch {
	case store:
		b.Set(k, a.encode())
		if !exists {
			n.Nxattr++
		}
	case exists:
		b.Delete(k)
		n.Nxattr--
	}
	n.Ctime = f.now()
	putInode(b, ino, &n)
	return f.db.Apply(b, false)
}

// chmodACL adds to b the rewrite of ino's access ACL (if it has one) that
// chmod to mode implies. n is ino's record.
func (f *FS) chmodACL(b *lsm.Batch, ino uint64, n *inode, mode uint32) error {
	if !f.aclEnabled() || n.isSymlink() {
		return nil
	}
	a, err := f.getACL(ino, n, xattrACLAccess)
	if a == nil || err != nil {
		return err
	}
	a.chmod(mode)
	b.Set(xattrKey(ino, xattrACLAccess), a.encode())
	return nil
}

// newInodeACL works out a new inode's mode and ACLs from its parent: with
// a default ACL in the parent, the inherited access ACL (nil if it says no
// more than the mode) and, for a directory, the default ACL it inherits;
// without one, the umask applied. p is the parent's record.
func (f *FS) newInodeACL(parent uint64, p *inode, mode, umask uint32) (newMode uint32, access, dflt acl, err error) {
	var def acl
	if f.aclEnabled() && mode&syscall.S_IFMT != syscall.S_IFLNK {
		if def, err = f.getACL(parent, p, xattrACLDefault); err != nil {
			return 0, nil, nil, err
		}
	}
	if def == nil {
		return mode &^ (umask & 0o777), nil, nil, nil
	}
	access = def.clone()
	mode, equiv := access.createMasq(mode)
	if equiv {
		access = nil
	}
	if mode&syscall.S_IFMT == syscall.S_IFDIR {
		dflt = def
	}
	return mode, access, dflt, nil
}

// putNewInodeACL adds a new inode's ACL xattrs (from newInodeACL) to b and
// counts them in n.
func putNewInodeACL(b *lsm.Batch, ino uint64, n *inode, access, dflt acl) {
	if access != nil {
		b.Set(xattrKey(ino, xattrACLAccess), access.encode())
		n.Nxattr++
	}
	if dflt != nil {
		b.Set(xattrKey(ino, xattrACLDefault), dflt.encode())
		n.Nxattr++
	}
}
