package fs

import (
	"crypto/rand"
	"fmt"
	"syscall"
	"time"

	"github.com/lsmfs/lsmfs/lsm"
)

// DefaultBlockSize is the data block size Format uses by default, chosen by
// TestBlockSizeTable (bench_test.go; the engine on ext4, medians of 5
// interleaved rounds on a shared 2-core machine):
//
//	workload                           4 KiB   16 KiB  64 KiB  128 KiB
//	sequential write 1 MiB (MiB/s)       241      280     311      344
//	sequential read 1 MiB (MiB/s)        952     1292    1841     1676
//	random write 4 KiB, fsync/32 (IOPS) 25696   12811    3821     2513
//	random read 4 KiB (IOPS)            77957   66498   47775    30106
//	create 4 KiB files (files/s)        54052   44547   45069    54250
//
// A 4 KiB write into a larger block reads and rewrites the whole block, so
// random writes cost in proportion to the block size (3.4x fewer IOPS at
// 64 KiB than at 16 KiB), while sequential throughput gains only 10-40%
// from larger blocks, and far less once FUSE's per-request cost is added.
// 16 KiB keeps random I/O within 2x of 4 KiB blocks at a quarter of their
// key count. Small files are stored short whatever the block size.
const DefaultBlockSize = 16 << 10

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
