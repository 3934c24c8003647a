package fs

import (
	"sync"
	"sync/atomic"
	"syscall"
)

// openInode is the in-memory state of an inode that has open handles (files
// and directories): the count that keeps an unlinked inode alive as an
// orphan, and for regular files the write buffer shared by all handles.
//
// opens and wb are guarded by the inode's shard lock in FS.locks (exclusive
// to change them, shared to read them).
type openInode struct {
	ino   uint64
	opens int
	// writers counts the handles opened for writing. While one is open,
	// the kernel may hold data lsmfs has not seen: dirty pages of a shared
	// writable mapping (and with the writeback cache, of write(2)).
	writers int
	wb      writeBuffer
}

const openShards = 64

// openTable maps inode numbers to their openInode. Its shard mutexes are
// leaf locks. An entry exists exactly while its inode has open handles;
// entries are created and removed with the inode's shard lock held
// exclusively, so holding that lock (shared or exclusive) makes get stable.
type openTable struct {
	shards [openShards]struct {
		sync.Mutex
		m map[uint64]*openInode
	}
}

func (t *openTable) shard(ino uint64) *struct {
	sync.Mutex
	m map[uint64]*openInode
} {
	return &t.shards[ino%openShards]
}

// get returns ino's state, or nil if it has no open handle.
func (t *openTable) get(ino uint64) *openInode {
	s := t.shard(ino)
	s.Lock()
	defer s.Unlock()
	return s.m[ino]
}

func (t *openTable) isOpen(ino uint64) bool { return t.get(ino) != nil }

// acquire counts one more open handle of ino, opened with open(2) flags;
// ino's lock is held exclusively.
func (t *openTable) acquire(ino uint64, flags uint32) *openInode {
	s := t.shard(ino)
	s.Lock()
	defer s.Unlock()
	if s.m == nil {
		s.m = map[uint64]*openInode{}
	}
	oi := s.m[ino]
	if oi == nil {
		oi = &openInode{ino: ino}
		s.m[ino] = oi
	}
	oi.opens++
	if writeFlags(flags) {
		oi.writers++
	}
	return oi
}

// overlay applies what the kernel and the write buffer may hold beyond
// the committed record n, giving what getattr reports (see
// writeBuffer.overlay). While a handle open for writing exists, the
// kernel may hold file data lsmfs has not seen (dirty pages of a shared
// mapping, or of any write with the writeback cache): a regular file that
// stores nothing then reports one stored byte, as an estimate. tar --sparse
// archives a file with st_blocks 0 as all holes without reading it, and
// copied zeros where the data was still in those pages.
func (oi *openInode) overlay(n *inode, writebackCache bool) {
	oi.wb.overlay(n)
	if oi.writers > 0 && n.isReg() && n.Stored == 0 && (n.Size > 0 || writebackCache) {
		n.Stored = 1
		n.estimated = true
	}
}

// writeFlags reports whether open(2) flags open for writing.
func writeFlags(flags uint32) bool { return flags&syscall.O_ACCMODE != syscall.O_RDONLY }

// release counts one handle of oi, opened with open(2) flags, closed and
// reports whether it was the last; oi's lock is held exclusively.
func (t *openTable) release(oi *openInode, flags uint32) (last bool) {
	oi.opens--
	if writeFlags(flags) {
		oi.writers--
	}
	if oi.opens > 0 {
		return false
	}
	s := t.shard(oi.ino)
	s.Lock()
	delete(s.m, oi.ino)
	s.Unlock()
	return true
}

// all returns every open inode, for Close.
func (t *openTable) all() []*openInode {
	var out []*openInode
	for i := range t.shards {
		s := &t.shards[i]
		s.Lock()
		for _, oi := range s.m {
			out = append(out, oi)
		}
		s.Unlock()
	}
	return out
}

// handle is an open file or directory (the FUSE file handle, fh).
type handle struct {
	ino   uint64
	oi    *openInode
	flags uint32     // open(2) flags
	dir   *dirHandle // directories only
	// direct is set when the kernel was told FOPEN_DIRECT_IO
	// (addFileHandle): h's writes bypass its page cache.
	direct bool
}

// syncWrites reports whether writes through h must be durable on return.
func (h *handle) syncWrites() bool { return h.flags&(syscall.O_SYNC|syscall.O_DSYNC) != 0 }

// handleTable maps FUSE file handles to handles. Safe for concurrent use.
type handleTable struct {
	next atomic.Uint64
	m    sync.Map // uint64 -> *handle
}

func (t *handleTable) add(h *handle) uint64 {
	fh := t.next.Add(1)
	t.m.Store(fh, h)
	return fh
}

func (t *handleTable) get(fh uint64) *handle {
	v, ok := t.m.Load(fh)
	if !ok {
		return nil
	}
	return v.(*handle)
}

func (t *handleTable) remove(fh uint64) *handle {
	v, ok := t.m.LoadAndDelete(fh)
	if !ok {
		return nil
	}
	return v.(*handle)
}
