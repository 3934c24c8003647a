package fs

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/lsm"
)

// rawDefaults names the embedded default implementation without exporting it.
type rawDefaults = fuse.RawFileSystem

// inodeReserve is how many inode numbers one superblock update reserves.
const inodeReserve = 1024

// FS is an lsmfs filesystem served over one engine. It is a
// fuse.RawFileSystem whose node ids are inode numbers; every method is safe
// for concurrent use.
type FS struct {
	rawDefaults // ENOSYS for what lsmfs does not implement

	db     *lsm.DB
	opts   Options
	log    *slog.Logger
	errLog errLog // bounds errno's failure lines
	sb     superblock
	bs     int // data block size, from the superblock

	locks   lockTable
	open    openTable
	handles handleTable
	ghosts  ghostTable // deleted inodes the kernel may still hold
	lost    lostTable  // inodes whose buffered writes a failed flush dropped
	// releases counts last releases of open inodes, each after the
	// inode's buffer is written and before it leaves the open table
	// (releaseInode): readdirplus's cursor, whose iterator reads records
	// as they were when it was made, takes a new view when it moves.
	releases atomic.Uint64
	// baseReads counts stored blocks a flush looked up (resolveBases):
	// for the length of a block a write replaced, or the bytes under a
	// partial one.
	baseReads atomic.Uint64

	// renameMu serializes renames across directories, as the kernel's
	// s_vfs_rename_mutex does: it keeps the tree still while a rename
	// checks that a directory is not moved into its own subtree.
	renameMu sync.Mutex

	alloc struct {
		sync.Mutex // leaf lock
		next       uint64
		bound      uint64 // persisted in the superblock's "inode-next"
	}

	// inodes counts live inode records for statfs: the records found by a
	// background scan of the snapshot taken at New plus every create and
	// deletion since.
	inodes struct {
		delta   atomic.Int64
		scanned atomic.Int64
		done    chan struct{}
		stop    atomic.Bool
	}

	// acl is set when the kernel enforces POSIX ACLs (FUSE_POSIX_ACL, seen
	// at Init); only then are system.posix_acl_* served (node_acl.go).
	acl atomic.Bool
	// server is the mounted go-fuse server (Init), for notifications to
	// the kernel; nil when no kernel is attached (tests).
	server atomic.Pointer[fuse.Server]
	// kernelMinor is the FUSE protocol minor the kernel reported at Init
	// (0 without a kernel): see directWriteMinor.
	kernelMinor atomic.Uint32

	// buffered is the memory all write buffers hold (Options.WriteBufferTotal).
	buffered atomic.Int64
	// atimes are access times reads moved, not written yet (atime.go).
	atimes atimeTable
	// flusher writes buffers dirty for FlushAge (writebuf.go flushOld),
	// and the pending access times.
	flusher struct {
		stop chan struct{}
		done chan struct{}
	}

	blockPool sync.Pool
	closed    atomic.Bool
}

// New opens the filesystem stored in db: it reads and checks the superblock
// and root inode and, unless o.ReadOnly, reclaims the orphans (inodes
// unlinked while open) a crash left behind. The FS does not own db: Close
// the FS, then the db.
func New(db *lsm.DB, o Options) (*FS, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	f := &FS{rawDefaults: fuse.NewDefaultRawFileSystem(), db: db, opts: o, log: o.Logger}
	v, err := db.Get(superKey(superNameSuper))
	if errors.Is(err, lsm.ErrNotFound) {
		return nil, ErrNotFormatted
	} else if err != nil {
		return nil, fmt.Errorf("fs: read superblock: %w", err)
	}
	if f.sb, err = decodeSuperblock(v); err != nil {
		return nil, err
	}
	if u := db.UUID(); u != ([16]byte{}) && u != f.sb.UUID {
		return nil, fmt.Errorf("fs: engine UUID %x does not match the filesystem's %x", u, f.sb.UUID)
	}
	f.bs = int(f.sb.BlockSize)
	if err := blockFitsBatch(db, f.bs); err != nil {
		return nil, fmt.Errorf("fs: %w", err)
	}
	v, err = db.Get(superKey(superNameInodeNext))
	if err != nil {
		return nil, fmt.Errorf("fs: read inode counter: %w", err)
	}
	bound, err := decodeInodeNext(v)
	if err != nil {
		return nil, err
	}
	// Numbers below bound may have been used before a crash: start above.
	f.alloc.next, f.alloc.bound = bound, bound
	root, err := f.getInode(rootIno)
	if err != nil {
		return nil, fmt.Errorf("fs: read root inode: %w", err)
	}
	if !root.isDir() {
		return nil, fmt.Errorf("fs: root inode is not a directory (mode %#o): %w", root.Mode, ErrCorrupt)
	}
	if !o.ReadOnly {
		if err := f.reclaimOrphans(); err != nil {
			return nil, err
		}
	}
	f.inodes.done = make(chan struct{})
	go f.countInodes(db.NewSnapshot())
	f.flusher.stop, f.flusher.done = make(chan struct{}), make(chan struct{})
	f.atimes.kick = make(chan struct{}, 1)
	if o.ReadOnly || f.opts.FlushAge < 0 {
		close(f.flusher.done)
	} else {
		go f.flushOld(f.flusher.stop, f.flusher.done)
	}
	return f, nil
}

// Raw returns the filesystem as go-fuse's raw API, for fuse.NewServer.
func (f *FS) Raw() fuse.RawFileSystem { return f }

// BlockSize is the data block size recorded at Format.
func (f *FS) BlockSize() int { return f.bs }

// MountOptions returns the FUSE mount options lsmfs is designed for; mount/
// merges user flags into them.
//
//   - default_permissions: the kernel checks modes and ownership.
//   - MaxWrite 1 MiB: fewer, larger WRITE and READ requests.
//   - MaxBackground 64: more readahead and writeback requests in flight.
//   - Symlink caching: targets never change (an inode number is never
//     reused and a symlink's target is immutable), so the kernel may keep
//     them forever.
//   - CAP_ATOMIC_O_TRUNC: open(O_TRUNC) truncates in OPEN, saving a SETATTR.
//   - POSIX ACLs (EnableAcl), with CAP_DONT_MASK (the umask arrives apart
//     from the mode, so that a default ACL can replace it) and
//     CAP_SETXATTR_EXT (SETXATTR_ACL_KILL_SGID); see node_acl.go.
//   - CAP_HANDLE_KILLPRIV_V2: lsmfs clears setuid/setgid and removes
//     file capabilities itself on write, truncate, chown and open(O_TRUNC)
//     (WRITE_KILL_SUIDGID, FATTR_KILL_SUIDGID, OPEN_KILL_SUIDGID), so the
//     kernel no longer asks for security.capability (a GETXATTR) before
//     every write(2): one request per write instead of two.
//   - CAP_WRITEBACK_CACHE when Options.WritebackCache is set.
//   - DisableSplice: READ replies are byte slices, never file descriptors,
//     so go-fuse's splice attempt (a pipe write and a drain per READ before
//     it falls back to writev) is pure cost: reads of small files took 25%
//     less daemon CPU without it.
//
// Entry, attribute and negative-entry timeouts are returned with every reply
// (Options), not here.
func (f *FS) MountOptions() fuse.MountOptions {
	mo := fuse.MountOptions{
		FsName:               "lsmfs",
		Name:                 "lsmfs",
		Options:              []string{"default_permissions"},
		MaxWrite:             1 << 20,
		MaxBackground:        64,
		EnableSymlinkCaching: true,
		EnableAcl:            true,
		DisableSplice:        true,
		ExtraCapabilities:    fuse.CAP_ATOMIC_O_TRUNC | fuse.CAP_DONT_MASK | fuse.CAP_SETXATTR_EXT | fuse.CAP_HANDLE_KILLPRIV_V2,
	}
	if f.opts.ReadOnly {
		mo.Options = append(mo.Options, "ro")
	}
	if f.opts.WritebackCache {
		mo.ExtraCapabilities |= fuse.CAP_WRITEBACK_CACHE
	}
	return mo
}

// String names the filesystem (go-fuse uses it in debug output).
func (f *FS) String() string { return "lsmfs" }

// Close writes every dirty buffer and forces the journal. It does not close
// the db. Handles still open are forgotten (the kernel has released them at
// unmount); an orphan they kept is reclaimed at the next New.
func (f *FS) Close() error {
	if f.closed.Swap(true) {
		return ErrClosed
	}
	f.inodes.stop.Store(true)
	<-f.inodes.done
	close(f.flusher.stop)
	<-f.flusher.done
	var first error
	for _, oi := range f.open.all() {
		h := f.locks.lock(oi.ino)
		if err := f.flushLocked(oi, false); err != nil && first == nil {
			first = fmt.Errorf("fs: close: flush inode %d: %w", oi.ino, err)
		}
		h.unlock()
	}
	if f.opts.ReadOnly {
		return first
	}
	f.writeAtimes()
	if err := f.db.SyncJournal(); err != nil && first == nil {
		first = fmt.Errorf("fs: close: sync journal: %w", err)
	}
	return first
}

// allocIno hands out a new inode number. The reservation is written in its
// own batch, before any batch that uses a number from it, so the journal's
// prefix property makes it durable before any such use: after a crash
// numbers start above every number that may have been used.
func (f *FS) allocIno() (uint64, error) {
	f.alloc.Lock()
	defer f.alloc.Unlock()
	if f.alloc.next >= f.alloc.bound {
		if f.alloc.next > math.MaxUint64-inodeReserve {
			// The counter would wrap to 0 (a negative entry) and 1 (the
			// root): out of inode numbers.
			return 0, syscall.ENOSPC
		}
		bound := f.alloc.next + inodeReserve
		b := lsm.NewBatch()
		b.Set(superKey(superNameInodeNext), encodeInodeNext(bound))
		if err := f.db.Apply(b, false); err != nil {
			return 0, err
		}
		f.alloc.bound = bound
	}
	ino := f.alloc.next
	f.alloc.next++
	return ino, nil
}

// reclaimOrphans deletes the inodes that were unlinked while open when the
// filesystem last stopped.
func (f *FS) reclaimOrphans() error {
	lo, hi := familyRange(famOrphan)
	it := f.db.NewIter(&lsm.IterOptions{LowerBound: lo, UpperBound: hi})
	var orphans []uint64
	for ok := it.First(); ok; ok = it.Next() {
		ino, err := decodeOrphanKey(it.Key())
		if err != nil {
			it.Close()
			return fmt.Errorf("fs: scan orphans: %w", err)
		}
		orphans = append(orphans, ino)
	}
	if err := closeIter(it); err != nil {
		return fmt.Errorf("fs: scan orphans: %w", err)
	}
	for _, ino := range orphans {
		b := lsm.NewBatch()
		n, err := f.getInode(ino)
		switch {
		case errors.Is(err, syscall.ENOENT):
			b.Delete(orphanKey(ino)) // nothing left to reclaim
		case err != nil:
			return fmt.Errorf("fs: reclaim orphan %d: %w", ino, err)
		case n.Nlink > 0:
			// Linked again (O_TMPFILE then linkat) in a batch that
			// should have removed the key: keep the file.
			f.log.Warn("fs: orphan key on a linked inode; dropping the key", "ino", ino, "nlink", n.Nlink)
			b.Delete(orphanKey(ino))
		default:
			if err := f.dropInode(b, ino, &n, true); err != nil {
				return fmt.Errorf("fs: reclaim orphan %d: %w", ino, err)
			}
		}
		if err := f.db.Apply(b, false); err != nil {
			return fmt.Errorf("fs: reclaim orphan %d: %w", ino, err)
		}
		f.log.Info("fs: reclaimed orphan inode", "ino", ino)
	}
	return nil
}

// countInodes counts the inode records of snap for statfs, then releases it.
func (f *FS) countInodes(snap *lsm.Snapshot) {
	defer close(f.inodes.done)
	defer snap.Close()
	lo, hi := familyRange(famInode)
	it := snap.NewIter(&lsm.IterOptions{LowerBound: lo, UpperBound: hi})
	var n int64
	for ok := it.First(); ok && !f.inodes.stop.Load(); ok = it.Next() {
		n++
		if n%4096 == 0 {
			f.inodes.scanned.Store(n)
		}
	}
	f.inodes.scanned.Store(n)
	if err := closeIter(it); err != nil {
		f.log.Warn("fs: count inodes", "err", err)
	}
}

// inodeCount is the number of live inodes (an underestimate until the
// count started at New has finished).
func (f *FS) inodeCount() uint64 {
	return uint64(max(f.inodes.scanned.Load()+f.inodes.delta.Load(), 0))
}
