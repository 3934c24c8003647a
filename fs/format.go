package fs

import (
	"crypto/rand"
	"fmt"
	"syscall"
	"time"

	"github.com/lsmfs/lsmfs/lsm"
)

// DefaultBlockSize is the data block size Format uses by default: 4 KiB,
// the page size. The kernel writes whole pages, so a 4 KiB write replaces a
// block whole and never waits for the stored block to be read (with larger
// blocks the flush reads the block under it), and it rewrites 4 KiB, not
// 16. Measured through FUSE (bench/fs, 3 interleaved rounds, medians;
// lsmfs:bs=16384 beside the default):
//
//	workload                                  4 KiB   16 KiB
//	4 KiB random write, fsync every 32 (IOPS) 17,599    8,209
//	4 KiB random read, O_DIRECT (IOPS)         6,425    6,258
//	sequential write 1 GiB (MiB/s)               468      534
//	sequential read 1 GiB, cold (MiB/s)          815    1,086
//	small-file rows (create ... rm -rf)      within noise
//
// Alone (dd 1 GiB into a fresh mount, then cat after dropping caches)
// sequential reads ran at the same speed and daemon CPU with both sizes;
// in the harness the 4x more keys of a large file cost flush and compaction
// work that lands in the following steps. Sequential reads batch adjacent
// values into one read of up to 1 MiB (lsm.Iterator.Each) whatever the
// block size. Small files are stored short whatever the block size.
const DefaultBlockSize = 4 << 10

// FormatOptions configure Format.
type FormatOptions struct {
	// BlockSize is the data block size, a power of two in [4KiB, 1MiB].
	// Default DefaultBlockSize.
	BlockSize int
	// UUID identifies the filesystem. Default: the engine's UUID if it has
	// one, else a random one.
	UUID [16]byte
	// RootUID and RootGID own the root directory. Default 0 (root).
	RootUID, RootGID uint32
	// RootMode holds the permission bits of the root directory. Default
	// 0755.
	RootMode uint32
	// Clock stamps the root directory. Default time.Now.
	Clock func() time.Time
}

// Format writes a new, empty filesystem into db: the superblock, the inode
// counter and the root directory, in one durable batch. It refuses an engine
// that holds any key (ErrFormatted).
func Format(db *lsm.DB, o FormatOptions) error {
	if o.BlockSize == 0 {
		o.BlockSize = DefaultBlockSize
	}
	if err := validBlockSize(o.BlockSize); err != nil {
		return fmt.Errorf("fs: format: %w", err)
	}
	if err := blockFitsBatch(db, o.BlockSize); err != nil {
		return fmt.Errorf("fs: format: %w", err)
	}
	if o.RootMode == 0 {
		o.RootMode = 0o755
	}
	if o.RootMode&^0o7777 != 0 {
		return fmt.Errorf("fs: format: root mode %#o has bits beyond 07777", o.RootMode)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.UUID == ([16]byte{}) {
		o.UUID = db.UUID()
	}
	if o.UUID == ([16]byte{}) {
		if _, err := rand.Read(o.UUID[:]); err != nil {
			return fmt.Errorf("fs: format: uuid: %w", err)
		}
	}

	it := db.NewIter(nil)
	nonEmpty := it.First()
	if err := closeIter(it); err != nil {
		return fmt.Errorf("fs: format: %w", err)
	}
	if nonEmpty {
		if _, err := db.Get(superKey(superNameSuper)); err == nil {
			return ErrFormatted
		}
		return fmt.Errorf("%w: the engine holds keys but no lsmfs superblock", ErrFormatted)
	}

	now := o.Clock().UnixNano()
	b := lsm.NewBatch()
	b.Set(superKey(superNameSuper), encodeSuperblock(&superblock{
		UUID: o.UUID, BlockSize: uint32(o.BlockSize), Created: now,
	}))
	b.Set(superKey(superNameInodeNext), encodeInodeNext(rootIno+1))
	putInode(b, rootIno, &inode{
		Mode: syscall.S_IFDIR | o.RootMode, Uid: o.RootUID, Gid: o.RootGID,
		Nlink: 2, Parent: rootIno,
		Atime: now, Mtime: now, Ctime: now, Btime: now,
	})
	if err := db.Apply(b, true); err != nil {
		return fmt.Errorf("fs: format: %w", err)
	}
	return nil
}
