package lsm

import (
	"bytes"
	"errors"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/rangedel"
	"github.com/lsmfs/lsmfs/lsm/internal/vlog"
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
	// raw and rawKind are the current entry's stored value and kind; a
	// pointer is resolved (read from the value log) only when Value asks.
	raw      []byte
	rawKind  base.Kind
	resolved bool
	valid    bool
	// forward is the direction of the last move; the merging iterator is
	// positioned on the entry after (forward) or before (backward) the
	// current user key's versions.
	forward bool
	err     error
	closed  bool
	// registered: regSeq (snap, or below it for DB.NewIter) is in
	// DB.mu.iterSeqs, which keeps cleaned value-log segments the iterator
	// may read.
	registered bool
	regSeq     base.SeqNum
	// stepLimit, when > 0, bounds the entries forward moves pass over
	// (live or not); past it the iterator stops with errStepLimit. steps
	// counts them. The value-log cleaner's bounded walk sets it.
	steps, stepLimit int
}

// errStepLimit stops an iterator that passed its stepLimit.
var errStepLimit = errors.New("lsm: iterator step limit")

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
		if !it.step() {
			return false
		}
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
			if !it.skipVersions() {
				return false
			}
			continue
		}
		it.key = append(it.key[:0], k.UserKey...)
		it.setRaw(k.Kind(), m.Value())
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
		it.setRaw(newest.Kind(), it.valBuf)
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
	if !it.enter() {
		return false
	}
	defer it.db.reads.exit()
	if it.lower != nil && bytes.Compare(key, it.lower) < 0 {
		key = it.lower
	}
	it.iter.SeekGE(key)
	return it.findNext()
}

// SeekLT moves to the last key < key.
func (it *Iterator) SeekLT(key []byte) bool {
	if !it.enter() {
		return false
	}
	defer it.db.reads.exit()
	if it.upper != nil && bytes.Compare(key, it.upper) > 0 {
		key = it.upper
	}
	it.iter.SeekLT(key)
	return it.findPrev()
}

// First moves to the first key.
func (it *Iterator) First() bool {
	if it.lower != nil {
		return it.SeekGE(it.lower)
	}
	if !it.enter() {
		return false
	}
	defer it.db.reads.exit()
	it.iter.First()
	return it.findNext()
}

// Last moves to the last key.
func (it *Iterator) Last() bool {
	if it.upper != nil {
		return it.SeekLT(it.upper)
	}
	if !it.enter() {
		return false
	}
	defer it.db.reads.exit()
	it.iter.Last()
	return it.findPrev()
}

// Next moves to the next key.
func (it *Iterator) Next() bool {
	if !it.valid || !it.enter() {
		return false
	}
	defer it.db.reads.exit()
	if !it.forward {
		// Step past the current key from the other side.
		it.iter.SeekGE(append(it.key, 0))
		return it.findNext()
	}
	if !it.skipVersions() {
		return false
	}
	return it.findNext()
}

// step counts one entry a forward move passes over: false, with the
// iterator failed, past its stepLimit.
func (it *Iterator) step() bool {
	if it.stepLimit > 0 {
		if it.steps++; it.steps > it.stepLimit {
			return it.fail(errStepLimit)
		}
	}
	return true
}

// skipVersions moves the merging iterator past the older versions of
// it.key, counting each as a step.
func (it *Iterator) skipVersions() bool {
	m := it.iter
	for m.Next() && userKeyEqual(m.Key().UserKey, it.key) {
		if !it.step() {
			return false
		}
	}
	return true
}

// Prev moves to the previous key.
func (it *Iterator) Prev() bool {
	if !it.valid || !it.enter() {
		return false
	}
	defer it.db.reads.exit()
	if it.forward {
		it.iter.SeekLT(it.key)
	}
	return it.findPrev()
}

// enter starts a move or a value read: false, with the iterator no longer
// on a key, if it is closed, has failed, or its DB is closed (ErrClosed).
// After true, the caller calls it.db.reads.exit.
func (it *Iterator) enter() bool {
	if it.closed || it.err != nil {
		it.valid = false
		return false
	}
	if !it.db.reads.enter() {
		it.err, it.valid = ErrClosed, false
		return false
	}
	return true
}

func (it *Iterator) setRaw(kind base.Kind, raw []byte) {
	it.rawKind, it.raw = kind, raw
	it.resolved = false
	it.value = nil
	it.valid = true
}

// Valid reports whether the iterator is on a key.
func (it *Iterator) Valid() bool { return it.valid }

// Key returns the current key; valid until the next move.
func (it *Iterator) Key() []byte { return it.key }

// Value returns the current value; valid until the next move. A value kept
// in the value log is read here, not when the iterator moves; if that read
// fails, Value returns nil and Error reports why.
func (it *Iterator) Value() []byte {
	if !it.valid {
		return nil
	}
	if !it.resolved {
		if it.rawKind == base.KindValuePointer {
			if !it.enter() {
				return nil
			}
			defer it.db.reads.exit()
		}
		it.resolved = true
		if it.rawKind == base.KindValuePointer {
			v, err := it.db.readPointer(it.raw)
			if err != nil {
				if it.err == nil {
					it.err = err
				}
				return nil
			}
			it.value = v
		} else {
			it.value = it.raw
		}
	}
	return it.value
}

// ValueLen returns the current value's length without reading a value that
// lives in the value log.
func (it *Iterator) ValueLen() int {
	if !it.valid {
		return 0
	}
	if it.rawKind == base.KindValuePointer {
		if p, err := vlog.DecodePointer(it.raw); err == nil {
			return int(p.Len)
		}
	}
	return len(it.raw)
}

// Each moves the iterator to First and then through its whole range,
// calling fn with every key and its value in order, and stops early at
// fn's first error, which it returns. key and value are valid only during
// the call. A key for which skip (if not nil) reports true is passed over
// without reading its value. Values the value log holds back to back (a
// file's blocks, as written) are read together, one read per run of up to
// vlog.MaxRun bytes, rather than one read each: the way to read a range of
// large values. Runs are scans: they bypass the block cache.
func (it *Iterator) Each(skip func(key []byte) bool, fn func(key, value []byte) error) error {
	if it.closed {
		return ErrClosed
	}
	if !it.db.reads.enter() {
		it.fail(ErrClosed)
		return ErrClosed
	}
	defer it.db.reads.exit()
	var (
		ptrs []vlog.Pointer
		keys []byte // the run's keys, back to back
		ends []int  // where each key ends in keys
	)
	key := func(i int) []byte {
		start := 0
		if i > 0 {
			start = ends[i-1]
		}
		return keys[start:ends[i]:ends[i]] // an append by fn must not reach the next key
	}
	flush := func() error {
		if len(ptrs) == 0 {
			return nil
		}
		var fnErr, err error
		bad := 0
		if len(ptrs) == 1 {
			var v []byte
			if v, err = it.db.vlogR.Read(ptrs[0]); err == nil {
				fnErr = fn(key(0), v)
			}
		} else {
			bad, err = it.db.vlogR.ReadRun(ptrs, func(i int, v []byte) error {
				fnErr = fn(key(i), v)
				return fnErr
			})
		}
		p := ptrs[bad]
		ptrs, keys, ends = ptrs[:0], keys[:0], ends[:0]
		if fnErr != nil {
			return fnErr
		}
		if err != nil {
			err = it.db.vlogReadError(p, err)
			if it.err == nil {
				it.err = err
			}
		}
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		if skip != nil && skip(it.key) {
			continue
		}
		if it.rawKind != base.KindValuePointer {
			if err := flush(); err != nil {
				return err
			}
			k, v := it.key, it.raw
			if err := fn(k[:len(k):len(k)], v[:len(v):len(v)]); err != nil {
				return err
			}
			continue
		}
		p, err := vlog.DecodePointer(it.raw)
		if err != nil {
			it.err = base.Corruptf("value pointer", -1, "%v", err)
			return it.err
		}
		if len(ptrs) > 0 && !vlog.Adjacent(ptrs[0], ptrs[len(ptrs)-1], p) {
			if err := flush(); err != nil {
				return err
			}
		}
		ptrs = append(ptrs, p)
		keys = append(keys, it.key...)
		ends = append(ends, len(keys))
	}
	if err := flush(); err != nil {
		return err
	}
	return it.err
}

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
	if it.registered {
		d := it.db
		d.mu.Lock()
		if d.mu.iterSeqs[it.regSeq]--; d.mu.iterSeqs[it.regSeq] <= 0 {
			delete(d.mu.iterSeqs, it.regSeq)
		}
		d.mu.Unlock()
	}
	if it.err != nil && !errors.Is(err, it.err) {
		err = errors.Join(it.err, err)
	}
	return err
}
