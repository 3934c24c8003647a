package lsm

import (
	"bytes"
	"errors"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

// mergingIter merges internal iterators into one stream in CompareInternal
// order (forward) or its reverse. It has one direction at a time: First,
// SeekGE and Next move forward; Last, SeekLT and Prev move backward. Switching
// direction is done by the caller with a seek, which the user-level Iterator
// always does, since it moves one user key at a time.
type mergingIter struct {
	iters []base.InternalIterator
	heap  []int // indexes into iters of positioned children
	// reverse is true when the heap is a max-heap (backward iteration).
	reverse bool
	err     error
}

func newMergingIter(iters []base.InternalIterator) *mergingIter {
	return &mergingIter{iters: iters, heap: make([]int, 0, len(iters))}
}

func (m *mergingIter) less(i, j int) bool {
	c := base.CompareInternal(m.iters[m.heap[i]].Key(), m.iters[m.heap[j]].Key())
	if m.reverse {
		return c > 0
	}
	return c < 0
}

func (m *mergingIter) swap(i, j int) { m.heap[i], m.heap[j] = m.heap[j], m.heap[i] }

func (m *mergingIter) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !m.less(j, i) {
			break
		}
		m.swap(i, j)
		j = i
	}
}

func (m *mergingIter) down(i int) {
	n := len(m.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && m.less(r, l) {
			j = r
		}
		if !m.less(j, i) {
			return
		}
		m.swap(i, j)
		i = j
	}
}

// build collects the positioned children after a seek.
func (m *mergingIter) build(positioned func(it base.InternalIterator) bool) bool {
	m.heap = m.heap[:0]
	m.err = nil
	for i, it := range m.iters {
		if positioned(it) {
			m.heap = append(m.heap, i)
		} else if err := it.Error(); err != nil {
			m.err = errors.Join(m.err, err)
		}
	}
	if m.err != nil {
		m.heap = m.heap[:0]
		return false
	}
	for i := len(m.heap)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
	return len(m.heap) > 0
}

func (m *mergingIter) SeekGE(key []byte) bool {
	m.reverse = false
	return m.build(func(it base.InternalIterator) bool { return it.SeekGE(key) })
}

func (m *mergingIter) SeekLT(key []byte) bool {
	m.reverse = true
	return m.build(func(it base.InternalIterator) bool { return it.SeekLT(key) })
}

func (m *mergingIter) First() bool {
	m.reverse = false
	return m.build(func(it base.InternalIterator) bool { return it.First() })
}

func (m *mergingIter) Last() bool {
	m.reverse = true
	return m.build(func(it base.InternalIterator) bool { return it.Last() })
}

func (m *mergingIter) step(forward bool) bool {
	if len(m.heap) == 0 {
		return false
	}
	if forward == m.reverse {
		// The caller must seek to change direction.
		m.err = errors.New("lsm: merging iterator moved against its direction")
		m.heap = m.heap[:0]
		return false
	}
	it := m.iters[m.heap[0]]
	var ok bool
	if forward {
		ok = it.Next()
	} else {
		ok = it.Prev()
	}
	if ok {
		m.down(0)
		return true
	}
	if err := it.Error(); err != nil {
		m.err = err
		m.heap = m.heap[:0]
		return false
	}
	last := len(m.heap) - 1
	m.swap(0, last)
	m.heap = m.heap[:last]
	if len(m.heap) > 0 {
		m.down(0)
	}
	return len(m.heap) > 0
}

func (m *mergingIter) Next() bool { return m.step(true) }
func (m *mergingIter) Prev() bool { return m.step(false) }

func (m *mergingIter) Valid() bool { return len(m.heap) > 0 }

func (m *mergingIter) Key() base.InternalKey { return m.iters[m.heap[0]].Key() }

func (m *mergingIter) Value() []byte { return m.iters[m.heap[0]].Value() }

func (m *mergingIter) Error() error { return m.err }

func (m *mergingIter) Close() error {
	var err error
	for _, it := range m.iters {
		err = errors.Join(err, it.Close())
	}
	m.heap = m.heap[:0]
	return err
}

// userKeyEqual is bytes.Equal, named for readability at call sites.
func userKeyEqual(a, b []byte) bool { return bytes.Equal(a, b) }
