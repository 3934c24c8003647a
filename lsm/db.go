package lsm

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lsmfs/lsmfs/blockcache"
	"github.com/lsmfs/lsmfs/journal"
	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/manifest"
	"github.com/lsmfs/lsmfs/lsm/internal/memtable"
	"github.com/lsmfs/lsmfs/lsm/internal/sstable"
	"github.com/lsmfs/lsmfs/lsm/internal/vlog"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// DB is an open engine. All methods are safe for concurrent use.
type DB struct {
	dirname string
	opts    *Options

	dirLock    io.Closer
	wal        *journal.Journal
	cache      *blockcache.Cache
	ownCache   bool
	cacheNS    uint64 // see Open: set when the cache is shared
	tableCache *tableCache
	readStats  sstable.ReaderStats
	// inTablesLSN: Open found only records the tables hold, up to it; the
	// journal is checkpointed there once Open has checked everything.
	inTablesLSN uint64

	// commit serializes sequence number assignment, journal enqueue and
	// memtable insertion, so that journal order = sequence order and each
	// memtable has one writer. Lock order: commit, then mu.
	commit struct {
		sync.Mutex
		lastSeq base.SeqNum
	}
	// visibleSeq is the highest sequence number readers may see.
	visibleSeq atomic.Uint64
	// reads counts the reads in progress (Get, iterator moves): Close
	// closes the tables, value log and cache after the last one.
	reads readGate

	mu struct {
		sync.Mutex
		// cond is broadcast when a flush or compaction ends, a background
		// error is set, or the DB closes.
		cond sync.Cond
		mem  struct {
			mutable *memTable
			queue   []*memTable // immutable, oldest first
		}
		versions   *versionSet
		snapshots  snapshotList
		flushing   bool
		compacting int
		manual     int // manual compactions running or waiting
		// flushRequested: the pipeline is due for a flush.
		flushRequested bool
		memCompacting  bool
		// dupShare is the adaptive policy's last measured duplicate share.
		dupShare float64
		// Value log: seals and discards not yet in a manifest edit, cleaner
		// state, cleaned segments waiting for old readers (by the sequence
		// number of their rewrite), and the sequence numbers open iterators
		// read at.
		pendingSeals   []manifest.VlogSegment
		pendingDiscard map[uint64]uint64
		cleaning       bool
		zombies        map[uint64]base.SeqNum
		// unreadable holds the segments the cleaner could not read (a
		// bad sector, damage): it leaves them alone until the next open.
		unreadable map[uint64]bool
		// flushVlogFloor is the first segment the running flush created
		// to move inline values to (0: none): the cleaner leaves that
		// segment and later ones alone until the flush's tables, which
		// hold the only pointers to those records, are in the tree.
		flushVlogFloor uint64
		iterSeqs       map[base.SeqNum]int
		// compactPointer[l] is where the next size-triggered compaction of
		// level l starts (round robin over the key space).
		compactPointer [numLevels][]byte
		closed         bool
		closing        bool
		// bgErr is sticky: after a failed flush or compaction write, writes
		// fail with it and reads go on (fail-stop).
		bgErr error
	}

	readState struct {
		sync.RWMutex
		val *readState
	}

	// Value log (nil writer: values stay inline).
	vlogW *vlog.Writer
	vlogR *vlog.Reader
	// vlogActive is the active segment's number.
	vlogActive atomic.Uint64
	// vlogLeftovers are files of segments the manifest says were deleted,
	// found at open (removed once Open has checked everything).
	vlogLeftovers []uint64
	// vlogTails maps segments sealed at Open short of their file's end
	// (a torn tail, or damage) to their valid size; checkVlogTails tells
	// the two apart.
	vlogTails map[uint64]int64
	// vlogGone lists segments the cleaner removed in this process, so that a
	// read racing with a removal can be retried.
	vlogGone struct {
		sync.RWMutex
		m map[uint64]bool
	}

	// space tracks free space and ENOSPC (space.go).
	space spaceState

	bg sync.WaitGroup // background goroutines
	// obsolete queues tables to remove (see deleteObsolete).
	obsolete struct {
		sync.Mutex
		files []uint64
	}
	// opened is set once Open has finished.
	opened  atomic.Bool
	metrics dbMetrics

	// testHookNewIter, set by tests only, runs in NewIter between the
	// registration of the iterator's sequence number and the loading of
	// its read state.
	testHookNewIter func()
	// testHookFlushMoved, set by tests only, runs in a flush that moved
	// values to the value log, before it seals its last segment.
	testHookFlushMoved func()
	// testHookBottomPick, set by tests only, runs in Compact's bottom pass
	// with d.mu released, before it reads a candidate table.
	testHookBottomPick func()
}

// readState is what a reader needs: the memtables (newest first) and the
// current version. Readers take a reference and drop it when done.
type readState struct {
	refs      atomic.Int32
	memtables []*memTable
	version   *version
}

func (s *readState) unref() {
	if s.refs.Add(-1) == 0 && s.version != nil {
		s.version.unref()
	}
}

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
	s.version = d.mu.versions.current
	s.version.ref()
	d.readState.Lock()
	old := d.readState.val
	d.readState.val = s
	d.readState.Unlock()
	if old != nil {
		old.unref()
	}
}

func (d *DB) newMemTable(minSize uint64) *memTable {
	size := uint64(d.opts.InMemoryFlushSize)
	if minSize+memEntryOverhead > size {
		size = minSize + 1<<20
	}
	return &memTable{skl: memtable.New(uint32(min(size, math.MaxUint32)))}
}

const memEntryOverhead = memtable.EntryOverhead

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
		if sync {
			return d.SyncJournal()
		}
		return nil
	}
	if d.opts.ReadOnly {
		return ErrReadOnly
	}
	if uint64(b.Len()) > d.maxBatchBytes() {
		return fmt.Errorf("apply batch of %d bytes: %w", b.Len(), ErrBatchTooLarge)
	}
	if err := d.admit(b); err != nil {
		return fmt.Errorf("apply batch: %w", d.refusedForSpace(err))
	}
	if err := d.journalRoom(b); err != nil {
		// The ring fills while flushes lack room.
		return fmt.Errorf("apply batch: %w", d.refusedForSpace(err))
	}
	frees := b.frees
	d.commit.Lock()
	if err := d.waitForRoomLocked(b.memSize, frees); err != nil {
		d.commit.Unlock()
		// Out of room for background work (a compaction may need more
		// than is free).
		return d.refusedForSpace(err)
	}
	userBytes := uint64(b.Len())
	if d.separates(b, sync) {
		sep, err := d.separateValues(b)
		if err != nil {
			// The batch's records in the writer's buffer refer to its
			// values, which are the caller's again once Apply returns:
			// they go, whatever the error (no pointer to them was used).
			d.vlogW.Discard()
			if isNoSpace(err) && !d.vlogW.Failed() {
				// Nothing was written: the batch fails alone.
				d.commit.Unlock()
				d.noteNoSpace(err)
				return fmt.Errorf("apply batch: %w", noSpace(err))
			}
			d.commit.Unlock()
			d.setBackgroundError(err)
			return fmt.Errorf("apply batch: %w", d.failure(err))
		}
		d.space.written.Add(uint64(b.Len()))
		b = sep
	} else if len(b.shared) > 0 {
		m, err := b.materialize()
		if err != nil {
			d.commit.Unlock()
			return fmt.Errorf("apply batch: %w", err)
		}
		b = m
	}
	c, err := d.applyLocked(b, sync, frees)
	d.commit.Unlock()
	d.metrics.userBytes.Add(userBytes)
	if err != nil {
		return err
	}
	if sync {
		if err := c.Wait(); err != nil {
			d.setBackgroundError(err)
			return fmt.Errorf("apply batch: sync journal: %w", d.failure(err))
		}
	}
	if frees {
		if d.space.full.Load() {
			d.requestReclaim()
		} else {
			// Not known to be full (say, just reopened on a full disk, or
			// compactions lacking room with more than the reserve free):
			// the first batch refused for space asks for the pass.
			d.space.freedSince.Store(true)
		}
	}
	return nil
}

// applyLocked stamps the batch with sequence numbers, enqueues it in the
// journal and inserts it into the active memtable. d.commit is held and
// room was made (waitForRoomLocked). Only a batch that frees space (a
// deletion, a value-log cleaning's moves) may take the last sixteenth of
// the journal ring: writes never fill it, so that an rm still gets in when
// the ring cannot be reclaimed (flushes failing for lack of space).
func (d *DB) applyLocked(b *Batch, sync, frees bool) (*journal.Commit, error) {
	seq := d.commit.lastSeq + 1
	b.setSeq(seq)
	c, err := d.wal.EnqueueOrStop([][]byte{b.repr}, sync, d.ringKept(frees), d.ringWaitStop)
	if errors.Is(err, ErrNoSpace) {
		// Refused while waiting for ring space that a failing flush will
		// not make: nothing was enqueued (values this batch put in the
		// value log are garbage, as after a crash).
		return nil, fmt.Errorf("apply batch: %w", d.refusedForSpace(err))
	}
	if errors.Is(err, journal.ErrRecordTooLarge) {
		// Refused before anything was enqueued: the engine goes on.
		return nil, fmt.Errorf("apply batch of %d bytes: %w: %v", len(b.repr), ErrBatchTooLarge, err)
	}
	if err != nil {
		d.setBackgroundError(err)
		return nil, fmt.Errorf("apply batch seq=%d: %w", seq, d.failure(err))
	}
	mem := d.mutableForWrite(b.memSize)
	err = applyBatchToMemtable(mem, b.repr, d.inlineThreshold())
	if err == nil {
		mem.lsn = c.LSN()
		mem.maxSeq = seq + base.SeqNum(b.count) - 1
		d.commit.lastSeq = mem.maxSeq
		d.visibleSeq.Store(d.commit.lastSeq)
	}
	mem.writers.Done()
	if err != nil {
		// The batch is in the journal but not in memory: nothing may be
		// written after it.
		d.setBackgroundError(err)
		return nil, err
	}
	return c, nil
}

// MaxBatchBytes is the largest batch Apply takes (ErrBatchTooLarge beyond).
func (d *DB) MaxBatchBytes() uint64 { return d.maxBatchBytes() }

// maxBatchBytes is the largest batch Apply takes: at most a memtable, and
// what one journal record can hold (a quarter of the ring of the journal
// opened, which on a device is not Options.Journal.Size).
func (d *DB) maxBatchBytes() uint64 {
	n := uint64(d.opts.MemtableSize)
	if j := uint64(d.wal.MaxRecordBytes()); j < n {
		n = j
	}
	return n
}

// inlineThreshold is the value size from which a value a batch keeps inline
// is counted in memTable.inlineLarge (0: no value log, nothing counted).
func (d *DB) inlineThreshold() int { return max(d.opts.ValueThreshold, 0) }

// applyBatchToMemtable inserts the batch's entries into mem, counting the
// Set values of at least inline bytes (inline > 0) in mem.inlineLarge.
func applyBatchToMemtable(mem *memTable, repr []byte, inline int) error {
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
		if inline > 0 && e.kind == base.KindSet && len(e.value) >= inline {
			mem.inlineLarge += uint64(len(e.value))
		}
		if err := mem.Add(base.MakeInternalKey(e.key, e.seq, e.kind), e.value); err != nil {
			return fmt.Errorf("apply batch seq=%d to memtable: %w", e.seq, err)
		}
	}
}

// waitForRoomLocked stalls the writer (d.commit held) while too many L0
// tables wait, or while the memtable memory is at its bound and the batch
// needs a new segment; it fails when the DB is closed or failed.
func (d *DB) waitForRoomLocked(need uint64, frees bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	stalled := false
	for {
		if d.mu.closed || d.mu.closing {
			return ErrClosed
		}
		if d.mu.bgErr != nil {
			return d.mu.bgErr
		}
		// The level-0 stall waits for a compaction; out of space none can
		// run, and a batch that deletes is what would give the space
		// back: it goes on while memory allows.
		if len(d.mu.versions.current.levels[0]) >= d.opts.L0StopWritesTrigger && !(frees && d.space.blocked) {
			d.maybeScheduleCompactionLocked()
		} else if d.mu.mem.mutable.Available() >= need {
			return nil
		} else if _, total := d.pipelineMemoryLocked(); total < uint64(d.opts.MaxMemtables)*uint64(d.opts.MemtableSize) {
			return nil // mutableForWrite rotates
		} else if !d.mu.flushing && len(d.mu.mem.queue) == 0 {
			// Over the bound with nothing to flush but the active segment
			// itself (a large batch gave it a large arena).
			if d.mu.mem.mutable.Empty() {
				d.mu.mem.mutable = d.newMemTable(need)
				d.updateReadStateLocked()
				return nil
			}
			d.rotateLocked(0)
			d.markFlushLocked()
		} else {
			d.markFlushLocked()
		}
		if d.space.blocked && !d.mu.flushing && d.mu.compacting == 0 && !d.space.retryNow {
			// The flush or compaction this writer would wait for cannot
			// find space: fail instead of stalling.
			return ErrNoSpace
		}
		if !stalled {
			stalled = true
			d.metrics.stalls.Add(1)
		}
		d.mu.cond.Wait()
	}
}

// mutableForWrite returns the mutable memtable with room for need bytes,
// rotating if needed, with a writer reference taken.
func (d *DB) mutableForWrite(need uint64) *memTable {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.mem.mutable.Available() < need {
		d.rotateLocked(need)
	}
	m := d.mu.mem.mutable
	m.writers.Add(1)
	return m
}

// rotateLocked moves the active segment into the pipeline.
func (d *DB) rotateLocked(need uint64) {
	d.mu.mem.queue = append(d.mu.mem.queue, d.mu.mem.mutable)
	d.mu.mem.mutable = d.newMemTable(need)
	d.updateReadStateLocked()
	if _, total := d.pipelineMemoryLocked(); total > d.metrics.peakMemtable.Load() {
		d.metrics.peakMemtable.Store(total)
	}
	d.segmentJoinedLocked()
}

// setBackgroundError records the first fatal write error (fail-stop: see
// space.go); it is returned wrapped in ErrFailed.
func (d *DB) setBackgroundError(err error) {
	if err == nil || errors.Is(err, ErrClosed) {
		return
	}
	d.mu.Lock()
	if d.mu.bgErr == nil {
		if !errors.Is(err, ErrFailed) {
			err = fmt.Errorf("%w: %w", ErrFailed, err)
		}
		d.mu.bgErr = err
		d.opts.Logger.Error("engine stops accepting writes", "err", err)
	}
	d.mu.cond.Broadcast()
	d.mu.Unlock()
}

// failure returns err marked as a fail-stop error (the engine's sticky
// error was set from it, or before it).
func (d *DB) failure(err error) error {
	if errors.Is(err, ErrFailed) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrFailed, err)
}

// journalRoom fails a batch with ErrNoSpace when the journal ring is nearly
// full while flushes (which would free it at the next checkpoint) fail for
// lack of space: the writer would otherwise wait for ring space forever.
// The last sixteenth of the ring is kept for batches that delete: writes
// stop before it (here, and in applyLocked for writers that got past this
// check before the flush failed), so that an rm still gets in, and the
// reclaim pass can retire the value-log segments it leaves unread (which
// needs no flush).
func (d *DB) journalRoom(b *Batch) error {
	if !d.space.blockedFlag.Load() || d.wal == nil {
		return nil
	}
	st := d.wal.Stats()
	need := st.LiveBytes + int64(b.Len()) + int64(d.opts.Journal.MaxFrameBytes) + 2*4096 + d.ringKept(b.frees)
	if need > st.Capacity {
		return ErrNoSpace
	}
	return nil
}

// ringKept is the journal ring space a batch must leave free: the last
// sixteenth, kept for batches that free space (frees).
func (d *DB) ringKept(frees bool) int64 {
	if frees {
		return 0
	}
	return d.wal.Capacity() / 16
}

// ringWaitStop ends a writer's wait for room in the journal ring when
// flushes, which free the ring at the next checkpoint, are failing for lack
// of space (journalRoom refused such writers up front; this catches those
// already waiting when the flush failed: backgroundNoSpaceLocked wakes
// them). Called with the journal's lock held.
func (d *DB) ringWaitStop() error {
	if d.space.blockedFlag.Load() {
		return ErrNoSpace
	}
	return nil
}

// Get returns a copy of the value of key, or ErrNotFound.
func (d *DB) Get(key []byte) ([]byte, error) {
	return d.get(key, true)
}

// GetNoCache is Get for a value its caller reads once, or caches itself
// (file data, which the kernel's page cache keeps): a value read from the
// value log is not put in the block cache, where it would push out what
// has no other cache (tables' blocks, metadata), and is not copied again.
func (d *DB) GetNoCache(key []byte) ([]byte, error) {
	return d.get(key, false)
}

func (d *DB) get(key []byte, fill bool) ([]byte, error) {
	if !d.reads.enter() {
		return nil, ErrClosed
	}
	defer d.reads.exit()
	v, err := d.getCurrent(key, fill)
	if errors.Is(err, errSegmentGone) {
		// The value moved while we read it: read the current version.
		v, err = d.getCurrent(key, fill)
	}
	return v, err
}

// ValueLen returns the length of key's value without reading a value that
// lives in the value log, or ErrNotFound.
func (d *DB) ValueLen(key []byte) (int, error) {
	if !d.reads.enter() {
		return 0, ErrClosed
	}
	defer d.reads.exit()
	rs := d.loadReadState()
	defer rs.unref()
	kind, raw, found, err := d.getInternal(rs, key, d.visibleSeq.Load())
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, ErrNotFound
	}
	if kind == base.KindValuePointer {
		p, err := vlog.DecodePointer(raw)
		if err != nil {
			return 0, base.Corruptf("value pointer", -1, "%v", err)
		}
		return int(p.Len), nil
	}
	return len(raw), nil
}

// getCurrent reads key at the newest visible sequence number. The read
// state is loaded before the sequence number: the read state then holds a
// prefix of the batches at or below it (a flush cannot have dropped a
// version that the sequence number still needs).
func (d *DB) getCurrent(key []byte, fill bool) ([]byte, error) {
	rs := d.loadReadState()
	defer rs.unref()
	return d.getAt(rs, key, d.visibleSeq.Load(), fill)
}

// getAt reads key at snap; fill says whether a value read from the value
// log goes to the block cache.
func (d *DB) getAt(rs *readState, key []byte, snap base.SeqNum, fill bool) ([]byte, error) {
	kind, raw, found, err := d.getInternal(rs, key, snap)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, ErrNotFound
	}
	if kind == base.KindValuePointer {
		v, err := d.readPointerFill(raw, fill)
		if err != nil || !fill {
			return v, err // without fill, v is ours
		}
		return append([]byte(nil), v...), nil
	}
	return raw, nil
}

// getInternal returns the kind and a copy of the stored value of the
// newest live entry for key at snap (a pointer entry's value is the
// pointer). found is false for a missing or deleted key.
func (d *DB) getInternal(rs *readState, key []byte, snap base.SeqNum) (kind base.Kind, raw []byte, found bool, err error) {
	if rs.version == nil {
		return 0, nil, false, ErrClosed
	}
	var maxTomb base.SeqNum
	result := func(k base.InternalKey, v []byte) (base.Kind, []byte, bool, error) {
		if k.Kind() == base.KindDelete || k.Seq() < maxTomb {
			return 0, nil, false, nil
		}
		return k.Kind(), append([]byte(nil), v...), true, nil
	}
	for _, m := range rs.memtables {
		if t := maxCovering(m.Tombstones(), key, snap); t > maxTomb {
			maxTomb = t
		}
		if k, v, ok := m.Get(key, snap); ok {
			return result(k, v)
		}
	}
	v := rs.version
	l0 := v.levels[0]
	for i := len(l0) - 1; i >= 0; i-- {
		f := l0[i]
		if !f.Overlaps(key, key) {
			continue
		}
		k, val, ok, release, err := d.getFromTable(f, key, snap, &maxTomb)
		if err != nil {
			return 0, nil, false, err
		}
		if ok {
			a, b, c, e := result(k, val)
			release()
			return a, b, c, e
		}
	}
	for l := 1; l < numLevels; l++ {
		files := v.levels[l]
		i := searchLevel(files, key)
		if i >= len(files) || !files[i].Overlaps(key, key) {
			continue
		}
		k, val, ok, release, err := d.getFromTable(files[i], key, snap, &maxTomb)
		if err != nil {
			return 0, nil, false, err
		}
		if ok {
			a, b, c, e := result(k, val)
			release()
			return a, b, c, e
		}
	}
	return 0, nil, false, nil
}

// getFromTable looks key up in one table: it raises *maxTomb by the table's
// covering tombstones and returns the newest visible point entry. When ok,
// the caller must call release after using the value.
func (d *DB) getFromTable(f *tableMeta, key []byte, snap base.SeqNum, maxTomb *base.SeqNum) (k base.InternalKey, v []byte, ok bool, release func(), err error) {
	r, rel, err := d.tableCache.get(f.FileNum)
	if err != nil {
		return k, nil, false, nil, err
	}
	if t := maxCovering(r.RangeTombstones(), key, snap); t > *maxTomb {
		*maxTomb = t
	}
	if !r.MayContain(key) {
		rel()
		return k, nil, false, nil, nil
	}
	it := r.NewIter()
	for valid := it.SeekGE(key); valid; valid = it.Next() {
		ik := it.Key()
		if !userKeyEqual(ik.UserKey, key) {
			break
		}
		if ik.Seq() <= snap {
			return ik, it.Value(), true, func() { it.Close(); rel() }, nil
		}
	}
	err = it.Error()
	it.Close()
	rel()
	if err == nil {
		r.RecordBloomUseless()
	}
	return k, nil, false, nil, err
}

// resolveValue returns the value an entry stands for (following value-log
// pointers). The result may alias v or the cache: do not modify it.
func (d *DB) resolveValue(k base.InternalKey, v []byte) ([]byte, error) {
	if k.Kind() == base.KindValuePointer {
		return d.readPointer(v)
	}
	return v, nil
}

// NewIter returns an iterator over the current state.
func (d *DB) NewIter(o *IterOptions) *Iterator {
	if !d.reads.enter() {
		return d.newIterAt(&readState{}, o, 0, false) // fails with ErrClosed
	}
	defer d.reads.exit()
	if d.vlogR == nil {
		// The read state before the sequence number (see getCurrent).
		rs := d.loadReadState()
		return d.newIterAt(rs, o, d.visibleSeq.Load(), false)
	}
	// With a value log, a sequence number reg is registered first, so the
	// cleaner keeps every segment it retires after reg. The read state,
	// loaded after, holds every batch up to reg, and the iterator reads at
	// a sequence number loaded after it: a segment retired at or before
	// reg (its pointers replaced or deleted by then) is one the iterator
	// no longer points into. Loading the read state first left a window in
	// which a rotation, a delete and a whole cleaning pass could retire
	// segments that the older read state still pointed into, and Value
	// failed with errSegmentGone.
	d.mu.Lock()
	reg := d.visibleSeq.Load()
	d.mu.iterSeqs[reg]++
	d.mu.Unlock()
	if h := d.testHookNewIter; h != nil {
		h()
	}
	rs := d.loadReadState()
	it := d.newIterAt(rs, o, d.visibleSeq.Load(), true)
	it.regSeq = reg
	return it
}

// newIterAt returns an iterator over rs (whose reference it takes over) at
// snap; registered says snap is counted in d.mu.iterSeqs.
func (d *DB) newIterAt(rs *readState, o *IterOptions, snap base.SeqNum, registered bool) *Iterator {
	if o == nil {
		o = &IterOptions{}
	}
	it := &Iterator{db: d, rs: rs, snap: snap, regSeq: snap, lower: o.LowerBound, upper: o.UpperBound, registered: registered}
	if rs.version == nil {
		it.err = ErrClosed
		it.iter = newMergingIter(nil)
		return it
	}
	var iters []base.InternalIterator
	var tombs []base.RangeTombstone
	for _, m := range rs.memtables {
		iters = append(iters, m.NewIter())
		tombs = append(tombs, overlapping(m.Tombstones(), o.LowerBound, o.UpperBound)...)
	}
	hi := o.UpperBound // inclusive bound for table selection is fine: conservative
	for _, f := range rs.version.overlaps(0, o.LowerBound, hi) {
		ti, err := d.newTableIter(f)
		if err != nil {
			iters = append(iters, errIter{err})
			continue
		}
		iters = append(iters, ti)
		tombs = append(tombs, overlapping(ti.reader().RangeTombstones(), o.LowerBound, o.UpperBound)...)
	}
	for l := 1; l < numLevels; l++ {
		files := rs.version.overlaps(l, o.LowerBound, hi)
		if len(files) == 0 {
			continue
		}
		for _, f := range files {
			r, rel, err := d.tableCache.get(f.FileNum)
			if err != nil {
				iters = append(iters, errIter{err})
				continue
			}
			tombs = append(tombs, overlapping(r.RangeTombstones(), o.LowerBound, o.UpperBound)...)
			rel()
		}
		iters = append(iters, newLevelIter(d, files))
	}
	// Tombstones alias readers that the read state keeps open through the
	// version reference... but the table cache may close an unreferenced
	// reader, so copy them.
	it.tombs = fragment(cloneTombstones(tombs))
	it.iter = newMergingIter(iters)
	return it
}

func cloneTombstones(ts []base.RangeTombstone) []base.RangeTombstone {
	if len(ts) == 0 {
		return nil
	}
	out := make([]base.RangeTombstone, len(ts))
	for i, t := range ts {
		out[i] = base.RangeTombstone{Start: append([]byte(nil), t.Start...), End: append([]byte(nil), t.End...), Seq: t.Seq}
	}
	return out
}

// SyncJournal makes every batch applied so far durable. After a failure
// (fail-stop) it returns the sticky error: what was applied may be lost.
func (d *DB) SyncJournal() error {
	d.mu.Lock()
	closed, bgErr := d.mu.closed, d.mu.bgErr
	d.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if bgErr != nil {
		return bgErr
	}
	if d.opts.ReadOnly {
		return nil
	}
	if err := d.wal.Sync(); err != nil {
		d.setBackgroundError(err)
		return fmt.Errorf("sync journal: %w", d.failure(err))
	}
	return nil
}

// UUID returns the owner UUID recorded at Format.
func (d *DB) UUID() [16]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.versions.uuid
}

func (d *DB) tablePath(n uint64) string { return vfs.Join(d.dirname, tableFileName(n)) }

// Options returns the engine's effective options (defaults filled in, the
// journal path resolved). The FS, Logger and Cache fields are shared.
func (d *DB) Options() Options {
	o := *d.opts
	d.mu.Lock()
	if o.Journal.Path == "" {
		o.Journal.Path = d.mu.versions.journalPath
	}
	if o.UUID == ([16]byte{}) {
		o.UUID = d.mu.versions.uuid
	}
	d.mu.Unlock()
	if o.Journal.Path == "" {
		o.Journal.Path = vfs.Join(d.dirname, defaultJournalName)
	}
	return o
}

// Dir returns the engine's directory.
func (d *DB) Dir() string { return d.dirname }

// DiskUsage reports the size and free space of the filesystem that holds
// the engine's directory (for statfs), and avail, the part of free that
// batches adding data may use: free less the space reserve, kept for
// deletions, and 0 while the engine is full and not yet past the free
// space at which it accepts writes again. (As ext4's f_bavail leaves out
// the blocks reserved for root: df shows what writes can take.)
func (d *DB) DiskUsage() (total, free, avail uint64, err error) {
	total, free, err = d.opts.FS.Usage(d.dirname)
	if err != nil {
		return 0, 0, 0, err
	}
	if d.space.full.Load() && !d.space.canLeaveFull(free) {
		return total, free, 0, nil
	}
	return total, free, free - min(free, d.space.reserve), nil
}

// readGate counts the reads in progress, so that Close can wait for them
// before it closes what they read (tables, value-log segments, the block
// cache: a read racing Close panicked in the cache or failed with "file
// already closed"); reads that come after fail with ErrClosed.
type readGate struct{ n atomic.Int64 }

// gateClosed is added to the count when the gate closes.
const gateClosed = 1 << 40

// enter starts a read; false once the gate is closed.
func (g *readGate) enter() bool {
	if g.n.Add(1) >= gateClosed {
		g.n.Add(-1)
		return false
	}
	return true
}

// exit ends a read started by enter.
func (g *readGate) exit() { g.n.Add(-1) }

// close refuses new reads and waits for those in progress, which are short:
// no read waits for anything Close holds.
func (g *readGate) close() {
	g.n.Add(gateClosed)
	for g.n.Load() != gateClosed {
		time.Sleep(20 * time.Microsecond)
	}
}
