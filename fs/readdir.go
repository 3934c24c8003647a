package fs

// Directory handles: opendir, readdir, readdirplus, releasedir, fsyncdir.
//
// A directory handle lists a snapshot of the directory taken at its first
// read from offset 0 (and again at every later read from offset 0, which is
// rewinddir's "refer to the current state"). The offset cookie of an entry
// is its position in that snapshot's listing plus one (entries 0 and 1 are
// "." and ".."), so cookies never skip or repeat entries whatever happens to
// the directory meanwhile, and seekdir to any earlier cookie works.
// Sequential reads resume after the last key returned; a seek elsewhere
// re-walks the snapshot from the start. Only the snapshot and one key are
// held between calls: memory does not grow with the directory. Once the
// listing is read to its end the snapshot is released (an open snapshot
// keeps what it sees, deleted files included); a later read from offset 0,
// or from a cookie other than the end, takes a new one.

import (
	"bytes"
	"errors"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/lsm"
)

type dirHandle struct {
	// mu serializes calls on the handle; it is taken before any inode lock.
	mu     sync.Mutex
	ino    uint64
	parent uint64        // ".." as of the snapshot
	snap   *lsm.Snapshot // nil until the first read, and after the end
	gen    uint64        // f.locks.dirGen(ino) when snap was taken
	pos    uint64        // position of the next entry
	last   []byte        // key of the entry at pos-1 (pos > 2)
	// end: the listing was read to its end, at pos, and its snapshot
	// released: an open snapshot keeps every version it sees, so a
	// directory handle left open (a file manager, a watcher) kept the
	// space of files deleted since.
	end bool
}

// OpenDir opens a directory.
func (f *FS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	ino := in.NodeId
	h := f.locks.lock(ino)
	n, err := f.getInodeOrGhost(ino) // a removed working directory opens, and lists empty
	if err == nil && !n.isDir() {
		err = syscall.ENOTDIR
	}
	if err != nil {
		h.unlock()
		return f.errno("opendir", ino, err)
	}
	oi := f.open.acquire(ino, in.Flags)
	h.unlock()
	out.Fh = f.handles.add(&handle{ino: ino, oi: oi, flags: in.Flags, dir: &dirHandle{ino: ino}})
	return fuse.OK
}

// ReleaseDir closes a directory handle; a directory removed while open is
// deleted at its last close.
func (f *FS) ReleaseDir(in *fuse.ReleaseIn) {
	h := f.handles.remove(in.Fh)
	if h == nil || h.dir == nil {
		return
	}
	h.dir.mu.Lock()
	if h.dir.snap != nil {
		h.dir.snap.Close()
		h.dir.snap = nil
	}
	h.dir.mu.Unlock()
	if err := f.releaseInode(h.oi, h.flags); err != nil {
		f.errno("releasedir", h.ino, err)
	}
}

// FsyncDir forces the journal: directory changes are durable once it is.
func (f *FS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return f.errno("fsyncdir", in.NodeId, f.db.SyncJournal())
}

// ReadDir lists entries without attributes.
func (f *FS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return f.errno("readdir", in.NodeId, f.readDir(in, out, false))
}

// ReadDirPlus lists entries with their attributes, so the kernel need not
// look each one up.
func (f *FS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return f.errno("readdirplus", in.NodeId, f.readDir(in, out, true))
}

// readDir serves one READDIR(PLUS). A listing from the start reads the
// directory, as far as its access time goes (atime.go).
func (f *FS) readDir(in *fuse.ReadIn, out *fuse.DirEntryList, plus bool) error {
	h := f.handles.get(in.Fh)
	if h == nil || h.dir == nil {
		return syscall.EBADF
	}
	err := f.readDirHandle(h.dir, in, out, plus)
	if err == nil && in.Offset == 0 && !noAtime(h.flags) && !f.opts.NoDirAtime {
		f.noteAtime(h.ino, nil)
	}
	return err
}

func (f *FS) readDirHandle(dh *dirHandle, in *fuse.ReadIn, out *fuse.DirEntryList, plus bool) error {
	dh.mu.Lock()
	defer dh.mu.Unlock()
	off := in.Offset
	if dh.snap == nil && dh.end && off == dh.pos {
		return nil // the end again (how the kernel learns it)
	}
	if dh.snap == nil || off == 0 && dh.pos != 0 {
		// A read after the end from elsewhere than the end re-walks a new
		// snapshot: entries created or removed since move the positions.
		if err := f.refresh(dh); err != nil {
			return err
		}
	}
	if off != dh.pos {
		if err := dh.seek(off); err != nil {
			return err
		}
	}
	// With no change to the directory since the snapshot, its entries are
	// current and readdirplus can trust them.
	fresh := f.locks.dirGen(dh.ino) == dh.gen
	var cur inodeCursor // readdirplus: the entries' inode records
	defer cur.close()
	add := func(e fuse.DirEntry, child uint64, trusted bool) bool {
		if !plus {
			return out.AddDirEntry(e)
		}
		eo := out.AddDirLookupEntry(e)
		if eo == nil {
			return false
		}
		if child != 0 {
			f.lookupForPlus(&cur, dh.ino, e.Name, child, trusted, eo)
		}
		return true
	}
	if dh.pos == 0 {
		if !add(fuse.DirEntry{Name: ".", Ino: dh.ino, Mode: syscall.S_IFDIR, Off: 1}, 0, false) {
			return nil
		}
		dh.pos = 1
	}
	if dh.pos == 1 {
		if !add(fuse.DirEntry{Name: "..", Ino: dh.parent, Mode: syscall.S_IFDIR, Off: 2}, 0, false) {
			return nil
		}
		dh.pos = 2
	}
	lo, hi := dentryRange(dh.ino)
	it := dh.snap.NewIter(&lsm.IterOptions{LowerBound: lo, UpperBound: hi})
	ok := false
	if dh.last == nil {
		ok = it.First()
	} else {
		ok = it.SeekGE(append(dh.last, 0))
	}
	for ; ok; ok = it.Next() {
		d, err := decodeDentry(it.Value())
		if err != nil {
			it.Close()
			return withKey(err, it.Key())
		}
		e := fuse.DirEntry{Name: string(dentryKeyName(it.Key())), Ino: d.Ino, Mode: uint32(d.Type) << 12, Off: dh.pos + 1}
		if !add(e, d.Ino, fresh) {
			break
		}
		dh.pos++
		dh.last = append(dh.last[:0], it.Key()...)
	}
	if err := closeIter(it); err != nil {
		return err
	}
	if !ok {
		// Every entry is listed: let go of the snapshot.
		dh.snap.Close()
		dh.snap, dh.end = nil, true
	}
	return nil
}

// lookupForPlus fills eo for entry name -> child of readdirplus. Unless the
// snapshot is known current, the entry is checked against the live
// directory; an entry gone or renamed since gets no attributes (node id 0:
// the kernel then makes no dentry from it).
func (f *FS) lookupForPlus(cur *inodeCursor, dir uint64, name string, child uint64, trusted bool, eo *fuse.EntryOut) {
	if !trusted {
		d, err := f.getDentry(dir, name)
		if err != nil || d.Ino != child {
			return
		}
	}
	var n inode
	ok := false
	if f.open.get(child) == nil {
		// Not open: the stored record is what stat returns, unless it is
		// gone (a ghost, or ENOENT), which stat sorts out.
		n, ok = cur.get(f, child)
	}
	if !ok {
		var err error
		if n, err = f.stat(child); err != nil {
			return
		}
	}
	f.fillEntry(child, &n, eo)
}

// inodeCursor reads the inode records of one readdirplus reply's entries
// with one iterator, where that pays. The children of a directory made one
// after another have inode numbers, and so records, next to each other:
// stepping to the next record costs far less than a lookup, which probes
// every memtable's filter and every level (at a million entries, the
// lookups were 55% of the daemon's CPU while ls -f listed the directory).
// Children made in turns with other directories' are far apart, and a
// seek costs more than a lookup; so the cursor is only placed once two
// entries in a row are within cursorSteps inode numbers, and otherwise the
// caller looks records up.
//
// The iterator sees the records as they were when it was made, within the
// reply, as a lookup made then would; the kernel sent the request before
// any change it has not seen the end of, and drops the attributes of an
// inode changed since (attr_version). One change it is not told of by a
// reply: the last close of an inode writes its buffered data to the record
// (FLUSH and RELEASE change no attribute version), and the inode, open
// (read through stat) when the iterator was made, may be closed by the
// time its entry comes. So the cursor takes a new view whenever an inode
// was closed since it made its iterator (FS.releases); when closes keep
// coming, it gives way to lookups for the rest of the reply.
type inodeCursor struct {
	it       *lsm.Iterator
	releases uint64 // FS.releases when it was made
	at       uint64 // the inode number of the record it is at
	prev     uint64 // the last inode number asked for
	remade   int    // iterators dropped for a close
	off      bool   // the iterator erred, or closes kept coming: lookups
	kb       [9]byte
}

// cursorSteps is how many inode numbers ahead of the cursor a record may
// be for the cursor to step to it.
const cursorSteps = 8

// cursorRemakes is how many iterators a cursor drops for closes before it
// gives way to lookups (each new one costs a seek).
const cursorRemakes = 2

// get returns ino's stored record; ok is false if the cursor does not
// have it (not placed near it, no record, or an error), and the caller
// looks it up instead.
func (c *inodeCursor) get(f *FS, ino uint64) (n inode, ok bool) {
	prev := c.prev
	c.prev = ino
	if c.off {
		return inode{}, false
	}
	if c.it != nil && f.releases.Load() != c.releases {
		c.close() // a record may have been written since: a new view
		if c.remade++; c.remade >= cursorRemakes {
			c.off = true
			return inode{}, false
		}
	}
	key := appendInodeKey(c.kb[:0], ino)
	valid := false
	switch {
	case c.it != nil && c.it.Valid() && ino >= c.at && ino-c.at <= cursorSteps:
		valid = true
		for i := 0; valid && bytes.Compare(c.it.Key(), key) < 0; i++ {
			valid = c.it.Next() // at most cursorSteps records: one per number
		}
	case ino > prev && ino-prev <= cursorSteps:
		if c.it == nil {
			// The count first: a close counted after it makes a new view.
			c.releases = f.releases.Load()
			c.it = f.db.NewIter(&lsm.IterOptions{LowerBound: []byte{famInode}, UpperBound: []byte{famInode + 1}})
		}
		valid = c.it.SeekGE(key)
	default:
		return inode{}, false
	}
	if valid {
		at, err := decodeInodeKey(c.it.Key())
		if err != nil {
			c.off = true
			return inode{}, false
		}
		c.at = at
	}
	if !valid || c.at != ino {
		if !valid && c.it.Error() != nil {
			c.off = true
		}
		return inode{}, false
	}
	n, err := decodeInode(c.it.Value())
	if err != nil || c.it.Error() != nil {
		c.off = true // the lookup reports it
		return inode{}, false
	}
	return n, true
}

func (c *inodeCursor) close() {
	if c.it != nil {
		c.it.Close() // an error was seen by get, or changes nothing read
		c.it = nil
	}
}

// refresh takes a new snapshot of dh's directory and rewinds.
func (f *FS) refresh(dh *dirHandle) error {
	if dh.snap != nil {
		dh.snap.Close()
		dh.snap = nil
	}
	h := f.locks.rlock(dh.ino)
	dh.gen = f.locks.dirGen(dh.ino)
	snap := f.db.NewSnapshot()
	h.unlock()
	v, err := snap.Get(inodeKey(dh.ino))
	var n inode
	switch g, ghost := f.ghosts.get(dh.ino, false); {
	case errors.Is(err, lsm.ErrNotFound) && ghost:
		n = g // removed: its listing is empty
	case err != nil:
		snap.Close()
		return err
	default:
		if n, err = decodeInode(v); err != nil {
			snap.Close()
			return withKey(err, inodeKey(dh.ino))
		}
	}
	dh.snap, dh.parent, dh.pos, dh.last, dh.end = snap, n.Parent, 0, nil, false
	return nil
}

// seek positions dh so the next entry returned is the one at off.
func (dh *dirHandle) seek(off uint64) error {
	dh.pos, dh.last = off, nil
	if off <= 2 {
		return nil
	}
	lo, hi := dentryRange(dh.ino)
	it := dh.snap.NewIter(&lsm.IterOptions{LowerBound: lo, UpperBound: hi})
	i := uint64(2)
	for ok := it.First(); ok && i < off; ok = it.Next() {
		dh.last = append(dh.last[:0], it.Key()...)
		i++
	}
	if i < off && dh.last == nil {
		// Past the end of an empty listing: resume after every entry.
		dh.last = bytes.Clone(hi)
	}
	return closeIter(it)
}
