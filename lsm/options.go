package lsm

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/lsmfs/lsmfs/blockcache"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// Options configure an engine. The zero value is usable: EnsureDefaults fills
// every unset field with the default named in its comment.
type Options struct {
	// FS is the filesystem holding the engine's directory. Default vfs.Default.
	FS vfs.FS
	// Logger receives the engine's logs. Default: discard.
	Logger *slog.Logger
	// ReadOnly opens without writing: no replay into new tables, no
	// compactions, and writes fail with ErrReadOnly.
	ReadOnly bool

	// UUID identifies the owner (the filesystem); used by Format and checked
	// against the journal's superblock by Open. Zero at Open: take the UUID
	// recorded in the manifest.
	UUID [16]byte
	// Journal configures the write-ahead journal.
	Journal JournalOptions

	// MemtableSize is the memory of the memtable pipeline at which it is
	// flushed to an L0 table. Default 64 MiB.
	MemtableSize int64
	// InMemoryFlushSize is the size of the active (mutable) segment; when it
	// is full it joins the pipeline of immutable segments, where the
	// MemtablePolicy works on it. Default MemtableSize/8.
	InMemoryFlushSize int64
	// MemtablePolicy is the in-memory compaction policy: none, basic, eager
	// or adaptive. Default basic.
	MemtablePolicy MemtablePolicy
	// AdaptiveThreshold is the share of duplicate keys at or above which the
	// adaptive policy merges eagerly. Default 0.3.
	AdaptiveThreshold float64
	// MaxMemtables bounds memtable memory at MaxMemtables*MemtableSize
	// (the pipeline being flushed plus the one filling); writes stall
	// beyond. Default 2.
	MaxMemtables int

	// Cache is the block cache; shared by several engines if set. Default: a
	// new cache of CacheSize bytes.
	Cache *blockcache.Cache
	// CacheSize sizes the cache created when Cache is nil. Default 128 MiB;
	// negative: no cache.
	CacheSize int64

	// BlockSize is the target SSTable data block size. Default 8 KiB.
	BlockSize int
	// BloomBitsPerKey sizes the per-table bloom filter. Default 10; negative
	// disables filters.
	BloomBitsPerKey int
	// DisableCompression turns LZ4 off for SSTable blocks.
	DisableCompression bool
	// TargetFileSize is the size at which compaction output tables are cut.
	// Default 8 MiB.
	TargetFileSize int64

	// Compaction is the on-disk compaction style: leveled or tiered.
	// Default leveled.
	Compaction CompactionStyle
	// TierRatio: under the tiered style, a run joins a merge while its size
	// is at most TierRatio times the runs before it. Default 2.
	TierRatio float64

	// L0CompactionTrigger is the number of L0 tables (leveled) or sorted
	// runs (tiered) that triggers a compaction. Default 4.
	L0CompactionTrigger int
	// L0StopWritesTrigger is the number of L0 tables at which writes stall.
	// Default 20.
	L0StopWritesTrigger int
	// LBaseMaxBytes is the target size of L1. Default 64 MiB.
	LBaseMaxBytes int64
	// LevelMultiplier is the size ratio between adjacent levels. Default 10.
	LevelMultiplier int
	// MaxConcurrentCompactions bounds background compactions. Default 1.
	MaxConcurrentCompactions int
	// MaxManifestSize rotates the manifest when it grows past it. Default 4 MiB.
	MaxManifestSize int64

	// ValueThreshold is the size from which a value goes to the value log
	// and the tree keeps a pointer. Default 4 KiB; negative keeps every
	// value in the tree.
	ValueThreshold int
	// VlogSegmentSize is the size at which a value-log segment is sealed and
	// a new one started. Default 64 MiB; on a data device under 3,200 MiB, a
	// fiftieth of it, at least 1 MiB (set by Open, vlogSegmentSizeFor).
	VlogSegmentSize int64
	// VlogCleanThreshold: the background cleaner rewrites sealed segments
	// whose live share fell below it. Default 0.5.
	VlogCleanThreshold float64
	// FlushMoveMin is the least a flush must hold of the large values that
	// synchronous batches kept inline (see Apply) to move them to value-log
	// segments of its own; below it they stay in the flush's tables.
	// Default 1 MiB; negative never moves them.
	FlushMoveMin int64

	// SpaceReserve is the free space of the data device kept for deletions
	// and for the flushes and compactions that turn them into free space:
	// batches that only add data fail with ErrNoSpace below it (see
	// space.go). Default (0): 1% of the device, at most 64 MiB, measured at
	// Open; negative: none.
	SpaceReserve int64
}

// JournalOptions configure the write-ahead journal.
type JournalOptions struct {
	// Path is the journal: a regular file or a block device. Default: the
	// path recorded at Format, or DIR/journal.
	Path string
	// Size is the ring size of a file journal, used by Format. Default 256 MiB.
	// A device journal uses the whole device.
	Size int64
	// CommitInterval bounds how long an unsynced write may stay in memory
	// before the journal forces it. Default 5s.
	CommitInterval time.Duration
	// MaxFrameBytes bounds the raw record bytes gathered into one frame.
	// Default 1 MiB.
	MaxFrameBytes int
	// DisableCompression turns LZ4 off for journal frames.
	DisableCompression bool
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Journal.Size == 0 {
		o.Journal.Size = 256 << 20
	}
	if o.Journal.CommitInterval == 0 {
		o.Journal.CommitInterval = 5 * time.Second
	}
	if o.Journal.MaxFrameBytes == 0 {
		o.Journal.MaxFrameBytes = 1 << 20
	}
	if o.MemtableSize == 0 {
		o.MemtableSize = 64 << 20
	}
	if o.MaxMemtables == 0 {
		o.MaxMemtables = 2
	}
	if o.InMemoryFlushSize == 0 {
		o.InMemoryFlushSize = o.MemtableSize / 8
		if o.InMemoryFlushSize < 64<<10 {
			o.InMemoryFlushSize = 64 << 10
		}
	}
	if o.MemtablePolicy == "" {
		o.MemtablePolicy = PolicyBasic
	}
	if o.AdaptiveThreshold == 0 {
		o.AdaptiveThreshold = 0.3
	}
	if o.CacheSize == 0 {
		o.CacheSize = 128 << 20
	}
	if o.BlockSize == 0 {
		o.BlockSize = 8 << 10
	}
	if o.BloomBitsPerKey == 0 {
		o.BloomBitsPerKey = 10
	}
	if o.TargetFileSize == 0 {
		o.TargetFileSize = 8 << 20
	}
	if o.Compaction == "" {
		o.Compaction = CompactionLeveled
	}
	if o.TierRatio == 0 {
		o.TierRatio = 2
	}
	if o.L0CompactionTrigger == 0 {
		o.L0CompactionTrigger = 4
	}
	if o.L0StopWritesTrigger == 0 {
		// Room above the compaction trigger for L0 to fill while a
		// compaction runs, also for a trigger set high (l0_trigger).
		o.L0StopWritesTrigger = max(20, 2*o.L0CompactionTrigger+4)
	}
	if o.LBaseMaxBytes == 0 {
		o.LBaseMaxBytes = 64 << 20
	}
	if o.LevelMultiplier == 0 {
		o.LevelMultiplier = 10
	}
	if o.MaxConcurrentCompactions == 0 {
		o.MaxConcurrentCompactions = 1
	}
	if o.MaxManifestSize == 0 {
		o.MaxManifestSize = 4 << 20
	}
	if o.ValueThreshold == 0 {
		o.ValueThreshold = 4 << 10
	}
	if o.VlogSegmentSize == 0 {
		o.VlogSegmentSize = 64 << 20
	}
	if o.VlogCleanThreshold == 0 {
		o.VlogCleanThreshold = 0.5
	}
	if o.FlushMoveMin == 0 {
		o.FlushMoveMin = defaultFlushMoveMin
	}
	return o
}

// Validate reports the first out-of-range option by name.
func (o *Options) Validate() error {
	switch {
	case o.MemtableSize < 256<<10 || o.MemtableSize > 2<<30:
		return fmt.Errorf("lsm: memtable size %d out of range [256KiB, 2GiB]", o.MemtableSize)
	case o.MaxMemtables < 2:
		return fmt.Errorf("lsm: max memtables %d < 2", o.MaxMemtables)
	case o.InMemoryFlushSize < 64<<10 || o.InMemoryFlushSize > o.MemtableSize:
		return fmt.Errorf("lsm: in-memory flush size %d out of range [64KiB, memtable size %d]", o.InMemoryFlushSize, o.MemtableSize)
	case o.MemtablePolicy.valid() != nil:
		return o.MemtablePolicy.valid()
	case o.AdaptiveThreshold <= 0 || o.AdaptiveThreshold > 1:
		return fmt.Errorf("lsm: adaptive threshold %g out of range (0, 1]", o.AdaptiveThreshold)
	case o.BlockSize < 1<<10 || o.BlockSize > 1<<20:
		return fmt.Errorf("lsm: block size %d out of range [1KiB, 1MiB]", o.BlockSize)
	case o.TargetFileSize < 64<<10:
		return fmt.Errorf("lsm: target file size %d < 64KiB", o.TargetFileSize)
	case o.Compaction.valid() != nil:
		return o.Compaction.valid()
	case o.TierRatio < 1:
		return fmt.Errorf("lsm: tier ratio %g < 1", o.TierRatio)
	case o.L0CompactionTrigger < 1:
		return fmt.Errorf("lsm: l0 compaction trigger %d < 1", o.L0CompactionTrigger)
	case o.L0StopWritesTrigger <= o.L0CompactionTrigger:
		return fmt.Errorf("lsm: l0 stop-writes trigger %d <= compaction trigger %d", o.L0StopWritesTrigger, o.L0CompactionTrigger)
	case o.LevelMultiplier < 2:
		return fmt.Errorf("lsm: level multiplier %d < 2", o.LevelMultiplier)
	case o.MaxConcurrentCompactions < 1:
		return fmt.Errorf("lsm: max concurrent compactions %d < 1", o.MaxConcurrentCompactions)
	case o.Journal.Size < 4<<20:
		return fmt.Errorf("lsm: journal size %d < 4MiB", o.Journal.Size)
	case o.ValueThreshold > 0 && o.ValueThreshold < 16:
		return fmt.Errorf("lsm: value threshold %d < 16 (a pointer is about 16 bytes)", o.ValueThreshold)
	case o.VlogSegmentSize < 64<<10:
		return fmt.Errorf("lsm: value-log segment size %d < 64KiB", o.VlogSegmentSize)
	case o.VlogCleanThreshold <= 0 || o.VlogCleanThreshold > 1:
		return fmt.Errorf("lsm: value-log clean threshold %g out of range (0, 1]", o.VlogCleanThreshold)
	case o.Journal.CommitInterval < 0:
		return fmt.Errorf("lsm: negative commit interval %s", o.Journal.CommitInterval)
	}
	return nil
}

// String prints the effective options, one per line, for `lsmfs stats`.
func (o *Options) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "memtable_size=%d\ninmemory_flush_size=%d\nmemtable_policy=%s\nadaptive_threshold=%g\nmax_memtables=%d\n",
		o.MemtableSize, o.InMemoryFlushSize, o.MemtablePolicy, o.AdaptiveThreshold, o.MaxMemtables)
	fmt.Fprintf(&b, "cache_size=%d\nblock_size=%d\nbloom_bits_per_key=%d\ncompression=%v\n", o.CacheSize, o.BlockSize, o.BloomBitsPerKey, !o.DisableCompression)
	fmt.Fprintf(&b, "compaction=%s\ntier_ratio=%g\n", o.Compaction, o.TierRatio)
	fmt.Fprintf(&b, "target_file_size=%d\nl0_trigger=%d\nl0_stop_writes=%d\nlbase_max_bytes=%d\nlevel_ratio=%d\ncompaction_concurrency=%d\n",
		o.TargetFileSize, o.L0CompactionTrigger, o.L0StopWritesTrigger, o.LBaseMaxBytes, o.LevelMultiplier, o.MaxConcurrentCompactions)
	fmt.Fprintf(&b, "value_threshold=%d\nvlog_segment_size=%d\nvlog_clean_threshold=%g\n", o.ValueThreshold, o.VlogSegmentSize, o.VlogCleanThreshold)
	fmt.Fprintf(&b, "space_reserve=%d\n", o.SpaceReserve)
	fmt.Fprintf(&b, "journal=%s\njournal_size=%d\ncommit_interval=%s\njournal_max_frame=%d\njournal_compression=%v\n",
		o.Journal.Path, o.Journal.Size, o.Journal.CommitInterval, o.Journal.MaxFrameBytes, !o.Journal.DisableCompression)
	return b.String()
}
