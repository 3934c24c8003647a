package mount

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/lsmfs/lsmfs/lsm"
)

// CompactProgress reports how far Compact is. Phase is "compact" (tables
// merged down to the last level: Done and Total are table bytes read) or
// "clean" (value-log segments with dead values rewritten: Done and Total are
// value bytes). Total is an estimate made when the phase starts; Done never
// passes it before the phase ends, and equals it when it does.
type CompactProgress struct {
	Phase string `json:"phase"`
	Done  uint64 `json:"done"`
	Total uint64 `json:"total"`
}

// CompactResult is what Compact did.
type CompactResult struct {
	// TablesBefore/After and TableBytesBefore/After count the tables of
	// every level.
	TablesBefore     int    `json:"tables_before"`
	TablesAfter      int    `json:"tables_after"`
	TableBytesBefore uint64 `json:"table_bytes_before"`
	TableBytesAfter  uint64 `json:"table_bytes_after"`
	// SegmentsCleaned counts value-log segments rewritten and removed
	// while Compact ran (by it or by the background cleaner).
	SegmentsCleaned int `json:"segments_cleaned"`
	// VlogBytesBefore/After are the sealed value-log segments' sizes.
	VlogBytesBefore uint64 `json:"vlog_bytes_before"`
	VlogBytesAfter  uint64 `json:"vlog_bytes_after"`
	// DiskBytesBefore/After are the space the files in the data directory
	// take on disk (allocated blocks, the journal file included).
	DiskBytesBefore uint64  `json:"disk_bytes_before"`
	DiskBytesAfter  uint64  `json:"disk_bytes_after"`
	Seconds         float64 `json:"seconds"`
}

// compactPollInterval is how often Compact samples the engine's counters
// for progress.
const compactPollInterval = 200 * time.Millisecond

// Compact compacts the whole tree down to its last level (lsm.DB.Compact
// over the whole key range, after flushing the memtables) and then cleans
// the value log (lsm.DB.CleanValueLog): space held by deleted and
// overwritten data is given back. progress, if not nil, is called from
// another goroutine every compactPollInterval and once at the end of each
// phase. dataDir is the engine's directory, for the disk usage figures.
func Compact(db *lsm.DB, dataDir string, progress func(CompactProgress)) (CompactResult, error) {
	start := time.Now()
	var res CompactResult
	before := db.Metrics()
	for _, l := range before.Levels {
		res.TablesBefore += l.Tables
		res.TableBytesBefore += l.Bytes
	}
	res.VlogBytesBefore = before.Vlog.Bytes
	res.DiskBytesBefore = DirDiskUsage(dataDir)

	// Phase 1: the tables (and the memtables, flushed first).
	total := res.TableBytesBefore + before.MemtableBytes
	stop := watchProgress(progress, "compact", total, func(m lsm.Metrics) uint64 {
		return m.CompactionBytesIn - before.CompactionBytesIn + m.FlushBytes - before.FlushBytes
	}, db)
	err := db.Compact(nil, nil)
	stop(err == nil)
	if err != nil {
		return res, fmt.Errorf("compact: %w", err)
	}

	// Phase 2: the value log.
	mid := db.Metrics()
	stop = watchProgress(progress, "clean", mid.Vlog.LiveBytes, func(m lsm.Metrics) uint64 {
		return m.Vlog.Rewritten - mid.Vlog.Rewritten
	}, db)
	n, err := db.CleanValueLog()
	stop(err == nil)
	if err != nil {
		return res, fmt.Errorf("clean value log: %w", err)
	}

	after := db.Metrics()
	// The background cleaner may have taken segments the compaction freed:
	// count those too.
	res.SegmentsCleaned = max(n, int(after.Vlog.Cleaned-before.Vlog.Cleaned))
	for _, l := range after.Levels {
		res.TablesAfter += l.Tables
		res.TableBytesAfter += l.Bytes
	}
	res.VlogBytesAfter = after.Vlog.Bytes
	res.DiskBytesAfter = DirDiskUsage(dataDir)
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// watchProgress calls progress with done(metrics) every
// compactPollInterval until the returned stop is called; stop(true) reports
// the phase complete (Done = Total).
func watchProgress(progress func(CompactProgress), phase string, total uint64, done func(lsm.Metrics) uint64, db *lsm.DB) (stop func(complete bool)) {
	if progress == nil {
		return func(bool) {}
	}
	if total == 0 {
		total = 1
	}
	report := func(d uint64) {
		if d >= total {
			d = total - 1
		}
		progress(CompactProgress{Phase: phase, Done: d, Total: total})
	}
	report(0)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(compactPollInterval)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				report(done(db.Metrics()))
			}
		}
	}()
	return func(complete bool) {
		close(quit)
		wg.Wait()
		if complete {
			progress(CompactProgress{Phase: phase, Done: total, Total: total})
		}
	}
}

// DirDiskUsage returns the bytes the regular files directly in dir take on
// disk (allocated blocks, as du counts them), or 0 if dir cannot be read.
func DirDiskUsage(dir string) uint64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var total uint64
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			total += uint64(st.Blocks) * 512
		}
	}
	return total
}
