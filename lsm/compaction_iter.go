package lsm

import (
	"bytes"
	"sort"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

// compactionIter turns the merged input of a flush or compaction into what
// must be written: for each user key, the newest version in each snapshot
// stripe, minus versions a tombstone in the same stripe deletes; at the
// bottom of the tree (elide), also point tombstones and deleted data that no
// snapshot can see.
//
// Stripes: with open snapshots s0 < s1 < ... < sk-1, stripe i holds sequence
// numbers in (s(i-1), si], and stripe k those above sk-1. Every reader sees
// either all or none of two versions in one stripe, so only the newest of them
// matters.
type compactionIter struct {
	iter      *mergingIter
	snapshots []base.SeqNum // ascending
	tombs     []base.RangeTombstone
	elide     bool

	key      base.InternalKey
	value    []byte
	keyBuf   []byte
	valid    bool
	started  bool
	curUser  []byte
	lastStrp int
	err      error

	dropped uint64 // entries dropped, for metrics
	// drops counts the value-log bytes of dropped pointer entries.
	drops dropAccount
}

func newCompactionIter(iter *mergingIter, snapshots []base.SeqNum, tombs []base.RangeTombstone, elide bool) *compactionIter {
	return &compactionIter{iter: iter, snapshots: snapshots, tombs: tombs, elide: elide, drops: dropAccount{}}
}

func (c *compactionIter) stripe(seq base.SeqNum) int {
	return sort.Search(len(c.snapshots), func(i int) bool { return c.snapshots[i] >= seq })
}

// coveredInStripe reports whether a tombstone with a sequence number above seq
// and in the same stripe covers key.
func (c *compactionIter) coveredInStripe(key []byte, seq base.SeqNum, st int) bool {
	if len(c.tombs) == 0 {
		return false
	}
	// Smallest covering tombstone sequence number above seq.
	i := sort.Search(len(c.tombs), func(i int) bool { return bytes.Compare(c.tombs[i].End, key) > 0 })
	var best base.SeqNum
	for ; i < len(c.tombs) && bytes.Compare(c.tombs[i].Start, key) <= 0; i++ {
		if s := c.tombs[i].Seq; s > seq && (best == 0 || s < best) {
			best = s
		}
	}
	return best != 0 && c.stripe(best) == st
}

// next moves to the next entry to write.
func (c *compactionIter) next() bool {
	m := c.iter
	if !c.started {
		c.started = true
		m.First()
	} else if c.valid {
		m.Next()
	}
	for m.Valid() {
		k := m.Key()
		if !bytes.Equal(k.UserKey, c.curUser) {
			c.curUser = append(c.curUser[:0], k.UserKey...)
			c.lastStrp = -1
		}
		st := c.stripe(k.Seq())
		if st == c.lastStrp {
			c.drop(k, m.Value())
			m.Next()
			continue
		}
		c.lastStrp = st
		if c.coveredInStripe(k.UserKey, k.Seq(), st) {
			c.drop(k, m.Value())
			m.Next()
			continue
		}
		if c.elide && st == 0 && k.Kind() == base.KindDelete {
			c.drop(k, nil)
			m.Next()
			continue
		}
		c.keyBuf = k.Append(c.keyBuf[:0])
		c.key, _ = base.DecodeInternalKey(c.keyBuf)
		c.value = m.Value()
		c.valid = true
		return true
	}
	c.err = m.Error()
	c.valid = false
	return false
}

func (c *compactionIter) drop(k base.InternalKey, v []byte) {
	c.dropped++
	c.drops.note(k, v)
}

// outputTombstones returns the fragmented tombstones to write: in each
// fragment, the newest sequence number per stripe; at the bottom, none from
// stripe 0.
func (c *compactionIter) outputTombstones() []base.RangeTombstone {
	var out []base.RangeTombstone
	for i := 0; i < len(c.tombs); {
		j := i
		lastStrp := -1
		for ; j < len(c.tombs) && bytes.Equal(c.tombs[j].Start, c.tombs[i].Start) && bytes.Equal(c.tombs[j].End, c.tombs[i].End); j++ {
			t := c.tombs[j]
			st := c.stripe(t.Seq)
			if st == lastStrp {
				continue
			}
			lastStrp = st
			if c.elide && st == 0 {
				continue
			}
			out = append(out, t)
		}
		i = j
	}
	return out
}
