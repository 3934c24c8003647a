package fs

import (
	"slices"
	"sync"
	"sync/atomic"
)

// lockShards is the number of inode lock shards (a power of two). Inode
// numbers are handed out sequentially, so the low bits spread neighbours
// (files created together) over different shards.
const lockShards = 1024

// lockTable serializes read-modify-write of inode records (and of an open
// inode's write buffer) per inode. An operation that changes several inodes
// locks all of them before reading any, in ascending shard order, so two
// operations never wait on each other in a cycle. Several inodes may share a
// shard; a shard is locked once.
//
// Lock order (outermost first):
//
//	dirHandle.mu  >  FS.renameMu  >  inode shards (ascending)  >  leaf locks
//
// Leaf locks (openTable shards, handle table, inode allocator, reserve) take
// no other lock while held.
type lockTable struct {
	shards [lockShards]lockShard
}

type lockShard struct {
	sync.RWMutex
	// gen counts dentry changes in directories of this shard; it is bumped
	// with the directory locked, before the batch is applied. readdirplus
	// uses it to tell whether its snapshot still shows the directory as it
	// is.
	gen atomic.Uint64
	_   [32]byte // keep shards on separate cache lines
}

func shardOf(ino uint64) uint16 { return uint16(ino & (lockShards - 1)) }

// held is a set of locked shards, released by unlock.
type held struct {
	n    int
	idx  [4]uint16
	read bool
	t    *lockTable
}

// lock locks the shards of inos (at most 4 distinct) exclusively, in order.
func (t *lockTable) lock(inos ...uint64) held {
	h := held{t: t}
	for _, ino := range inos {
		if ino == 0 {
			continue
		}
		s := shardOf(ino)
		if slices.Contains(h.idx[:h.n], s) {
			continue
		}
		h.idx[h.n] = s
		h.n++
	}
	slices.Sort(h.idx[:h.n])
	for _, s := range h.idx[:h.n] {
		t.shards[s].Lock()
	}
	return h
}

// rlock locks the shard of ino for reading.
func (t *lockTable) rlock(ino uint64) held {
	h := held{t: t, n: 1, read: true}
	h.idx[0] = shardOf(ino)
	t.shards[h.idx[0]].RLock()
	return h
}

func (h held) unlock() {
	for i := h.n - 1; i >= 0; i-- {
		if h.read {
			h.t.shards[h.idx[i]].RUnlock()
		} else {
			h.t.shards[h.idx[i]].Unlock()
		}
	}
}

// bumpDir records a change of directory dir's entries; dir is locked.
func (t *lockTable) bumpDir(dir uint64) { t.shards[shardOf(dir)].gen.Add(1) }

// dirGen returns the change counter covering dir.
func (t *lockTable) dirGen(dir uint64) uint64 { return t.shards[shardOf(dir)].gen.Load() }
