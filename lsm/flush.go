package lsm

import (
	"fmt"
	"math"
	"slices"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/manifest"
)

// maybeScheduleFlushLocked starts the flush goroutine when immutable
// memtables wait and none runs. d.mu is held.
func (d *DB) maybeScheduleFlushLocked() {
	if d.mu.flushing || !d.mu.flushRequested || len(d.mu.mem.queue) == 0 || d.mu.closed || d.mu.bgErr != nil || d.opts.ReadOnly ||
		!d.backgroundMayWriteLocked() {
		return
	}
	d.backgroundStartedLocked()
	d.mu.flushing = true
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		for {
			err := d.flushQueued()
			d.mu.Lock()
			if err != nil {
				d.mu.flushing = false
				if isRetryable(err) {
					d.backgroundNoSpaceLocked(fmt.Errorf("flush: %w", err))
					d.mu.Unlock()
					return
				}
				d.mu.Unlock()
				d.setBackgroundError(fmt.Errorf("flush: %w", err))
				return
			}
			d.backgroundSucceededLocked()
			if !d.mu.flushRequested || len(d.mu.mem.queue) == 0 || d.mu.closed {
				d.mu.flushing = false
				d.mu.cond.Broadcast()
				d.mu.Unlock()
				return
			}
			d.mu.Unlock()
		}
	}()
}

// flushQueued writes the pipeline (every immutable segment) as one sorted
// run into L0, records it in the manifest, drops the segments and
// checkpoints the journal.
func (d *DB) flushQueued() error {
	d.mu.Lock()
	mems := append([]*memTable(nil), d.mu.mem.queue...)
	for _, m := range mems {
		m.flushing = true
	}
	d.mu.flushRequested = false
	d.mu.Unlock()
	if len(mems) == 0 {
		return nil
	}
	// The snapshot list is read after every insert into the inputs ended:
	// visibleSeq then covers the inputs, so a snapshot taken later sees all
	// of them (top stripe) and one taken earlier is in the list.
	var lsn, inlineLarge uint64
	var maxSeq base.SeqNum
	for _, m := range mems {
		m.writers.Wait()
		lsn, maxSeq = max(lsn, m.lsn), max(maxSeq, m.maxSeq)
		inlineLarge += m.inlineLarge
	}
	d.mu.Lock()
	snapshots := d.mu.snapshots.seqs()
	d.mu.Unlock()
	var iters []mergeInput
	var tombs []base.RangeTombstone
	for _, m := range mems {
		iters = append(iters, m.NewIter())
		tombs = append(tombs, m.Tombstones()...)
	}
	miter := newMergingIter(iters)
	c := newCompactionIter(miter, snapshots, fragment(tombs), false)
	// Values kept inline move to the value log when there are enough of
	// them to make a segment worth its file (Options.FlushMoveMin).
	move := d.opts.FlushMoveMin >= 0 && inlineLarge >= uint64(d.opts.FlushMoveMin)
	outputs, written, err := d.writeTables(c, math.MaxUint64, move)
	miter.Close()
	if err != nil {
		return retryable(err) // writeTables left nothing behind (its segments included)
	}
	d.space.written.Add(written)
	if d.vlogW != nil {
		// The tables point into the value log: its bytes must be durable
		// before the manifest makes the tables part of the tree.
		if err := d.vlogW.SyncWritten(); err != nil {
			d.clearFlushVlogFloor()
			return err
		}
	}
	e := &manifest.Edit{LastSeq: maxSeq, JournalLSN: lsn}
	for _, f := range outputs {
		e.Added = append(e.Added, manifest.NewFile{Level: 0, Meta: f})
	}
	d.mu.Lock()
	d.addVlogEditLocked(e, c.drops)
	err = d.mu.versions.logAndApply(e)
	// Applied, the tables hold the pointers to what the flush moved; failed,
	// the records are garbage (the engine fails, or retries the flush).
	d.mu.flushVlogFloor = 0
	if err != nil {
		d.mu.Unlock()
		return err
	}
	d.mu.mem.queue = d.mu.mem.queue[len(mems):]
	d.updateReadStateLocked()
	d.maybeScheduleCompactionLocked()
	d.maybeScheduleCleanLocked()
	d.mu.cond.Broadcast()
	d.mu.Unlock()
	d.metrics.flushes.Add(1)
	d.metrics.flushBytes.Add(written)
	if lsn > 0 {
		if err := d.wal.Checkpoint(lsn); err != nil {
			return fmt.Errorf("checkpoint journal at lsn %d: %w", lsn, err)
		}
	}
	d.relieveJournalPressure()
	d.purgeObsolete()
	return nil
}

// relieveJournalPressure rotates the mutable memtable when the journal is
// more than half full, so that the next flush can free ring space.
func (d *DB) relieveJournalPressure() {
	st := d.wal.Stats()
	if st.Capacity == 0 || st.LiveBytes*2 < st.Capacity {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed || d.mu.bgErr != nil {
		return
	}
	// Even while a flush runs: it picks up the request when it ends (a
	// pressure signal must never be dropped, or a writer waiting for ring
	// space with the commit lock held waits forever).
	if !d.mu.mem.mutable.Empty() {
		d.rotateLocked(0)
	}
	d.markFlushLocked()
}

// Flush writes every memtable to disk and waits for it.
func (d *DB) Flush() error {
	if d.opts.ReadOnly {
		return ErrReadOnly
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed {
		return ErrClosed
	}
	if !d.mu.mem.mutable.Empty() {
		d.rotateLocked(0)
	}
	tried := false
	for len(d.mu.mem.queue) > 0 && d.mu.bgErr == nil && !d.mu.closed {
		if !d.allowOneAttemptLocked(&tried) {
			return ErrNoSpace
		}
		d.markFlushLocked()
		d.mu.cond.Wait()
	}
	if d.mu.closed {
		return ErrClosed
	}
	return d.mu.bgErr
}

// mergeInput is an input of a merging iterator.
type mergeInput = base.InternalIterator

// defaultFlushMoveMin is the least a flush moves to the value log (counted
// before dropping superseded versions; Options.FlushMoveMin): each move
// creates segments of the flush's own, and a segment per flush of a few
// small synchronous files would leave a trail of small files the cleaner
// does not merge while their values live. Below it, the values stay in the
// tables, at most this much per flush.
const defaultFlushMoveMin = 1 << 20

// clearFlushVlogFloor lets the cleaner at every segment again after a
// flush failed.
func (d *DB) clearFlushVlogFloor() {
	d.mu.Lock()
	d.clearFlushVlogFloorLocked()
	d.mu.Unlock()
}

// clearFlushVlogFloorLocked is clearFlushVlogFloor with d.mu held.
func (d *DB) clearFlushVlogFloorLocked() {
	d.mu.flushVlogFloor = 0
	d.maybeScheduleCleanLocked()
}

// dropFlushSegments removes the segments of a flush that failed (no
// pointer to their records exists): a seal no edit recorded yet is taken
// back and the file removed; a segment an edit already recorded (another
// one took the pending seals) goes the cleaner's way, as a zombie no
// reader needs. A file it cannot remove is adopted at the next open, with
// nothing pointing into it.
func (d *DB) dropFlushSegments(segs []uint64) {
	if len(segs) == 0 {
		return
	}
	d.mu.Lock()
	var remove []uint64
	for _, seg := range segs {
		if i := slices.IndexFunc(d.mu.pendingSeals, func(s manifest.VlogSegment) bool { return s.Num == seg }); i >= 0 {
			d.mu.pendingSeals = slices.Delete(d.mu.pendingSeals, i, i+1)
			delete(d.mu.versions.vlog, seg)
			remove = append(remove, seg)
		} else if d.mu.versions.vlog[seg] != nil {
			d.mu.zombies[seg] = max(base.SeqNum(d.visibleSeq.Load()), 1)
		} else {
			remove = append(remove, seg) // never sealed
		}
	}
	d.clearFlushVlogFloorLocked()
	d.mu.Unlock()
	for _, seg := range remove {
		d.vlogR.Forget(seg)
	}
	if err := d.removeSegmentFiles(remove); err != nil {
		d.opts.Logger.Warn("remove the value-log segments of a failed flush", "err", err)
	}
}
