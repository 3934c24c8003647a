package lsm

import (
	"fmt"
)

// CompactionStyle selects how tables are merged on disk.
type CompactionStyle string

const (
	// CompactionLeveled keeps L1+ levels of growing size (LevelMultiplier)
	// and merges a table into the overlapping tables of the next level:
	// low read and space amplification, more write amplification.
	CompactionLeveled CompactionStyle = "leveled"
	// CompactionTiered (size-tiered) keeps sorted runs and merges runs of
	// similar size (TierRatio): lower write amplification, more runs to read.
	CompactionTiered CompactionStyle = "tiered"
)

func (s CompactionStyle) valid() error {
	switch s {
	case CompactionLeveled, CompactionTiered:
		return nil
	}
	return fmt.Errorf("lsm: unknown compaction style %q (want leveled or tiered)", string(s))
}

// sortedRun is one sorted run of the tiered view: an L0 table, or a whole
// L1+ level.
type sortedRun struct {
	level int
	files []*tableMeta
	size  uint64
}

// runsLocked lists the version's sorted runs, newest first.
func (d *DB) runsLocked() []sortedRun {
	v := d.mu.versions.current
	var runs []sortedRun
	for i := len(v.levels[0]) - 1; i >= 0; i-- {
		f := v.levels[0][i]
		runs = append(runs, sortedRun{level: 0, files: []*tableMeta{f}, size: f.Size})
	}
	for l := 1; l < numLevels; l++ {
		if len(v.levels[l]) > 0 {
			runs = append(runs, sortedRun{level: l, files: v.levels[l], size: v.levelSize(l)})
		}
	}
	return runs
}

// pickTieredLocked merges a window of adjacent runs of similar size once
// there are L0CompactionTrigger runs or more: starting from the newest run,
// the window grows while the next older run is at most TierRatio times the
// window's size. One tiered compaction runs at a time.
func (d *DB) pickTieredLocked() *compaction {
	if d.mu.compacting > 0 {
		return nil
	}
	runs := d.runsLocked()
	if len(runs) < d.opts.L0CompactionTrigger || len(runs) < 2 {
		return nil
	}
	for i := 0; i+1 < len(runs); i++ {
		acc := runs[i].size
		j := i + 1
		for j < len(runs) && float64(runs[j].size) <= d.opts.TierRatio*float64(acc) {
			acc += runs[j].size
			j++
		}
		if j-i >= 2 {
			return d.setupTieredLocked(runs, i, j, "tier-size")
		}
	}
	// No similar sizes: when runs pile up, merge the newest ones anyway so
	// reads stay bounded.
	if len(runs) >= d.opts.L0StopWritesTrigger-1 {
		return d.setupTieredLocked(runs, 0, min(len(runs), max(2, d.opts.L0CompactionTrigger)), "tier-count")
	}
	return nil
}

// setupTieredLocked builds the compaction of runs[i:j] (i newest). The
// output is one run placed where it keeps runs ordered by age: in the level
// of the oldest input run if that is L1+; for L0-only inputs that include
// the oldest L0 table, in the deepest empty level above the older runs; else
// back in L0.
func (d *DB) setupTieredLocked(runs []sortedRun, i, j int, reason string) *compaction {
	c := &compaction{reason: reason}
	byLevel := map[int]int{}
	for _, r := range runs[i:j] {
		if anyCompacting(r.files) {
			return nil
		}
		if k, ok := byLevel[r.level]; ok {
			c.inputs[k].files = append(c.inputs[k].files, r.files...)
			continue
		}
		byLevel[r.level] = len(c.inputs)
		c.inputs = append(c.inputs, compactionLevel{level: r.level, files: append([]*tableMeta(nil), r.files...)})
	}
	oldest := runs[j-1]
	switch {
	case oldest.level > 0:
		c.outputLevel = oldest.level
	case j < len(runs) && runs[j].level == 0:
		c.outputLevel = 0 // older L0 tables remain: stay in L0
	default:
		next := numLevels
		if j < len(runs) {
			next = runs[j].level
		}
		c.outputLevel = next - 1
	}
	c.smallest, c.largest = bounds(c.allInputs())
	c.elide = j == len(runs)
	return c
}

// compactAllRunsLocked merges every run into one at the bottom (manual
// compaction under the tiered style). d.mu is held; it is released while
// the compaction runs.
func (d *DB) compactAllRunsLocked() error {
	if d.mu.closed || d.mu.closing {
		return ErrClosed
	}
	if d.mu.bgErr != nil {
		return d.mu.bgErr
	}
	runs := d.runsLocked()
	if len(runs) == 0 || (len(runs) == 1 && runs[0].level == numLevels-1) {
		return nil
	}
	c := d.setupTieredLocked(runs, 0, len(runs), "manual")
	if c == nil {
		return fmt.Errorf("lsm: manual compaction: inputs busy")
	}
	c.outputLevel = numLevels - 1
	return d.runManualLocked(c)
}
