package lsm

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/lsmfs/lsmfs/blockcache"
	"github.com/lsmfs/lsmfs/journal"
)

// dbMetrics are the engine's own counters.
type dbMetrics struct {
	userBytes       atomic.Uint64
	flushes         atomic.Uint64
	flushBytes      atomic.Uint64
	compactions     atomic.Uint64
	moves           atomic.Uint64
	compactBytesIn  atomic.Uint64
	compactBytesOut atomic.Uint64
	stalls          atomic.Uint64
	peakMemtable    atomic.Uint64
	memCompactions  atomic.Uint64
	memMerges       atomic.Uint64
	memDropped      atomic.Uint64
	vlogCleaned     atomic.Uint64
	vlogRewritten   atomic.Uint64
	// flushValuesMoved counts inline value bytes flushes moved to the
	// value log (valueSeparator).
	flushValuesMoved atomic.Uint64
}

// LevelMetrics describe one level.
type LevelMetrics struct {
	Tables int
	Bytes  uint64
}

// Metrics are engine counters for `lsmfs stats` and benchmarks.
type Metrics struct {
	// MemtableCount and MemtableBytes count the segments (active and
	// pipeline) and the memory they hold; PeakMemtableBytes is the most
	// memory they held since open.
	MemtableCount     int
	MemtableBytes     uint64
	MemtableEntries   uint64
	PeakMemtableBytes uint64
	MemtablePolicy    MemtablePolicy
	// InMemoryCompactions counts segments flattened or merged in memory;
	// InMemoryMerges the merges, which dropped InMemoryDropped entries.
	InMemoryCompactions, InMemoryMerges, InMemoryDropped uint64
	// DuplicateShare is the adaptive policy's last measurement.
	DuplicateShare float64
	Levels         [numLevels]LevelMetrics

	// UserBytes is the encoded size of all batches applied since open.
	UserBytes uint64
	// FlushBytes and CompactionBytes are the table bytes written since open;
	// FlushBytes also counts the values flushes moved to the value log
	// (Vlog.FlushMoved).
	FlushBytes, CompactionBytes uint64
	// CompactionBytesIn is the table bytes read by compactions.
	CompactionBytesIn    uint64
	Flushes, Compactions uint64
	Moves                uint64
	WriteStalls          uint64
	BloomUseful          uint64
	BloomUseless         uint64
	TableBlocksRead      uint64
	TableBytesRead       uint64
	Cache                blockcache.Metrics
	Journal              journal.Stats
	Vlog                 VlogStats
	BackgroundError      string
}

// WriteAmplification is bytes written to disk (journal, value log,
// flushes, compactions) per user byte.
func (m *Metrics) WriteAmplification() float64 {
	if m.UserBytes == 0 {
		return 0
	}
	disk := m.Journal.DeviceBytes + m.Vlog.BytesWritten + m.FlushBytes + m.CompactionBytes
	return float64(disk) / float64(m.UserBytes)
}

// Metrics returns a snapshot of the engine's counters.
func (d *DB) Metrics() Metrics {
	rs := d.loadReadState()
	defer rs.unref()
	var m Metrics
	for _, mt := range rs.memtables {
		m.MemtableCount++
		m.MemtableBytes += mt.Memory()
		m.MemtableEntries += mt.Entries()
	}
	if rs.version != nil {
		for l, files := range rs.version.levels {
			m.Levels[l].Tables = len(files)
			m.Levels[l].Bytes = rs.version.levelSize(l)
		}
	}
	m.PeakMemtableBytes = max(d.metrics.peakMemtable.Load(), m.MemtableBytes)
	m.MemtablePolicy = d.opts.MemtablePolicy
	m.InMemoryCompactions = d.metrics.memCompactions.Load()
	m.InMemoryMerges = d.metrics.memMerges.Load()
	m.InMemoryDropped = d.metrics.memDropped.Load()
	m.UserBytes = d.metrics.userBytes.Load()
	m.FlushBytes = d.metrics.flushBytes.Load()
	m.CompactionBytes = d.metrics.compactBytesOut.Load()
	m.CompactionBytesIn = d.metrics.compactBytesIn.Load()
	m.Flushes = d.metrics.flushes.Load()
	m.Compactions = d.metrics.compactions.Load()
	m.Moves = d.metrics.moves.Load()
	m.WriteStalls = d.metrics.stalls.Load()
	m.BloomUseful = d.readStats.BloomUseful.Load()
	m.BloomUseless = d.readStats.BloomUseless.Load()
	m.TableBlocksRead = d.readStats.BlocksRead.Load()
	m.TableBytesRead = d.readStats.BytesRead.Load()
	if d.cache != nil {
		m.Cache = d.cache.Metrics()
	}
	if d.wal != nil {
		m.Journal = d.wal.Stats()
	}
	d.mu.Lock()
	m.DuplicateShare = d.mu.dupShare
	if d.mu.versions != nil {
		m.Vlog = d.vlogStatsLocked()
	}
	if d.mu.bgErr != nil {
		m.BackgroundError = d.mu.bgErr.Error()
	}
	d.mu.Unlock()
	return m
}

// String prints the metrics as a small table.
func (m *Metrics) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "memtable (%s): %d segments, %d bytes, peak %d; in-memory compactions %d, merges %d dropping %d entries; duplicate share %.2f\n",
		m.MemtablePolicy, m.MemtableCount, m.MemtableBytes, m.PeakMemtableBytes, m.InMemoryCompactions, m.InMemoryMerges, m.InMemoryDropped, m.DuplicateShare)
	for l, lm := range m.Levels {
		if lm.Tables > 0 {
			fmt.Fprintf(&b, "L%d: %d tables, %d bytes\n", l, lm.Tables, lm.Bytes)
		}
	}
	fmt.Fprintf(&b, "user bytes %d, flushed %d, compacted %d (in %d), write amplification %.2f\n",
		m.UserBytes, m.FlushBytes, m.CompactionBytes, m.CompactionBytesIn, m.WriteAmplification())
	fmt.Fprintf(&b, "flushes %d, compactions %d, moves %d, stalls %d\n", m.Flushes, m.Compactions, m.Moves, m.WriteStalls)
	fmt.Fprintf(&b, "bloom useful %d useless %d; table blocks read %d\n", m.BloomUseful, m.BloomUseless, m.TableBlocksRead)
	fmt.Fprintf(&b, "value log: %d segments, %d bytes (%d live), cleaned %d, rewrote %d bytes, %d disk reads\n",
		m.Vlog.Segments, m.Vlog.Bytes, m.Vlog.LiveBytes, m.Vlog.Cleaned, m.Vlog.Rewritten, m.Vlog.DiskReads)
	return b.String()
}
