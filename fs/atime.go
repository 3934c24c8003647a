package fs

// Access times.
//
// The kernel leaves a FUSE inode's access time to the filesystem (it marks
// the inode S_NOATIME) and forgets the atime it cached whenever a READ or a
// READDIR came back from lsmfs, so the next stat asks again. lsmfs updates
// the time when such a request was served, by the rules of Linux's mount
// options: relatime (the default) moves it only when it is not after the
// last change of the data or of the inode (mtime, ctime) or is a day old,
// so that a file read over and over costs one update per change;
// strictatime on every read that reaches lsmfs; noatime never. Reads the
// kernel serves from its page cache never reach lsmfs and change nothing,
// as on any FUSE filesystem (a file written through the kernel's cache and
// read back at once keeps its old atime).
//
// An update is kept in memory (atimeTable), as the kernel keeps a dirty
// inode, and shown in every attribute reply (fillAttr); the flusher writes
// the pending ones in the background, each in its own unforced batch, and
// so does Close. A read never writes to the engine, so it never waits for
// a stalled writer, and many reads of a file between two flushes cost one
// write. A crash may lose the last updates (as with lazytime), never data.
// Writing is best effort: an update that cannot be written (a full device)
// stays pending and is tried again; with atimeMax inodes pending, a read
// that would add one asks the flusher for a pass and its time is lost.

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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

// noAtime reports whether reads through a handle with these open flags
// leave access times alone: O_NOATIME, and write-only handles, through
// which only the kernel reads (a partial page the writeback cache fills
// before a write): not an access.
func noAtime(flags uint32) bool {
	return flags&syscall.O_NOATIME != 0 || flags&syscall.O_ACCMODE == syscall.O_WRONLY
}

// atimeMax bounds the pending access times: about 4 MiB. A variable for
// tests.
var atimeMax = 1 << 16

// atimeTable holds the access times reads set, by inode, from the read
// until a flusher pass after the one that wrote them: an attribute reply
// whose record was read before the write (a GETATTR racing the flusher)
// still finds the time here, instead of handing the kernel the old one to
// cache for the attribute timeout.
type atimeTable struct {
	mu sync.Mutex
	m  map[uint64]atimeEntry
	n  atomic.Int64 // len(m): readers skip the lock while it is 0
	// kick asks the flusher for a pass now (the table is full).
	kick chan struct{}
}

type atimeEntry struct {
	t       int64
	written bool // in the engine since the last pass
}

func (t *atimeTable) get(ino uint64) (int64, bool) {
	e, ok := t.entry(ino)
	return e.t, ok
}

func (t *atimeTable) entry(ino uint64) (atimeEntry, bool) {
	if t.n.Load() == 0 {
		return atimeEntry{}, false
	}
	t.mu.Lock()
	e, ok := t.m[ino]
	t.mu.Unlock()
	return e, ok
}

// set records v as ino's access time, unless atimeMax others are pending:
// then it asks the flusher for a pass and reports false (the time is not
// kept: best effort, bounded memory when the engine cannot take them).
func (t *atimeTable) set(ino uint64, v int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[uint64]atimeEntry)
	}
	if _, ok := t.m[ino]; !ok && len(t.m) >= atimeMax {
		select {
		case t.kick <- struct{}{}:
		default:
		}
		return false
	}
	t.m[ino] = atimeEntry{t: v}
	t.n.Store(int64(len(t.m)))
	return true
}

// drop forgets ino's entry if it is still e (any, with all).
func (t *atimeTable) drop(ino uint64, e atimeEntry, all bool) {
	if t.n.Load() == 0 {
		return
	}
	t.mu.Lock()
	if cur, ok := t.m[ino]; ok && (all || cur == e) {
		delete(t.m, ino)
		t.n.Store(int64(len(t.m)))
	}
	t.mu.Unlock()
}

// markWritten notes that ino's time e is in the engine, if it is still e.
func (t *atimeTable) markWritten(ino uint64, e atimeEntry) {
	t.mu.Lock()
	if cur, ok := t.m[ino]; ok && cur == e {
		t.m[ino] = atimeEntry{t: e.t, written: true}
	}
	t.mu.Unlock()
}

// inodes returns the inodes in the table.
func (t *atimeTable) inodes() []uint64 {
	if t.n.Load() == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	inos := make([]uint64, 0, len(t.m))
	for ino := range t.m {
		inos = append(inos, ino)
	}
	return inos
}

// noteAtime records a read of ino just served, if atimeDue says so of its
// record (seen: the record the read used; nil to read it) with any pending
// time over it. It reports whether it moved the time. It takes no inode
// lock and never waits for the engine.
func (f *FS) noteAtime(ino uint64, seen *inode) bool {
	if f.opts.Atime == AtimeNever || f.opts.ReadOnly {
		return false
	}
	var n inode
	if seen != nil {
		n = *seen
	} else {
		var err error
		if n, err = f.getInode(ino); err != nil {
			return false
		}
	}
	if t, ok := f.atimes.get(ino); ok {
		n.Atime = t
	}
	now := f.now()
	if !f.atimeDue(&n, now) {
		return false
	}
	return f.atimes.set(ino, now)
}

// addGhost keeps n as ino's ghost (its record is being deleted, under
// ino's lock), with the access time a read left pending: the next flusher
// pass finds the record gone and drops the entry, and the ghost would
// show the older time.
func (f *FS) addGhost(ino uint64, n inode) {
	if t, ok := f.atimes.get(ino); ok {
		n.Atime = t
	}
	f.ghosts.add(ino, n)
}

// writeAtimes writes the pending access times, each read-modify-written
// under its inode's lock, and forgets those the pass before wrote. A time
// that cannot be written stays pending: when the engine refuses writes
// (full, failed, closed) the pass stops at the first refusal.
func (f *FS) writeAtimes() {
	for _, ino := range f.atimes.inodes() {
		h := f.locks.lock(ino)
		e, ok := f.atimes.entry(ino)
		switch {
		case !ok:
			h.unlock() // an explicit time replaced it (setattr)
			continue
		case e.written:
			f.atimes.drop(ino, e, false)
			h.unlock()
			continue
		}
		n, err := f.getInode(ino)
		if err != nil {
			h.unlock()
			// Gone (numbers are never reused), or a record that does not
			// decode (fsck's to report): nothing to write it to.
			f.atimes.drop(ino, e, false)
			if !errors.Is(err, syscall.ENOENT) {
				f.log.Debug("fs: access time not written", "ino", ino, "err", err)
			}
			continue
		}
		n.Atime = e.t
		b := lsm.NewBatch()
		putInode(b, ino, &n)
		err = f.db.Apply(b, false)
		if err == nil {
			f.atimes.markWritten(ino, e) // a later read's time stays pending
		}
		h.unlock()
		if err != nil {
			f.log.Debug("fs: access times not written", "ino", ino, "err", err)
			return
		}
	}
}
