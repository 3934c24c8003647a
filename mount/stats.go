package mount

import (
	"strings"
	"time"

	"github.com/lsmfs/lsmfs/lsm"
)

// Stats is what `lsmfs stats` shows and the control socket serves as JSON
// (GET /v1/stats). Counters count since the daemon (or, for an unmounted
// data directory, the read-only engine) opened the engine. The JSON field
// names are an interface: add fields, do not rename them.
type Stats struct {
	// Source is "daemon" (a mounted filesystem, live figures) or "datadir"
	// (an unmounted data directory opened read-only: no operations, and the
	// counters only cover opening it).
	Source     string    `json:"source"`
	Time       time.Time `json:"time"`
	DataDir    string    `json:"datadir"`
	Mountpoint string    `json:"mountpoint,omitempty"`
	// PID is the daemon's process id (0 for an unmounted data directory).
	PID           int     `json:"pid,omitempty"`
	UptimeSeconds float64 `json:"uptime_seconds,omitempty"`
	ReadOnly      bool    `json:"read_only"`
	// MetricsAddress is where the Prometheus endpoint listens (metrics=).
	MetricsAddress string `json:"metrics_address,omitempty"`

	// MountOptions is the -o list the daemon runs with (defaults left out);
	// FUSEOptions are the options handed to the kernel; EngineOptions are
	// the engine's effective options (lsm.Options.String, defaults filled).
	MountOptions  string            `json:"mount_options"`
	FUSEOptions   []string          `json:"fuse_options,omitempty"`
	EngineOptions map[string]string `json:"engine_options"`

	// Ops are the FUSE operations by type, in protocol order; types never
	// requested are left out.
	Ops []OpStats `json:"ops"`

	Journal    JournalStats    `json:"journal"`
	Memtable   MemtableStats   `json:"memtable"`
	Levels     []LevelStats    `json:"levels"`
	Compaction CompactionStats `json:"compaction"`
	ValueLog   ValueLogStats   `json:"value_log"`
	Cache      CacheStats      `json:"cache"`
	Reads      ReadStats       `json:"reads"`
	// BackgroundError is the engine's sticky background error, if any: the
	// engine refuses writes after it.
	BackgroundError string `json:"background_error,omitempty"`
}

// JournalStats describe the write-ahead journal.
type JournalStats struct {
	Records          uint64 `json:"records"`
	Frames           uint64 `json:"frames"`
	CompressedFrames uint64 `json:"compressed_frames"`
	Forces           uint64 `json:"forces"`
	// RawBytes and StoredBytes are frame payloads before and after
	// compression; DeviceBytes adds headers and padding.
	RawBytes    uint64 `json:"raw_bytes"`
	StoredBytes uint64 `json:"stored_bytes"`
	DeviceBytes uint64 `json:"device_bytes"`
	// CompressionRatio is RawBytes/StoredBytes.
	CompressionRatio float64 `json:"compression_ratio"`
	// RecordsPerForce measures group commit: operations made durable by
	// one device force.
	RecordsPerForce     float64 `json:"records_per_force"`
	MeanRecordsPerFrame float64 `json:"mean_records_per_frame"`
	MaxRecordsPerFrame  uint64  `json:"max_records_per_frame"`
	ForceSeconds        float64 `json:"force_seconds_total"`
	ForceSecondsMax     float64 `json:"force_seconds_max"`
	Checkpoints         uint64  `json:"checkpoints"`
	SpaceWaits          uint64  `json:"space_waits"`
	SpaceWaitSeconds    float64 `json:"space_wait_seconds_total"`
	// LiveBytes is the ring space not yet reclaimable; Capacity the ring.
	LiveBytes int64 `json:"live_bytes"`
	Capacity  int64 `json:"capacity_bytes"`
}

// MemtableStats describe the memtable pipeline and its in-memory policy.
type MemtableStats struct {
	Policy              string  `json:"policy"`
	Segments            int     `json:"segments"`
	Bytes               uint64  `json:"bytes"`
	PeakBytes           uint64  `json:"peak_bytes"`
	InMemoryCompactions uint64  `json:"in_memory_compactions"`
	InMemoryMerges      uint64  `json:"in_memory_merges"`
	InMemoryDropped     uint64  `json:"in_memory_dropped_entries"`
	DuplicateShare      float64 `json:"duplicate_share"`
}

// LevelStats describe one level of the tree (levels without tables are
// left out).
type LevelStats struct {
	Level  int    `json:"level"`
	Tables int    `json:"tables"`
	Bytes  uint64 `json:"bytes"`
}

// CompactionStats describe flushes and compactions.
type CompactionStats struct {
	UserBytes    uint64 `json:"user_bytes"`
	FlushBytes   uint64 `json:"flush_bytes"`
	WrittenBytes uint64 `json:"compaction_written_bytes"`
	ReadBytes    uint64 `json:"compaction_read_bytes"`
	Flushes      uint64 `json:"flushes"`
	Compactions  uint64 `json:"compactions"`
	Moves        uint64 `json:"moves"`
	WriteStalls  uint64 `json:"write_stalls"`
	// WriteAmplification is bytes written to disk (journal, flushes,
	// compactions) per user byte.
	WriteAmplification float64 `json:"write_amplification"`
}

// ValueLogStats describe the value log.
type ValueLogStats struct {
	Segments  int    `json:"segments"`
	Bytes     uint64 `json:"bytes"`
	LiveBytes uint64 `json:"live_bytes"`
	// LiveRatio is LiveBytes/Bytes (1 with no sealed segment).
	LiveRatio      float64 `json:"live_ratio"`
	Cleaned        uint64  `json:"cleaned_segments"`
	RewrittenBytes uint64  `json:"rewritten_bytes"`
	// FlushMovedBytes counts the value bytes synchronous writes kept
	// inline that flushes then moved to the value log.
	FlushMovedBytes uint64 `json:"flush_moved_bytes"`
	DiskReads       uint64 `json:"disk_reads"`
	DiskBytes       uint64 `json:"disk_bytes"`
	// ReadAheads counts runs of a file read in sequence served from the
	// daemon's own read-ahead.
	ReadAheads uint64 `json:"read_aheads"`
}

// CacheStats describe the block cache.
type CacheStats struct {
	Capacity int64   `json:"capacity_bytes"`
	Used     int64   `json:"used_bytes"`
	Hits     uint64  `json:"hits"`
	Misses   uint64  `json:"misses"`
	HitRatio float64 `json:"hit_ratio"`
	Evicted  uint64  `json:"evicted"`
}

// ReadStats describe table reads.
type ReadStats struct {
	BloomUseful  uint64 `json:"bloom_useful"`
	BloomUseless uint64 `json:"bloom_useless"`
	BlocksRead   uint64 `json:"table_blocks_read"`
	BytesRead    uint64 `json:"table_bytes_read"`
}

// EngineStats returns the figures of an open engine: everything in Stats
// except the daemon's (source, mount point, pid, operations, FUSE options).
func EngineStats(db *lsm.DB, dataDir string) Stats {
	m := db.Metrics()
	j := m.Journal
	s := Stats{
		Time:    time.Now(),
		DataDir: dataDir,
		Journal: JournalStats{
			Records: j.Records, Frames: j.Frames, CompressedFrames: j.CompressedFrames, Forces: j.Forces,
			RawBytes: j.RawBytes, StoredBytes: j.StoredBytes, DeviceBytes: j.DeviceBytes,
			CompressionRatio:    j.CompressionRatio(),
			MeanRecordsPerFrame: j.MeanRecordsPerFrame, MaxRecordsPerFrame: j.MaxRecordsPerFrame,
			ForceSeconds: j.ForceLatencyTotal.Seconds(), ForceSecondsMax: j.ForceLatencyMax.Seconds(),
			Checkpoints: j.Checkpoints, SpaceWaits: j.SpaceWaits, SpaceWaitSeconds: j.SpaceWaitTime.Seconds(),
			LiveBytes: j.LiveBytes, Capacity: j.Capacity,
		},
		Memtable: MemtableStats{
			Policy: string(m.MemtablePolicy), Segments: m.MemtableCount, Bytes: m.MemtableBytes,
			PeakBytes: m.PeakMemtableBytes, InMemoryCompactions: m.InMemoryCompactions,
			InMemoryMerges: m.InMemoryMerges, InMemoryDropped: m.InMemoryDropped, DuplicateShare: m.DuplicateShare,
		},
		Compaction: CompactionStats{
			UserBytes: m.UserBytes, FlushBytes: m.FlushBytes, WrittenBytes: m.CompactionBytes,
			ReadBytes: m.CompactionBytesIn, Flushes: m.Flushes, Compactions: m.Compactions, Moves: m.Moves,
			WriteStalls: m.WriteStalls, WriteAmplification: m.WriteAmplification(),
		},
		ValueLog: ValueLogStats{
			Segments: m.Vlog.Segments, Bytes: m.Vlog.Bytes, LiveBytes: m.Vlog.LiveBytes, LiveRatio: 1,
			Cleaned: m.Vlog.Cleaned, RewrittenBytes: m.Vlog.Rewritten, DiskReads: m.Vlog.DiskReads, DiskBytes: m.Vlog.DiskBytes,
			ReadAheads: m.Vlog.ReadAheads, FlushMovedBytes: m.Vlog.FlushMoved,
		},
		Cache: CacheStats{
			Capacity: m.Cache.Capacity, Used: m.Cache.Used, Hits: m.Cache.Hits, Misses: m.Cache.Misses,
			HitRatio: m.Cache.HitRatio(), Evicted: m.Cache.KeysEvicted,
		},
		Reads: ReadStats{
			BloomUseful: m.BloomUseful, BloomUseless: m.BloomUseless,
			BlocksRead: m.TableBlocksRead, BytesRead: m.TableBytesRead,
		},
		BackgroundError: m.BackgroundError,
		Levels:          []LevelStats{},
		Ops:             []OpStats{},
	}
	if j.Forces > 0 {
		s.Journal.RecordsPerForce = float64(j.Records) / float64(j.Forces)
	}
	if m.Vlog.Bytes > 0 {
		s.ValueLog.LiveRatio = float64(m.Vlog.LiveBytes) / float64(m.Vlog.Bytes)
	}
	for l, lm := range m.Levels {
		if lm.Tables > 0 {
			s.Levels = append(s.Levels, LevelStats{Level: l, Tables: lm.Tables, Bytes: lm.Bytes})
		}
	}
	o := db.Options()
	s.EngineOptions = parseOptionLines(o.String())
	return s
}

// parseOptionLines parses lsm.Options.String's "name=value" lines.
func parseOptionLines(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			out[k] = v
		}
	}
	return out
}
