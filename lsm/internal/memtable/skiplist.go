package memtable

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"unsafe"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

const (
	maxHeight = 20
)

// node field offsets relative to the node start.
const (
	fKeyOff = 0
	fKeyLen = 4
	fValLen = 8
	fHeight = 12
	fPrefix = 16 // first 8 user key bytes, zero-padded, big-endian
	fTower  = 24 // first next pointer, 4-byte aligned
)

// keyPrefix returns the first 8 bytes of an encoded internal key's user key,
// zero-padded, as a big-endian integer: prefixes order like user keys, and
// equal prefixes need a full comparison.
func keyPrefix(ikey []byte) uint64 { return paddedPrefix(ikey[:len(ikey)-base.TrailerLen]) }

// paddedPrefix returns the first 8 bytes of b, zero-padded, as a big-endian
// integer: such prefixes order like the byte strings, and equal ones need a
// full comparison.
func paddedPrefix(b []byte) uint64 {
	if len(b) >= 8 {
		return binary.BigEndian.Uint64(b)
	}
	var p [8]byte
	copy(p[:], b)
	return binary.BigEndian.Uint64(p[:])
}

// prefix returns node nd's key prefix (keyPrefix).
func (s *skiplist) prefix(nd uint32) uint64 {
	return binary.LittleEndian.Uint64(s.a.buf[nd+fPrefix:])
}

// less reports whether node nd's key is < key (whose prefix is p).
func (s *skiplist) less(nd uint32, key []byte, p uint64) bool {
	np := s.prefix(nd)
	if np != p {
		return np < p
	}
	return compareKeys(s.key(nd), key) < 0
}

// skiplist is an ordered set of encoded internal keys in an arena.
type skiplist struct {
	a      *arena
	head   uint32
	height atomic32
	rng    *rand.Rand

	// The writer's insert hints; readers never look.
	recent  [numRecent]insertHint
	streams []insertHint // a power of two of them; nil: none (a range deletion list)
	tick    uint64       // the writer's clock for recent hints' last use
}

// A skiplist remembers insert positions, so that an insert next to an
// earlier one walks a level or two from there instead of the whole list from
// the head. The engine's batches interleave ordered streams of keys:
//   - streams of one id: a directory's entries, an inode's record again and
//     again, a file's blocks. Their keys share their first 9 bytes (the
//     family and an inode number), which pick one of the stream hints, one
//     per 8 KiB of arena (streamBytes), at most maxStreams: 1,024 for the
//     engine's 8 MiB segments, about 90 KB beside them;
//   - streams across ids: new inodes and their blocks and orphan records, in
//     allocation order. numRecent hints, the least recently used replaced,
//     keep their last positions.
const (
	streamBytes = 8 << 10
	maxStreams  = 1024
	numRecent   = 4
)

// hintLevels is how many of a hint's lowest levels add tries before it
// searches from the head: a key that no hint brackets that low is far from
// all of them. hintStored is how many levels a hint records: the walk
// starts at the higher of the bracketing level and the new node's top level,
// and a node taller than hintStored (1 in 256) is added from the head.
const (
	hintLevels = 3
	hintStored = 4
)

// insertHint is a remembered insert position (RocksDB's InlineSkipList calls
// it a splice): for each of its levels, a node before the last key added
// through it (or the head) and the node that followed at that level when
// recorded (0: none). Nodes are never removed, so a hint stays usable as
// other inserts go in between: the walk from prev[l] passes them.
// Invariant: prev[l+1] is prev[l] or a node before it, so when level l
// brackets a key, every prev above l is before the key too.
type insertHint struct {
	// lo and hi are the key prefixes of prev and next at the levels
	// pickHint checks (lo 0 for the head, hi ^0 for none): most hints are
	// ruled out by them, without reading the arena.
	lo, hi     [hintLevels]uint64
	prev, next [hintStored]uint32
	used       uint64 // skiplist.tick at its last use; 0: never set
}

// set records prev and next at level l.
func (hn *insertHint) set(s *skiplist, l int, prev, next uint32) {
	hn.prev[l], hn.next[l] = prev, next
	if l >= hintLevels {
		return
	}
	hn.lo[l], hn.hi[l] = 0, ^uint64(0)
	if prev != s.head {
		hn.lo[l] = s.prefix(prev)
	}
	if next != 0 {
		hn.hi[l] = s.prefix(next)
	}
}

// brackets reports whether hn's level l holds key (prefix p) between prev
// and next, with nothing added between them since (tight), so that the walk
// from there is a skiplist's usual few steps per level.
func (s *skiplist) brackets(hn *insertHint, l int, key []byte, p uint64) bool {
	if p < hn.lo[l] || p > hn.hi[l] {
		return false
	}
	pr, nx := hn.prev[l], hn.next[l]
	if s.next(pr, l) != nx {
		return false
	}
	return (pr == s.head || p > hn.lo[l] || s.less(pr, key, p)) &&
		(nx == 0 || p < hn.hi[l] || !s.less(nx, key, p))
}

// streamHint returns the hint of key's stream: the one its family and id
// (the user key's first 9 bytes) pick.
func (s *skiplist) streamHint(key []byte, p uint64) *insertHint {
	var b9 uint64
	if len(key)-base.TrailerLen > 8 {
		b9 = uint64(key[8])
	}
	h := p*0x9e3779b97f4a7c15 ^ b9*0xc2b2ae3d27d4eb4f
	return &s.streams[h>>(64-bits.TrailingZeros(uint(len(s.streams))))]
}

type atomic32 struct{ v uint32 }

func (x *atomic32) load() uint32 { return loadU32(&x.v) }

func (x *atomic32) store(v uint32) { storeU32(&x.v, v) }

// newSkiplist returns an empty list in a; with streams, it keeps hints per
// key stream beside the recent ones.
func newSkiplist(a *arena, streams bool) (*skiplist, error) {
	s := &skiplist{a: a, rng: rand.New(rand.NewPCG(0x9e3779b97f4a7c15, 0x2545f4914f6cdd1d))}
	if streams {
		n := 2
		for n*2 <= min(len(a.buf)/streamBytes, maxStreams) {
			n *= 2
		}
		s.streams = make([]insertHint, n)
	}
	head, err := s.newNode(nil, nil, maxHeight)
	if err != nil {
		return nil, err
	}
	s.head = head
	s.height.store(1)
	return s, nil
}

// hintBytes is the memory of the list's hints beside its arena.
func (s *skiplist) hintBytes() uint64 {
	n := uint64(unsafe.Sizeof(s.recent))
	n += uint64(len(s.streams)) * uint64(unsafe.Sizeof(insertHint{}))
	return n
}

func nodeSize(h int) uint32 { return uint32(fTower + 4*h) }

func (s *skiplist) newNode(key, value []byte, h int) (uint32, error) {
	a := s.a
	total := nodeSize(h) + uint32(len(key)) + uint32(len(value))
	nd, err := a.alloc(total)
	if err != nil {
		return 0, err
	}
	kOff := nd + nodeSize(h)
	copy(a.buf[kOff:], key)
	copy(a.buf[kOff+uint32(len(key)):], value)
	binary.LittleEndian.PutUint32(a.buf[nd+fKeyOff:], kOff)
	binary.LittleEndian.PutUint32(a.buf[nd+fKeyLen:], uint32(len(key)))
	binary.LittleEndian.PutUint32(a.buf[nd+fValLen:], uint32(len(value)))
	a.buf[nd+fHeight] = byte(h)
	if len(key) >= base.TrailerLen {
		binary.LittleEndian.PutUint64(a.buf[nd+fPrefix:], keyPrefix(key))
	}
	for i := 0; i < h; i++ {
		binary.LittleEndian.PutUint32(a.buf[nd+fTower+uint32(4*i):], 0)
	}
	return nd, nil
}

func (s *skiplist) key(nd uint32) []byte {
	b := s.a.buf
	kOff := binary.LittleEndian.Uint32(b[nd+fKeyOff:])
	kLen := binary.LittleEndian.Uint32(b[nd+fKeyLen:])
	return s.a.bytes(kOff, kLen)
}

func (s *skiplist) value(nd uint32) []byte {
	b := s.a.buf
	kOff := binary.LittleEndian.Uint32(b[nd+fKeyOff:])
	kLen := binary.LittleEndian.Uint32(b[nd+fKeyLen:])
	vLen := binary.LittleEndian.Uint32(b[nd+fValLen:])
	return s.a.bytes(kOff+kLen, vLen)
}

func (s *skiplist) next(nd uint32, level int) uint32 {
	return s.a.load(nd + fTower + uint32(4*level))
}

func (s *skiplist) setNext(nd uint32, level int, to uint32) {
	s.a.store(nd+fTower+uint32(4*level), to)
}

func (s *skiplist) randomHeight() int {
	h := 1
	for h < maxHeight && s.rng.Uint32()&3 == 0 {
		h++
	}
	return h
}

// compareKeys orders encoded internal keys; both have full trailers.
func compareKeys(a, b []byte) int {
	na, nb := len(a)-base.TrailerLen, len(b)-base.TrailerLen
	if c := bytes.Compare(a[:na], b[:nb]); c != 0 {
		return c
	}
	ta := binary.LittleEndian.Uint64(a[na:])
	tb := binary.LittleEndian.Uint64(b[nb:])
	switch {
	case ta > tb:
		return -1
	case ta < tb:
		return 1
	}
	return 0
}

// add inserts an encoded internal key and returns its node. Single writer
// only.
//
// It starts from a hint that brackets key at a level below hintLevels (the
// key's stream hint first, then the recent ones), or from the head, at the
// higher of that level and the new node's top level, and walks down to level
// 0 collecting the node's predecessors: the walk reads the links as they
// are, so a stale hint costs steps, never order. The hint it started from
// then records the new node; a search from the head is recorded in the
// key's stream hint and the least recently used recent one.
func (s *skiplist) add(key, value []byte) (uint32, error) {
	p := keyPrefix(key)
	h := s.randomHeight()
	listHeight := int(s.height.load())
	var stream *insertHint
	if s.streams != nil {
		stream = s.streamHint(key, p)
	}
	hint, lvl := s.pickHint(stream, key, p)
	x, top := s.head, max(listHeight, h)-1
	if hint != nil && max(lvl, h-1) < hintStored {
		// prev[top] is before key: top is lvl, or higher, where prev is
		// the head or a node before prev[lvl] (the invariant).
		top = max(lvl, h-1)
		x = hint.prev[top]
	} else {
		hint = nil
	}
	var prev, next [maxHeight]uint32
	for l := top; l >= 0; l-- {
		for {
			nx := s.next(x, l)
			if nx == 0 || !s.less(nx, key, p) {
				next[l] = nx
				break
			}
			x = nx
		}
		prev[l] = x
	}
	nd, err := s.newNode(key, value, h)
	if err != nil {
		return 0, err
	}
	if h > listHeight {
		s.height.store(uint32(h))
	}
	for l := 0; l < h; l++ {
		s.setNext(nd, l, next[l])
		s.setNext(prev[l], l, nd)
	}
	for l := 0; l < h; l++ {
		prev[l] = nd // the next key of an ascending stream follows nd
	}
	s.tick++
	record := func(hn *insertHint) {
		for l := 0; l < hintStored; l++ {
			switch {
			case l <= top:
				hn.set(s, l, prev[l], next[l])
			case hint == nil: // above the list's top
				hn.set(s, l, s.head, 0)
			}
		}
		hn.used = s.tick
	}
	if hint != nil {
		record(hint)
		return nd, nil
	}
	if stream != nil {
		record(stream)
	}
	v := &s.recent[0]
	for i := range s.recent {
		if s.recent[i].used < v.used {
			v = &s.recent[i]
		}
	}
	record(v)
	return nd, nil
}

// pickHint returns the hint that brackets key at the lowest level below
// hintLevels, stream (may be nil) before the recent ones at each level, and
// that level; nil if none does.
func (s *skiplist) pickHint(stream *insertHint, key []byte, p uint64) (*insertHint, int) {
	var near [1 + numRecent]*insertHint
	n := 0
	if stream != nil && stream.near(p) {
		near[n] = stream
		n++
	}
	for i := range s.recent {
		if s.recent[i].near(p) {
			near[n] = &s.recent[i]
			n++
		}
	}
	for l := 0; l < hintLevels; l++ {
		for _, hn := range near[:n] {
			if s.brackets(hn, l, key, p) {
				return hn, l
			}
		}
	}
	return nil, 0
}

// near reports whether prefix p is within hn's widest checked level, the
// only ones pickHint tries: the levels below are narrower (prev[l+1] is
// before prev[l], and next[l+1] after next[l]).
func (hn *insertHint) near(p uint64) bool {
	const l = hintLevels - 1
	return hn.used != 0 && hn.lo[l] <= p && p <= hn.hi[l]
}

// seekGE returns the first node whose key is >= key (encoded internal key
// comparison), or 0.
func (s *skiplist) seekGE(key []byte) uint32 {
	_, nx := s.findSplice(key)
	return nx
}

// findSplice returns the last node < key (or the head) and the node its
// level-0 link pointed to when read: the first node >= key at that moment.
// The successor is the one pointer read once. Reading the predecessor's link
// again would race with an insert between the two (a concurrent writer may
// link a node < key in there) and return a node < key.
func (s *skiplist) findSplice(key []byte) (prev, next uint32) {
	x := s.head
	p := keyPrefix(key)
	var nx uint32
	for lvl := int(s.height.load()) - 1; lvl >= 0; lvl-- {
		for {
			nx = s.next(x, lvl)
			if nx == 0 || !s.less(nx, key, p) {
				break
			}
			x = nx
		}
	}
	return x, nx
}

// findLT returns the last node < key, or the head.
func (s *skiplist) findLT(key []byte) uint32 {
	x, _ := s.findSplice(key)
	return x
}

// seekLT returns the last node whose key is < key, or 0 (head).
func (s *skiplist) seekLT(key []byte) uint32 {
	x := s.findLT(key)
	if x == s.head {
		return 0
	}
	return x
}

// last returns the last node, or 0.
func (s *skiplist) last() uint32 {
	x := s.head
	for lvl := int(s.height.load()) - 1; lvl >= 0; lvl-- {
		for {
			nx := s.next(x, lvl)
			if nx == 0 {
				break
			}
			x = nx
		}
	}
	if x == s.head {
		return 0
	}
	return x
}
