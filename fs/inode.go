package fs

import (
	"errors"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/lsm"
)

const (
	// rootIno is the inode number (and FUSE node id) of the root directory.
	rootIno = 1
	// generation is the constant FUSE generation: inode numbers are never
	// reused, so (ino, generation) never names two files.
	generation = 0

	// maxNameLen is the longest entry or xattr name, in bytes (NAME_MAX).
	maxNameLen = 255
	// maxSymlinkLen is the longest symlink target (PATH_MAX - 1).
	maxSymlinkLen = 4095
	// maxFileSize bounds offsets and sizes (EFBIG beyond).
	maxFileSize = 1 << 62
	// maxNlink bounds hard links (EMLINK beyond).
	maxNlink = 1<<31 - 1

	// pointDeleteMax is the most data blocks deleted one tombstone each;
	// more take one range deletion. Point tombstones cost readers nothing
	// once compacted away, a range tombstone is consulted by every read that
	// overlaps it until then, so small files use points and large ones a
	// range (one entry instead of thousands).
	pointDeleteMax = 16
	// xattrPointDeleteMax is the same threshold for an inode's xattrs.
	xattrPointDeleteMax = 16
)

// getInode reads ino's record: ENOENT if it does not exist.
func (f *FS) getInode(ino uint64) (inode, error) {
	var kb [9]byte
	v, err := f.db.Get(appendInodeKey(kb[:0], ino))
	if err != nil {
		if errors.Is(err, lsm.ErrNotFound) {
			return inode{}, syscall.ENOENT
		}
		return inode{}, err
	}
	n, err := decodeInode(v)
	if err != nil {
		return inode{}, withKey(err, inodeKey(ino))
	}
	return n, nil
}

// getDir reads ino's record and requires a live directory.
func (f *FS) getDir(ino uint64) (inode, error) {
	n, err := f.getInode(ino)
	if err != nil {
		return n, err
	}
	if !n.isDir() {
		return n, syscall.ENOTDIR
	}
	if n.Nlink == 0 {
		return n, syscall.ENOENT // removed while still open
	}
	return n, nil
}

// getDentry reads the entry name of directory parent: ENOENT if absent.
func (f *FS) getDentry(parent uint64, name string) (dentry, error) {
	k := dentryKey(parent, name)
	v, err := f.db.Get(k)
	if err != nil {
		if errors.Is(err, lsm.ErrNotFound) {
			return dentry{}, syscall.ENOENT
		}
		return dentry{}, err
	}
	d, err := decodeDentry(v)
	if err != nil {
		return dentry{}, withKey(err, k)
	}
	return d, nil
}

func putInode(b *lsm.Batch, ino uint64, n *inode) {
	var buf [9 + inodeLen]byte
	k := appendInodeKey(buf[:0], ino)
	b.Set(k, appendInode(buf[9:9], n))
}

// now is the current time in nanoseconds, from Options.Clock.
func (f *FS) now() int64 { return f.opts.Clock().UnixNano() }

// blocksOf is the number of blocks of size bs that size bytes span.
func blocksOf(size uint64, bs int) uint64 { return (size + uint64(bs) - 1) / uint64(bs) }

// fillAttr converts an inode record into FUSE attributes.
func (f *FS) fillAttr(ino uint64, n *inode, a *fuse.Attr) {
	*a = fuse.Attr{
		Ino:     ino,
		Size:    n.Size,
		Blocks:  (n.Stored + 511) / 512,
		Mode:    n.Mode,
		Nlink:   n.Nlink,
		Owner:   fuse.Owner{Uid: n.Uid, Gid: n.Gid},
		Rdev:    n.Rdev,
		Blksize: uint32(f.bs),
	}
	a.Atime, a.Atimensec = splitNs(n.Atime)
	if t, ok := f.atimes.get(ino); ok {
		a.Atime, a.Atimensec = splitNs(t) // a read's, not written yet
	}
	a.Mtime, a.Mtimensec = splitNs(n.Mtime)
	a.Ctime, a.Ctimensec = splitNs(n.Ctime)
}

// splitNs converts nanoseconds since the epoch into the seconds and
// nanoseconds of a FUSE timestamp (seconds are a two's complement int64).
func splitNs(ns int64) (uint64, uint32) {
	sec, nsec := ns/1e9, ns%1e9
	if nsec < 0 {
		sec--
		nsec += 1e9
	}
	return uint64(sec), uint32(nsec)
}

// joinNs is the inverse of splitNs. Times outside what int64 nanoseconds
// hold (years 1677..2262) are clamped to its ends, as the kernel clamps to
// a filesystem's s_time_min/s_time_max, instead of wrapping around.
func joinNs(sec uint64, nsec uint32) int64 {
	const maxSec, minSec = 9_223_372_035, -9_223_372_035
	switch s := int64(sec); {
	case s > maxSec:
		return maxSec * 1e9
	case s < minSec:
		return minSec * 1e9
	default:
		return s*1e9 + int64(nsec)
	}
}

func (f *FS) fillEntry(ino uint64, n *inode, out *fuse.EntryOut) {
	out.NodeId = ino
	out.Generation = generation
	out.SetEntryTimeout(timeout(f.opts.EntryTimeout))
	out.SetAttrTimeout(attrTimeout(f.opts.AttrTimeout, n))
	f.fillAttr(ino, n, &out.Attr)
}

// attrTimeout is how long the kernel may cache n's attributes: d, or 0 for
// an estimate (n.estimated).
func attrTimeout(d time.Duration, n *inode) time.Duration {
	if n.estimated {
		return 0
	}
	return timeout(d)
}

// killPriv clears set-user-ID, and set-group-ID when group execution is
// allowed, as a write or chown by an unprivileged caller must. A
// set-group-ID bit without group execution stays: Linux 6.2 and later clear
// it too when the caller is outside the file's group, which a FUSE request
// cannot tell (it carries no supplementary groups).
func killPriv(mode uint32) uint32 {
	mode &^= syscall.S_ISUID
	if mode&syscall.S_IXGRP != 0 {
		mode &^= syscall.S_ISGID
	}
	return mode
}

// xattrCapability holds file capabilities; they go wherever setuid goes.
const xattrCapability = "security.capability"

// killPrivs adds to b what a write, truncation or chown does to privileges:
// with mode, setuid/setgid are cleared (killPriv); always, the file
// capabilities are removed. Without CAP_HANDLE_KILLPRIV the kernel has
// asked for both already and this finds nothing to do; with it, this is
// where they happen.
func (f *FS) killPrivs(b *lsm.Batch, ino uint64, n *inode, mode bool) error {
	if mode {
		n.Mode = killPriv(n.Mode)
	}
	if n.Nxattr == 0 || !n.isReg() {
		return nil
	}
	k := xattrKey(ino, xattrCapability)
	if _, err := f.db.Get(k); errors.Is(err, lsm.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	b.Delete(k)
	n.Nxattr--
	return nil
}

// dropInode adds to b the deletion of everything ino owns: its record, data
// blocks, xattrs, symlink target and, for an orphan, its orphan key.
func (f *FS) dropInode(b *lsm.Batch, ino uint64, n *inode, orphan bool) error {
	b.Delete(inodeKey(ino))
	if orphan {
		b.Delete(orphanKey(ino))
	}
	if n.isSymlink() {
		b.Delete(symlinkKey(ino))
	}
	if n.Stored > 0 {
		nblocks := blocksOf(n.Size, f.bs)
		if nblocks <= pointDeleteMax {
			for i := uint64(0); i < nblocks; i++ {
				b.Delete(blockKey(ino, i))
			}
		} else {
			lo, hi := blockRange(ino, 0, 0)
			b.DeleteRange(lo, hi)
		}
	}
	return f.dropXattrs(b, ino, n)
}

// dropXattrs adds the deletion of ino's xattrs to b.
func (f *FS) dropXattrs(b *lsm.Batch, ino uint64, n *inode) error {
	if n.Nxattr == 0 {
		return nil
	}
	lo, hi := xattrRange(ino)
	if n.Nxattr > xattrPointDeleteMax {
		b.DeleteRange(lo, hi)
		return nil
	}
	it := f.db.NewIter(&lsm.IterOptions{LowerBound: lo, UpperBound: hi})
	for ok := it.First(); ok; ok = it.Next() {
		b.Delete(it.Key())
	}
	return closeIter(it)
}

// closeIter closes it and returns its error, if any.
func closeIter(it *lsm.Iterator) error {
	err := it.Error()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return err
}

// unlinkInode finishes dropping one link of child in batch b; n is its
// record with nlink already decremented. A child still linked elsewhere is
// rewritten; one with no links left is kept as an orphan while it has open
// handles, and otherwise deleted with everything it owns (dropped). The
// caller holds child's lock.
func (f *FS) unlinkInode(b *lsm.Batch, child uint64, n *inode) (dropped bool, err error) {
	if n.Nlink > 0 {
		putInode(b, child, n)
		return false, nil
	}
	if f.open.isOpen(child) {
		putInode(b, child, n)
		b.Set(orphanKey(child), nil)
		return false, nil
	}
	return true, f.dropInode(b, child, n, false)
}
