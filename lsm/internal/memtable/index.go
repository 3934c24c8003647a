package memtable

import (
	"bytes"
	"encoding/binary"
	"sync/atomic"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

// pointIndex maps each user key of a skiplist to the node of its newest
// entry, so that a point lookup costs one or two cache misses instead of a
// walk down the list: at 100k entries a search visits about 20 nodes, and
// between two FUSE requests the kernel's work evicts them, so each is a miss
// (the lookups of an unlink spent more time there than in the rest of the
// engine). It is a hash table with linear probing; a slot holds the key
// hash's high 32 bits and the node's arena offset.
//
// Concurrency: the one writer inserts after the node is linked, with one
// atomic store per slot; readers load slots without locks. Entries are never
// removed. A reader that can see an entry (its sequence number is at or below
// the reader's, which the engine publishes after the whole batch is added)
// finds it, or a newer one of the same key, in the index; for a newer one it
// is not allowed to see, it searches the list. Past its fill ratio the index takes
// no more keys and says so (full): a miss then proves nothing and Get
// searches the list.
type pointIndex struct {
	slots []atomic.Uint64
	mask  uint64
	used  int // writer only
	limit int
	full  atomic.Bool
}

// Fill ratios: a skiplist's index takes no new keys past listLoad (linear
// probing slows down sharply beyond it, for misses most); a Flat's, built
// once for a known number of keys that are then looked up present (a
// segment's filter turns most misses away), is sized for up to flatLoad,
// half the memory at some lookups' cost of a probe or two more.
const (
	listLoad = 0.7
	flatLoad = 0.9
)

// newPointIndex returns an index for about keys keys at a fill ratio of at
// most load.
func newPointIndex(keys int, load float64) *pointIndex {
	n := uint64(1)
	for float64(n)*load < float64(max(keys, 16)) {
		n <<= 1
	}
	return &pointIndex{slots: make([]atomic.Uint64, n), mask: n - 1, limit: int(float64(n) * load)}
}

// userKey returns node nd's user key.
func (s *skiplist) userKey(nd uint32) []byte {
	k := s.key(nd)
	return k[:len(k)-base.TrailerLen]
}

// trailer returns node nd's trailer (sequence number and kind).
func (s *skiplist) trailer(nd uint32) uint64 {
	k := s.key(nd)
	return binary.LittleEndian.Uint64(k[len(k)-base.TrailerLen:])
}

// newer reports whether node a's entry is newer than node b's.
func (s *skiplist) newer(a, b uint32) bool { return s.trailer(a) > s.trailer(b) }

// slot returns the slot holding ukey (hash h), or the empty slot where it
// would go (v == 0); keyOf returns the user key of a ref.
func (x *pointIndex) slot(h uint64, ukey []byte, keyOf func(uint32) []byte) (i, v uint64) {
	tag := h >> 32
	for i = h & x.mask; ; i = (i + 1) & x.mask {
		v = x.slots[i].Load()
		if v == 0 || v>>32 == tag && bytes.Equal(keyOf(uint32(v)), ukey) {
			return i, v
		}
	}
}

// put records ref, an entry of user key ukey (hash h): newer says whether
// it is newer than old, the entry the index holds for the key. A full index
// still takes new entries of the keys it holds: an entry it keeps must stay
// the newest. Writer only.
func (x *pointIndex) put(h uint64, ukey []byte, ref uint32, keyOf func(uint32) []byte, newer func(ref, old uint32) bool) {
	i, v := x.slot(h, ukey, keyOf)
	switch {
	case v == 0 && x.used >= x.limit:
		x.full.Store(true)
		return
	case v == 0:
		x.used++
	case !newer(ref, uint32(v)):
		return
	}
	x.slots[i].Store(h>>32<<32 | uint64(ref))
}

// get returns the ref of ukey's newest indexed entry (0 for none); with
// none, known says whether the key is known to be absent (the index is not
// full).
func (x *pointIndex) get(h uint64, ukey []byte, keyOf func(uint32) []byte) (ref uint32, known bool) {
	if _, v := x.slot(h, ukey, keyOf); v != 0 {
		return uint32(v), true
	}
	return 0, !x.full.Load()
}

// size is the index's memory in bytes.
func (x *pointIndex) size() uint64 { return uint64(len(x.slots)) * 8 }
