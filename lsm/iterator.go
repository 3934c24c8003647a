package lsm

import (
	"bytes"
	"errors"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/rangedel"
)

// IterOptions bound an iterator. Nil bounds are open.
type IterOptions struct {
	// LowerBound is inclusive.
	LowerBound []byte
	// UpperBound is exclusive.
	UpperBound []byte
}

// Iterator walks the live keys of a DB or snapshot in order. It sees a
// consistent view: the state at its creation. Key and Value are valid until the
// next positioning call. An Iterator is not safe for concurrent use; Close it
// to release the files it pins.
type Iterator struct {
	db     *DB
	rs     *readState
	iter   *mergingIter
	snap   base.SeqNum
	lower  []byte
	upper  []byte
	tombs  []base.RangeTombstone // fragmented, overlapping the bounds
	key    []byte
	value  []byte
	valBuf []byte
	valid  bool
	// forward is the direction of the last move; the merging iterator is
	// positioned on the entry after (forward) or before (backward) the
	// current user key's versions.
	forward bool
	err     error
	closed  bool
}

func (it *Iterator) deleted(k base.InternalKey) bool {
	if k.Kind() == base.KindDelete {
		return true
	}
	return len(it.tombs) > 0 && rangedel.MaxCovering(it.tombs, k.UserKey, it.snap) > k.Seq()
}

func (it *Iterator) fail(err error) bool {
	if it.err == nil {
		it.err = err
	}
	it.valid = false
	return false
}

// findNext positions on the first live user key at or after the merging
// iterator's position.
func (it *Iterator) findNext() bool {
	m := it.iter
	it.forward = true
	for m.Valid() {
		k := m.Key()
		if it.upper != nil && bytes.Compare(k.UserKey, it.upper) >= 0 {
			break
		}
		if k.Seq() > it.snap {
			m.Next()
			continue
		}
		if it.deleted(k) {
			it.key = append(it.key[:0], k.UserKey...)
			for m.Next() && userKeyEqual(m.Key().UserKey, it.key) {
			}
			continue
		}
		it.key = append(it.key[:0], k.UserKey...)
		v, err := it.db.resolveValue(k, m.Value())
		if err != nil {
			return it.fail(err)
		}
		it.value = v
		it.valid = true
		return true
	}
	if err := m.Error(); err != nil {
		return it.fail(err)
	}
	it.valid = false
	return false
}

// findPrev positions on the last live user key at or before the merging
// iterator's position (which is on the oldest version of some user key).
func (it *Iterator) findPrev() bool {
	m := it.iter
	it.forward = false
	for m.Valid() {
		k := m.Key()
		if it.lower != nil && bytes.Compare(k.UserKey, it.lower) < 0 {
			break
		}
		it.key = append(it.key[:0], k.UserKey...)
		// Versions of this key come oldest first; the last visible one seen is
		// the newest visible.
		var have bool
		var newest base.InternalKey
		for {
			k = m.Key()
			if k.Seq() <= it.snap {
				have = true
				newest = base.InternalKey{UserKey: it.key, Trailer: k.Trailer}
				it.valBuf = append(it.valBuf[:0], m.Value()...)
			}
			if !m.Prev() || !userKeyEqual(m.Key().UserKey, it.key) {
				break
			}
		}
		if err := m.Error(); err != nil {
			return it.fail(err)
		}
		if !have || it.deleted(newest) {
			continue
		}
		v, err := it.db.resolveValue(newest, it.valBuf)
		if err != nil {
			return it.fail(err)
		}
		it.value = v
		it.valid = true
		return true
	}
	if err := m.Error(); err != nil {
		return it.fail(err)
	}
	it.valid = false
	return false
}

// SeekGE moves to the first key >= key.
func (it *Iterator) SeekGE(key []byte) bool {
	if it.closed || it.err != nil {
		return false
	}
	if it.lower != nil && bytes.Compare(key, it.lower) < 0 {
		key = it.lower
	}
	it.iter.SeekGE(key)
	return it.findNext()
}

// SeekLT moves to the last key < key.
func (it *Iterator) SeekLT(key []byte) bool {
	if it.closed || it.err != nil {
		return false
	}
	if it.upper != nil && bytes.Compare(key, it.upper) > 0 {
		key = it.upper
	}
	it.iter.SeekLT(key)
	return it.findPrev()
}

// First moves to the first key.
func (it *Iterator) First() bool {
	if it.closed || it.err != nil {
		return false
	}
	if it.lower != nil {
		return it.SeekGE(it.lower)
	}
	it.iter.First()
	return it.findNext()
}

// Last moves to the last key.
func (it *Iterator) Last() bool {
	if it.closed || it.err != nil {
		return false
	}
	if it.upper != nil {
		return it.SeekLT(it.upper)
	}
	it.iter.Last()
	return it.findPrev()
}

// Next moves to the next key.
func (it *Iterator) Next() bool {
	if !it.valid {
		return false
	}
	if !it.forward {
		// Step past the current key from the other side.
		it.iter.SeekGE(append(it.key, 0))
		return it.findNext()
	}
	m := it.iter
	for m.Next() && userKeyEqual(m.Key().UserKey, it.key) {
	}
	return it.findNext()
}

// Prev moves to the previous key.
func (it *Iterator) Prev() bool {
	if !it.valid {
		return false
	}
	if it.forward {
		it.iter.SeekLT(it.key)
	}
	return it.findPrev()
}

// Valid reports whether the iterator is on a key.
func (it *Iterator) Valid() bool { return it.valid }

// Key returns the current key; valid until the next move.
func (it *Iterator) Key() []byte { return it.key }

// Value returns the current value; valid until the next move.
func (it *Iterator) Value() []byte { return it.value }

// Error returns the first error met, if any.
func (it *Iterator) Error() error { return it.err }

// Close releases the iterator's resources.
func (it *Iterator) Close() error {
	if it.closed {
		return ErrClosed
	}
	it.closed = true
	it.valid = false
	err := it.iter.Close()
	it.rs.unref()
	if it.err != nil && !errors.Is(err, it.err) {
		err = errors.Join(it.err, err)
	}
	return err
}
