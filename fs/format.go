package fs

import (
	"crypto/rand"
	"fmt"
	"syscall"
	"time"

	"github.com/lsmfs/lsmfs/lsm"
)

// DefaultBlockSize is the data block size Format uses by default. It was
// chosen by BenchmarkBlockSize (bench_test.go; numbers in the README): 64 KiB
// keeps sequential writes and reads within a few percent of 128 KiB while a
// 4 KiB random write or read moves 2x fewer bytes than at 128 KiB, and small
// files are stored short whatever the block size.
const DefaultBlockSize = 64 << 10

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
