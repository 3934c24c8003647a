package memtable

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/rangedel"
)

// EntryOverhead is the most arena bytes an entry needs beyond its key and
// value; the engine uses it to decide whether a batch fits.
const EntryOverhead = fTower + 4*maxHeight + base.TrailerLen + 4

// indexEntryBytes sizes a segment's point index: it has room for one key
// per indexEntryBytes of arena. The engine's entries take 70 to 100 arena
// bytes (a node of height 1 or 2 with an inode's key and record, or a
// directory entry's), and many keys have several versions; a segment of
// smaller entries indexes its first capacity/indexEntryBytes keys, and Get
// searches the list for the rest.
const indexEntryBytes = 72

// Memtable is one segment of the engine's in-memory write buffer.
type Memtable struct {
	arena     *arena
	points    *skiplist
	rangeDels *skiplist
	filter    *keyFilter // user keys of points
	index     *pointIndex

	count         atomic.Uint64 // point entries
	pointBytes    atomic.Uint64 // encoded keys and values of the point entries
	numTombstones atomic.Uint64

	// frag caches the fragmented tombstones, redone when numTombstones
	// passes n, its value before the walk that found them: the cache
	// holds at least the first n tombstones added (see Tombstones). seen
	// is how many it holds, maxSeq their largest sequence number.
	frag struct {
		sync.Mutex
		n, seen uint64
		maxSeq  uint64
		spans   []base.RangeTombstone
	}

	keyBuf []byte // writer's scratch
}

// New returns an empty memtable whose arena holds capacity bytes.
func New(capacity uint32) *Memtable {
	if capacity < 64<<10 {
		capacity = 64 << 10
	}
	a := newArena(capacity)
	// Entries take at least ~50 arena bytes; most of the engine's are
	// larger. Smaller ones only raise the false-positive rate.
	m := &Memtable{arena: a, filter: newKeyFilter(int(capacity / 128)), index: newPointIndex(int(capacity / indexEntryBytes))}
	var err error
	if m.points, err = newSkiplist(a, true); err != nil {
		panic(err) // cannot happen: capacity covers two heads
	}
	if m.rangeDels, err = newSkiplist(a, false); err != nil {
		panic(err)
	}
	return m
}

// Add inserts one entry. A KindRangeDelete entry's value is the tombstone's
// exclusive end key. Only one goroutine may call Add at a time.
func (m *Memtable) Add(key base.InternalKey, value []byte) error {
	m.keyBuf = key.Append(m.keyBuf[:0])
	if key.Kind() == base.KindRangeDelete {
		if _, err := m.rangeDels.add(m.keyBuf, value); err != nil {
			return err
		}
		m.numTombstones.Add(1)
		return nil
	}
	h := hashKey(key.UserKey)
	m.filter.add(h) // before the entry is linked
	nd, err := m.points.add(m.keyBuf, value)
	if err != nil {
		return err
	}
	m.index.put(m.points, h, key.UserKey, nd)
	m.count.Add(1)
	m.pointBytes.Add(uint64(len(m.keyBuf) + len(value)))
	return nil
}

// PointBytes is the bytes of the point entries' encoded keys and values
// (what a Flat of them holds as data).
func (m *Memtable) PointBytes() uint64 { return m.pointBytes.Load() }

// Size is the number of arena bytes in use.
func (m *Memtable) Size() uint64 { return uint64(m.arena.size()) }

// Capacity is the arena's size.
func (m *Memtable) Capacity() uint64 { return uint64(len(m.arena.buf)) }

// Memory is the memory the segment holds: its whole arena, and its filter,
// index and insert hints beside it.
func (m *Memtable) Memory() uint64 {
	return m.Capacity() + m.filter.size() + m.index.size() + m.points.hintBytes() + m.rangeDels.hintBytes()
}

// Available is the number of arena bytes left.
func (m *Memtable) Available() uint64 { return m.Capacity() - m.Size() }

// Empty reports whether nothing was added.
func (m *Memtable) Empty() bool { return m.count.Load() == 0 && m.numTombstones.Load() == 0 }

// Count is the number of point entries.
func (m *Memtable) Count() uint64 { return m.count.Load() }

// NumTombstones is the number of range tombstones added.
func (m *Memtable) NumTombstones() uint64 { return m.numTombstones.Load() }

// Get returns the newest point entry for ukey with a sequence number <= snap.
func (m *Memtable) Get(ukey []byte, snap base.SeqNum) (key base.InternalKey, value []byte, found bool) {
	h := hashKey(ukey)
	if !m.filter.mayContain(h) {
		return base.InternalKey{}, nil, false
	}
	switch nd, known := m.index.get(m.points, h, ukey); {
	case nd != 0:
		if k, _ := base.DecodeInternalKey(m.points.key(nd)); k.Seq() <= snap {
			return k, m.points.value(nd), true
		}
		// Newer than the reader may see: the list has the older ones.
	case known:
		return base.InternalKey{}, nil, false
	}
	var buf [64]byte
	seek := base.MakeInternalKey(ukey, snap, base.KindMax).Append(buf[:0])
	nd := m.points.seekGE(seek)
	if nd == 0 {
		return base.InternalKey{}, nil, false
	}
	k, _ := base.DecodeInternalKey(m.points.key(nd))
	if !bytes.Equal(k.UserKey, ukey) {
		return base.InternalKey{}, nil, false
	}
	return k, m.points.value(nd), true
}

// Tombstones returns the fragmented range tombstones (see package rangedel).
// The slice is shared and must not be modified.
func (m *Memtable) Tombstones() []base.RangeTombstone {
	n := m.numTombstones.Load()
	if n == 0 {
		return nil
	}
	m.frag.Lock()
	defer m.frag.Unlock()
	if m.frag.n >= n && m.frag.spans != nil {
		return m.frag.spans
	}
	// The writer links a tombstone, then counts it: the first n are in
	// the list, and the walk finds them. It may find later ones too, not
	// all of them (one linked behind it is missed), so the cache is
	// labelled with n, not with what the walk found: a reader that sees
	// more counted must walk again. A tombstone found but not counted yet
	// is of a batch not yet visible, which readers' snapshots leave out.
	ts := make([]base.RangeTombstone, 0, n)
	var maxSeq uint64
	for nd := m.rangeDels.next(m.rangeDels.head, 0); nd != 0; nd = m.rangeDels.next(nd, 0) {
		k, _ := base.DecodeInternalKey(m.rangeDels.key(nd))
		ts = append(ts, base.RangeTombstone{Start: k.UserKey, End: m.rangeDels.value(nd), Seq: k.Seq()})
		maxSeq = max(maxSeq, uint64(k.Seq()))
	}
	spans, ok := extendFragments(m.frag.spans, m.frag.seen, m.frag.maxSeq, ts)
	if !ok {
		spans = rangedel.Fragment(ts)
	}
	m.frag.spans, m.frag.n, m.frag.seen, m.frag.maxSeq = spans, n, uint64(len(ts)), maxSeq
	if m.frag.spans == nil {
		m.frag.spans = []base.RangeTombstone{}
	}
	return m.frag.spans
}

// extendFragments returns frags, the fragmented form of the n tombstones
// of ts with sequence numbers up to maxSeq, with the others of ts (ts is
// sorted by start key) merged in, if they are disjoint from frags and
// from each other: the common case of tombstones added one by one over
// separate spans (rm -rf deleting each file's blocks), which then cost a
// merge instead of fragmenting them all again per addition. ok is false
// when it does not apply.
func extendFragments(frags []base.RangeTombstone, n, maxSeq uint64, ts []base.RangeTombstone) (_ []base.RangeTombstone, ok bool) {
	if frags == nil {
		return nil, false
	}
	var fresh []base.RangeTombstone
	var old uint64
	for _, t := range ts {
		if uint64(t.Seq) <= maxSeq {
			old++
			continue
		}
		if bytes.Compare(t.Start, t.End) >= 0 {
			continue // empty: Fragment drops it
		}
		if len(fresh) > 0 && bytes.Compare(fresh[len(fresh)-1].End, t.Start) > 0 {
			return nil, false
		}
		if len(rangedel.Overlapping(frags, t.Start, t.End)) > 0 {
			return nil, false
		}
		fresh = append(fresh, t)
	}
	if old != n {
		return nil, false // one came in below maxSeq: not only additions
	}
	out := make([]base.RangeTombstone, 0, len(frags)+len(fresh))
	i := 0
	for _, t := range fresh {
		for i < len(frags) && bytes.Compare(frags[i].Start, t.Start) < 0 {
			out = append(out, frags[i])
			i++
		}
		out = append(out, t)
	}
	return append(out, frags[i:]...), true
}

// NewIter returns an iterator over the point entries.
func (m *Memtable) NewIter() *Iter { return &Iter{s: m.points} }

// Iter iterates over a memtable's point entries; it implements
// base.InternalIterator. It sees entries added after its creation.
type Iter struct {
	s   *skiplist
	nd  uint32
	key base.InternalKey
	buf [64]byte
}

var _ base.InternalIterator = (*Iter)(nil)

func (it *Iter) load() bool {
	if it.nd == 0 {
		return false
	}
	it.key, _ = base.DecodeInternalKey(it.s.key(it.nd))
	return true
}

// SeekGE implements base.InternalIterator.
func (it *Iter) SeekGE(key []byte) bool {
	seek := base.MakeInternalKey(key, base.MaxSeqNum, base.KindMax).Append(it.buf[:0])
	it.nd = it.s.seekGE(seek)
	return it.load()
}

// SeekLT implements base.InternalIterator.
func (it *Iter) SeekLT(key []byte) bool {
	seek := base.MakeInternalKey(key, base.MaxSeqNum, base.KindMax).Append(it.buf[:0])
	it.nd = it.s.seekLT(seek)
	return it.load()
}

// First implements base.InternalIterator.
func (it *Iter) First() bool {
	it.nd = it.s.next(it.s.head, 0)
	return it.load()
}

// Last implements base.InternalIterator.
func (it *Iter) Last() bool {
	it.nd = it.s.last()
	return it.load()
}

// Next implements base.InternalIterator.
func (it *Iter) Next() bool {
	if it.nd == 0 {
		return false
	}
	it.nd = it.s.next(it.nd, 0)
	return it.load()
}

// Prev implements base.InternalIterator. The list has no back links, so Prev
// is a search: O(log n).
func (it *Iter) Prev() bool {
	if it.nd == 0 {
		return false
	}
	it.nd = it.s.seekLT(it.s.key(it.nd))
	return it.load()
}

// Key implements base.InternalIterator.
func (it *Iter) Key() base.InternalKey { return it.key }

// Value implements base.InternalIterator.
func (it *Iter) Value() []byte { return it.s.value(it.nd) }

// Error implements base.InternalIterator.
func (it *Iter) Error() error { return nil }

// Close implements base.InternalIterator.
func (it *Iter) Close() error { it.nd = 0; return nil }
