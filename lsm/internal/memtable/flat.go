package memtable

import (
	"bytes"
	"slices"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/rangedel"
)

// Flat is an immutable memtable segment: its entries in one sorted array,
// which costs less memory per entry than a skiplist node and is searched by
// binary search over a dense array of key prefixes (few cache misses). The
// "basic" in-memory policy flattens each immutable segment; "eager" merges
// segments into one Flat.
//
// Layout: data holds each entry's encoded internal key followed by its value;
// ents[i] locates entry i. The entries are grouped by their user key's first
// byte (leadGroup), whose bounds starts holds, and prefix[i] is the 8 bytes
// after it (tailPrefix), so most binary search steps, within the key's
// group, touch only the prefix array. The engine's keys are a family byte
// and an inode number: the 8 bytes after the family byte tell inodes apart
// where the first 8 bytes (the skiplist's prefix) leave out the number's
// last byte.
type Flat struct {
	data   []byte
	ents   []flatEnt
	prefix []uint64
	starts [numLeadGroups + 1]uint32 // starts[g]: the first entry of group g or above
	tombs  []base.RangeTombstone     // fragmented
	filter *keyFilter                // user keys of ents
}

// numLeadGroups is the number of groups leadGroup sorts user keys into.
const numLeadGroups = 257

// leadGroup is the group of a user key: 0 for the empty key, else 1 plus
// its first byte. Groups order like the keys in them.
func leadGroup(ukey []byte) int {
	if len(ukey) == 0 {
		return 0
	}
	return 1 + int(ukey[0])
}

// tailPrefix returns the 8 bytes of a user key after its first, zero-padded,
// as a big-endian integer: within a group, tail prefixes order like the
// keys, and equal ones need a full comparison.
func tailPrefix(ukey []byte) uint64 {
	if len(ukey) == 0 {
		return 0
	}
	return paddedPrefix(ukey[1:])
}

type flatEnt struct {
	off    uint32 // of the key in data
	keyLen uint32
	valLen uint32
}

// FlatBuilder builds a Flat from entries added in CompareInternal order.
type FlatBuilder struct {
	f Flat
}

// Add appends an entry; keys must come in increasing internal order.
func (b *FlatBuilder) Add(key base.InternalKey, value []byte) {
	off := uint32(len(b.f.data))
	b.f.data = key.Append(b.f.data)
	b.f.data = append(b.f.data, value...)
	b.f.ents = append(b.f.ents, flatEnt{off: off, keyLen: uint32(key.Size()), valLen: uint32(len(value))})
	b.f.prefix = append(b.f.prefix, tailPrefix(key.UserKey))
}

// Grow makes room for entries entries of data bytes of keys and values in
// all, so that adding them copies nothing twice (at most what the inputs of
// a merge hold: Finish trims what the merge dropped).
func (b *FlatBuilder) Grow(data, entries int) {
	b.f.data = slices.Grow(b.f.data, data)
	b.f.ents = slices.Grow(b.f.ents, entries)
	b.f.prefix = slices.Grow(b.f.prefix, entries)
}

// Finish returns the Flat with the given fragmented tombstones (copied).
func (b *FlatBuilder) Finish(tombs []base.RangeTombstone) *Flat {
	f := b.f
	b.f = Flat{}
	// Trim large slack (of append growth, or of a Grow for entries a merge
	// dropped): a Flat lives until flushed.
	f.data = trim(f.data)
	f.ents = trim(f.ents)
	f.prefix = trim(f.prefix)
	f.filter = newKeyFilter(len(f.ents))
	g := 0 // the next group to find the start of
	for i := range f.ents {
		k, _ := base.DecodeInternalKey(f.key(i))
		f.filter.add(hashKey(k.UserKey))
		for ; g <= leadGroup(k.UserKey); g++ {
			f.starts[g] = uint32(i)
		}
	}
	for ; g < len(f.starts); g++ {
		f.starts[g] = uint32(len(f.ents))
	}
	if len(tombs) > 0 {
		f.tombs = make([]base.RangeTombstone, len(tombs))
		for i, t := range tombs {
			f.tombs[i] = base.RangeTombstone{Start: append([]byte(nil), t.Start...), End: append([]byte(nil), t.End...), Seq: t.Seq}
		}
		f.tombs = rangedel.Fragment(f.tombs)
	}
	return &f
}

// trim returns s, or a copy without its spare capacity if that is over an
// eighth of it.
func trim[T any](s []T) []T {
	if cap(s)-len(s) > cap(s)/8 {
		return append([]T(nil), s...)
	}
	return s
}

// Len is the number of point entries.
func (f *Flat) Len() int { return len(f.ents) }

// Size is the memory the segment holds, in bytes.
func (f *Flat) Size() uint64 {
	n := uint64(len(f.data)) + uint64(len(f.ents))*12 + uint64(len(f.prefix))*8 + uint64(len(f.starts))*4
	if f.filter != nil {
		n += f.filter.size()
	}
	for _, t := range f.tombs {
		n += uint64(len(t.Start)+len(t.End)) + 40
	}
	return n
}

// PointBytes is the bytes of the entries' encoded keys and values.
func (f *Flat) PointBytes() uint64 { return uint64(len(f.data)) }

// Empty reports whether the segment holds nothing.
func (f *Flat) Empty() bool { return len(f.ents) == 0 && len(f.tombs) == 0 }

// Tombstones returns the fragmented range tombstones; do not modify.
func (f *Flat) Tombstones() []base.RangeTombstone { return f.tombs }

func (f *Flat) key(i int) []byte {
	e := f.ents[i]
	return f.data[e.off : e.off+e.keyLen : e.off+e.keyLen]
}

func (f *Flat) value(i int) []byte {
	e := f.ents[i]
	s := e.off + e.keyLen
	return f.data[s : s+e.valLen : s+e.valLen]
}

// search returns the index of the first entry whose encoded key is >= key.
// Entries of the groups before key's are all below it, and those of the
// groups after all above it: the search is within key's group.
func (f *Flat) search(key []byte) int {
	ukey := key[:len(key)-base.TrailerLen]
	g := leadGroup(ukey)
	lo, hi := int(f.starts[g]), int(f.starts[g+1])
	p := tailPrefix(ukey)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		var less bool
		if mp := f.prefix[m]; mp != p {
			less = mp < p
		} else {
			less = compareKeys(f.key(m), key) < 0
		}
		if less {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Get returns the newest point entry for ukey with a sequence number <= snap.
func (f *Flat) Get(ukey []byte, snap base.SeqNum) (key base.InternalKey, value []byte, found bool) {
	if f.filter != nil && !f.filter.mayContain(hashKey(ukey)) {
		return base.InternalKey{}, nil, false
	}
	var buf [64]byte
	i := f.search(base.MakeInternalKey(ukey, snap, base.KindMax).Append(buf[:0]))
	if i >= len(f.ents) {
		return base.InternalKey{}, nil, false
	}
	k, _ := base.DecodeInternalKey(f.key(i))
	if !bytes.Equal(k.UserKey, ukey) {
		return base.InternalKey{}, nil, false
	}
	return k, f.value(i), true
}

// NewIter returns an iterator over the point entries.
func (f *Flat) NewIter() *FlatIter { return &FlatIter{f: f, i: -1} }

// FlatIter iterates over a Flat; it implements base.InternalIterator.
type FlatIter struct {
	f   *Flat
	i   int
	key base.InternalKey
	buf [64]byte
}

var _ base.InternalIterator = (*FlatIter)(nil)

func (it *FlatIter) load() bool {
	if it.i < 0 || it.i >= len(it.f.ents) {
		return false
	}
	it.key, _ = base.DecodeInternalKey(it.f.key(it.i))
	return true
}

// SeekGE implements base.InternalIterator.
func (it *FlatIter) SeekGE(key []byte) bool {
	it.i = it.f.search(base.MakeInternalKey(key, base.MaxSeqNum, base.KindMax).Append(it.buf[:0]))
	return it.load()
}

// SeekLT implements base.InternalIterator.
func (it *FlatIter) SeekLT(key []byte) bool {
	it.i = it.f.search(base.MakeInternalKey(key, base.MaxSeqNum, base.KindMax).Append(it.buf[:0])) - 1
	return it.load()
}

// First implements base.InternalIterator.
func (it *FlatIter) First() bool { it.i = 0; return it.load() }

// Last implements base.InternalIterator.
func (it *FlatIter) Last() bool { it.i = len(it.f.ents) - 1; return it.load() }

// Next implements base.InternalIterator.
func (it *FlatIter) Next() bool {
	if it.i >= len(it.f.ents) {
		return false
	}
	it.i++
	return it.load()
}

// Prev implements base.InternalIterator.
func (it *FlatIter) Prev() bool {
	if it.i < 0 {
		return false
	}
	it.i--
	return it.load()
}

// Key implements base.InternalIterator.
func (it *FlatIter) Key() base.InternalKey { return it.key }

// Value implements base.InternalIterator.
func (it *FlatIter) Value() []byte { return it.f.value(it.i) }

// Error implements base.InternalIterator.
func (it *FlatIter) Error() error { return nil }

// Close implements base.InternalIterator.
func (it *FlatIter) Close() error { it.i = -1; return nil }

// DuplicateKeys counts entries whose user key equals the previous entry's:
// versions that an eager merge could drop.
func (f *Flat) DuplicateKeys() int {
	n := 0
	var prev []byte
	for i := range f.ents {
		k := f.key(i)
		u := k[:len(k)-base.TrailerLen]
		if i > 0 && bytes.Equal(u, prev) {
			n++
		}
		prev = u
	}
	return n
}

// userKeyAt returns entry i's user key, for samplers.
func (f *Flat) userKeyAt(i int) []byte {
	k := f.key(i)
	return k[:len(k)-base.TrailerLen]
}

// SampleUserKeys returns up to n user keys spread over the segment.
func (f *Flat) SampleUserKeys(n int) [][]byte {
	if len(f.ents) == 0 || n <= 0 {
		return nil
	}
	step := len(f.ents) / n
	if step == 0 {
		step = 1
	}
	var out [][]byte
	for i := 0; i < len(f.ents) && len(out) < n; i += step {
		out = append(out, f.userKeyAt(i))
	}
	return out
}
