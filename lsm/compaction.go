package lsm

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/manifest"
)

// compaction is a picked unit of background work: input tables from one or
// more levels merged into new tables of outputLevel. Leveled compactions
// take tables of one level and the overlapping tables of the next; tiered
// ones take whole sorted runs.
type compaction struct {
	inputs      []compactionLevel
	outputLevel int
	// smallest and largest bound the inputs' user keys.
	smallest, largest []byte
	// elide: no table below outputLevel overlaps the inputs, so deleted data
	// that no snapshot sees can be dropped.
	elide bool
	// move: one input table and nothing to merge with: relink it.
	move   bool
	reason string
}

// compactionLevel is the input tables of one level.
type compactionLevel struct {
	level int
	files []*tableMeta
}

// String prints the compaction, for logs and tests.
func (c *compaction) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "L%d->L%d (%s)", c.inputs[0].level, c.outputLevel, c.reason)
	if c.move {
		b.WriteString(" move")
	}
	if c.elide {
		b.WriteString(" elide")
	}
	for _, in := range c.inputs {
		if len(in.files) == 0 {
			continue
		}
		fmt.Fprintf(&b, " L%d:", in.level)
		for _, f := range in.files {
			fmt.Fprintf(&b, " %06d", f.FileNum)
		}
	}
	return b.String()
}

func (c *compaction) allInputs() []*tableMeta {
	var out []*tableMeta
	for _, in := range c.inputs {
		out = append(out, in.files...)
	}
	return out
}

func anyCompacting(files []*tableMeta) bool {
	for _, f := range files {
		if f.compacting {
			return true
		}
	}
	return false
}

func bounds(files []*tableMeta) (lo, hi []byte) {
	for _, f := range files {
		if lo == nil || bytes.Compare(f.Smallest, lo) < 0 {
			lo = f.Smallest
		}
		if hi == nil || bytes.Compare(f.Largest, hi) > 0 {
			hi = f.Largest
		}
	}
	return lo, hi
}

// levelTarget is the target size of level l >= 1.
func (d *DB) levelTarget(l int) uint64 {
	t := uint64(d.opts.LBaseMaxBytes)
	m := uint64(d.opts.LevelMultiplier)
	for i := 1; i < l; i++ {
		if t > math.MaxUint64/m {
			return math.MaxUint64 // saturate: a wrapped target made the level always "full"
		}
		t *= m
	}
	return t
}

// pickLocked picks the most urgent compaction, or nil. d.mu is held.
func (d *DB) pickLocked() *compaction {
	if d.opts.Compaction == CompactionTiered {
		return d.pickTieredLocked()
	}
	return d.pickLeveledLocked()
}

// pickLeveledLocked scores L0 by table count and L1+ by size against their
// targets, and compacts the worst level into the next.
func (d *DB) pickLeveledLocked() *compaction {
	v := d.mu.versions.current
	if len(v.levels[0]) >= d.opts.L0StopWritesTrigger {
		// Writers are stalled until L0 shrinks: an L1 over its target
		// (as every L0 compaction leaves it) must not go first.
		if c := d.setupCompactionLocked(0, v.levels[0], "l0-stall"); c != nil {
			return c
		}
	}
	bestLevel, bestScore := -1, 1.0
	if n := len(v.levels[0]); n > 0 && !anyCompacting(v.levels[0]) {
		if s := float64(n) / float64(d.opts.L0CompactionTrigger); s >= bestScore {
			bestLevel, bestScore = 0, s
		}
	}
	for l := 1; l < numLevels-1; l++ {
		var size uint64
		for _, f := range v.levels[l] {
			if !f.compacting {
				size += f.Size
			}
		}
		if s := float64(size) / float64(d.levelTarget(l)); s > bestScore {
			bestLevel, bestScore = l, s
		}
	}
	if bestLevel < 0 {
		return nil
	}
	if bestLevel == 0 {
		return d.setupCompactionLocked(0, v.levels[0], "l0-count")
	}
	// Round robin: the first table after the last one compacted.
	files := v.levels[bestLevel]
	start := searchLevel(files, d.mu.compactPointer[bestLevel])
	for i := 0; i < len(files); i++ {
		f := files[(start+i)%len(files)]
		if f.compacting {
			continue
		}
		if c := d.setupCompactionLocked(bestLevel, []*tableMeta{f}, "level-size"); c != nil {
			d.mu.compactPointer[bestLevel] = append([]byte(nil), f.Largest...)
			d.mu.compactPointer[bestLevel] = append(d.mu.compactPointer[bestLevel], 0)
			return c
		}
	}
	return nil
}

// setupCompactionLocked adds the overlapping tables of the next level and
// decides whether the compaction can drop deleted data. nil when an input
// is busy.
func (d *DB) setupCompactionLocked(level int, inputs []*tableMeta, reason string) *compaction {
	v := d.mu.versions.current
	if len(inputs) == 0 || anyCompacting(inputs) {
		return nil
	}
	c := &compaction{outputLevel: level + 1, reason: reason}
	c.smallest, c.largest = bounds(inputs)
	next := v.overlaps(c.outputLevel, c.smallest, c.largest)
	if anyCompacting(next) {
		return nil
	}
	c.inputs = []compactionLevel{{level, inputs}, {level + 1, next}}
	if len(next) > 0 {
		lo, hi := bounds(c.allInputs())
		c.smallest, c.largest = lo, hi
	}
	c.elide = true
	for l := c.outputLevel + 1; l < numLevels; l++ {
		if len(v.overlaps(l, c.smallest, c.largest)) > 0 {
			c.elide = false
			break
		}
	}
	c.move = level > 0 && len(inputs) == 1 && len(next) == 0 && !c.elide
	return c
}

// maybeScheduleCompactionLocked starts background compactions up to the
// concurrency bound. d.mu is held.
func (d *DB) maybeScheduleCompactionLocked() {
	for d.mu.compacting < d.opts.MaxConcurrentCompactions && d.mu.manual == 0 &&
		!d.mu.closed && !d.mu.closing && d.mu.bgErr == nil && !d.opts.ReadOnly && d.backgroundMayWriteLocked() {
		c := d.pickLocked()
		if c == nil {
			return
		}
		d.backgroundStartedLocked()
		d.startCompactionLocked(c)
		d.bg.Add(1)
		go func() {
			defer d.bg.Done()
			err := d.runCompaction(c)
			d.purgeObsolete()
			d.mu.Lock()
			d.finishCompactionLocked(c)
			if err != nil {
				if isRetryable(err) {
					d.backgroundNoSpaceLocked(fmt.Errorf("compaction %s: %w", c, err))
					d.mu.Unlock()
					return
				}
				d.mu.Unlock()
				d.setBackgroundError(fmt.Errorf("compaction %s: %w", c, err))
				return
			}
			d.backgroundSucceededLocked()
			d.maybeScheduleCompactionLocked()
			d.mu.Unlock()
		}()
	}
}

func (d *DB) startCompactionLocked(c *compaction) {
	for _, f := range c.allInputs() {
		f.compacting = true
	}
	d.mu.compacting++
}

func (d *DB) finishCompactionLocked(c *compaction) {
	for _, f := range c.allInputs() {
		f.compacting = false
	}
	d.mu.compacting--
	d.mu.cond.Broadcast()
}

// runCompaction merges the inputs and installs the outputs.
func (d *DB) runCompaction(c *compaction) error {
	e := &manifest.Edit{}
	for _, in := range c.inputs {
		for _, f := range in.files {
			e.Deleted = append(e.Deleted, manifest.DeletedFile{Level: in.level, FileNum: f.FileNum})
		}
	}
	if c.move {
		e.Added = append(e.Added, manifest.NewFile{Level: c.outputLevel, Meta: c.inputs[0].files[0].FileMetadata})
		d.mu.Lock()
		err := d.mu.versions.logAndApply(e)
		if err == nil {
			d.updateReadStateLocked()
		}
		d.mu.Unlock()
		d.metrics.moves.Add(1)
		return err
	}
	d.mu.Lock()
	snapshots := d.mu.snapshots.seqs()
	d.mu.Unlock()

	var iters []base.InternalIterator
	var tombs []base.RangeTombstone
	var inBytes uint64
	closeAll := func() {
		for _, it := range iters {
			it.Close()
		}
	}
	for _, f := range c.allInputs() {
		inBytes += f.Size
		r, release, err := d.tableCache.get(f.FileNum)
		if err != nil {
			closeAll()
			return err
		}
		tombs = append(tombs, cloneTombstones(r.RangeTombstones())...)
		iters = append(iters, &tableIter{Iterator: r.NewIter(), release: release, r: r})
	}
	miter := newMergingIter(iters)
	ci := newCompactionIter(miter, snapshots, fragment(tombs), c.elide)
	target := uint64(d.opts.TargetFileSize)
	if c.outputLevel == 0 {
		target = math.MaxUint64 // an L0 output is one table: one sorted run
	}
	outputs, written, err := d.writeTables(ci, target, false)
	miter.Close()
	if err != nil {
		return retryable(err) // writeTables left nothing behind
	}
	d.space.written.Add(written)
	for _, f := range outputs {
		e.Added = append(e.Added, manifest.NewFile{Level: c.outputLevel, Meta: f})
	}
	d.mu.Lock()
	d.addVlogEditLocked(e, ci.drops)
	err = d.mu.versions.logAndApply(e)
	if err == nil {
		d.updateReadStateLocked()
		d.maybeScheduleCleanLocked()
	}
	d.mu.Unlock()
	if err != nil {
		// The outputs stay: a manifest append whose sync failed may still
		// name them (its record can be in the file, and reach the disk),
		// and Open removes the tables the manifest does not name.
		return err
	}
	d.metrics.compactions.Add(1)
	d.metrics.compactBytesIn.Add(inBytes)
	d.metrics.compactBytesOut.Add(written)
	d.opts.Logger.Debug("compacted", "compaction", c.String(), "in", inBytes, "out", written, "dropped", ci.dropped)
	return nil
}

// Compact compacts every table overlapping [start, end] (nil: open) down
// to the lowest level that holds data, after flushing the memtables; then it
// rewrites the tables of that lowest level that hold deletions (point or
// range): nothing lies below them, so the rewrite drops the deletions and
// what they delete, kept there while a snapshot needed them.
func (d *DB) Compact(start, end []byte) error {
	if d.opts.ReadOnly {
		return ErrReadOnly
	}
	if err := d.Flush(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.manual++
	defer func() {
		d.mu.manual--
		d.maybeScheduleCompactionLocked()
	}()
	for d.mu.compacting > 0 && !d.mu.closed {
		d.mu.cond.Wait()
	}
	if d.opts.Compaction == CompactionTiered {
		if err := d.compactAllRunsLocked(); err != nil {
			return err
		}
		return d.compactBottomLocked(start, end)
	}
	for level := 0; level < numLevels-1; level++ {
		if d.mu.closed {
			return ErrClosed
		}
		if d.mu.bgErr != nil {
			return d.mu.bgErr
		}
		v := d.mu.versions.current
		deepest := v.deepestLevel()
		inputs := v.overlaps(level, start, end)
		// Tables of level >= 1 go down until the deepest level with data
		// (that last step merges them with it and drops deleted data).
		if len(inputs) == 0 || (level > 0 && level >= deepest) {
			continue
		}
		if level == 0 {
			inputs = v.levels[0] // L0 tables may overlap each other: take all
		}
		c := d.setupCompactionLocked(level, inputs, "manual")
		if c == nil {
			return fmt.Errorf("lsm: manual compaction of L%d: inputs busy", level)
		}
		c.move = false
		if err := d.runManualLocked(c); err != nil {
			return err
		}
	}
	return d.compactBottomLocked(start, end)
}

// deepestLevel is the deepest level below L0 that holds tables, or 0.
func (v *version) deepestLevel() int {
	for l := numLevels - 1; l > 0; l-- {
		if len(v.levels[l]) > 0 {
			return l
		}
	}
	return 0
}

// runManualLocked runs compaction c for Compact. d.mu is held; it is
// released while the compaction runs.
func (d *DB) runManualLocked(c *compaction) error {
	d.startCompactionLocked(c)
	d.mu.Unlock()
	err := d.runCompaction(c)
	d.purgeObsolete()
	d.mu.Lock()
	d.finishCompactionLocked(c)
	if err != nil {
		if isRetryable(err) { // out of space: not fatal
			return fmt.Errorf("compaction %s: %w", c, noSpace(err))
		}
		d.mu.Unlock()
		d.setBackgroundError(fmt.Errorf("compaction %s: %w", c, err))
		d.mu.Lock()
		return d.failure(err)
	}
	return nil
}

// compactBottomLocked rewrites in place, one at a time, the tables of the
// deepest level overlapping [start, end] that hold deletions or range
// tombstones. Tables of one level are disjoint, tombstones included, and
// none lies below, so each rewrite may drop every deletion and version no
// snapshot needs. One table at a time needs free space for one table only
// (Compact reclaims space on a full disk). Tables written by this pass are
// not taken again: with a snapshot still open, their deletions stay. d.mu
// is held; it is released while reading table properties and compacting.
func (d *DB) compactBottomLocked(start, end []byte) error {
	limit := d.mu.versions.nextFileNum // tables written from here on are this pass's
	seen := map[uint64]bool{}
	for {
		if d.mu.closed {
			return ErrClosed
		}
		if d.mu.bgErr != nil {
			return d.mu.bgErr
		}
		v := d.mu.versions.current
		level := v.deepestLevel()
		if level == 0 {
			return nil
		}
		var pick *tableMeta
		for _, f := range v.overlaps(level, start, end) {
			if f.FileNum >= limit || seen[f.FileNum] || f.compacting {
				continue
			}
			seen[f.FileNum] = true
			d.mu.Unlock()
			if h := d.testHookBottomPick; h != nil {
				h()
			}
			garbage, err := d.holdsDeletions(f.FileNum)
			d.mu.Lock()
			current := !f.compacting && slices.Contains(d.mu.versions.current.levels[level], f)
			if err != nil {
				if !current {
					// Compacted away while unlocked, and its file
					// removed: the read's failure says nothing.
					continue
				}
				return err
			}
			if garbage && current {
				pick = f
				break
			}
		}
		if pick == nil {
			return nil
		}
		c := &compaction{
			inputs:      []compactionLevel{{level, []*tableMeta{pick}}},
			outputLevel: level,
			elide:       true,
			reason:      "manual-bottom",
		}
		c.smallest, c.largest = bounds(c.inputs[0].files)
		if err := d.runManualLocked(c); err != nil {
			return err
		}
	}
}

// holdsDeletions reports whether table n holds point deletions or range
// tombstones (from its properties).
func (d *DB) holdsDeletions(n uint64) (bool, error) {
	rd, release, err := d.tableCache.get(n)
	if err != nil {
		return false, err
	}
	defer release()
	p := rd.Properties()
	return p.NumDeletions > 0 || p.NumRangeTombstones > 0, nil
}
