package fs

// The consistency checker (bbolt's tx.Check in spirit): it reads a snapshot
// of the whole keyspace and reports every problem it finds, not just the
// first. `lsmfs fsck` prints the report; tests run it after every sequence.

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/lsmfs/lsmfs/lsm"
)

// maxProblems bounds the problems a Report lists; the rest are counted.
const maxProblems = 10000

// Report is what Check found.
type Report struct {
	// Problems lists every inconsistency, one sentence each.
	Problems []string
	// Omitted counts problems beyond maxProblems that were not listed.
	Omitted int

	Inodes, Dirs, Files, Symlinks, Specials int
	Dentries, Blocks, Xattrs, Orphans       int
	BlockBytes                              uint64
}

// OK reports whether Check found nothing wrong.
func (r Report) OK() bool { return len(r.Problems) == 0 }

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "inodes=%d (dirs=%d files=%d symlinks=%d special=%d) dentries=%d blocks=%d (%d bytes) xattrs=%d orphans=%d\n",
		r.Inodes, r.Dirs, r.Files, r.Symlinks, r.Specials, r.Dentries, r.Blocks, r.BlockBytes, r.Xattrs, r.Orphans)
	for _, p := range r.Problems {
		b.WriteString("problem: ")
		b.WriteString(p)
		b.WriteByte('\n')
	}
	if r.Omitted > 0 {
		fmt.Fprintf(&b, "... and %d more problems\n", r.Omitted)
	}
	return b.String()
}

func (r *Report) addf(format string, args ...any) {
	if len(r.Problems) >= maxProblems {
		r.Omitted++
		return
	}
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

type ckInode struct {
	n       inode
	links   uint32 // dentries naming it
	subdirs uint32 // entries that are directories (directories)
	entries uint64 // entries (directories)
	stored  uint64 // bytes in its blocks
	xattrs  uint32
	orphan  bool
	target  bool   // has a symlink key
	named   uint64 // a directory's parent according to its dentry (0: none)
}

// Check verifies the filesystem stored in db:
//   - the superblock and inode counter decode, and every inode number is
//     below the counter; the root is a directory that is its own parent;
//   - every key decodes and belongs to a known family;
//   - every dentry names a live inode of the type it records, in a live
//     directory;
//   - nlink equals the number of dentries (directories: 2 + subdirectories),
//     a directory's size its number of entries, and an inode with no link
//     left is an orphan (and every orphan key names such an inode);
//   - directories form a tree: one name each, parent pointers that match it
//     and lead to the root;
//   - no data block lies beyond its file's size (there is no exception for
//     preallocation: fallocate stores no blocks, KEEP_SIZE reserves
//     nothing), no block is longer than the block size, and the inode's
//     stored-bytes count equals the sum of its blocks; only regular files
//     have blocks, only symlinks targets (of length size), and each inode's
//     xattr count matches its keys;
//   - ACL xattrs decode, and only directories have a default ACL.
//
// Value-log pointers, table and journal checksums are the engine's part:
// lsm.DB.Check. Repair (repair.go) fixes what can be fixed safely.
//
// It returns an error only when it cannot read the keyspace (or finds no
// superblock); every inconsistency goes into the Report.
func Check(db *lsm.DB) (Report, error) {
	snap := db.NewSnapshot()
	defer snap.Close()
	c := &checker{snap: snap, inodes: map[uint64]*ckInode{}, uuid: db.UUID()}
	if err := c.run(); err != nil {
		return c.r, err
	}
	return c.r, nil
}

type checker struct {
	snap   *lsm.Snapshot
	r      Report
	bs     uint64
	bound  uint64
	inodes map[uint64]*ckInode
	uuid   [16]byte // the engine's
}

// scanRange calls fn with every key in [lo, hi) and its value or, if lenFn
// is set, lenFn with every key and its value's length (not reading values
// kept in the value log: the engine check reads those). A damaged table or
// value is a problem of the report, not the end of the check: the scan
// goes on after the key whose value could not be read, or gives up on the
// rest of the range if the failing key is unknown. Other errors (I/O) are
// returned.
func (c *checker) scanRange(lo, hi []byte, fn func(k, v []byte), lenFn func(k []byte, n int)) error {
	for {
		it := c.snap.NewIter(&lsm.IterOptions{LowerBound: lo, UpperBound: hi})
		var failed []byte // the key whose value could not be read
		for ok := it.First(); ok; ok = it.Next() {
			if lenFn != nil {
				lenFn(it.Key(), it.ValueLen())
				continue
			}
			v := it.Value()
			if v == nil && it.Error() != nil {
				failed = slices.Clone(it.Key())
				break
			}
			fn(it.Key(), v)
		}
		err := closeIter(it)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, lsm.ErrCorrupt):
			return err
		case failed == nil:
			c.r.addf("keys from %q: %v (the rest of the range is not checked)", lo, err)
			return nil
		}
		c.r.addf("key %q: %v", failed, err)
		lo = append(failed, 0) // the next key after it
	}
}

func (c *checker) run() error {
	r := &c.r
	v, err := c.snap.Get(superKey(superNameSuper))
	if errors.Is(err, lsm.ErrNotFound) {
		return ErrNotFormatted
	} else if err != nil {
		return fmt.Errorf("fs: check: %w", err)
	}
	sb, err := decodeSuperblock(v)
	if err != nil {
		r.addf("%v", err)
		sb.BlockSize = DefaultBlockSize
	} else if c.uuid != ([16]byte{}) && c.uuid != sb.UUID {
		r.addf("superblock: filesystem UUID %x, but the engine's is %x (a mount refuses it)", sb.UUID, c.uuid)
	}
	c.bs = uint64(sb.BlockSize)
	if v, err := c.snap.Get(superKey(superNameInodeNext)); err != nil {
		r.addf("inode counter: %v", err)
	} else if c.bound, err = decodeInodeNext(v); err != nil {
		r.addf("%v", err)
	}
	steps := []struct {
		fam   byte
		fn    func(k, v []byte)
		lenFn func(k []byte, n int)
	}{
		{famSuper, c.super, nil},
		{famInode, c.inode, nil},
		{famDentry, c.dentry, nil},
		{famBlock, nil, c.block},
		{famXattr, c.xattr, nil},
		{famSymlink, c.symlink, nil},
		{famOrphan, c.orphan, nil},
	}
	known := make([]byte, 0, len(steps))
	for _, s := range steps {
		lo, hi := familyRange(s.fam)
		if err := c.scanRange(lo, hi, s.fn, s.lenFn); err != nil {
			return fmt.Errorf("fs: check: scan %q: %w", s.fam, err)
		}
		known = append(known, s.fam)
	}
	// Keys outside every family.
	sort.Slice(known, func(i, j int) bool { return known[i] < known[j] })
	var lo []byte
	for _, fam := range append(known, 0) {
		var hi []byte
		if fam != 0 {
			hi = []byte{fam}
		}
		if err := c.scanRange(lo, hi, nil, func(k []byte, _ int) { r.addf("key %q belongs to no family", k) }); err != nil {
			return fmt.Errorf("fs: check: %w", err)
		}
		if fam != 0 {
			lo = []byte{fam + 1}
		}
	}
	c.finish()
	return nil
}

func (c *checker) super(k, v []byte) {
	name, _ := decodeSuperKey(k)
	if name != superNameSuper && name != superNameInodeNext {
		c.r.addf("unknown superblock key %q", k)
	}
}

func (c *checker) inode(k, v []byte) {
	ino, err := decodeInodeKey(k)
	if err != nil {
		c.r.addf("%v", err)
		return
	}
	n, err := decodeInode(v)
	if err != nil {
		c.r.addf("inode %d: %v", ino, err)
		return
	}
	if ino == 0 || c.bound != 0 && ino >= c.bound {
		c.r.addf("inode %d is outside the allocated range [1, %d)", ino, c.bound)
	}
	c.inodes[ino] = &ckInode{n: n}
	c.r.Inodes++
	switch {
	case n.isDir():
		c.r.Dirs++
	case n.isReg():
		c.r.Files++
	case n.isSymlink():
		c.r.Symlinks++
	default:
		c.r.Specials++
	}
}

func (c *checker) dentry(k, v []byte) {
	c.r.Dentries++
	parent, name, err := decodeDentryKey(k)
	if err != nil {
		c.r.addf("%v", err)
		return
	}
	d, err := decodeDentry(v)
	if err != nil {
		c.r.addf("dentry %d/%q: %v", parent, name, err)
		return
	}
	if err := checkName(name); err != nil {
		c.r.addf("dentry %d/%q: bad name: %v", parent, name, err)
	}
	p := c.inodes[parent]
	switch {
	case p == nil:
		c.r.addf("dentry %d/%q is in a missing directory", parent, name)
	case !p.n.isDir():
		c.r.addf("dentry %d/%q is in a non-directory (mode %#o)", parent, name, p.n.Mode)
	default:
		p.entries++
		if uint32(d.Type)<<12 == syscall.S_IFDIR {
			p.subdirs++
		}
	}
	ch := c.inodes[d.Ino]
	if ch == nil {
		c.r.addf("dentry %d/%q names missing inode %d", parent, name, d.Ino)
		return
	}
	ch.links++
	if ch.n.dtype() != d.Type {
		c.r.addf("dentry %d/%q records type %d, inode %d has mode %#o", parent, name, d.Type, d.Ino, ch.n.Mode)
	}
	if ch.n.isDir() {
		if ch.named != 0 {
			c.r.addf("directory %d has a second name %d/%q", d.Ino, parent, name)
		}
		ch.named = parent
	}
}

func (c *checker) block(k []byte, vlen int) {
	c.r.Blocks++
	c.r.BlockBytes += uint64(vlen)
	ino, idx, err := decodeBlockKey(k)
	if err != nil {
		c.r.addf("%v", err)
		return
	}
	n := c.inodes[ino]
	switch {
	case n == nil:
		c.r.addf("block %d of missing inode %d", idx, ino)
		return
	case !n.n.isReg():
		c.r.addf("block %d of inode %d, which is not a regular file (mode %#o)", idx, ino, n.n.Mode)
	case uint64(vlen) > c.bs:
		c.r.addf("block %d of inode %d holds %d bytes, more than the block size %d", idx, ino, vlen, c.bs)
	case idx*c.bs+uint64(vlen) > n.n.Size:
		c.r.addf("block %d of inode %d ends at %d, beyond size %d", idx, ino, idx*c.bs+uint64(vlen), n.n.Size)
	}
	n.stored += uint64(vlen)
}

func (c *checker) xattr(k, v []byte) {
	c.r.Xattrs++
	ino, name, err := decodeXattrKey(k)
	if err != nil {
		c.r.addf("%v", err)
		return
	}
	n := c.inodes[ino]
	if n == nil {
		c.r.addf("xattr %q of missing inode %d", name, ino)
		return
	}
	n.xattrs++
	if isACLName(name) {
		if _, err := parseACL(v); err != nil {
			c.r.addf("inode %d: %s does not decode: %v", ino, name, err)
		} else if name == xattrACLDefault && !n.n.isDir() {
			c.r.addf("inode %d: a default ACL on a non-directory (mode %#o)", ino, n.n.Mode)
		}
	}
}

func (c *checker) symlink(k, v []byte) {
	ino, err := decodeSymlinkKey(k)
	if err != nil {
		c.r.addf("%v", err)
		return
	}
	n := c.inodes[ino]
	switch {
	case n == nil:
		c.r.addf("symlink target of missing inode %d", ino)
		return
	case !n.n.isSymlink():
		c.r.addf("symlink target of inode %d, which is not a symlink (mode %#o)", ino, n.n.Mode)
	case uint64(len(v)) != n.n.Size:
		c.r.addf("symlink %d: target of %d bytes, size %d", ino, len(v), n.n.Size)
	}
	n.target = true
}

func (c *checker) orphan(k, v []byte) {
	c.r.Orphans++
	ino, err := decodeOrphanKey(k)
	if err != nil {
		c.r.addf("%v", err)
		return
	}
	n := c.inodes[ino]
	switch {
	case n == nil:
		c.r.addf("orphan key of missing inode %d", ino)
		return
	case n.n.Nlink != 0:
		c.r.addf("orphan key of inode %d, which has %d links", ino, n.n.Nlink)
	}
	n.orphan = true
}

func (c *checker) finish() {
	r := &c.r
	root := c.inodes[rootIno]
	switch {
	case root == nil:
		r.addf("root inode %d is missing", rootIno)
	case !root.n.isDir():
		r.addf("root inode is not a directory (mode %#o)", root.n.Mode)
	case root.n.Parent != rootIno:
		r.addf("root's parent is %d, want itself", root.n.Parent)
	case root.links != 0:
		r.addf("root has %d names", root.links)
	}
	inos := make([]uint64, 0, len(c.inodes))
	for ino := range c.inodes {
		inos = append(inos, ino)
	}
	sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] })
	for _, ino := range inos {
		in := c.inodes[ino]
		n := &in.n
		if n.Nlink == 0 && !in.orphan {
			r.addf("inode %d has no links and no orphan key", ino)
		}
		if n.isDir() {
			switch {
			case n.Nlink == 0:
				if in.entries != 0 {
					r.addf("removed directory %d has %d entries", ino, in.entries)
				}
				if in.links != 0 {
					// Reclaimed as an orphan at the next mount, leaving
					// its names dangling.
					r.addf("removed directory %d is named by %d dentries", ino, in.links)
				}
			case n.Nlink != 2+in.subdirs:
				r.addf("directory %d: nlink %d, want 2 + %d subdirectories", ino, n.Nlink, in.subdirs)
			}
			if n.Size != in.entries {
				r.addf("directory %d: size %d, want its %d entries", ino, n.Size, in.entries)
			}
			if ino != rootIno && n.Nlink != 0 {
				if in.links != 1 {
					r.addf("directory %d has %d names, want 1", ino, in.links)
				} else if in.named != n.Parent {
					r.addf("directory %d is named in %d but its parent pointer says %d", ino, in.named, n.Parent)
				}
			}
		} else if n.Nlink != in.links {
			r.addf("inode %d: nlink %d, but %d dentries name it", ino, n.Nlink, in.links)
		}
		if n.Stored != in.stored {
			r.addf("inode %d: stored bytes %d, blocks hold %d", ino, n.Stored, in.stored)
		}
		if n.isSymlink() && !in.target {
			r.addf("symlink %d has no target", ino)
		}
		if n.Nxattr != in.xattrs {
			r.addf("inode %d: xattr count %d, %d xattr keys", ino, n.Nxattr, in.xattrs)
		}
	}
	c.checkTree(inos)
}

// checkTree follows every live directory's parent pointers to the root.
func (c *checker) checkTree(inos []uint64) {
	good := map[uint64]bool{rootIno: true}
	for _, ino := range inos {
		in := c.inodes[ino]
		if !in.n.isDir() || in.n.Nlink == 0 {
			continue
		}
		var path []uint64
		seen := map[uint64]bool{}
		d := ino
		for !good[d] {
			if seen[d] {
				c.r.addf("directory %d: parent pointers loop through %d", ino, d)
				break
			}
			seen[d] = true
			path = append(path, d)
			p := c.inodes[d]
			if p == nil || !p.n.isDir() || p.n.Nlink == 0 {
				c.r.addf("directory %d: ancestor %d is not a live directory", ino, d)
				break
			}
			d = p.n.Parent
		}
		if good[d] {
			for _, x := range path {
				good[x] = true
			}
		}
	}
}
