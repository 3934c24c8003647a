package lsm

import (
	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

// Snapshot is a consistent, read-only view of the DB at the moment it was
// taken. Versions it can see are kept by compactions until it is closed.
type Snapshot struct {
	db         *DB
	seq        base.SeqNum
	prev, next *Snapshot
	closed     bool
}

// snapshotList is a doubly linked list of open snapshots, oldest first.
type snapshotList struct {
	root Snapshot
}

func (l *snapshotList) init() {
	l.root.next = &l.root
	l.root.prev = &l.root
}

func (l *snapshotList) pushBack(s *Snapshot) {
	s.prev = l.root.prev
	s.next = &l.root
	s.prev.next = s
	s.next.prev = s
}

func (l *snapshotList) remove(s *Snapshot) {
	s.prev.next = s.next
	s.next.prev = s.prev
	s.prev, s.next = nil, nil
}

// seqs returns the sequence numbers of open snapshots, ascending.
func (l *snapshotList) seqs() []base.SeqNum {
	var out []base.SeqNum
	for s := l.root.next; s != &l.root; s = s.next {
		out = append(out, s.seq)
	}
	return out
}

// NewSnapshot returns a snapshot of the current state.
func (d *DB) NewSnapshot() *Snapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := &Snapshot{db: d, seq: d.visibleSeq.Load()}
	d.mu.snapshots.pushBack(s)
	return s
}

// Get returns a copy of key's value as of the snapshot, or ErrNotFound.
func (s *Snapshot) Get(key []byte) ([]byte, error) {
	if s.closed {
		return nil, ErrClosed
	}
	if !s.db.reads.enter() {
		return nil, ErrClosed
	}
	defer s.db.reads.exit()
	rs := s.db.loadReadState()
	defer rs.unref()
	return s.db.getAt(rs, key, s.seq, true)
}

// NewIter returns an iterator over the snapshot.
func (s *Snapshot) NewIter(o *IterOptions) *Iterator {
	// Registered on its own: the iterator may outlive the snapshot, and the
	// value-log cleaner must keep what it reads.
	d := s.db
	if !d.reads.enter() {
		return d.newIterAt(&readState{}, o, 0, false) // fails with ErrClosed
	}
	defer d.reads.exit()
	rs := d.loadReadState()
	registered := false
	if d.vlogR != nil {
		d.mu.Lock()
		d.mu.iterSeqs[s.seq]++
		d.mu.Unlock()
		registered = true
	}
	it := d.newIterAt(rs, o, s.seq, registered)
	if s.closed && it.err == nil {
		it.err = ErrClosed
	}
	return it
}

// Close releases the snapshot.
func (s *Snapshot) Close() error {
	d := s.db
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	d.mu.snapshots.remove(s)
	return nil
}
