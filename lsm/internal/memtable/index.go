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
// is not allowed to see, it searches the list. Once it holds limit keys
// (maxLoad of its slots) the index takes no new ones and says so (full): a
// miss then proves nothing and Get searches the list.
type pointIndex struct {
	slots []atomic.Uint64
	used  int // writer only
	limit int
	full  atomic.Bool
}

// maxLoad is the fill ratio past which the index takes no new keys (linear
// probing slows down sharply beyond it).
const maxLoad = 0.75

// newPointIndex returns an index for keys keys. The table has any number
// of slots (a hash picks its first by multiplication, not a mask), so its
// memory follows keys closely: 8/maxLoad bytes a key.
func newPointIndex(keys int) *pointIndex {
	keys = max(keys, 16)
	n := int(float64(keys)/maxLoad) + 1
	return &pointIndex{slots: make([]atomic.Uint64, n), limit: keys}
}

// first is the slot where the probe for hash h starts: its low 32 bits
// scaled to the table.
func (x *pointIndex) first(h uint64) int {
	return int(uint64(uint32(h)) * uint64(len(x.slots)) >> 32)
}

// next is the slot after i, wrapping.
func (x *pointIndex) next(i int) int {
	if i++; i == len(x.slots) {
		return 0
	}
	return i
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

// slot returns the slot that holds ukey (hash h), or the empty slot where
// its probe ends (v == 0).
func (x *pointIndex) slot(s *skiplist, h uint64, ukey []byte) (i int, v uint64) {
	tag := h >> 32
	for i = x.first(h); ; i = x.next(i) {
		v = x.slots[i].Load()
		if v == 0 || v>>32 == tag && bytes.Equal(s.userKey(uint32(v)), ukey) {
			return i, v
		}
	}
}

// put records nd, an entry of user key ukey (hash h), unless the index holds
// a newer entry of the key. A full index still takes new entries of the keys
// it holds: an entry it keeps must stay the newest. Writer only.
func (x *pointIndex) put(s *skiplist, h uint64, ukey []byte, nd uint32) {
	i, v := x.slot(s, h, ukey)
	switch {
	case v == 0 && x.used >= x.limit:
		x.full.Store(true)
		return
	case v == 0:
		x.used++
	case s.trailer(nd) <= s.trailer(uint32(v)):
		return
	}
	x.slots[i].Store(h>>32<<32 | uint64(nd))
}

// get returns the node of ukey's newest indexed entry; with none, known says
// whether the key is known to be absent (the index is not full).
func (x *pointIndex) get(s *skiplist, h uint64, ukey []byte) (nd uint32, known bool) {
	if _, v := x.slot(s, h, ukey); v != 0 {
		return uint32(v), true
	}
	return 0, !x.full.Load()
}

// size is the index's memory in bytes.
func (x *pointIndex) size() uint64 { return uint64(len(x.slots)) * 8 }
