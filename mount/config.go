package mount

import (
	"fmt"
	"io"
	"log"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/lsm"
)

// Config is a parsed -o option list: everything a mount can be told. The zero
// value is the default mount; ParseOptions builds one, String renders it back.
// Zero numeric fields take the engine's default (see Options for the values).
type Config struct {
	// Journal is the journal file or block device. Default: the journal
	// recorded at mkfs (DATADIR/journal).
	Journal string
	// CacheSize is the block cache size in bytes. Default 128 MiB; negative:
	// no cache (cache_size=0).
	CacheSize int64
	// MemtableSize is the memtable memory at which it is flushed. Default
	// 64 MiB.
	MemtableSize int64
	// MemtablePolicy is none, basic, eager or adaptive. Default "" (basic).
	MemtablePolicy string
	// InMemoryFlushSize is the size of the active memtable segment.
	// Default MemtableSize/8.
	InMemoryFlushSize int64
	// Compaction is leveled or tiered. Default "" (leveled).
	Compaction string
	// TierRatio is the size ratio of tiered compaction. Default 2.
	TierRatio float64
	// ValueThreshold is the value size from which data goes to the value
	// log. Default 4 KiB; negative: every value stays in the tree
	// (value_threshold=0).
	ValueThreshold int
	// CommitInterval bounds how long an unsynced write stays in memory.
	// Default 5s.
	CommitInterval time.Duration
	// Compression is "lz4" or "none". Default "" (lz4).
	Compression string
	// L0Trigger is the number of L0 tables that starts a compaction. Default 4.
	L0Trigger int
	// LevelRatio is the size ratio between levels. Default 10.
	LevelRatio int
	// CompactionConcurrency bounds background compactions. Default 1.
	CompactionConcurrency int
	// LogFile receives the daemon's log. Default "": syslog when daemonized,
	// stderr in the foreground (decided by cmd/lsmfs).
	LogFile string
	// Debug traces FUSE operations and logs at debug level. Default off.
	Debug bool
	// Metrics is the host:port on which the daemon serves Prometheus
	// metrics (port 0: any free port). Default "": no metrics endpoint.
	Metrics string

	// AllowOther lets other users access the mount. Default off.
	AllowOther bool
	// WritebackCache asks the kernel for the FUSE writeback cache. Default
	// off.
	WritebackCache bool
	// Readahead is the kernel's readahead for files of this mount, set in
	// /sys/class/bdi after the mount. Default 0: DefaultReadahead; negative:
	// no readahead (readahead=0).
	Readahead int64
	// StrictAtime makes every read lsmfs serves update the access time
	// (strictatime). Default off: relatime, or never with the noatime
	// kernel flag. As in mount(2), it overrides noatime.
	StrictAtime bool
	// NoDirAtime leaves directories' access times alone (nodiratime).
	NoDirAtime bool
	// ReadOnly mounts read-only. Default off.
	ReadOnly bool
	// FsName is the source shown in /proc/mounts. Default: DATADIR.
	FsName string
	// Subtype is the NAME of fuse.NAME in /proc/mounts. Default "lsmfs".
	Subtype string
	// KernelFlags are generic mount flags (nosuid, noexec, noatime, ...)
	// handed to the kernel, in option order, without contradictions.
	KernelFlags []string

	// Ignored lists the options accepted for mount(8), fstab or systemd and
	// otherwise ignored, for the log.
	Ignored []string

	// Format lets Mount format an empty or missing data directory. It is
	// not a mount option: lsmfs mount sets it, mount(8), fstab and systemd
	// mounts never do, so that a data disk that failed to mount under the
	// data directory is reported, not replaced by a new, empty filesystem
	// on the disk below. String leaves it out.
	Format bool
}

// DefaultReadahead is the kernel readahead a mount gets unless readahead=
// says otherwise: 1 MiB, one READ request of MaxWrite. The kernel's own
// default for a FUSE mount is 128 KiB, eight requests per MiB read in
// sequence, with at most two in flight: a sequential read waited for a
// round trip every 128 KiB (1,030 against 1,715 MiB/s in bench/fs).
const DefaultReadahead = 1 << 20

// DefaultSubtype is the FUSE subtype: mounts show as fuse.lsmfs.
const DefaultSubtype = "lsmfs"

// opposites pairs each kernel flag with the one it cancels.
var opposites = map[string]string{
	"suid": "nosuid", "nosuid": "suid",
	"dev": "nodev", "nodev": "dev",
	"exec": "noexec", "noexec": "exec",
	"atime": "noatime", "noatime": "atime",
	"sync": "async", "async": "sync",
}

func (c *Config) addKernelFlag(f string) {
	c.KernelFlags = slices.DeleteFunc(c.KernelFlags, func(g string) bool { return g == f || g == opposites[f] })
	c.KernelFlags = append(c.KernelFlags, f)
}

// EnsureDefaults fills the fields whose default does not depend on the data
// directory and returns c.
func (c *Config) EnsureDefaults() *Config {
	if c.Compression == "" {
		c.Compression = "lz4"
	}
	if c.Subtype == "" {
		c.Subtype = DefaultSubtype
	}
	return c
}

// Validate reports the first option out of range, by its -o name.
func (c *Config) Validate() error {
	switch c.Compression {
	case "", "lz4", "none":
	default:
		return fmt.Errorf("mount option compression=%s: want lz4 or none", c.Compression)
	}
	for _, f := range c.KernelFlags {
		if _, ok := opposites[f]; !ok && f != "dirsync" {
			return fmt.Errorf("mount option %q: not a kernel flag", f)
		}
	}
	o := c.EngineOptions(nil)
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return fmt.Errorf("mount options: %w", err)
	}
	return nil
}

// String renders c as an -o option list that ParseOptions parses back to an
// equal Config (ignored options are dropped). Defaults are left out.
func (c *Config) String() string {
	var opts []string
	add := func(name, val string) {
		if val != "" {
			opts = append(opts, name+"="+escapeOption(val))
		}
	}
	add("journal", c.Journal)
	switch {
	case c.CacheSize < 0:
		add("cache_size", "0")
	case c.CacheSize > 0:
		add("cache_size", FormatSize(c.CacheSize))
	}
	if c.MemtableSize > 0 {
		add("memtable_size", FormatSize(c.MemtableSize))
	}
	add("memtable_policy", c.MemtablePolicy)
	if c.InMemoryFlushSize > 0 {
		add("inmemory_flush_size", FormatSize(c.InMemoryFlushSize))
	}
	add("compaction", c.Compaction)
	if c.TierRatio > 0 {
		add("tier_ratio", strconv.FormatFloat(c.TierRatio, 'g', -1, 64))
	}
	switch {
	case c.ValueThreshold < 0:
		add("value_threshold", "0")
	case c.ValueThreshold > 0:
		add("value_threshold", FormatSize(int64(c.ValueThreshold)))
	}
	if c.CommitInterval > 0 {
		add("commit_interval", c.CommitInterval.String())
	}
	if c.Compression != "" && c.Compression != "lz4" {
		add("compression", c.Compression)
	}
	if c.L0Trigger > 0 {
		add("l0_trigger", strconv.Itoa(c.L0Trigger))
	}
	if c.LevelRatio > 0 {
		add("level_ratio", strconv.Itoa(c.LevelRatio))
	}
	if c.CompactionConcurrency > 0 {
		add("compaction_concurrency", strconv.Itoa(c.CompactionConcurrency))
	}
	add("log", c.LogFile)
	add("metrics", c.Metrics)
	if c.Debug {
		opts = append(opts, "debug")
	}
	if c.AllowOther {
		opts = append(opts, "allow_other")
	}
	if c.WritebackCache {
		opts = append(opts, "writeback_cache")
	}
	switch {
	case c.Readahead < 0:
		add("readahead", "0")
	case c.Readahead > 0:
		add("readahead", FormatSize(c.Readahead))
	}
	if c.StrictAtime {
		opts = append(opts, "strictatime")
	}
	if c.NoDirAtime {
		opts = append(opts, "nodiratime")
	}
	if c.ReadOnly {
		opts = append(opts, "ro")
	}
	add("fsname", c.FsName)
	if c.Subtype != "" && c.Subtype != DefaultSubtype {
		add("subtype", c.Subtype)
	}
	opts = append(opts, c.KernelFlags...)
	return strings.Join(opts, ",")
}

// Abs makes the paths in c (journal, log) absolute, relative to the current
// directory, so that c can be handed to a daemon that changes directory.
func (c *Config) Abs() error {
	for _, p := range []*string{&c.Journal, &c.LogFile} {
		if *p == "" {
			continue
		}
		a, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = a
	}
	return nil
}

// EngineOptions returns the lsm.Options c asks for; unset fields stay zero
// (the engine's defaults). logger may be nil.
func (c *Config) EngineOptions(logger *slog.Logger) *lsm.Options {
	return &lsm.Options{
		Logger:   logger,
		ReadOnly: c.ReadOnly,
		Journal: lsm.JournalOptions{
			Path:               c.Journal,
			CommitInterval:     c.CommitInterval,
			DisableCompression: c.Compression == "none",
		},
		MemtableSize:             c.MemtableSize,
		MemtablePolicy:           lsm.MemtablePolicy(c.MemtablePolicy),
		InMemoryFlushSize:        c.InMemoryFlushSize,
		Compaction:               lsm.CompactionStyle(c.Compaction),
		TierRatio:                c.TierRatio,
		ValueThreshold:           c.ValueThreshold,
		CacheSize:                c.CacheSize,
		DisableCompression:       c.Compression == "none",
		L0CompactionTrigger:      c.L0Trigger,
		LevelMultiplier:          c.LevelRatio,
		MaxConcurrentCompactions: c.CompactionConcurrency,
	}
}

// FUSEOptions merges c into the options the filesystem recommends (from
// fs.FS.MountOptions) and returns the options for fuse.NewServer. dataDir is
// the default source name. logger receives go-fuse's debug trace.
func (c *Config) FUSEOptions(recommended fuse.MountOptions, dataDir string, logger *slog.Logger) *fuse.MountOptions {
	mo := recommended
	mo.FsName = dataDir
	if c.FsName != "" {
		mo.FsName = c.FsName
	}
	mo.Name = DefaultSubtype
	if c.Subtype != "" {
		mo.Name = c.Subtype
	}
	mo.AllowOther = mo.AllowOther || c.AllowOther
	mo.Debug = mo.Debug || c.Debug
	if logger != nil {
		// go-fuse writes its operation trace (with debug) and its rare
		// complaints to one logger.
		level := slog.LevelWarn
		if mo.Debug {
			level = slog.LevelDebug
		}
		mo.Logger = slog.NewLogLogger(logger.Handler(), level)
	} else if mo.Logger == nil {
		mo.Logger = log.New(io.Discard, "", 0)
	}
	var opts []string
	for _, o := range recommended.Options {
		// The user's kernel flags and ro/rw decide; drop the ones they
		// override.
		if o == "ro" || o == "rw" || slices.Contains(c.KernelFlags, opposites[o]) {
			continue
		}
		opts = append(opts, o)
	}
	opts = append(opts, "default_permissions")
	if c.ReadOnly {
		opts = append(opts, "ro")
	}
	for _, f := range c.KernelFlags {
		if f == "noatime" && c.StrictAtime {
			continue // strictatime clears noatime, as mount(2) does
		}
		opts = append(opts, f)
	}
	mo.Options = uniqueKeepOrder(opts)
	return &mo
}

// uniqueKeepOrder drops repeated options, keeping the first.
func uniqueKeepOrder(ss []string) []string {
	seen := make(map[string]bool, len(ss))
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
