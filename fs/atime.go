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
// stays pending and is tried again; past atimeMax pending inodes, the read
// that adds one writes them all first.

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

// atimeMax bounds the pending access times: about 3 MiB. A variable for
// tests.
var atimeMax = 1 << 16

// atimeTable holds the access times reads set that no batch has written
// yet, by inode.
type atimeTable struct {
	mu sync.Mutex
	m  map[uint64]int64
	n  atomic.Int64 // len(m): readers skip the lock while it is 0
}

func (t *atimeTable) get(ino uint64) (int64, bool) {
	if t.n.Load() == 0 {
		return 0, false
	}
	t.mu.Lock()
	v, ok := t.m[ino]
	t.mu.Unlock()
	return v, ok
}

// set records v as ino's access time and returns how many are pending.
func (t *atimeTable) set(ino uint64, v int64) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[uint64]int64)
	}
	t.m[ino] = v
	t.n.Store(int64(len(t.m)))
	return len(t.m)
}

// drop forgets ino's pending time if it is still v (any, with all).
func (t *atimeTable) drop(ino uint64, v int64, all bool) {
	if t.n.Load() == 0 {
		return
	}
	t.mu.Lock()
	if cur, ok := t.m[ino]; ok && (all || cur == v) {
		delete(t.m, ino)
		t.n.Store(int64(len(t.m)))
	}
	t.mu.Unlock()
}

// inodes returns the inodes with a pending time.
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
// lock and never waits for the engine, unless atimeMax are pending.
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
	if f.atimes.set(ino, now) > atimeMax {
		f.writeAtimes()
	}
	return true
}

// writeAtimes writes the pending access times, each read-modify-written
// under its inode's lock; what cannot be written stays pending (a
// failure is logged once per call).
func (f *FS) writeAtimes() {
	for _, ino := range f.atimes.inodes() {
		h := f.locks.lock(ino)
		t, ok := f.atimes.get(ino)
		if !ok {
			h.unlock() // an explicit time replaced it (setattr)
			continue
		}
		n, err := f.getInode(ino)
		if err != nil {
			h.unlock()
			if errors.Is(err, syscall.ENOENT) {
				f.atimes.drop(ino, 0, true) // gone, and numbers are never reused
				continue
			}
			f.log.Debug("fs: access times not written", "ino", ino, "err", err)
			return
		}
		n.Atime = t
		b := lsm.NewBatch()
		putInode(b, ino, &n)
		err = f.db.Apply(b, false)
		if err == nil {
			f.atimes.drop(ino, t, false) // a later read's time stays pending
		}
		h.unlock()
		if err != nil {
			f.log.Debug("fs: access times not written", "ino", ino, "err", err)
			return
		}
	}
}
