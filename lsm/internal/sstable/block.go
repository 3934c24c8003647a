package sstable

import (
	"bytes"
	"encoding/binary"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

// A block holds sorted key/value entries with prefix-compressed keys (see
// doc.go for the layout). Every block kind uses this format: data blocks and
// the index and range-tombstone blocks are keyed by encoded internal keys,
// the properties and metaindex blocks by plain names.

// blockBuilder accumulates the entries of one block.
type blockBuilder struct {
	buf             []byte
	restarts        []uint32
	restartInterval int
	counter         int // entries since the last restart point
	nEntries        int
	lastKey         []byte
}

func (b *blockBuilder) empty() bool { return b.nEntries == 0 }

// estimatedSize is the length finish would return now.
func (b *blockBuilder) estimatedSize() int { return len(b.buf) + 4*len(b.restarts) + 4 }

// entrySize bounds the bytes add(key, value) would append.
func entrySize(key, value []byte) int { return 3*binary.MaxVarintLen32 + len(key) + len(value) + 4 }

// add appends an entry; keys must arrive in increasing order.
func (b *blockBuilder) add(key, value []byte) {
	shared := 0
	if b.counter < b.restartInterval {
		n := min(len(key), len(b.lastKey))
		for shared < n && key[shared] == b.lastKey[shared] {
			shared++
		}
	} else {
		b.counter = 0
	}
	if b.counter == 0 {
		shared = 0
		b.restarts = append(b.restarts, uint32(len(b.buf)))
	}
	b.buf = binary.AppendUvarint(b.buf, uint64(shared))
	b.buf = binary.AppendUvarint(b.buf, uint64(len(key)-shared))
	b.buf = binary.AppendUvarint(b.buf, uint64(len(value)))
	b.buf = append(b.buf, key[shared:]...)
	b.buf = append(b.buf, value...)
	b.lastKey = append(b.lastKey[:0], key...)
	b.counter++
	b.nEntries++
}

// finish appends the restart array and count and returns the block, which
// stays valid until reset.
func (b *blockBuilder) finish() []byte {
	for _, r := range b.restarts {
		b.buf = binary.LittleEndian.AppendUint32(b.buf, r)
	}
	return binary.LittleEndian.AppendUint32(b.buf, uint32(len(b.restarts)))
}

func (b *blockBuilder) reset() {
	b.buf = b.buf[:0]
	b.restarts = b.restarts[:0]
	b.counter = 0
	b.nEntries = 0
	b.lastKey = b.lastKey[:0]
}

// blockIter walks the entries of one decoded block. Its methods trust the
// structure checked by checkBlock but still bounds-check every read: a
// decoding failure sets bad and makes the method return false.
type blockIter struct {
	data        []byte
	restarts    int // offset of the restart array
	numRestarts int
	off         int // offset of the current entry
	nextOff     int // offset of the entry after it
	shared      int // shared-prefix length of the current entry
	// key is the current entry's full key. It aliases data when the entry
	// shares no prefix with its predecessor, keyBuf otherwise.
	key      []byte
	keyBuf   []byte
	keyInBuf bool
	ikey     base.InternalKey
	val      []byte
	bad      bool
}

// init points the iterator at data; it reports false when the restart
// array does not fit.
func (it *blockIter) init(data []byte) bool {
	*it = blockIter{keyBuf: it.keyBuf[:0]}
	if len(data) < 4 {
		it.bad = true
		return false
	}
	n := binary.LittleEndian.Uint32(data[len(data)-4:])
	if uint64(n) > uint64(len(data)-4)/4 {
		it.bad = true
		return false
	}
	it.data = data
	it.numRestarts = int(n)
	it.restarts = len(data) - 4 - 4*int(n)
	return true
}

func (it *blockIter) restartOffset(i int) int {
	return int(binary.LittleEndian.Uint32(it.data[it.restarts+4*i:]))
}

// readUvarint reads a uvarint from b[p:end], returning the offset after it.
func readUvarint(b []byte, p, end int) (uint64, int, bool) {
	if p < end && b[p] < 0x80 {
		return uint64(b[p]), p + 1, true
	}
	if p >= end {
		return 0, 0, false
	}
	v, n := binary.Uvarint(b[p:end])
	if n <= 0 {
		return 0, 0, false
	}
	return v, p + n, true
}

// decodeHeader decodes the header of the entry at off: its shared-prefix
// length, its own key bytes and the offset of its value, checking that they
// fit before the restart array.
func (it *blockIter) decodeHeader(off int) (shared int, k []byte, p, vlen int, ok bool) {
	end := it.restarts
	if off < 0 || off >= end {
		return 0, nil, 0, 0, false
	}
	var sh, unshared, vl uint64
	p = off
	if p+3 <= end && it.data[p]|it.data[p+1]|it.data[p+2] < 0x80 {
		sh, unshared, vl = uint64(it.data[p]), uint64(it.data[p+1]), uint64(it.data[p+2])
		p += 3
	} else {
		var ok1, ok2, ok3 bool
		sh, p, ok1 = readUvarint(it.data, p, end)
		if ok1 {
			unshared, p, ok2 = readUvarint(it.data, p, end)
		}
		if ok2 {
			vl, p, ok3 = readUvarint(it.data, p, end)
		}
		if !ok3 {
			return 0, nil, 0, 0, false
		}
	}
	if sh > uint64(len(it.key)) || unshared > uint64(end-p) || vl > uint64(end-p)-unshared {
		return 0, nil, 0, 0, false
	}
	k = it.data[p : p+int(unshared)]
	return int(sh), k, p + int(unshared), int(vl), true
}

// decodeAt decodes the entry at off. When the entry shares a prefix, it.key
// must hold the key of the entry just before off.
func (it *blockIter) decodeAt(off int) bool {
	shared, k, p, vlen, ok := it.decodeHeader(off)
	if !ok {
		it.bad = true
		return false
	}
	if shared == 0 {
		it.key = k
		it.keyInBuf = false
	} else {
		if !it.keyInBuf {
			it.keyBuf = append(it.keyBuf[:0], it.key[:shared]...)
		}
		it.keyBuf = append(it.keyBuf[:shared], k...)
		it.key = it.keyBuf
		it.keyInBuf = true
	}
	it.val = it.data[p : p+vlen : p+vlen]
	it.off, it.nextOff, it.shared = off, p+vlen, shared
	if n := len(it.key) - base.TrailerLen; n >= 0 {
		it.ikey = base.InternalKey{UserKey: it.key[:n:n], Trailer: binary.LittleEndian.Uint64(it.key[n:])}
	} else {
		it.ikey = base.InternalKey{}
	}
	return true
}

func (it *blockIter) first() bool {
	if it.numRestarts == 0 {
		return false
	}
	it.key = nil
	return it.decodeAt(0)
}

func (it *blockIter) next() bool {
	if it.nextOff >= it.restarts {
		return false
	}
	return it.decodeAt(it.nextOff)
}

// scanFrom decodes from restart point r forward to the entry whose
// successor starts at stop.
func (it *blockIter) scanFrom(r, stop int) bool {
	it.key = nil
	if !it.decodeAt(it.restartOffset(r)) {
		return false
	}
	for it.nextOff < stop {
		if !it.decodeAt(it.nextOff) {
			return false
		}
	}
	if it.nextOff != stop {
		it.bad = true
		return false
	}
	return true
}

func (it *blockIter) last() bool {
	if it.numRestarts == 0 {
		return false
	}
	return it.scanFrom(it.numRestarts-1, it.restarts)
}

// prev moves to the entry before the current one.
func (it *blockIter) prev() bool {
	target := it.off
	if target == 0 {
		return false
	}
	// Largest restart point before target.
	lo, hi := 0, it.numRestarts
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if it.restartOffset(m) < target {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		it.bad = true
		return false
	}
	return it.scanFrom(lo-1, target)
}

// restartUserKey returns the user key of the entry at restart point i,
// which shares no prefix.
func (it *blockIter) restartUserKey(i int) ([]byte, bool) {
	shared, k, _, _, ok := it.decodeHeader(it.restartOffset(i))
	if !ok || shared != 0 || len(k) < base.TrailerLen {
		return nil, false
	}
	return k[:len(k)-base.TrailerLen], true
}

// searchRestarts returns the first restart point whose user key is >= key
// (numRestarts if none).
func (it *blockIter) searchRestarts(key []byte) (int, bool) {
	lo, hi := 0, it.numRestarts
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		uk, ok := it.restartUserKey(m)
		if !ok {
			it.bad = true
			return 0, false
		}
		if bytes.Compare(uk, key) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, true
}

// seekGE moves to the first entry whose user key is >= key.
func (it *blockIter) seekGE(key []byte) bool {
	if it.numRestarts == 0 {
		return false
	}
	r, ok := it.searchRestarts(key)
	if !ok {
		return false
	}
	if r > 0 {
		r--
	}
	it.key = nil
	if !it.decodeAt(it.restartOffset(r)) {
		return false
	}
	for bytes.Compare(it.ikey.UserKey, key) < 0 {
		if !it.next() {
			return false
		}
	}
	return true
}

// seekLT moves to the last entry whose user key is < key.
func (it *blockIter) seekLT(key []byte) bool {
	if it.numRestarts == 0 {
		return false
	}
	r, ok := it.searchRestarts(key)
	if !ok || r == 0 {
		return false
	}
	r--
	it.key = nil
	if !it.decodeAt(it.restartOffset(r)) {
		return false
	}
	// The entry at the restart point is < key; find the last one that is.
	targetNext := it.nextOff
	for it.nextOff < it.restarts {
		if !it.decodeAt(it.nextOff) {
			return false
		}
		if bytes.Compare(it.ikey.UserKey, key) >= 0 {
			// Went one too far: decode again up to target.
			return it.scanFrom(r, targetNext)
		}
		targetNext = it.nextOff
	}
	return true
}

// checkBlock walks every entry of a decoded block and checks its structure:
// the restart array, entry bounds, prefix lengths, and that every restart
// point starts an entry that shares no prefix. It calls fn with each key and
// value (key is only valid during the call); a non-empty string from fn is
// a reason to reject. It returns the entry count, or the offset within the
// block of the first problem and a reason.
//
// maxGroup bounds the entries per restart point (1 for blocks without prefix
// compression). It keeps the work of rebuilding keys linear in the block's
// length: a key can only grow by bytes stored within its group, so the keys
// of a block add up to at most maxGroup times its length.
func checkBlock(it *blockIter, b []byte, maxGroup int, fn func(key, val []byte) string) (n, badOff int, reason string) {
	if badOff, reason := it.initChecked(b); reason != "" || it.numRestarts == 0 {
		return 0, badOff, reason
	}
	ri, group := 0, 0
	it.key = nil
	off := 0
	for off < it.restarts {
		if !it.decodeAt(off) {
			return n, off, "bad entry"
		}
		group++
		if ri < it.numRestarts {
			switch r := it.restartOffset(ri); {
			case off == r:
				if it.shared != 0 {
					return n, off, "restart entry shares a prefix"
				}
				ri++
				group = 1
			case off > r:
				return n, r, "restart offset inside an entry"
			}
		}
		if group > maxGroup {
			return n, off, "too many entries between restart points"
		}
		if fn != nil {
			if reason := fn(it.key, it.val); reason != "" {
				return n, off, reason
			}
		}
		n++
		off = it.nextOff
	}
	if ri != it.numRestarts {
		return n, it.restarts, "restart offset past the entries"
	}
	return n, 0, ""
}

// initChecked is init plus a check of the restart array: offsets strictly
// increasing from 0 and inside the entries.
func (it *blockIter) initChecked(b []byte) (badOff int, reason string) {
	if !it.init(b) {
		return max(len(b)-4, 0), "bad restart count"
	}
	if it.numRestarts == 0 {
		if it.restarts != 0 {
			return 0, "entries without restart points"
		}
		return 0, ""
	}
	prevR := -1
	for i := range it.numRestarts {
		r := it.restartOffset(i)
		if (i == 0 && r != 0) || r <= prevR || r >= it.restarts {
			return it.restarts + 4*i, "bad restart offset"
		}
		prevR = r
	}
	return 0, ""
}

// compareNext compares, in CompareInternal order, the encoded internal key
// prev with the key of an entry that shares its first shared bytes and
// continues with k, without building that key. ok is false when the new key
// is too short to hold a trailer.
func compareNext(prev []byte, shared int, k []byte) (c int, ok bool) {
	pu, cu := len(prev)-base.TrailerLen, shared+len(k)-base.TrailerLen
	if cu < 0 || pu < 0 {
		return 0, false
	}
	// User keys: the first shared bytes are common.
	switch {
	case shared <= pu && shared <= cu:
		c = bytes.Compare(prev[shared:pu], k[:cu-shared])
	case pu <= cu:
		// prev's user key is a prefix of the new one.
		if pu < cu {
			c = -1
		}
	default:
		// The new user key is a proper prefix of prev's.
		c = 1
	}
	if c != 0 {
		return c, true
	}
	// Same user key: the larger trailer sorts first.
	var t [base.TrailerLen]byte
	for i := range t {
		if j := cu + i; j < shared {
			t[i] = prev[j]
		} else {
			t[i] = k[j-shared]
		}
	}
	pt, ct := binary.LittleEndian.Uint64(prev[pu:]), binary.LittleEndian.Uint64(t[:])
	switch {
	case pt > ct:
		return -1, true
	case pt < ct:
		return 1, true
	}
	return 0, true
}
