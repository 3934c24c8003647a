package fs

// Value encodings. Every structured value starts with a version byte; the
// layouts below are part of the on-disk format (never change a version's
// layout: add a new version). Decoders never panic: bad bytes give a
// *CorruptError (errors.Is(err, ErrCorrupt)).
//
// inode value, version 1 (85 bytes, integers big-endian):
//
//	+---+------+-----+-----+-------+------+-------+------+--------+--------+
//	| 1 | mode | uid | gid | nlink | rdev | flags | size | stored | parent |
//	|1B | 4B   | 4B  | 4B  | 4B    | 4B   | 4B    | 8B   | 8B     | 8B     |
//	+---+------+-----+-----+-------+------+-------+------+--------+--------+
//	| atime | mtime | ctime | btime | nxattr |
//	| 8B ns | 8B ns | 8B ns | 8B ns | 4B     |
//	+-------+-------+-------+-------+--------+
//
//	mode    file type and permission bits, as in st_mode
//	flags   reserved, 0
//	size    st_size; for directories the number of entries
//	stored  bytes held in data blocks (the sum of their lengths); st_blocks
//	parent  for a directory, the directory holding its entry (root: itself)
//	times   signed nanoseconds since the Unix epoch
//	nxattr  number of xattr keys of the inode
//
// dentry value, version 1 (10 bytes): | 1 | child ino 8B | type 1B |, type
// being the st_mode file type shifted right by 12 (a DT_* value).
//
// superblock "super", version 1 (45 bytes):
//
//	| 1 | magic "lsmfs\x00sb" 8B | UUID 16B | block size 4B | features 8B | created 8B ns |
//
// superblock "inode-next", version 1 (9 bytes): | 1 | bound 8B |: every inode
// number below bound may have been handed out; the allocator starts at bound
// after a restart.

import (
	"encoding/binary"
	"fmt"
	"github.com/lsmfs/lsmfs/lsm"
	"syscall"
)

// Version bytes: part of the on-disk format; never change.
const (
	inodeVersion     = 1
	dentryVersion    = 1
	superVersion     = 1
	inodeNextVersion = 1

	inodeLen     = 85
	dentryLen    = 10
	superLen     = 45
	inodeNextLen = 9
)

// superMagic identifies an lsmfs superblock: part of the on-disk format.
const superMagic = "lsmfs\x00sb"

// supportedFeatures is the mask of superblock feature bits this code reads.
const supportedFeatures = 0

// inode is the decoded inode value.
type inode struct {
	Mode   uint32
	Uid    uint32
	Gid    uint32
	Nlink  uint32
	Rdev   uint32
	Flags  uint32
	Size   uint64
	Stored uint64
	Parent uint64
	Atime  int64
	Mtime  int64
	Ctime  int64
	Btime  int64
	Nxattr uint32

	// estimated (not stored): Stored leaves out buffered blocks whose
	// stored length is unknown until the write buffer is flushed, so the
	// attributes must not be cached by the kernel (the flush changes
	// st_blocks and nothing tells the kernel).
	estimated bool
}

func (n *inode) isDir() bool     { return n.Mode&syscall.S_IFMT == syscall.S_IFDIR }
func (n *inode) isReg() bool     { return n.Mode&syscall.S_IFMT == syscall.S_IFREG }
func (n *inode) isSymlink() bool { return n.Mode&syscall.S_IFMT == syscall.S_IFLNK }

// dtype is the directory-entry type of the inode.
func (n *inode) dtype() uint8 { return uint8(n.Mode >> 12) }

func appendInode(dst []byte, n *inode) []byte {
	dst = append(dst, inodeVersion)
	for _, v := range [...]uint32{n.Mode, n.Uid, n.Gid, n.Nlink, n.Rdev, n.Flags} {
		dst = binary.BigEndian.AppendUint32(dst, v)
	}
	for _, v := range [...]uint64{n.Size, n.Stored, n.Parent,
		uint64(n.Atime), uint64(n.Mtime), uint64(n.Ctime), uint64(n.Btime)} {
		dst = binary.BigEndian.AppendUint64(dst, v)
	}
	return binary.BigEndian.AppendUint32(dst, n.Nxattr)
}

func encodeInode(n *inode) []byte { return appendInode(make([]byte, 0, inodeLen), n) }

func decodeInode(v []byte) (inode, error) {
	var n inode
	if len(v) == 0 {
		return n, &CorruptError{What: "inode value", Reason: "empty"}
	}
	if v[0] != inodeVersion {
		return n, &CorruptError{What: "inode value", Reason: fmt.Sprintf("unknown version %d", v[0])}
	}
	if len(v) != inodeLen {
		return n, &CorruptError{What: "inode value", Reason: fmt.Sprintf("length %d, want %d", len(v), inodeLen)}
	}
	u32 := func(i int) uint32 { return binary.BigEndian.Uint32(v[1+4*i:]) }
	u64 := func(i int) uint64 { return binary.BigEndian.Uint64(v[25+8*i:]) }
	n = inode{
		Mode: u32(0), Uid: u32(1), Gid: u32(2), Nlink: u32(3), Rdev: u32(4), Flags: u32(5),
		Size: u64(0), Stored: u64(1), Parent: u64(2),
		Atime: int64(u64(3)), Mtime: int64(u64(4)), Ctime: int64(u64(5)), Btime: int64(u64(6)),
		Nxattr: binary.BigEndian.Uint32(v[81:]),
	}
	if !validType(n.Mode) {
		return inode{}, &CorruptError{What: "inode value", Reason: fmt.Sprintf("bad file type in mode %#o", n.Mode)}
	}
	if n.Flags != 0 {
		// Reserved: a later format may give them a meaning only if they
		// are zero on disk now.
		return inode{}, &CorruptError{What: "inode value", Reason: fmt.Sprintf("reserved flags %#x", n.Flags)}
	}
	return n, nil
}

func validType(mode uint32) bool {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFREG, syscall.S_IFDIR, syscall.S_IFLNK, syscall.S_IFIFO,
		syscall.S_IFSOCK, syscall.S_IFCHR, syscall.S_IFBLK:
		return true
	}
	return false
}

// dentry is the decoded dentry value.
type dentry struct {
	Ino  uint64
	Type uint8 // st_mode >> 12
}

func encodeDentry(d dentry) []byte {
	v := make([]byte, 0, dentryLen)
	v = append(v, dentryVersion)
	v = binary.BigEndian.AppendUint64(v, d.Ino)
	return append(v, d.Type)
}

func decodeDentry(v []byte) (dentry, error) {
	if len(v) == 0 {
		return dentry{}, &CorruptError{What: "dentry value", Reason: "empty"}
	}
	if v[0] != dentryVersion {
		return dentry{}, &CorruptError{What: "dentry value", Reason: fmt.Sprintf("unknown version %d", v[0])}
	}
	if len(v) != dentryLen {
		return dentry{}, &CorruptError{What: "dentry value", Reason: fmt.Sprintf("length %d, want %d", len(v), dentryLen)}
	}
	d := dentry{Ino: binary.BigEndian.Uint64(v[1:]), Type: v[9]}
	if d.Ino == 0 {
		return dentry{}, &CorruptError{What: "dentry value", Reason: "inode number 0"}
	}
	if !validType(uint32(d.Type) << 12) {
		return dentry{}, &CorruptError{What: "dentry value", Reason: fmt.Sprintf("bad file type %d", d.Type)}
	}
	return d, nil
}

// superblock is the decoded "super" value.
type superblock struct {
	UUID      [16]byte
	BlockSize uint32
	Features  uint64
	Created   int64
}

func encodeSuperblock(s *superblock) []byte {
	v := make([]byte, 0, superLen)
	v = append(v, superVersion)
	v = append(v, superMagic...)
	v = append(v, s.UUID[:]...)
	v = binary.BigEndian.AppendUint32(v, s.BlockSize)
	v = binary.BigEndian.AppendUint64(v, s.Features)
	return binary.BigEndian.AppendUint64(v, uint64(s.Created))
}

func decodeSuperblock(v []byte) (superblock, error) {
	var s superblock
	if len(v) == 0 {
		return s, &CorruptError{What: "superblock", Reason: "empty"}
	}
	if v[0] != superVersion {
		return s, &CorruptError{What: "superblock", Reason: fmt.Sprintf("unknown version %d", v[0])}
	}
	if len(v) != superLen {
		return s, &CorruptError{What: "superblock", Reason: fmt.Sprintf("length %d, want %d", len(v), superLen)}
	}
	if string(v[1:9]) != superMagic {
		return s, &CorruptError{What: "superblock", Reason: fmt.Sprintf("bad magic %q", v[1:9])}
	}
	copy(s.UUID[:], v[9:25])
	s.BlockSize = binary.BigEndian.Uint32(v[25:])
	s.Features = binary.BigEndian.Uint64(v[29:])
	s.Created = int64(binary.BigEndian.Uint64(v[37:]))
	if err := validBlockSize(int(s.BlockSize)); err != nil {
		return superblock{}, &CorruptError{What: "superblock", Reason: err.Error()}
	}
	if s.Features&^supportedFeatures != 0 {
		return superblock{}, &CorruptError{What: "superblock", Reason: fmt.Sprintf("unsupported feature bits %#x", s.Features&^supportedFeatures)}
	}
	return s, nil
}

func encodeInodeNext(bound uint64) []byte {
	v := make([]byte, 0, inodeNextLen)
	v = append(v, inodeNextVersion)
	return binary.BigEndian.AppendUint64(v, bound)
}

func decodeInodeNext(v []byte) (uint64, error) {
	if len(v) != inodeNextLen || v[0] != inodeNextVersion {
		return 0, &CorruptError{What: "inode-next", Reason: fmt.Sprintf("bad value (%d bytes)", len(v))}
	}
	b := binary.BigEndian.Uint64(v[1:])
	if b <= rootIno {
		return 0, &CorruptError{What: "inode-next", Reason: fmt.Sprintf("bound %d <= root", b)}
	}
	return b, nil
}

// blockBatchHeadroom is what a flush batch of one block needs beyond the
// block: its key, the inode record, the batch's own header.
const blockBatchHeadroom = 64 << 10

// blockFitsBatch refuses an engine whose largest batch cannot hold one full
// block: the write buffer's flush splits down to one block and no further,
// so every write filling a block would fail (a 1 MiB block with a 4 MiB
// journal, whose records are at most a quarter of it, or a 1 MiB memtable).
func blockFitsBatch(db *lsm.DB, bs int) error {
	if max := db.MaxBatchBytes(); max < uint64(bs+blockBatchHeadroom) {
		return fmt.Errorf("the block size of %d bytes needs batches of %d bytes, and the engine takes at most %d "+
			"(a quarter of the journal, and the memtable size): make the journal (mkfs --journal-size) at least %d MiB, "+
			"and memtable_size at least %d MiB", bs, bs+blockBatchHeadroom, max, 4*(bs+blockBatchHeadroom)>>20+1, (bs+blockBatchHeadroom)>>20+1)
	}
	return nil
}

// validBlockSize accepts powers of two from 4 KiB to 1 MiB.
func validBlockSize(bs int) error {
	if bs < 4<<10 || bs > 1<<20 || bs&(bs-1) != 0 {
		return fmt.Errorf("block size %d is not a power of two in [4KiB, 1MiB]", bs)
	}
	return nil
}
