package lsm

import (
	"fmt"
	"sync"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/memtable"
)

// MemtablePolicy is the in-memory compaction policy: what happens to a
// memtable segment when it stops being the active one and joins the
// pipeline of immutable segments that wait to be flushed.
type MemtablePolicy string

const (
	// PolicyNone leaves segments untouched until they are flushed.
	PolicyNone MemtablePolicy = "none"
	// PolicyBasic flattens each immutable segment's skiplist into a sorted
	// array: less memory per entry, faster searches. Segments are merged only
	// when flushed.
	PolicyBasic MemtablePolicy = "basic"
	// PolicyEager merges the pipeline's segments in memory, dropping versions
	// no live snapshot can see and keys deleted by range tombstones, so that
	// update-heavy work flushes (and compacts) less.
	PolicyEager MemtablePolicy = "eager"
	// PolicyAdaptive flattens like basic and merges like eager while the
	// measured share of duplicate keys is at least AdaptiveThreshold.
	PolicyAdaptive MemtablePolicy = "adaptive"
)

// memTable is one memtable segment plus what the engine tracks about it. A
// segment is a skiplist (the active segment, and immutable ones not yet
// flattened) or a Flat (flattened or merged). Immutable once it has left the
// active position; in-memory compaction replaces segments, never edits them.
type memTable struct {
	skl  *memtable.Memtable
	flat *memtable.Flat
	// lsn is the journal LSN of the last batch applied; maxSeq its last
	// sequence number. Written by the one writer; read by the flush after
	// writers.Wait().
	lsn    uint64
	maxSeq base.SeqNum
	// inlineLarge counts the bytes of values of at least ValueThreshold
	// that batches kept inline (synchronous ones, see syncInlineMax): what
	// a flush would move to the value log. Same access rules as lsn.
	inlineLarge uint64
	// writers counts inserts in flight; taken under DB.mu while the segment
	// is active.
	writers sync.WaitGroup
	// Guarded by DB.mu.
	flushing   bool // taken by a flush
	compacting bool // input of an in-memory compaction
}

func (m *memTable) Get(ukey []byte, snap base.SeqNum) (base.InternalKey, []byte, bool) {
	if m.flat != nil {
		return m.flat.Get(ukey, snap)
	}
	return m.skl.Get(ukey, snap)
}

func (m *memTable) NewIter() base.InternalIterator {
	if m.flat != nil {
		return m.flat.NewIter()
	}
	return m.skl.NewIter()
}

func (m *memTable) Tombstones() []base.RangeTombstone {
	if m.flat != nil {
		return m.flat.Tombstones()
	}
	return m.skl.Tombstones()
}

// Empty reports whether the segment holds no entry.
func (m *memTable) Empty() bool {
	if m.flat != nil {
		return m.flat.Empty()
	}
	return m.skl.Empty()
}

// Memory is the memory the segment holds (a skiplist's whole arena, and
// its filter and index).
func (m *memTable) Memory() uint64 {
	if m.flat != nil {
		return m.flat.Size()
	}
	return m.skl.Memory()
}

// Entries is the number of point entries in the segment.
func (m *memTable) Entries() uint64 {
	if m.flat != nil {
		return uint64(m.flat.Len())
	}
	return m.skl.Count()
}

// PointBytes is the bytes of the point entries' encoded keys and values.
func (m *memTable) PointBytes() uint64 {
	if m.flat != nil {
		return m.flat.PointBytes()
	}
	return m.skl.PointBytes()
}

// Used is the bytes of data in the segment.
func (m *memTable) Used() uint64 {
	if m.flat != nil {
		return m.flat.Size()
	}
	return m.skl.Size()
}

// Available is the room left in an active (skiplist) segment.
func (m *memTable) Available() uint64 {
	if m.skl == nil {
		return 0
	}
	return m.skl.Available()
}

func (m *memTable) Add(k base.InternalKey, v []byte) error { return m.skl.Add(k, v) }

func (m *memTable) kind() string {
	if m.flat != nil {
		return "flat"
	}
	return "skiplist"
}

// pipelineMemoryLocked is the memory of segments not being flushed, plus the
// active one.
func (d *DB) pipelineMemoryLocked() (pipeline, total uint64) {
	total = d.mu.mem.mutable.Memory()
	pipeline = total
	for _, m := range d.mu.mem.queue {
		total += m.Memory()
		if !m.flushing {
			pipeline += m.Memory()
		}
	}
	return pipeline, total
}

// segmentJoinedLocked runs when the active segment joined the pipeline:
// start in-memory compaction and, once the pipeline holds MemtableSize
// bytes, a flush.
func (d *DB) segmentJoinedLocked() {
	d.maybeScheduleMemCompactionLocked()
	if pipeline, _ := d.pipelineMemoryLocked(); pipeline >= uint64(d.opts.MemtableSize) {
		d.markFlushLocked()
	}
}

// markFlushLocked marks every segment of the pipeline for the next flush.
func (d *DB) markFlushLocked() {
	d.mu.flushRequested = true
	d.maybeScheduleFlushLocked()
}

func (d *DB) maybeScheduleMemCompactionLocked() {
	if d.opts.MemtablePolicy == PolicyNone || d.mu.memCompacting || d.mu.closed || d.mu.bgErr != nil || d.opts.ReadOnly {
		return
	}
	if d.pickMemCompactionLocked() == nil {
		return
	}
	d.mu.memCompacting = true
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		for {
			d.mu.Lock()
			job := d.pickMemCompactionLocked()
			if job == nil || d.mu.closed {
				d.mu.memCompacting = false
				d.mu.cond.Broadcast()
				d.mu.Unlock()
				return
			}
			for _, m := range job.inputs {
				m.compacting = true
			}
			d.mu.Unlock()
			d.runMemCompaction(job)
		}
	}()
}

// memCompaction replaces a run of adjacent pipeline segments with one Flat.
type memCompaction struct {
	inputs []*memTable
	merge  bool // eager: merge and drop; else flatten one segment
}

// pickMemCompactionLocked finds work: the oldest skiplist segment of the
// pipeline to flatten (or, when eager, merge with the segments before it).
func (d *DB) pickMemCompactionLocked() *memCompaction {
	q := d.mu.mem.queue
	start := len(q)
	for start > 0 && !q[start-1].flushing && !q[start-1].compacting {
		start--
	}
	run := q[start:]
	for i, m := range run {
		if m.skl == nil {
			continue
		}
		switch d.opts.MemtablePolicy {
		case PolicyEager:
			return &memCompaction{inputs: run[:i+1], merge: i > 0}
		default: // basic, adaptive: flatten first; adaptive may merge after
			return &memCompaction{inputs: run[i : i+1]}
		}
	}
	if d.opts.MemtablePolicy == PolicyAdaptive && len(run) >= 2 && d.mu.dupShare >= d.opts.AdaptiveThreshold {
		return &memCompaction{inputs: run, merge: true}
	}
	return nil
}

// runMemCompaction builds the replacement segment and installs it if no
// flush took the inputs meanwhile.
func (d *DB) runMemCompaction(job *memCompaction) {
	var lsn, inlineLarge uint64
	var maxSeq base.SeqNum
	for _, m := range job.inputs {
		m.writers.Wait()
		lsn, maxSeq = max(lsn, m.lsn), max(maxSeq, m.maxSeq)
		inlineLarge += m.inlineLarge // an upper bound once merged
	}
	// Read after the inserts ended (see flushQueued).
	d.mu.Lock()
	snapshots := d.mu.snapshots.seqs()
	d.mu.Unlock()
	var b memtable.FlatBuilder
	var tombs []base.RangeTombstone
	var iters []base.InternalIterator
	var data, entries uint64
	for _, m := range job.inputs {
		iters = append(iters, m.NewIter())
		tombs = append(tombs, m.Tombstones()...)
		data += m.PointBytes()
		entries += m.Entries()
	}
	b.Grow(int(data), int(entries))
	miter := newMergingIter(iters)
	var dropped uint64
	var drops dropAccount
	var outTombs []base.RangeTombstone
	if job.merge {
		c := newCompactionIter(miter, snapshots, fragment(tombs), false)
		for c.next() {
			b.Add(c.key, c.value)
		}
		dropped = c.dropped
		drops = c.drops
		outTombs = c.outputTombstones()
	} else {
		for ok := miter.First(); ok; ok = miter.Next() {
			b.Add(miter.Key(), miter.Value())
		}
		outTombs = tombs
	}
	miter.Close()
	out := &memTable{flat: b.Finish(outTombs), lsn: lsn, maxSeq: maxSeq, inlineLarge: inlineLarge}

	// Adaptive: measure the duplicate share of a newly flattened segment
	// against itself and the older pipeline segments.
	var share float64
	measured := false
	if !job.merge && d.opts.MemtablePolicy == PolicyAdaptive && out.flat.Len() > 0 {
		share = d.duplicateShare(out.flat, job.inputs[0])
		measured = true
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range job.inputs {
		m.compacting = false
	}
	// Install only if the inputs are still a run of the pipeline.
	idx := -1
	for i, m := range d.mu.mem.queue {
		if m == job.inputs[0] {
			idx = i
			break
		}
	}
	ok := idx >= 0 && idx+len(job.inputs) <= len(d.mu.mem.queue)
	for i := 0; ok && i < len(job.inputs); i++ {
		m := d.mu.mem.queue[idx+i]
		ok = m == job.inputs[i] && !m.flushing
	}
	if !ok {
		return
	}
	q := append([]*memTable(nil), d.mu.mem.queue[:idx]...)
	q = append(q, out)
	q = append(q, d.mu.mem.queue[idx+len(job.inputs):]...)
	d.mu.mem.queue = q
	if measured {
		d.mu.dupShare = share
	}
	d.updateReadStateLocked()
	d.metrics.memCompactions.Add(1)
	if job.merge {
		d.metrics.memMerges.Add(1)
		d.metrics.memDropped.Add(dropped)
		for seg, n := range drops {
			d.mu.pendingDiscard[seg] += n
		}
	}
	d.mu.cond.Broadcast()
}

// duplicateShare estimates the share of f's entries that are versions of a
// key seen before: within f, or in an older segment of the pipeline.
func (d *DB) duplicateShare(f *memtable.Flat, self *memTable) float64 {
	d.mu.Lock()
	var older []*memTable
	for _, m := range d.mu.mem.queue {
		if m == self {
			break
		}
		if !m.flushing {
			older = append(older, m)
		}
	}
	d.mu.Unlock()
	n := f.Len()
	dups := float64(f.DuplicateKeys())
	if len(older) > 0 {
		sample := f.SampleUserKeys(256)
		hits := 0
		for _, k := range sample {
			for _, m := range older {
				if _, _, ok := m.Get(k, base.MaxSeqNum); ok {
					hits++
					break
				}
			}
		}
		dups += float64(hits) / float64(len(sample)) * float64(n)
	}
	share := dups / float64(n)
	if share > 1 {
		share = 1
	}
	return share
}

func (p MemtablePolicy) valid() error {
	switch p {
	case PolicyNone, PolicyBasic, PolicyEager, PolicyAdaptive:
		return nil
	}
	return fmt.Errorf("lsm: unknown memtable policy %q (want none, basic, eager or adaptive)", string(p))
}
