package lsm

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/manifest"
	"github.com/lsmfs/lsmfs/lsm/internal/vlog"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// Value separation (package vlog): values of at least ValueThreshold bytes
// are appended to value-log segments and the tree keeps a pointer. Ordering:
// the value log is written (not yet forced) before the batch is enqueued in
// the journal, and the journal's BeforeForce hook forces the value log
// before every frame, so no durable frame points to bytes that are not.
// Exception: a synchronous batch of at most syncInlineMax bytes keeps its
// values inline, in the journal and the memtable (see separates), so that
// its commit costs one device flush (the journal's) instead of two; the
// memtable's flush then moves them to the value log (valueSeparator).
//
// Space: compactions and in-memory merges that drop a pointer add its bytes
// to its segment's discard count (persisted in manifest edits). The cleaner
// picks sealed segments whose live share fell below VlogCleanThreshold,
// rewrites their live values (a value is live when the newest version of its
// key still points to it, checked under the commit lock) and removes the
// segment once no snapshot or iterator older than the rewrite can read it.

// openValueLog reconciles the segment files with the manifest and starts a
// writer on a new segment. d.mu.versions is loaded; the DB is not shared.
func (d *DB) openValueLog() error {
	vs := d.mu.versions
	d.vlogR = vlog.NewReader(d.opts.FS, d.dirname, d.cache, d.cacheNS)
	names, err := d.opts.FS.List(d.dirname)
	if err != nil {
		return fmt.Errorf("list %s: %w", d.dirname, err)
	}
	present := map[uint64]bool{}
	var maxNum uint64
	for _, name := range names {
		num, ok := fileNum(name, ".vlog")
		if !ok {
			continue
		}
		present[num] = true
		maxNum = max(maxNum, num)
		if vs.vlogDeleted[num] {
			// Cleaned, but the removal did not reach the disk before a
			// crash: removed once Open has checked everything.
			d.vlogLeftovers = append(d.vlogLeftovers, num)
			continue
		}
		if vs.vlog[num] != nil || d.opts.ReadOnly {
			continue
		}
		// Active at the last close or crash: seal it at its valid prefix.
		size, err := vlog.ValidSize(d.opts.FS, d.dirname, num)
		if errors.Is(err, vlog.ErrCorrupt) {
			return base.Corruptf(vlog.FileName(num), 0, "%v", err)
		}
		if err != nil {
			return fmt.Errorf("value log %s: %w", vlog.FileName(num), err)
		}
		if size == 0 {
			// Created just before a crash, never used: garbage
			// (removeGarbageLocked). A durable pointer into it would
			// be corruption (checkVlogTails), not a reason to keep it.
			if d.vlogTails == nil {
				d.vlogTails = map[uint64]int64{}
			}
			d.vlogTails[num] = 0
			continue
		}
		if fi, err := d.opts.FS.Stat(vfs.Join(d.dirname, vlog.FileName(num))); err == nil && fi.Size() > size {
			if d.vlogTails == nil {
				d.vlogTails = map[uint64]int64{}
			}
			d.vlogTails[num] = size
		}
		vs.vlog[num] = &vlogSegment{size: uint64(size)}
		d.mu.pendingSeals = append(d.mu.pendingSeals, manifest.VlogSegment{Num: num, Bytes: uint64(size)})
	}
	for num := range vs.vlog {
		if !present[num] {
			return base.Corruptf(vlog.FileName(num), -1, "value-log segment named by the manifest is missing")
		}
	}
	// File numbers are shared by tables and segments (and key the block
	// cache): never reuse one a segment has.
	if vs.nextFileNum <= maxNum {
		vs.nextFileNum = maxNum + 1
	}
	return nil
}

// checkVlogTails tells a torn tail from damage, for each segment that was
// active at the last crash and whose file goes on past its valid prefix.
// Every durable pointer points to synced bytes (the value log is forced
// before a journal frame or a table that points into it becomes durable),
// and a crash can only tear what was not synced. So a pointer past the
// valid prefix, in a table of the tree or a replayed journal record, means
// a record in the synced part is damaged: truncating there would lose
// acknowledged data, and the cleaner would then remove the rest. Only the
// memtables and the tables written after the segment was created (file
// numbers are shared) can hold such pointers: a flush's table can be
// numbered below the segments the flush moved values to, but those are
// sealed in the manifest before the table is in it, so never a tail here.
// tables lists the tables.
func (d *DB) checkVlogTails(tails map[uint64]int64, tables []uint64) error {
	if len(tails) == 0 {
		return nil
	}
	check := func(it base.InternalIterator, where string) error {
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			if it.Key().Kind() != base.KindValuePointer {
				continue
			}
			p, err := vlog.DecodePointer(it.Value())
			if err != nil {
				return base.Corruptf(where, -1, "key %q: bad value pointer: %v", it.Key().UserKey, err)
			}
			valid, ok := tails[p.Segment]
			if ok && int64(p.Offset)+int64(p.Len) > valid {
				return base.Corruptf(vlog.FileName(p.Segment), valid,
					"damaged record in the synced part of the segment: %s (key %q) points past it", where, it.Key().UserKey)
			}
		}
		return it.Error()
	}
	var oldest uint64 = math.MaxUint64
	for seg := range tails {
		oldest = min(oldest, seg)
	}
	for _, n := range tables {
		if n < oldest {
			continue
		}
		rd, release, err := d.tableCache.get(n)
		if err != nil {
			return err
		}
		err = check(rd.NewIter(), tableFileName(n))
		release()
		if err != nil {
			return err
		}
	}
	d.mu.Lock()
	mems := append([]*memTable{d.mu.mem.mutable}, d.mu.mem.queue...)
	d.mu.Unlock()
	for _, m := range mems {
		if err := check(m.NewIter(), "the journal"); err != nil {
			return err
		}
	}
	return nil
}

// startValueLogWriter removes segments the cleaner deleted but a crash left
// behind, and starts a new active segment (the first writes of Open, after
// everything was checked).
func (d *DB) startValueLogWriter() error {
	if err := d.removeSegmentFiles(d.vlogLeftovers); err != nil {
		return err
	}
	d.vlogLeftovers = nil
	if d.opts.ValueThreshold < 0 {
		return nil
	}
	var err error
	d.vlogW, err = vlog.NewWriter(d.opts.FS, d.dirname, d.opts.VlogSegmentSize,
		func() uint64 {
			d.mu.Lock()
			defer d.mu.Unlock()
			n := d.mu.versions.newFileNum()
			d.vlogActive.Store(n)
			return n
		},
		d.sealVlogSegment)
	return err
}

// sealVlogSegment records a sealed segment (synced, never appended to
// again); the next manifest edit makes it durable.
func (d *DB) sealVlogSegment(seg uint64, size int64, keys vlog.KeyRange) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.versions.vlog[seg] = &vlogSegment{size: uint64(size), keys: keys}
	d.mu.pendingSeals = append(d.mu.pendingSeals, manifest.VlogSegment{Num: seg, Bytes: uint64(size)})
	d.maybeScheduleCleanLocked()
}

// newFlushSegment numbers a segment of a flush's valueSeparator and keeps
// the cleaner away from it (flushVlogFloor) until the flush ends.
func (d *DB) newFlushSegment() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := d.mu.versions.newFileNum()
	if d.mu.flushVlogFloor == 0 {
		d.mu.flushVlogFloor = n
	}
	return n
}

// fileNum parses "NNNNNN<ext>".
func fileNum(name, ext string) (uint64, bool) {
	if !strings.HasSuffix(name, ext) {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(name, ext), 10, 64)
	return n, err == nil
}

// separateValues returns a copy of b whose large values went to the value
// log; d.commit is held.
func (d *DB) separateValues(b *Batch) (*Batch, error) {
	r, err := b.reader()
	if err != nil {
		return nil, err
	}
	out := &Batch{}
	var pbuf []byte
	for {
		e, ok, err := r.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if e.kind == base.KindSet && len(e.value) >= d.opts.ValueThreshold {
			p, err := d.vlogW.Append(e.key, e.value)
			if err != nil {
				return nil, err
			}
			pbuf = p.Append(pbuf[:0])
			out.setPointer(e.key, pbuf)
			continue
		}
		out.add(e.kind, e.key, e.value, e.kind != base.KindDelete)
	}
	// Readers may follow the pointers as soon as the batch is visible.
	if err := d.vlogW.Flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// syncInlineMax is the size up to which a synchronous batch keeps its large
// values inline (journal and memtable) instead of appending them to the
// value log. Such a batch (an fsync of a small file) would otherwise force
// the value log (an append: the file system commits its size too) and then
// the journal; inline, only the journal. The flush then moves the values to
// the value log (valueSeparator), so tables never hold them and compactions
// never copy them. Larger batches measured no faster inline: the second
// write of their bytes, and a memtable full of data, cost what the saved
// force gains (README, "Tried").
const syncInlineMax = 64 << 10

// separates reports whether Apply moves b's large values to the value log.
func (d *DB) separates(b *Batch, sync bool) bool {
	if d.vlogW == nil || b.maxValue < d.opts.ValueThreshold {
		return false
	}
	return !sync || b.Len() > syncInlineMax
}

// vlogAppendFailed handles a failed value-log append or flush of the
// cleaner: the records buffered are dropped (they refer to values the
// cleaner lets go, and no pointer to them was used); an ENOSPC that wrote
// nothing is ErrNoSpace; anything else is returned as it is (the caller
// fails the engine).
func (d *DB) vlogAppendFailed(err error) error {
	d.vlogW.Discard()
	if isNoSpace(err) && !d.vlogW.Failed() {
		d.noteNoSpace(err)
		return noSpace(err)
	}
	return err
}

// errSegmentGone marks a read of a segment the cleaner removed: a Get that
// raced with the removal retries at a newer sequence number.
var errSegmentGone = errors.New("lsm: value-log segment was cleaned")

// readPointer returns the value a pointer entry stands for.
func (d *DB) readPointer(raw []byte) ([]byte, error) {
	return d.readPointerFill(raw, true)
}

// readPointerFill is readPointer; without fill the value is read with
// vlog.Reader.ReadOwned (not cached, and the caller's).
func (d *DB) readPointerFill(raw []byte, fill bool) ([]byte, error) {
	p, err := vlog.DecodePointer(raw)
	if err != nil {
		return nil, base.Corruptf("value pointer", -1, "%v", err)
	}
	read := d.vlogR.Read
	if !fill {
		read = d.vlogR.ReadOwned
	}
	v, err := read(p)
	if err != nil {
		return nil, d.vlogReadError(p, err)
	}
	return v, nil
}

// vlogReadError gives a failed read of p its meaning: the segment was
// cleaned meanwhile (errSegmentGone), or corruption, or err as is.
func (d *DB) vlogReadError(p vlog.Pointer, err error) error {
	d.vlogGone.RLock()
	gone := d.vlogGone.m[p.Segment]
	d.vlogGone.RUnlock()
	if gone {
		return fmt.Errorf("read %s: %w", p, errSegmentGone)
	}
	if errors.Is(err, vlog.ErrCorrupt) {
		return base.Corruptf(vlog.FileName(p.Segment), int64(p.Offset), "%v", err)
	}
	return err
}

// dropAccount accumulates the value-log bytes of dropped pointer entries,
// per segment.
type dropAccount map[uint64]uint64

func (a dropAccount) note(k base.InternalKey, v []byte) {
	if k.Kind() != base.KindValuePointer {
		return
	}
	if p, err := vlog.DecodePointer(v); err == nil {
		a[p.Segment] += uint64(p.Len)
	}
}

// addVlogEditLocked adds the pending seals and the discards of a flush or
// compaction (plus those of in-memory merges) to its edit. d.mu is held.
func (d *DB) addVlogEditLocked(e *manifest.Edit, drops dropAccount) {
	e.VlogSealed = append(e.VlogSealed, d.mu.pendingSeals...)
	d.mu.pendingSeals = nil
	for seg, n := range d.mu.pendingDiscard {
		drops[seg] += n
	}
	clear(d.mu.pendingDiscard)
	segs := make([]uint64, 0, len(drops))
	for seg := range drops {
		if d.mu.versions.vlog[seg] != nil {
			segs = append(segs, seg)
		}
	}
	slices.Sort(segs)
	for _, seg := range segs {
		e.VlogDiscard = append(e.VlogDiscard, manifest.VlogSegment{Num: seg, Bytes: drops[seg]})
	}
}

// VlogStats describe the value log.
type VlogStats struct {
	Segments int
	// Bytes is the size of the sealed segments; LiveBytes an estimate of
	// what still holds live values (Bytes minus discards).
	Bytes, LiveBytes uint64
	// Cleaned counts segments removed by the cleaner; Rewritten the value
	// bytes it moved.
	Cleaned, Rewritten uint64
	// DiskReads and DiskBytes count values read from segment files (cache
	// misses).
	DiskReads, DiskBytes uint64
	// ReadAheads counts runs of values (a file read in sequence) whose bytes
	// were read ahead, before they were asked for.
	ReadAheads uint64
	// BytesWritten counts bytes written to segments since open by the
	// writes of batches (what flushes move: FlushMoved).
	BytesWritten uint64
	// FlushMoved counts the value bytes that synchronous batches kept
	// inline and flushes then moved to the value log.
	FlushMoved uint64
}

func (d *DB) vlogStatsLocked() VlogStats {
	var s VlogStats
	for _, seg := range d.mu.versions.vlog {
		s.Segments++
		s.Bytes += seg.size
		s.LiveBytes += seg.size - seg.discard
	}
	s.Cleaned = d.metrics.vlogCleaned.Load()
	s.Rewritten = d.metrics.vlogRewritten.Load()
	s.FlushMoved = d.metrics.flushValuesMoved.Load()
	if d.vlogR != nil {
		s.DiskReads = d.vlogR.DiskReads.Load()
		s.DiskBytes = d.vlogR.DiskBytes.Load()
		s.ReadAheads = d.vlogR.ReadAheads.Load()
	}
	if d.vlogW != nil {
		s.BytesWritten = d.vlogW.BytesWritten.Load()
	}
	return s
}

// flushMovingLocked reports whether the running flush may have moved
// values into seg whose pointers are not in the tree yet (flushVlogFloor):
// the cleaner would find them dead. The flush appends only to segments it
// creates, numbered from the floor on, so a segment picked before the floor
// was set holds none. d.mu is held.
func (d *DB) flushMovingLocked(seg uint64) bool {
	return d.mu.flushVlogFloor != 0 && seg >= d.mu.flushVlogFloor
}

// liveRatio estimates the share of a sealed segment that holds live values.
func (s *vlogSegment) liveRatio() float64 {
	if s.size == 0 {
		return 0
	}
	return float64(s.size-s.discard) / float64(s.size)
}

// maybeScheduleCleanLocked starts the background cleaner when a sealed
// segment's live share is below VlogCleanThreshold. d.mu is held.
func (d *DB) maybeScheduleCleanLocked() {
	if d.vlogW == nil || d.mu.cleaning || d.mu.closed || d.mu.closing || d.mu.bgErr != nil {
		return
	}
	if len(d.pickCleanLocked(d.opts.VlogCleanThreshold, 1)) == 0 {
		return
	}
	d.mu.cleaning = true
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		cleaned, err := d.cleanValueLog(d.opts.VlogCleanThreshold, cleanStep(d.opts.VlogSegmentSize), true)
		d.mu.Lock()
		d.mu.cleaning = false
		d.mu.cond.Broadcast()
		if err == nil && cleaned > 0 {
			// Triggers that came during the pass were dropped: go on
			// while segments are left below the threshold (a large rm
			// on small segments leaves many).
			d.maybeScheduleCleanLocked()
		}
		d.mu.Unlock()
		var rerr *cleanReadError
		if err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrNoSpace) && !errors.As(err, &rerr) {
			d.setBackgroundError(fmt.Errorf("value-log cleaner: %w", err))
		}
	}()
}

// cleanStep is how many segments a background cleaning pass takes at
// most: 4, or as many as make 256 MiB (4 of the default size) when
// segments are smaller (small devices, vlogSegmentSizeFor).
func cleanStep(segmentSize int64) int {
	return int(max(4, (256<<20)/max(segmentSize, 1)))
}

// pickCleanLocked returns up to n sealed segments whose live share is below
// threshold, best first by the cost-benefit rule of log-structured file
// systems: (1-u)*age/(1+u), with age the segment's rank from the newest.
func (d *DB) pickCleanLocked(threshold float64, n int) []uint64 {
	// Not vlogW.Active: this runs under the writer's lock when a roll
	// seals a segment.
	active := d.vlogActive.Load()
	type cand struct {
		seg   uint64
		score float64
	}
	// Age is the rank from the newest segment, the active one or a
	// flush's (numbered above the active one when it made them).
	newest := active
	for seg := range d.mu.versions.vlog {
		newest = max(newest, seg)
	}
	var cs []cand
	for seg, s := range d.mu.versions.vlog {
		if seg == active || d.mu.zombies[seg] != 0 || d.mu.unreadable[seg] || d.flushMovingLocked(seg) {
			continue
		}
		u := s.liveRatio()
		if u >= threshold {
			continue
		}
		age := float64(newest + 1 - seg)
		cs = append(cs, cand{seg, (1 - u) * age / (1 + u)})
	}
	slices.SortFunc(cs, func(a, b cand) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return int(a.seg) - int(b.seg)
	})
	var out []uint64
	for i := 0; i < len(cs) && i < n; i++ {
		out = append(out, cs[i].seg)
	}
	return out
}

// CleanValueLog rewrites the live values of every sealed value-log segment
// that holds dead bytes and removes those segments (once no older snapshot
// or iterator can read them). It returns the number of segments cleaned.
func (d *DB) CleanValueLog() (int, error) {
	if d.opts.ReadOnly {
		return 0, ErrReadOnly
	}
	if d.vlogW == nil {
		return 0, nil
	}
	d.mu.Lock()
	if err := d.beginCleaningLocked(); err != nil {
		d.mu.Unlock()
		return 0, err
	}
	d.mu.Unlock()
	defer d.endCleaning()
	return d.cleanValueLog(1, 1<<30, false)
}

// beginCleaningLocked waits until no cleaning pass runs and marks one
// running, or fails with ErrClosed once the engine is closing (Close waits
// for the cleaner before it takes the commit lock, which the cleaner
// needs). d.mu is held.
func (d *DB) beginCleaningLocked() error {
	for d.mu.cleaning {
		d.mu.cond.Wait()
	}
	if d.mu.closing || d.mu.closed {
		return ErrClosed
	}
	d.mu.cleaning = true
	return nil
}

// endCleaning ends the pass beginCleaningLocked started.
func (d *DB) endCleaning() {
	d.mu.Lock()
	d.mu.cleaning = false
	d.mu.cond.Broadcast()
	d.mu.Unlock()
}

// cleanValueLog cleans up to n segments with a live share below threshold.
func (d *DB) cleanValueLog(threshold float64, n int, background bool) (int, error) {
	d.mu.Lock()
	segs := d.pickCleanLocked(threshold, n)
	if !background {
		// On demand (also to reclaim space when full): emptiest first,
		// as they free the most for the least rewriting, and a segment
		// with no live value needs no free space at all.
		slices.SortStableFunc(segs, func(a, b uint64) int {
			ua, ub := d.mu.versions.vlog[a].liveRatio(), d.mu.versions.vlog[b].liveRatio()
			switch {
			case ua < ub:
				return -1
			case ua > ub:
				return 1
			}
			return 0
		})
	}
	d.mu.Unlock()
	cleaned := 0
	var err, readErr error
	for _, seg := range segs {
		if err = d.checkOpen(); err != nil {
			break
		}
		if serr := d.cleanSegment(seg, background); serr != nil {
			var rerr *cleanReadError
			if errors.As(serr, &rerr) {
				// Nothing was written: the engine goes on, the segment
				// stays as it is (its values' readers get the error),
				// and it is not picked again until the next open.
				d.opts.Logger.Error("value-log cleaner: segment skipped: it could not be read", "segment", vlog.FileName(seg), "err", serr)
				d.mu.Lock()
				d.mu.unreadable[seg] = true
				d.mu.Unlock()
				if readErr == nil {
					readErr = serr
				}
				continue
			}
			err = serr
			if errors.Is(serr, ErrNoSpace) {
				// This one has too much live data to move now; emptier
				// ones need no space and free the most.
				continue
			}
			break
		}
		cleaned++
	}
	// Remove what was cleaned even when a later segment failed (out of
	// space, typically: the segments cleaned first are what frees it).
	if err == nil || !errors.Is(err, ErrClosed) {
		if zerr := d.removeZombies(); err == nil {
			err = zerr
		}
	}
	if err == nil {
		err = readErr
	}
	return cleaned, err
}

// reclaimDeadChecks bounds the segments one reclaim pass walks the tree
// for (retireDeadSegments): each walk passes at most a few entries per
// record the segment holds.
const reclaimDeadChecks = 16

// retireDeadSegments retires sealed segments that no key reads any more,
// learned by segmentDead's bounded walk over each one's key range, whatever
// its discard count: on a full disk the compaction that would count what
// deletions freed may not find room to run, and the segments would stay.
// Retiring needs no space. It checks at most n segments, going on after
// the last one the previous call checked, and returns how many it retired.
func (d *DB) retireDeadSegments(n int) (int, error) {
	if d.opts.ReadOnly || d.vlogW == nil {
		return 0, nil
	}
	d.mu.Lock()
	if err := d.beginCleaningLocked(); err != nil {
		d.mu.Unlock()
		return 0, err
	}
	active := d.vlogActive.Load()
	var segs []uint64
	for seg := range d.mu.versions.vlog {
		if seg != active && d.mu.zombies[seg] == 0 && !d.mu.unreadable[seg] && !d.flushMovingLocked(seg) {
			segs = append(segs, seg)
		}
	}
	slices.Sort(segs)
	// From the cursor on, then around.
	i, _ := slices.BinarySearch(segs, d.space.deadCursor+1)
	segs = append(segs[i:], segs[:i]...)
	if len(segs) > n {
		segs = segs[:n]
	}
	d.mu.Unlock()
	defer d.endCleaning()
	// The barrier of cleanSegment: past it, a pointer into a sealed
	// segment that no key reads stays unread.
	d.commit.Lock()
	d.commit.Unlock()
	retired := 0
	for _, seg := range segs {
		d.space.deadCursor = seg
		d.mu.Lock()
		s := d.mu.versions.vlog[seg]
		var keys vlog.KeyRange
		if s != nil {
			keys = s.keys
		}
		d.mu.Unlock()
		if s == nil {
			continue
		}
		if keys.Empty() {
			// Sealed before this open: its key range was not kept (the
			// manifest does not record it). Learn it once, reading the
			// segment's keys; a segment of no record is dead.
			var kr vlog.KeyRange
			if err := vlog.Scan(d.opts.FS, d.dirname, seg, int64(s.size), func(rec vlog.Record) error {
				kr.Add(rec.Key)
				return nil
			}); err != nil {
				continue // a read error: the cleaner reports it when it gets there
			}
			d.mu.Lock()
			s.keys = kr
			d.mu.Unlock()
			if kr.Empty() {
				if err := d.retireSegment(seg); err != nil {
					return retired, err
				}
				retired++
				continue
			}
		}
		dead, err := d.segmentDead(seg, s)
		if err != nil {
			if errors.Is(err, ErrClosed) {
				return retired, err
			}
			continue // a read error: the cleaner reports it when it gets there
		}
		if !dead {
			continue
		}
		if err := d.retireSegment(seg); err != nil {
			return retired, err
		}
		retired++
	}
	if retired > 0 {
		if err := d.removeZombies(); err != nil {
			return retired, err
		}
	}
	return retired, nil
}

// cleanReadError is a read of the tree or of the segment that failed while
// the cleaner worked on a segment, before it wrote anything for it.
type cleanReadError struct{ err error }

func (e *cleanReadError) Error() string { return e.err.Error() }
func (e *cleanReadError) Unwrap() error { return e.err }

// readFailure marks err, from a read, as a cleanReadError, unless the
// engine is closing.
func readFailure(err error) error {
	if errors.Is(err, ErrClosed) {
		return err
	}
	return &cleanReadError{err}
}

// cleanSegment moves seg's live values to the active segment and marks seg
// for removal.
func (d *DB) cleanSegment(seg uint64, background bool) error {
	d.mu.Lock()
	s := d.mu.versions.vlog[seg]
	d.mu.Unlock()
	if s == nil {
		return nil
	}
	const chunk = 4 << 20
	var pending []vlog.Record
	var pendingBytes int
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		moved, err := d.rewriteLive(pending)
		pending, pendingBytes = pending[:0], 0
		if background && moved > 0 {
			// Rate limit: about 64 MiB/s of rewriting.
			time.Sleep(time.Duration(moved) * time.Second / (64 << 20))
		}
		return err
	}
	// Every batch that appended to seg held the commit lock from its append
	// until its pointers were in the memtable, and seg is sealed (nothing
	// appends to it any more): past this barrier, a live record of seg is
	// what its key reads. A record dead now stays dead, since no write makes
	// an old pointer current again, so dead records are dropped here without
	// a copy; rewriteLive checks the others again under the lock.
	d.commit.Lock()
	d.commit.Unlock()
	if dead, err := d.segmentDead(seg, s); err != nil {
		return fmt.Errorf("clean %s: %w", vlog.FileName(seg), readFailure(err))
	} else if dead {
		return d.retireSegment(seg)
	}
	var scratch []byte
	var werr error // from flush: the scan's other errors are reads
	err := vlog.Scan(d.opts.FS, d.dirname, seg, int64(s.size), func(rec vlog.Record) error {
		live, err := d.pointsTo(rec, base.SeqNum(d.visibleSeq.Load()), &scratch)
		if err != nil || !live {
			return err
		}
		pending = append(pending, vlog.Record{Key: append([]byte(nil), rec.Key...), Value: append([]byte(nil), rec.Value...), Ptr: rec.Ptr})
		pendingBytes += len(rec.Value)
		if pendingBytes >= chunk {
			werr = flush()
			return werr
		}
		return nil
	})
	var rerr *cleanReadError
	switch {
	case err == nil:
		err = flush()
	case werr == nil && !errors.As(err, &rerr):
		err = readFailure(err)
	}
	if err != nil {
		return fmt.Errorf("clean %s: %w", vlog.FileName(seg), err)
	}
	return d.retireSegment(seg)
}

// retireSegment marks a cleaned segment for removal once no older reader
// needs it. The rewrites of its live values, and the writes that made the
// others dead, must be durable before the old copies may go: the journal
// is forced first.
func (d *DB) retireSegment(seg uint64) error {
	if err := d.SyncJournal(); err != nil {
		return err
	}
	d.mu.Lock()
	d.mu.zombies[seg] = d.visibleSeq.Load()
	d.mu.Unlock()
	return nil
}

// segmentDead reports whether no key reads a value of sealed segment seg
// (called past the commit-lock barrier of cleanSegment), learned without
// reading the segment: when its key range is known, one walk of the tree
// over that range finds no pointer into seg. A deleted or rewritten large
// file leaves such segments, and then costs one seek instead of a read of
// the whole segment and a lookup per record. The walk gives up (false)
// after passing a few entries per expected record (other keys, or deleted
// ones, in the range), which the scan then does cheaper.
func (d *DB) segmentDead(seg uint64, s *vlogSegment) (bool, error) {
	if s.keys.Empty() {
		return false, nil
	}
	it := d.newIterAt(d.loadReadState(), &IterOptions{
		LowerBound: s.keys.Lo,
		UpperBound: append(slices.Clip(s.keys.Hi), 0), // just past Hi
	}, base.SeqNum(d.visibleSeq.Load()), false)
	defer it.Close()
	it.stepLimit = int(s.size/2048) + 64
	for ok := it.First(); ok; ok = it.Next() {
		if it.rawKind != base.KindValuePointer {
			continue
		}
		if p, err := vlog.DecodePointer(it.raw); err != nil || p.Segment == seg {
			return false, nil // live, or damage the scan reports
		}
	}
	if err := it.Error(); err != nil {
		if errors.Is(err, errStepLimit) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// rewriteLive appends the records whose key still points to them to the
// active segment and points the keys at the copies, in one batch, under
// the commit lock (so no writer can change a key between the check and the
// rewrite). It returns the value bytes moved.
func (d *DB) rewriteLive(recs []vlog.Record) (int, error) {
	d.commit.Lock()
	defer d.commit.Unlock()
	var live []vlog.Record
	var need, size uint64
	var scratch, pbuf []byte
	for _, r := range recs {
		ok, err := d.pointsTo(r, d.commit.lastSeq, &scratch)
		if err != nil {
			return 0, readFailure(err)
		}
		if !ok {
			continue // overwritten or deleted: dead
		}
		live = append(live, r)
		need += uint64(len(r.Key)) + 32 + memEntryOverhead
		size += uint64(len(r.Key)+len(r.Value)) + 32
	}
	if len(live) == 0 {
		return 0, nil // nothing to move: no room needed
	}
	if d.space.full.Load() {
		// Out of space: move live values only if they fit without eating
		// the reserve, which deletions and flushes need.
		if _, free, err := d.opts.FS.Usage(d.dirname); err == nil && free < size+d.space.reserve {
			return 0, fmt.Errorf("move %d live bytes with %d free: %w", size, free, ErrNoSpace)
		}
	}
	if err := d.waitForRoomLocked(need, false); err != nil {
		return 0, err
	}
	b := &Batch{}
	moved := 0
	for _, r := range live {
		p, err := d.vlogW.Append(r.Key, r.Value)
		if err != nil {
			return 0, d.vlogAppendFailed(err)
		}
		pbuf = p.Append(pbuf[:0])
		b.setPointer(r.Key, pbuf)
		moved += len(r.Value)
	}
	if b.Empty() {
		return 0, nil
	}
	if err := d.vlogW.Flush(); err != nil {
		return 0, d.vlogAppendFailed(err)
	}
	d.space.written.Add(uint64(moved))
	if _, err := d.applyLocked(b, false, true); err != nil { // moves that free segments
		return 0, err
	}
	d.metrics.vlogRewritten.Add(uint64(moved))
	return moved, nil
}

// pointsTo reports whether r's key reads, at snap, a pointer to r itself
// (r is live). scratch is a reusable buffer.
func (d *DB) pointsTo(r vlog.Record, snap base.SeqNum, scratch *[]byte) (bool, error) {
	kind, raw, found, err := d.getInternalCurrent(r.Key, snap)
	if err != nil || !found || kind != base.KindValuePointer {
		return false, err
	}
	*scratch = r.Ptr.Append((*scratch)[:0])
	return string(raw) == string(*scratch), nil
}

// getInternalCurrent is getInternal on the current read state.
func (d *DB) getInternalCurrent(key []byte, snap base.SeqNum) (base.Kind, []byte, bool, error) {
	rs := d.loadReadState()
	defer rs.unref()
	return d.getInternal(rs, key, snap)
}

// removeZombies removes cleaned segments that no open snapshot or iterator
// older than the cleaning can still read.
func (d *DB) removeZombies() error {
	d.mu.Lock()
	oldest, any := d.oldestReaderSeqLocked()
	var ready []uint64
	for seg, seq := range d.mu.zombies {
		if !any || oldest >= seq {
			ready = append(ready, seg)
		}
	}
	if len(ready) == 0 {
		d.mu.Unlock()
		return nil
	}
	slices.Sort(ready)
	// With the seals not yet in an edit: a later edit that recorded the
	// seal of a segment this one deleted would name it again, missing.
	e := &manifest.Edit{VlogDeleted: ready}
	d.addVlogEditLocked(e, dropAccount{})
	err := d.mu.versions.logAndApply(e)
	if err == nil {
		for _, seg := range ready {
			delete(d.mu.zombies, seg)
		}
	}
	d.mu.Unlock()
	if err != nil {
		return err
	}
	for _, seg := range ready {
		d.vlogGone.Lock()
		d.vlogGone.m[seg] = true
		d.vlogGone.Unlock()
		d.vlogR.Forget(seg)
		d.metrics.vlogCleaned.Add(1)
	}
	return d.removeSegmentFiles(ready)
}

// removeSegmentFiles removes deleted segments' files and, once the removal
// is durable (directory synced), forgets them: later manifest snapshots no
// longer list them.
func (d *DB) removeSegmentFiles(segs []uint64) error {
	if len(segs) == 0 {
		return nil
	}
	for _, seg := range segs {
		if err := d.opts.FS.Remove(vfs.Join(d.dirname, vlog.FileName(seg))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.opts.Logger.Warn("remove cleaned value-log segment", "file", vlog.FileName(seg), "err", err)
			return nil // stays listed as deleted; retried at the next open
		}
	}
	if err := d.opts.FS.SyncDir(d.dirname); err != nil {
		return fmt.Errorf("sync %s: %w", d.dirname, err)
	}
	d.mu.Lock()
	for _, seg := range segs {
		delete(d.mu.versions.vlogDeleted, seg)
	}
	d.mu.Unlock()
	return nil
}

// oldestReaderSeqLocked is the smallest sequence number an open snapshot or
// iterator reads at; any is false when there is none (0 is a valid sequence
// number: a snapshot of an empty DB). d.mu is held.
func (d *DB) oldestReaderSeqLocked() (oldest base.SeqNum, any bool) {
	if s := d.mu.snapshots.seqs(); len(s) > 0 {
		oldest, any = s[0], true
	}
	for seq := range d.mu.iterSeqs {
		if !any || seq < oldest {
			oldest, any = seq, true
		}
	}
	return oldest, any
}
