package lsm

import (
	"bytes"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/sstable"
)

// tableIter is an sstable iterator that holds its reader's table cache
// reference until Close.
type tableIter struct {
	*sstable.Iterator
	release func()
	r       *sstable.Reader
}

func (t *tableIter) reader() *sstable.Reader { return t.r }

func (t *tableIter) Close() error {
	err := t.Iterator.Close()
	if t.release != nil {
		t.release()
		t.release = nil
	}
	return err
}

func (d *DB) newTableIter(f *tableMeta) (*tableIter, error) {
	r, release, err := d.tableCache.get(f.FileNum)
	if err != nil {
		return nil, err
	}
	return &tableIter{Iterator: r.NewIter(), release: release, r: r}, nil
}

// errIter is an iterator positioned nowhere that reports err.
type errIter struct{ err error }

func (e errIter) SeekGE([]byte) bool    { return false }
func (e errIter) SeekLT([]byte) bool    { return false }
func (e errIter) First() bool           { return false }
func (e errIter) Last() bool            { return false }
func (e errIter) Next() bool            { return false }
func (e errIter) Prev() bool            { return false }
func (e errIter) Key() base.InternalKey { return base.InternalKey{} }
func (e errIter) Value() []byte         { return nil }
func (e errIter) Error() error          { return e.err }
func (e errIter) Close() error          { return nil }

// levelIter concatenates the sorted, disjoint tables of one level, opening
// each table only when the iteration reaches it.
type levelIter struct {
	d     *DB
	files []*tableMeta
	idx   int
	cur   *tableIter
	err   error
}

var _ base.InternalIterator = (*levelIter)(nil)

func newLevelIter(d *DB, files []*tableMeta) *levelIter {
	return &levelIter{d: d, files: files, idx: -1}
}

// load opens table i (closing the current one); false on error or out of
// range.
func (l *levelIter) load(i int) bool {
	if l.cur != nil && l.idx == i {
		return true
	}
	if l.cur != nil {
		l.cur.Close()
		l.cur = nil
	}
	l.idx = i
	if i < 0 || i >= len(l.files) {
		return false
	}
	it, err := l.d.newTableIter(l.files[i])
	if err != nil {
		l.err = err
		return false
	}
	l.cur = it
	return true
}

func (l *levelIter) check(ok bool) bool {
	if !ok && l.cur != nil && l.cur.Error() != nil {
		l.err = l.cur.Error()
	}
	return ok && l.err == nil
}

func (l *levelIter) skipForward(ok bool) bool {
	for !ok {
		if l.err != nil || (l.cur != nil && l.cur.Error() != nil) {
			return l.check(false)
		}
		if !l.load(l.idx + 1) {
			return false
		}
		ok = l.cur.First()
	}
	return l.check(ok)
}

func (l *levelIter) skipBackward(ok bool) bool {
	for !ok {
		if l.err != nil || (l.cur != nil && l.cur.Error() != nil) {
			return l.check(false)
		}
		if !l.load(l.idx - 1) {
			return false
		}
		ok = l.cur.Last()
	}
	return l.check(ok)
}

func (l *levelIter) SeekGE(key []byte) bool {
	l.err = nil
	i := searchLevel(l.files, key)
	if !l.load(i) {
		return false
	}
	return l.skipForward(l.cur.SeekGE(key))
}

func (l *levelIter) SeekLT(key []byte) bool {
	l.err = nil
	// The last table whose smallest key is < key.
	lo, hi := 0, len(l.files)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(l.files[m].Smallest, key) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if !l.load(lo - 1) {
		return false
	}
	return l.skipBackward(l.cur.SeekLT(key))
}

func (l *levelIter) First() bool {
	l.err = nil
	if !l.load(0) {
		return false
	}
	return l.skipForward(l.cur.First())
}

func (l *levelIter) Last() bool {
	l.err = nil
	if !l.load(len(l.files) - 1) {
		return false
	}
	return l.skipBackward(l.cur.Last())
}

func (l *levelIter) Next() bool {
	if l.cur == nil || l.err != nil {
		return false
	}
	return l.skipForward(l.cur.Next())
}

func (l *levelIter) Prev() bool {
	if l.cur == nil || l.err != nil {
		return false
	}
	return l.skipBackward(l.cur.Prev())
}

func (l *levelIter) Key() base.InternalKey { return l.cur.Key() }
func (l *levelIter) Value() []byte         { return l.cur.Value() }
func (l *levelIter) Error() error          { return l.err }

func (l *levelIter) Close() error {
	if l.cur != nil {
		err := l.cur.Close()
		l.cur = nil
		return err
	}
	return nil
}
