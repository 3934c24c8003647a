package fs

// The repairer behind `lsmfs fsck --repair`. It fixes what can be fixed
// without guessing at lost data, and says what it changed:
//
//   - dentries that name a missing inode, sit in a missing or non-directory
//     parent, or do not decode: removed;
//   - a dentry whose recorded type disagrees with its inode: rewritten;
//   - a directory with a second name: the name its parent pointer does not
//     confirm is removed;
//   - blocks, xattrs, symlink targets and orphan keys of missing inodes, and
//     blocks of non-files or beyond a file's size: removed;
//   - an inode that no dentry names: reclaimed when it is an orphan (fsck
//     runs with nothing mounted, so nobody holds it open) or has no links
//     and holds nothing, otherwise linked into /lost+found as "#<ino>"
//     (created if need be, in the batch that names it, with the counter
//     raised above it); a directory in a parent loop loses one name and
//     goes there with its subtree, as does one whose parent is gone;
//   - an orphan key of an inode that still has links: removed;
//   - nlink (files: their dentries; directories: 2 + subdirectories), a
//     directory's size (its entries) and parent pointer, an inode's stored
//     bytes and xattr count: set to what the keys say;
//   - the inode-number counter: raised above every inode.
//
//   - a missing root directory: made again (mode 0755, root's).
//
// It leaves alone what it cannot fix safely: inode values or keys that do
// not decode (and the names, data and xattrs of such an inode), an
// oversized block, a bad superblock, damage inside the engine's files. It
// reads no file data: block lengths come from the value pointers. Check,
// run after Repair, reports what is left.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"syscall"
	"time"

	"github.com/lsmfs/lsmfs/lsm"
)

// lostFound is the name of the directory unreachable inodes are linked
// into, as e2fsck does.
const lostFound = "lost+found"

// Repair fixes the filesystem in db (opened writable, not mounted) and
// returns one sentence per change. It returns an error when it cannot read
// the keyspace or write the fixes, with the changes made durable before
// the failure: the fixes go in batches, each forced, and a change is
// listed once the batch that holds its last write is.
func Repair(db *lsm.DB) ([]string, error) {
	return RepairContext(context.Background(), db)
}

// RepairContext is Repair that stops when ctx is done: between the
// keyspace's families while reading, and before writing a batch. It then
// returns ctx's error (wrapped) with the changes written until then; run
// again, Repair finishes the rest.
func RepairContext(ctx context.Context, db *lsm.DB) ([]string, error) {
	rp := &repairer{ctx: ctx, db: db, inodes: map[uint64]*rpInode{}, broken: map[uint64]bool{}}
	// Half the engine's largest batch, so that a batch with its last
	// change (a few KiB at most) always fits.
	rp.flushAt = min(256<<10, int(db.MaxBatchBytes()/2))
	snap := db.NewSnapshot()
	err := rp.load(snap)
	snap.Close()
	if err != nil {
		// The scans already write fixes (removals) as they go.
		return rp.changes[:rp.applied], err
	}
	rp.plan()
	if err := rp.apply(); err != nil {
		return rp.changes[:rp.applied], err
	}
	return rp.changes, nil
}

type rpInode struct {
	n       inode
	dents   []rpDentry // dentries naming it (kept ones)
	entries uint64     // kept dentries in it (directories)
	subdirs uint32
	stored  uint64
	xattrs  uint32
	target  bool // has a symlink target
	orphan  bool
	dirty   bool
	gone    bool // reclaimed
	// notes are the changes to the inode's record, listed when the record
	// is written (at the end of plan).
	notes []string
}

type rpDentry struct {
	parent uint64
	name   string
	d      dentry
}

type repairer struct {
	ctx     context.Context
	db      *lsm.DB
	flushAt int // batch bytes
	bs      uint64
	bound   uint64
	maxIno  uint64
	inodes  map[uint64]*rpInode
	// broken holds the inodes whose record does not decode: what belongs
	// to them (names, data, xattrs) is left alone, for Check to report.
	broken  map[uint64]bool
	dents   []rpDentry // decodable dentries, in key order
	orphans []uint64
	blocks  map[uint64][]rpBlock // per inode, for the size check

	batch   *lsm.Batch
	changes []string
	applied int // changes[:applied] are durable
	err     error
}

type rpBlock struct {
	idx uint64
	len uint64
}

// changef lists a change whose writes are all in the batch (or in
// batches before it).
func (rp *repairer) changef(format string, args ...any) {
	rp.changes = append(rp.changes, fmt.Sprintf(format, args...))
}

// notef notes a change to n's record, which is written later.
func (n *rpInode) notef(format string, args ...any) {
	n.notes = append(n.notes, fmt.Sprintf(format, args...))
}

// scan iterates one family. For data blocks only lengths are needed: fn
// gets a nil value and the length, and no block is read (a damaged value
// then stops nothing, and a value-log-sized repair reads no value log).
func scanFamily(snap *lsm.Snapshot, fam byte, fn func(k, v []byte, vlen int)) error {
	lo, hi := familyRange(fam)
	it := snap.NewIter(&lsm.IterOptions{LowerBound: lo, UpperBound: hi})
	for ok := it.First(); ok; ok = it.Next() {
		if fam == famBlock {
			fn(it.Key(), nil, it.ValueLen())
			continue
		}
		v := it.Value()
		fn(it.Key(), v, len(v))
	}
	return closeIter(it)
}

// load reads the keyspace. Keys that must go are queued at once.
func (rp *repairer) load(snap *lsm.Snapshot) error {
	rp.batch = lsm.NewBatch()
	rp.blocks = map[uint64][]rpBlock{}
	v, err := snap.Get(superKey(superNameSuper))
	if errors.Is(err, lsm.ErrNotFound) {
		return ErrNotFormatted
	} else if err != nil {
		return fmt.Errorf("fs: repair: %w", err)
	}
	sb, err := decodeSuperblock(v)
	if err != nil {
		return fmt.Errorf("fs: repair: %w (not repaired)", err)
	}
	rp.bs = uint64(sb.BlockSize)
	if v, err := snap.Get(superKey(superNameInodeNext)); err == nil {
		rp.bound, _ = decodeInodeNext(v)
	}
	steps := []struct {
		fam byte
		fn  func(k, v []byte, vlen int)
	}{
		{famInode, rp.inode},
		{famDentry, rp.dentry},
		{famBlock, rp.block},
		{famXattr, rp.xattr},
		{famSymlink, rp.symlink},
		{famOrphan, rp.orphan},
	}
	for _, s := range steps {
		if err := rp.ctx.Err(); err != nil {
			return fmt.Errorf("fs: repair: %w", err)
		}
		if err := scanFamily(snap, s.fam, s.fn); err != nil {
			return fmt.Errorf("fs: repair: scan %q: %w", s.fam, err)
		}
		if s.fam == famInode {
			rp.ensureRoot()
		}
	}
	return nil
}

// ensureRoot makes a root directory when its record is missing (not when
// it does not decode: that is left alone): the top-level names then keep
// their directory, and lost+found has a home. Its counts are set by plan.
func (rp *repairer) ensureRoot() {
	if rp.inodes[rootIno] != nil || rp.broken[rootIno] {
		return
	}
	now := time.Now().UnixNano()
	root := &rpInode{n: inode{Mode: syscall.S_IFDIR | 0o755, Nlink: 2, Parent: rootIno,
		Atime: now, Mtime: now, Ctime: now, Btime: now}, dirty: true}
	root.notef("recreated the missing root directory (mode 0755, owner root)")
	rp.inodes[rootIno] = root
}

func (rp *repairer) del(k []byte, format string, args ...any) {
	rp.batch.Delete(k)
	rp.changef(format, args...)
	rp.flushMaybe()
}

func (rp *repairer) inode(k, v []byte, _ int) {
	ino, err := decodeInodeKey(k)
	if err != nil {
		return // left for Check to report
	}
	rp.maxIno = max(rp.maxIno, ino) // the counter stays above it either way
	n, err := decodeInode(v)
	if err != nil {
		rp.broken[ino] = true
		return
	}
	rp.inodes[ino] = &rpInode{n: n}
}

func (rp *repairer) dentry(k, v []byte, _ int) {
	parent, name, err := decodeDentryKey(k)
	if err != nil {
		rp.del(k, "removed undecodable dentry key %q", k)
		return
	}
	if rp.broken[parent] {
		return // in a directory whose record does not decode: left alone
	}
	d, err := decodeDentry(v)
	if err != nil {
		rp.del(k, "removed dentry %d/%q: %v", parent, name, err)
		return
	}
	p := rp.inodes[parent]
	if p != nil && p.n.isDir() && rp.broken[d.Ino] {
		// It names an inode whose record does not decode: kept, and
		// counted in its directory.
		p.entries++
		if d.Type == uint8(syscall.S_IFDIR>>12) {
			p.subdirs++
		}
		return
	}
	switch {
	case p == nil:
		rp.del(k, "removed dentry %d/%q: its directory %d is missing", parent, name, parent)
		return
	case !p.n.isDir():
		rp.del(k, "removed dentry %d/%q: inode %d is not a directory", parent, name, parent)
		return
	case rp.inodes[d.Ino] == nil:
		rp.del(k, "removed dentry %d/%q: it names missing inode %d", parent, name, d.Ino)
		return
	case checkName(name) != nil:
		// A name the kernel could never look up: keep the inode, lose the
		// name (it goes to lost+found if it has no other).
		rp.del(k, "removed dentry %d/%q: bad name", parent, name)
		return
	}
	rp.dents = append(rp.dents, rpDentry{parent, name, d})
}

func (rp *repairer) block(k, _ []byte, vlen int) {
	ino, idx, err := decodeBlockKey(k)
	if err != nil || rp.broken[ino] {
		return
	}
	n := rp.inodes[ino]
	switch {
	case n == nil:
		rp.del(k, "removed block %d of missing inode %d", idx, ino)
	case !n.n.isReg():
		rp.del(k, "removed block %d of inode %d, which is not a regular file", idx, ino)
	default:
		rp.blocks[ino] = append(rp.blocks[ino], rpBlock{idx, uint64(vlen)})
	}
}

func (rp *repairer) xattr(k, v []byte, _ int) {
	ino, name, err := decodeXattrKey(k)
	if err != nil || rp.broken[ino] {
		return
	}
	n := rp.inodes[ino]
	if n == nil {
		rp.del(k, "removed xattr %q of missing inode %d", name, ino)
		return
	}
	n.xattrs++
}

func (rp *repairer) symlink(k, v []byte, _ int) {
	ino, err := decodeSymlinkKey(k)
	if err != nil || rp.broken[ino] {
		return
	}
	n := rp.inodes[ino]
	switch {
	case n == nil:
		rp.del(k, "removed symlink target of missing inode %d", ino)
	case !n.n.isSymlink():
		rp.del(k, "removed symlink target of inode %d, which is not a symlink", ino)
	default:
		n.target = true
	}
}

func (rp *repairer) orphan(k, v []byte, _ int) {
	ino, err := decodeOrphanKey(k)
	if err != nil || rp.broken[ino] {
		return
	}
	n := rp.inodes[ino]
	if n == nil {
		rp.del(k, "removed orphan key of missing inode %d", ino)
		return
	}
	n.orphan = true
	rp.orphans = append(rp.orphans, ino)
}

// plan decides names, links and counts, queueing the fixes.
func (rp *repairer) plan() {
	// Directories: one name each, preferring the one their parent pointer
	// confirms.
	var kept []rpDentry
	dirNames := map[uint64][]rpDentry{}
	for _, d := range rp.dents {
		ch := rp.inodes[d.d.Ino]
		if ch.n.isDir() {
			dirNames[d.d.Ino] = append(dirNames[d.d.Ino], d)
			continue
		}
		kept = append(kept, d)
	}
	dirs := make([]uint64, 0, len(dirNames))
	for ino := range dirNames {
		dirs = append(dirs, ino)
	}
	sort.Slice(dirs, func(i, j int) bool { return dirs[i] < dirs[j] })
	for _, ino := range dirs {
		names := dirNames[ino]
		if ino == rootIno {
			for _, d := range names {
				rp.del(dentryKey(d.parent, d.name), "removed dentry %d/%q: it names the root", d.parent, d.name)
			}
			continue
		}
		keep := 0
		for i, d := range names {
			if d.parent == rp.inodes[ino].n.Parent {
				keep = i
				break
			}
		}
		for i, d := range names {
			if i != keep {
				rp.del(dentryKey(d.parent, d.name), "removed dentry %d/%q: directory %d has another name", d.parent, d.name, ino)
			}
		}
		kept = append(kept, names[keep])
	}
	for _, d := range kept {
		rp.link(d) // a whole change: its type rewrite, if any, is listed
		rp.flushMaybe()
	}

	// A directory whose names lead back to itself (a parent loop) loses
	// its name, which breaks the loop: it joins the unnamed below, with
	// its subtree whole. A directory below an unnamed one keeps its name:
	// the unnamed one goes to lost+found and takes it along.
	for _, ino := range dirs {
		if ino != rootIno && rp.inLoop(ino) {
			d := rp.inodes[ino].dents[0]
			rp.unlink(d)
			rp.del(dentryKey(d.parent, d.name), "removed dentry %d/%q: directory %d is in a parent loop", d.parent, d.name, ino)
		}
	}

	inos := make([]uint64, 0, len(rp.inodes))
	for ino := range rp.inodes {
		inos = append(inos, ino)
	}
	sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] })

	// Unnamed inodes: reclaimed when unlinked (orphans), else lost+found.
	var lost []uint64
	for _, ino := range inos {
		n := rp.inodes[ino]
		if ino == rootIno || len(n.dents) > 0 {
			continue
		}
		// Reclaimed: an orphan (unlinked while open; nobody holds it with
		// nothing mounted), or an unlinked inode that holds nothing. One
		// with data but no orphan key is damage: kept, in lost+found.
		if n.n.Nlink == 0 && (!n.n.isDir() || n.entries == 0) && (n.orphan || rp.holdsNothing(ino, n)) {
			rp.reclaim(ino, n)
			continue
		}
		lost = append(lost, ino)
	}
	// The counter covers the inodes that stay (lost+found is allocated
	// above them).
	rp.maxIno = 0
	for _, ino := range inos {
		if !rp.inodes[ino].gone {
			rp.maxIno = max(rp.maxIno, ino)
		}
	}
	if len(lost) > 0 {
		if lf := rp.lostFound(); lf != 0 {
			taken := map[string]bool{}
			for _, d := range rp.dents {
				if d.parent == lf {
					taken[d.name] = true
				}
			}
			for _, ino := range lost {
				name := fmt.Sprintf("#%d", ino)
				for i := 1; taken[name]; i++ {
					name = fmt.Sprintf("#%d.%d", ino, i)
				}
				taken[name] = true
				d := rpDentry{lf, name, dentry{Ino: ino, Type: rp.inodes[ino].n.dtype()}}
				rp.batch.Set(dentryKey(lf, name), encodeDentry(d.d))
				rp.link(d)
				rp.changef("linked unreachable inode %d into /%s/%s", ino, lostFound, name)
				rp.flushMaybe()
			}
		}
	}

	// Blocks beyond the size; counts (lost+found may be new).
	inos = inos[:0]
	for ino := range rp.inodes {
		inos = append(inos, ino)
	}
	sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] })
	for _, ino := range inos {
		n := rp.inodes[ino]
		if n.gone {
			continue
		}
		for _, b := range rp.blocks[ino] {
			if b.idx*rp.bs+b.len > n.n.Size {
				rp.del(blockKey(ino, b.idx), "removed block %d of inode %d: it ends at %d, beyond the size %d", b.idx, ino, b.idx*rp.bs+b.len, n.n.Size)
				continue
			}
			n.stored += b.len
		}
		if n.orphan && len(n.dents) > 0 {
			rp.del(orphanKey(ino), "removed orphan key of inode %d: it has a name", ino)
		}
		rp.fixCounts(ino, n)
	}
	if rp.maxIno >= rp.bound && rp.maxIno < 1<<63 {
		rp.bound = rp.maxIno + 1
		rp.batch.Set(superKey(superNameInodeNext), encodeInodeNext(rp.bound))
		rp.changef("raised the inode counter to %d, above every inode", rp.bound)
	}
	for _, ino := range inos {
		if n := rp.inodes[ino]; n.dirty && !n.gone {
			putInode(rp.batch, ino, &n.n)
			rp.changes = append(rp.changes, n.notes...)
			rp.flushMaybe()
		}
	}
}

// link counts a kept dentry.
func (rp *repairer) link(d rpDentry) {
	ch := rp.inodes[d.d.Ino]
	p := rp.inodes[d.parent]
	if ch.n.dtype() != d.d.Type {
		d.d.Type = ch.n.dtype()
		rp.batch.Set(dentryKey(d.parent, d.name), encodeDentry(d.d))
		rp.changef("dentry %d/%q: type set to its inode's (mode %#o)", d.parent, d.name, ch.n.Mode)
	}
	ch.dents = append(ch.dents, d)
	p.entries++
	if ch.n.isDir() {
		p.subdirs++
	}
}

// unlink uncounts a kept dentry.
func (rp *repairer) unlink(d rpDentry) {
	ch := rp.inodes[d.d.Ino]
	p := rp.inodes[d.parent]
	for i, x := range ch.dents {
		if x.parent == d.parent && x.name == d.name {
			ch.dents = append(ch.dents[:i], ch.dents[i+1:]...)
			break
		}
	}
	p.entries--
	if ch.n.isDir() {
		p.subdirs--
	}
}

// inLoop reports whether following the names of directory ino up its
// parents comes back to ino.
func (rp *repairer) inLoop(ino uint64) bool {
	seen := map[uint64]bool{}
	for d := ino; ; {
		n := rp.inodes[d]
		if n == nil || len(n.dents) == 0 {
			return false
		}
		d = n.dents[0].parent
		if d == ino {
			return true
		}
		if d == rootIno || seen[d] {
			return false // the root, or a loop ino is below but not in
		}
		seen[d] = true
	}
}

// holdsNothing reports whether inode ino keeps no data: no blocks, xattrs
// or symlink target, and no entries.
func (rp *repairer) holdsNothing(ino uint64, n *rpInode) bool {
	return len(rp.blocks[ino]) == 0 && n.xattrs == 0 && !n.target && n.entries == 0
}

// reclaim removes an unlinked, unnamed inode and everything of it.
func (rp *repairer) reclaim(ino uint64, n *rpInode) {
	n.gone = true
	rp.batch.Delete(inodeKey(ino))
	lo, hi := blockRange(ino, 0, 0)
	rp.batch.DeleteRange(lo, hi)
	lo, hi = xattrRange(ino)
	rp.batch.DeleteRange(lo, hi)
	rp.batch.Delete(symlinkKey(ino))
	rp.batch.Delete(orphanKey(ino))
	what := "orphan inode"
	if !n.orphan {
		what = "unlinked inode without an orphan key"
	}
	rp.changef("reclaimed %s %d (mode %#o, %d bytes)", what, ino, n.n.Mode, n.n.Size)
	rp.flushMaybe()
}

// lostFound returns /lost+found, creating it; 0 if it cannot.
func (rp *repairer) lostFound() uint64 {
	root := rp.inodes[rootIno]
	if root == nil || !root.n.isDir() {
		rp.changef("cannot link unreachable inodes: no root directory")
		return 0
	}
	for _, d := range rp.dents {
		if d.parent == rootIno && d.name == lostFound {
			if n := rp.inodes[d.d.Ino]; n != nil && n.n.isDir() && len(n.dents) > 0 {
				return d.d.Ino
			}
			rp.changef("cannot link unreachable inodes: /%s is not a directory", lostFound)
			return 0
		}
	}
	ino := max(rp.bound, rp.maxIno+1)
	rp.maxIno = ino
	now := time.Now().UnixNano()
	n := &rpInode{n: inode{Mode: syscall.S_IFDIR | 0o700, Nlink: 2, Parent: rootIno,
		Atime: now, Mtime: now, Ctime: now, Btime: now}, dirty: true}
	rp.inodes[ino] = n
	d := rpDentry{rootIno, lostFound, dentry{Ino: ino, Type: n.n.dtype()}}
	// The inode and the counter above it go in the batch of the name: a
	// repair interrupted between batches must not leave a name of an inode
	// that does not exist, whose number a new file would then take. Its
	// counts are written again at the end.
	putInode(rp.batch, ino, &n.n)
	rp.bound = ino + 1
	rp.batch.Set(superKey(superNameInodeNext), encodeInodeNext(rp.bound))
	rp.batch.Set(dentryKey(rootIno, lostFound), encodeDentry(d.d))
	rp.link(d)
	rp.changef("created /%s (inode %d)", lostFound, ino)
	return ino
}

// fixCounts sets nlink, size, parent, stored bytes and the xattr count to
// what the keys say.
func (rp *repairer) fixCounts(ino uint64, n *rpInode) {
	set32 := func(what string, field *uint32, want uint32) {
		if *field != want {
			n.notef("inode %d: %s %d -> %d", ino, what, *field, want)
			*field, n.dirty = want, true
		}
	}
	set64 := func(what string, field *uint64, want uint64) {
		if *field != want {
			n.notef("inode %d: %s %d -> %d", ino, what, *field, want)
			*field, n.dirty = want, true
		}
	}
	if n.n.isDir() {
		if ino == rootIno || len(n.dents) > 0 {
			set32("nlink", &n.n.Nlink, 2+n.subdirs)
		}
		set64("size (entries)", &n.n.Size, n.entries)
		if ino == rootIno {
			set64("parent", &n.n.Parent, rootIno)
		} else if len(n.dents) > 0 {
			set64("parent", &n.n.Parent, n.dents[0].parent)
		}
	} else if len(n.dents) > 0 {
		// A file left without a name (lost+found could not be had)
		// keeps its nlink: 0 would have the next repair reclaim it.
		set32("nlink", &n.n.Nlink, uint32(len(n.dents)))
	}
	set64("stored bytes", &n.n.Stored, n.stored)
	set32("xattr count", &n.n.Nxattr, n.xattrs)
}

// flushMaybe applies the batch when it grows large. It is called between
// changes, so every change listed so far has its writes in the batch or
// before it.
func (rp *repairer) flushMaybe() {
	if rp.batch.Len() < rp.flushAt || rp.err != nil {
		return
	}
	if err := rp.ctx.Err(); err != nil {
		rp.err = err
		return
	}
	// Forced: what Repair reports as made must be on disk, and a force
	// per 256 KiB costs fsck nothing it would notice.
	if err := rp.db.Apply(rp.batch, true); err != nil {
		rp.err = err
	} else {
		rp.applied = len(rp.changes)
	}
	rp.batch = lsm.NewBatch()
}

// apply writes what is left and makes it durable.
func (rp *repairer) apply() error {
	if rp.err == nil {
		rp.err = rp.ctx.Err()
	}
	if rp.err != nil {
		return fmt.Errorf("fs: repair: %w", rp.err)
	}
	if err := rp.db.Apply(rp.batch, true); err != nil {
		return fmt.Errorf("fs: repair: %w", err)
	}
	rp.applied = len(rp.changes)
	return nil
}
