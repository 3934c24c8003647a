package lsm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Running out of space, and write failures
//
// Fail-stop. A failed write or force of the journal, a failed force of the
// value log or of a table, a failed manifest write: after any of them the
// engine cannot tell what is durable, so it stops accepting writes for good
// (until reopened). The first such error becomes the sticky background
// error, wrapped in ErrFailed; the batch that met it and every later write
// get it; reads go on from memory and disk. Reopening recovers the last
// durable state (what the journal and the manifest say). Sync errors are
// never retried (PostgreSQL's fsync lesson: a failed fsync may have dropped
// the dirty pages it could not write).
//
// ENOSPC is different when nothing was half done: a value-log append that
// could not be written (the records are discarded and the segment's end is
// unchanged), or a table written by a flush or a compaction (its files are
// removed). Those leave the engine consistent, so they are not sticky:
//
//   - the writer whose value-log append failed gets ErrNoSpace;
//   - a flush or compaction that failed is retried with a backoff (50ms,
//     doubling to 2s); meanwhile writers that would have to wait for it (no
//     memtable or journal room left) get ErrNoSpace instead of stalling;
//   - the engine is "full": batches that only add data get ErrNoSpace at
//     once, while batches that delete something (rm, truncate, rename over
//     a file) are still applied, so space can be freed. Each such batch
//     while full asks for a reclaim pass (flush, compaction of everything,
//     value-log cleaning) that turns deletions into free space;
//   - the engine stops being full when statfs shows SpaceReserve free bytes
//     again (and at least 1 MiB).
//
// SpaceReserve keeps room for that: batches that only add data get
// ErrNoSpace while the data device has less than SpaceReserve free bytes,
// so that flushes, compactions and the manifest of the deletions that free
// space find room. Free space is read with statfs at most every 100ms while
// it is low, and otherwise after a second or once the bytes the engine wrote
// since (value-log appends and tables) could have eaten the margin.
//
// ENOSPC from a force, or from a manifest write (which may leave a torn
// record in the middle of the manifest), is fail-stop like any other error.
// The journal never runs out of space on a file (it is preallocated at mkfs);
// a full ring makes writers wait for a checkpoint, and when the checkpoint
// needs a flush that cannot find space, they get ErrNoSpace.

// spaceState is the engine's view of free space. Fields without a comment
// are guarded by DB.mu.
type spaceState struct {
	reserve uint64
	// full: batches that only add data get ErrNoSpace. Read without a
	// lock on the write path.
	full atomic.Bool
	// written counts bytes written to the data device since the last
	// statfs (value-log appends and tables).
	written atomic.Uint64

	check struct {
		sync.Mutex
		at   time.Time
		free uint64
	}

	// blocked: the last flush or compaction failed with ENOSPC; they start
	// again only when retryNow is set (by the retry timer or by a caller
	// that needs one more attempt).
	blocked  bool
	retryNow bool
	// blockedFlag mirrors blocked for the write path (no d.mu there).
	blockedFlag atomic.Bool
	backoff     time.Duration
	timer       *time.Timer
	// reclaim: a reclaim pass runs; reclaimAgain: deletions came in since
	// it started.
	reclaim, reclaimAgain bool
	// freedSince: a deleting batch was applied while the engine was not
	// known to be full (refusedForSpace).
	freedSince atomic.Bool
	// deadCursor is the segment after which the next reclaim pass goes
	// on looking for dead segments (retireDeadSegments). Reclaim passes
	// only.
	deadCursor uint64

	// While the device stays full, a failing flush is retried every
	// maxBackoff and the engine may enter and leave the full state with
	// each attempt: these keep each message to once a minute.
	fullLog, freedLog, retryLog logLimiter
}

// logEvery is how often a logLimiter lets its message through.
const logEvery = time.Minute

// logLimiter lets a recurring message through at its level at most once
// per logEvery; repeats in between go to Debug, and the next one through
// says how many there were. Safe for concurrent use.
type logLimiter struct {
	mu      sync.Mutex
	last    time.Time
	repeats int
}

func (l *logLimiter) log(logger *slog.Logger, level slog.Level, msg string, args ...any) {
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < logEvery {
		l.repeats++
		l.mu.Unlock()
		logger.Debug(msg, args...)
		return
	}
	n := l.repeats
	l.last, l.repeats = now, 0
	l.mu.Unlock()
	if n > 0 {
		args = append(args, "repeats_in_last_interval", n)
	}
	logger.Log(context.Background(), level, msg, args...)
}

const (
	spaceCheckLow  = 100 * time.Millisecond // statfs interval while space is low
	spaceCheckHigh = time.Second            // ... and while it is not
	minBackoff     = 50 * time.Millisecond
	maxBackoff     = 2 * time.Second
	minFreeToLeave = 1 << 20 // free bytes needed to stop being full
)

// isNoSpace reports whether err is an out-of-space error.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// retryableError marks an ENOSPC that left nothing behind: the work can be
// done again once there is space.
type retryableError struct{ err error }

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

// retryable marks err when it is an ENOSPC.
func retryable(err error) error {
	if err != nil && isNoSpace(err) {
		return &retryableError{err}
	}
	return err
}

func isRetryable(err error) bool {
	var r *retryableError
	return errors.As(err, &r)
}

// noSpace returns the error writers get: ErrNoSpace, with the cause.
func noSpace(cause error) error {
	if cause == nil || errors.Is(cause, ErrNoSpace) {
		if cause == nil {
			return ErrNoSpace
		}
		return cause
	}
	return fmt.Errorf("%w (%v)", ErrNoSpace, cause)
}

// initSpace sets the reserve from the options and the device size, and
// with autoSegment the value-log segment size (vlogSegmentSizeFor).
func (d *DB) initSpace(autoSegment bool) {
	r := d.opts.SpaceReserve
	if r == 0 || autoSegment {
		total, _, err := d.opts.FS.Usage(d.dirname)
		if err == nil && total > 0 {
			if r == 0 {
				r = int64(min(total/100, 64<<20))
			}
			if autoSegment {
				d.opts.VlogSegmentSize = vlogSegmentSizeFor(total)
			}
		}
	}
	d.space.reserve = uint64(max(r, 0))
	if r == 0 {
		r = -1
	}
	d.opts.SpaceReserve = r // effective, for Options
}

// vlogSegmentSizeFor is the default value-log segment size on a device of
// total bytes: 64 MiB, and on devices under 3,200 MiB a fiftieth of the
// device, at least 1 MiB. Deleted values give their space back only when
// their whole segment goes (it dies, or the cleaner moves its live values
// out, which needs free space for them): small segments die whole more
// often and need little room to clean. With 64 MiB segments on a 96 MiB
// device, deleting 76 MiB of files left a sealed segment holding 3 MiB of
// live values beside a dead active one, and no room to move them: the
// deletions freed nothing.
func vlogSegmentSizeFor(total uint64) int64 {
	return int64(max(1<<20, min(64<<20, (total/50)&^(1<<20-1))))
}

// admit decides whether a batch may be applied as far as space goes.
func (d *DB) admit(b *Batch) error {
	if b.frees {
		return nil
	}
	if d.space.full.Load() {
		if d.checkSpace(true) {
			return nil
		}
		return ErrNoSpace
	}
	if d.space.reserve == 0 {
		return nil
	}
	if !d.checkSpace(false) {
		return ErrNoSpace
	}
	return nil
}

// refusedForSpace returns err. When err refuses a batch for lack of space
// (admit, the journal ring, room for background work), it first starts the
// reclaim pass that deletions applied before the engine knew it was full
// are waiting for (they did not ask for one: see Apply).
func (d *DB) refusedForSpace(err error) error {
	if errors.Is(err, ErrNoSpace) && d.space.freedSince.Swap(false) {
		d.requestReclaim()
	}
	return err
}

// canLeaveFull reports whether free bytes are enough for a full engine to
// accept writes again.
func (s *spaceState) canLeaveFull(free uint64) bool {
	return free >= s.reserve+s.reserve/2 && free >= minFreeToLeave
}

// checkSpace reads free space when due (or when the engine is full and the
// last reading is older than spaceCheckLow) and reports whether batches
// that add data may go on; it updates full.
func (d *DB) checkSpace(full bool) bool {
	s := &d.space
	s.check.Lock()
	defer s.check.Unlock()
	written := s.written.Load()
	free := s.check.free - min(written, s.check.free) // estimate
	since := time.Since(s.check.at)
	low := free < max(2*s.reserve, 2*minFreeToLeave)
	due := s.check.at.IsZero() || since >= spaceCheckHigh || (low || full) && since >= spaceCheckLow
	if due {
		_, f, err := d.opts.FS.Usage(d.dirname)
		if err != nil {
			return !full // no statfs: rely on ENOSPC from the writes
		}
		if written > 0 {
			s.written.Add(^(written - 1)) // subtract what this reading covers
		}
		s.check.at, s.check.free = time.Now(), f
		free = f
	}
	if full {
		ok := s.canLeaveFull(free)
		if ok && s.full.CompareAndSwap(true, false) {
			s.freedLog.log(d.opts.Logger, slog.LevelInfo, "space freed: writes accepted again", "free", free, "reserve", s.reserve)
		}
		return ok
	}
	if free < s.reserve {
		d.setFull(fmt.Sprintf("free space %d below the reserve %d", free, s.reserve))
		return false
	}
	return true
}

// setFull makes batches that only add data fail with ErrNoSpace.
func (d *DB) setFull(why string) {
	if d.space.full.CompareAndSwap(false, true) {
		d.space.fullLog.log(d.opts.Logger, slog.LevelWarn, "out of space: only deletions are accepted until space is freed", "why", why)
	}
}

// noteNoSpace records an ENOSPC met by a write that left nothing behind.
func (d *DB) noteNoSpace(err error) {
	d.setFull(err.Error())
	d.space.check.Lock()
	d.space.check.at = time.Time{} // read statfs at the next check
	d.space.check.Unlock()
}

// backgroundNoSpaceLocked runs when a flush or compaction failed with a
// retryable ENOSPC: it blocks background writes until the retry timer fires
// and wakes writers so that those who need a flush fail instead of
// waiting. d.mu is held.
func (d *DB) backgroundNoSpaceLocked(err error) {
	s := &d.space
	d.noteNoSpace(err)
	s.blocked = true
	s.blockedFlag.Store(true)
	if d.wal != nil {
		d.wal.Wake() // writers already waiting for ring space give up (ringWaitStop)
	}
	s.retryNow = false
	if s.backoff == 0 {
		s.backoff = minBackoff
	} else {
		s.backoff = min(2*s.backoff, maxBackoff)
	}
	if s.timer == nil && !d.mu.closed {
		s.timer = time.AfterFunc(s.backoff, d.retryBackground)
	}
	s.retryLog.log(d.opts.Logger, slog.LevelWarn, "background write failed for lack of space; retrying", "err", err, "in", s.backoff)
	d.mu.cond.Broadcast()
}

// retryBackground is the retry timer: one more flush and compaction.
func (d *DB) retryBackground() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.space.timer = nil
	if d.mu.closed || d.mu.bgErr != nil {
		return
	}
	d.space.retryNow = true
	if len(d.mu.mem.queue) > 0 {
		d.markFlushLocked()
	}
	d.maybeScheduleCompactionLocked()
	if !d.mu.flushing && d.mu.compacting == 0 {
		// Nothing to retry: background writes may start freely again.
		d.space.blocked = false
		d.space.blockedFlag.Store(false)
	}
}

// backgroundMayWriteLocked reports whether a flush or compaction may start
// (not blocked by a recent ENOSPC, or a retry is due). d.mu is held.
func (d *DB) backgroundMayWriteLocked() bool {
	return !d.space.blocked || d.space.retryNow
}

// backgroundStartedLocked consumes the retry permission. d.mu is held.
func (d *DB) backgroundStartedLocked() { d.space.retryNow = false }

// backgroundSucceededLocked clears the ENOSPC state of background writes.
// d.mu is held.
func (d *DB) backgroundSucceededLocked() {
	d.space.blocked = false
	d.space.blockedFlag.Store(false)
	d.space.backoff = 0
}

// requestReclaim starts a reclaim pass (or asks the running one for
// another) after a deleting batch was applied while full.
func (d *DB) requestReclaim() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed || d.mu.closing || d.mu.bgErr != nil || d.opts.ReadOnly {
		return
	}
	if d.space.reclaim {
		d.space.reclaimAgain = true
		return
	}
	d.space.reclaim = true
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		for {
			start := time.Now()
			d.reclaimPass()
			// Deletions keep coming during an rm -rf: at most about ten
			// passes a second.
			time.Sleep(100*time.Millisecond - time.Since(start))
			d.mu.Lock()
			if !d.space.reclaimAgain || d.mu.closing || d.mu.closed || d.mu.bgErr != nil {
				d.space.reclaim = false
				d.space.reclaimAgain = false
				d.mu.cond.Broadcast()
				d.mu.Unlock()
				return
			}
			d.space.reclaimAgain = false
			d.mu.Unlock()
		}
	}()
}

// reclaimPass turns deletions into free space: flush them, compact them
// down (dropping what they delete, and counting the value-log bytes they
// free), clean the value log, then read statfs.
func (d *DB) reclaimPass() {
	d.mu.Lock()
	d.space.retryNow = true // one attempt now, whatever the backoff
	d.mu.Unlock()
	err := d.Compact(nil, nil)
	if d.vlogW != nil && !errors.Is(err, ErrClosed) {
		// Even when the compaction failed: segments already known to be
		// dead need no space to go.
		_, cerr := d.CleanValueLog()
		err = errors.Join(err, cerr)
		// A compaction that could not run (it needs room for its
		// outputs, up to a level's size, which may be more than is free
		// even once the engine no longer counts as full) did not count
		// what the deletions freed in the value log: look for segments
		// no key reads any more, whatever their counts say.
		if !errors.Is(cerr, ErrClosed) {
			_, rerr := d.retireDeadSegments(reclaimDeadChecks)
			err = errors.Join(err, rerr)
		}
	}
	if err != nil && !errors.Is(err, ErrClosed) {
		d.opts.Logger.Warn("reclaiming space", "err", err)
	}
	d.checkSpace(d.space.full.Load())
}

// allowOneAttemptLocked is used where a caller needs a flush to happen
// (Flush, Close): when background writes are blocked by ENOSPC it allows
// one attempt at once, and false once that attempt was made (*tried).
// d.mu is held.
func (d *DB) allowOneAttemptLocked(tried *bool) bool {
	if !d.space.blocked || d.mu.flushing {
		return true // nothing failed, or an attempt is running: wait for it
	}
	if *tried {
		return false
	}
	*tried = true
	d.space.retryNow = true
	return true
}

// stopSpaceTimerLocked stops the retry timer at close. d.mu is held.
func (d *DB) stopSpaceTimerLocked() {
	if d.space.timer != nil {
		d.space.timer.Stop()
		d.space.timer = nil
	}
}
