package memtable

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"

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
func keyPrefix(ikey []byte) uint64 {
	u := ikey[:len(ikey)-base.TrailerLen]
	if len(u) >= 8 {
		return binary.BigEndian.Uint64(u)
	}
	var b [8]byte
	copy(b[:], u)
	return binary.BigEndian.Uint64(b[:])
}

// less reports whether node nd's key is < key (whose prefix is p).
func (s *skiplist) less(nd uint32, key []byte, p uint64) bool {
	np := binary.LittleEndian.Uint64(s.a.buf[nd+fPrefix:])
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
}

type atomic32 struct{ v uint32 }

func (x *atomic32) load() uint32 { return loadU32(&x.v) }

func (x *atomic32) store(v uint32) { storeU32(&x.v, v) }

func newSkiplist(a *arena) (*skiplist, error) {
	s := &skiplist{a: a, rng: rand.New(rand.NewPCG(0x9e3779b97f4a7c15, 0x2545f4914f6cdd1d))}
	head, err := s.newNode(nil, nil, maxHeight)
	if err != nil {
		return nil, err
	}
	s.head = head
	s.height.store(1)
	return s, nil
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
func (s *skiplist) add(key, value []byte) (uint32, error) {
	var prev [maxHeight]uint32
	x := s.head
	p := keyPrefix(key)
	listHeight := int(s.height.load())
	for lvl := listHeight - 1; lvl >= 0; lvl-- {
		for {
			nx := s.next(x, lvl)
			if nx == 0 || !s.less(nx, key, p) {
				break
			}
			x = nx
		}
		prev[lvl] = x
	}
	h := s.randomHeight()
	nd, err := s.newNode(key, value, h)
	if err != nil {
		return 0, err
	}
	if h > listHeight {
		for lvl := listHeight; lvl < h; lvl++ {
			prev[lvl] = s.head
		}
		s.height.store(uint32(h))
	}
	for lvl := 0; lvl < h; lvl++ {
		s.setNext(nd, lvl, s.next(prev[lvl], lvl))
		s.setNext(prev[lvl], lvl, nd)
	}
	return nd, nil
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
