package fs

// Access times.
//
// The kernel leaves a FUSE inode's access time to the filesystem (it marks
// the inode S_NOATIME) and forgets the atime it cached whenever a READ or a
// READDIR came back from lsmfs, so the next stat asks again. lsmfs updates
// the time when such a request was served, by the rules of Linux's
// mount options: relatime (the default) writes it only when it is not
// after the last change of the data or of the inode (mtime, ctime) or is a
// day old, so that a file read over and over costs one write per change;
// strictatime writes it on every read that reaches lsmfs; noatime never.
// Reads the kernel serves from its page cache never reach lsmfs and change
// nothing, as on any FUSE filesystem: with relatime that matters little,
// since a change of the file sends its next read to lsmfs only when the
// kernel does not hold the pages already (a file written through the
// kernel's cache and read back at once keeps its old atime).
//
// The update is its own batch, not forced (like the kernel's lazy write of
// a dirty inode): a crash may lose it, never the data. It is best effort: a
// read that succeeded does not fail because its access time could not be
// written (a full device, a read-only mount).

import (
	"fmt"
	"syscall"
	"time"

	"github.com/lsmfs/lsmfs/lsm"
)

// AtimePolicy says when reads update access times.
type AtimePolicy uint8

const (
	// AtimeRelative (relatime, the default) updates an access time that is
	// not after the file's mtime and ctime, or is a day old.
	AtimeRelative AtimePolicy = iota
	// AtimeStrict (strictatime) updates it on every read lsmfs serves.
	AtimeStrict
	// AtimeNever (noatime) never updates it on reads.
	AtimeNever
)

func (p AtimePolicy) String() string {
	switch p {
	case AtimeRelative:
		return "relatime"
	case AtimeStrict:
		return "strictatime"
	case AtimeNever:
		return "noatime"
	}
	return fmt.Sprintf("AtimePolicy(%d)", uint8(p))
}

// relatimeAge is how old an access time may get under relatime before a
// read updates it anyway (Linux: a day).
const relatimeAge = int64(24 * time.Hour)

// atimeDue reports whether a read at now should write n's access time.
func (f *FS) atimeDue(n *inode, now int64) bool {
	if f.opts.ReadOnly || n.isDir() && f.opts.NoDirAtime {
		return false
	}
	switch f.opts.Atime {
	case AtimeNever:
		return false
	case AtimeStrict:
		return n.Atime != now
	}
	return n.Atime <= n.Mtime || n.Atime <= n.Ctime || now-n.Atime >= relatimeAge
}

// noAtime reports whether a handle was opened with O_NOATIME.
func noAtime(flags uint32) bool { return flags&syscall.O_NOATIME != 0 }

// touchAtime writes ino's access time after a read served at once, if
// atimeDue says so of its record (seen is the record the read used; nil to
// read it). It takes ino's lock: the caller holds none.
func (f *FS) touchAtime(ino uint64, seen *inode) {
	if f.opts.Atime == AtimeNever || f.opts.ReadOnly {
		return
	}
	if seen != nil && !f.atimeDue(seen, f.now()) {
		return // the common case: no lock, no write
	}
	h := f.locks.lock(ino)
	defer h.unlock()
	n, err := f.getInode(ino)
	if err != nil {
		return // removed meanwhile (a ghost keeps its last times)
	}
	now := f.now()
	if !f.atimeDue(&n, now) {
		return
	}
	n.Atime = now
	b := lsm.NewBatch()
	putInode(b, ino, &n)
	if err := f.db.Apply(b, false); err != nil {
		f.log.Debug("fs: access time not written", "ino", ino, "err", err)
	}
}
