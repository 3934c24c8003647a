package fs

// The keyspace. This file is the only place in package fs that builds or
// parses key bytes.
//
// All integers are big-endian so that byte order is numeric order. One prefix
// byte per family (part of the on-disk format; never change):
//
//	family      key                                 value
//	----------  ----------------------------------  -----------------------------------------------
//	superblock  'S' + name                          "super": version, magic, UUID, block size, ...
//	                                                "inode-next": version, inode numbers reserved
//	inode       'I' + ino(8)                        version, mode, uid, gid, nlink, rdev, flags,
//	                                                size, stored bytes, parent (dirs), a/m/c/btime
//	                                                (ns), xattr count (values.go)
//	dentry      'D' + parent ino(8) + name          version, child ino(8), file type(1)
//	data block  'B' + ino(8) + block index(8)       block bytes; a short block is stored short
//	xattr       'X' + ino(8) + name                 value bytes
//	symlink     'L' + ino(8)                        target bytes
//	orphan      'O' + ino(8)                        empty: an unlinked inode that is still open;
//	                                                reclaimed at its last release or at New
//
// Keys of one inode's blocks, xattrs, and one directory's entries are
// contiguous, so each is one prefix scan or one range deletion.

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// Family prefixes: part of the on-disk format; never change.
const (
	famSuper   byte = 'S'
	famInode   byte = 'I'
	famDentry  byte = 'D'
	famBlock   byte = 'B'
	famXattr   byte = 'X'
	famSymlink byte = 'L'
	famOrphan  byte = 'O'
)

// Superblock key names: part of the on-disk format; never change.
const (
	superNameSuper     = "super"
	superNameInodeNext = "inode-next"
)

// ---- superblock ----

func superKey(name string) []byte {
	k := make([]byte, 0, 1+len(name))
	k = append(k, famSuper)
	return append(k, name...)
}

func decodeSuperKey(k []byte) (name string, err error) {
	if len(k) < 2 || k[0] != famSuper {
		return "", keyError(k, "superblock")
	}
	return string(k[1:]), nil
}

// ---- inode ----

func appendInodeKey(dst []byte, ino uint64) []byte {
	dst = append(dst, famInode)
	return binary.BigEndian.AppendUint64(dst, ino)
}

func inodeKey(ino uint64) []byte { return appendInodeKey(make([]byte, 0, 9), ino) }

func decodeInodeKey(k []byte) (ino uint64, err error) {
	if len(k) != 9 || k[0] != famInode {
		return 0, keyError(k, "inode")
	}
	return binary.BigEndian.Uint64(k[1:]), nil
}

// ---- dentry ----

func appendDentryKey(dst []byte, parent uint64, name string) []byte {
	dst = append(dst, famDentry)
	dst = binary.BigEndian.AppendUint64(dst, parent)
	return append(dst, name...)
}

func dentryKey(parent uint64, name string) []byte {
	return appendDentryKey(make([]byte, 0, 9+len(name)), parent, name)
}

// dentryRange bounds the entries of directory parent: [lo, hi).
func dentryRange(parent uint64) (lo, hi []byte) {
	lo = appendDentryKey(make([]byte, 0, 9), parent, "")
	return lo, prefixEnd(lo)
}

func decodeDentryKey(k []byte) (parent uint64, name string, err error) {
	if len(k) < 10 || k[0] != famDentry {
		return 0, "", keyError(k, "dentry")
	}
	return binary.BigEndian.Uint64(k[1:9]), string(k[9:]), nil
}

// dentryKeyName returns the name part of a dentry key without copying; the
// caller has bounded its iterator to one directory.
func dentryKeyName(k []byte) []byte {
	if len(k) < 9 {
		return nil
	}
	return k[9:]
}

// ---- data block ----

func appendBlockKey(dst []byte, ino, idx uint64) []byte {
	dst = append(dst, famBlock)
	dst = binary.BigEndian.AppendUint64(dst, ino)
	return binary.BigEndian.AppendUint64(dst, idx)
}

func blockKey(ino, idx uint64) []byte { return appendBlockKey(make([]byte, 0, 17), ino, idx) }

// blockRange bounds the blocks of ino with index in [from, to): [lo, hi).
// to == 0 means "to the end of the inode".
func blockRange(ino, from, to uint64) (lo, hi []byte) {
	lo = blockKey(ino, from)
	if to == 0 {
		hi = prefixEnd(lo[:9:9])
	} else {
		hi = blockKey(ino, to)
	}
	return lo, hi
}

func decodeBlockKey(k []byte) (ino, idx uint64, err error) {
	if len(k) != 17 || k[0] != famBlock {
		return 0, 0, keyError(k, "block")
	}
	return binary.BigEndian.Uint64(k[1:9]), binary.BigEndian.Uint64(k[9:]), nil
}

// ---- xattr ----

func xattrKey(ino uint64, name string) []byte {
	k := make([]byte, 0, 9+len(name))
	k = append(k, famXattr)
	k = binary.BigEndian.AppendUint64(k, ino)
	return append(k, name...)
}

// xattrRange bounds the xattrs of ino: [lo, hi).
func xattrRange(ino uint64) (lo, hi []byte) {
	lo = xattrKey(ino, "")
	return lo, prefixEnd(lo)
}

func decodeXattrKey(k []byte) (ino uint64, name string, err error) {
	if len(k) < 10 || k[0] != famXattr {
		return 0, "", keyError(k, "xattr")
	}
	return binary.BigEndian.Uint64(k[1:9]), string(k[9:]), nil
}

// ---- symlink ----

func symlinkKey(ino uint64) []byte {
	k := make([]byte, 0, 9)
	k = append(k, famSymlink)
	return binary.BigEndian.AppendUint64(k, ino)
}

func decodeSymlinkKey(k []byte) (ino uint64, err error) {
	if len(k) != 9 || k[0] != famSymlink {
		return 0, keyError(k, "symlink")
	}
	return binary.BigEndian.Uint64(k[1:]), nil
}

// ---- orphan ----

func orphanKey(ino uint64) []byte {
	k := make([]byte, 0, 9)
	k = append(k, famOrphan)
	return binary.BigEndian.AppendUint64(k, ino)
}

func decodeOrphanKey(k []byte) (ino uint64, err error) {
	if len(k) != 9 || k[0] != famOrphan {
		return 0, keyError(k, "orphan")
	}
	return binary.BigEndian.Uint64(k[1:]), nil
}

// familyRange bounds every key of one family: [lo, hi).
func familyRange(fam byte) (lo, hi []byte) { return []byte{fam}, []byte{fam + 1} }

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}

func keyError(k []byte, family string) error {
	return &CorruptError{What: family + " key", Key: k, Reason: fmt.Sprintf("malformed (%d bytes)", len(k))}
}

// Key is a decoded key of any family, for Check reports, debug dumps and tests.
type Key struct {
	Family byte   // one of 'S', 'I', 'D', 'B', 'X', 'L', 'O'
	Ino    uint64 // the inode (for D: the parent directory)
	Index  uint64 // block index (B)
	Name   string // superblock name (S), entry name (D), xattr name (X)
}

// DecodeKey decodes any lsmfs key. Bad bytes give an error matching
// ErrCorrupt; it never panics.
func DecodeKey(k []byte) (Key, error) {
	if len(k) == 0 {
		return Key{}, keyError(k, "empty")
	}
	var (
		key = Key{Family: k[0]}
		err error
	)
	switch k[0] {
	case famSuper:
		key.Name, err = decodeSuperKey(k)
	case famInode:
		key.Ino, err = decodeInodeKey(k)
	case famDentry:
		key.Ino, key.Name, err = decodeDentryKey(k)
	case famBlock:
		key.Ino, key.Index, err = decodeBlockKey(k)
	case famXattr:
		key.Ino, key.Name, err = decodeXattrKey(k)
	case famSymlink:
		key.Ino, err = decodeSymlinkKey(k)
	case famOrphan:
		key.Ino, err = decodeOrphanKey(k)
	default:
		err = &CorruptError{What: "key", Key: k, Reason: fmt.Sprintf("unknown family %q", k[0])}
	}
	return key, err
}

// String prints the key as "family(fields)", e.g. dentry(1,"a.txt").
func (k Key) String() string {
	switch k.Family {
	case famSuper:
		return "super(" + strconv.Quote(k.Name) + ")"
	case famInode:
		return fmt.Sprintf("inode(%d)", k.Ino)
	case famDentry:
		return fmt.Sprintf("dentry(%d,%q)", k.Ino, k.Name)
	case famBlock:
		return fmt.Sprintf("block(%d,%d)", k.Ino, k.Index)
	case famXattr:
		return fmt.Sprintf("xattr(%d,%q)", k.Ino, k.Name)
	case famSymlink:
		return fmt.Sprintf("symlink(%d)", k.Ino)
	case famOrphan:
		return fmt.Sprintf("orphan(%d)", k.Ino)
	}
	return fmt.Sprintf("unknown(%q)", k.Family)
}
