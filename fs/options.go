package fs

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// Default values of Options. Kernel caching can be long because lsmfs is the
// only writer of its keyspace: every change reaches the engine through this
// process, which answers it and lets the kernel update or drop what it cached
// (create, unlink, rename, setattr and write all go through the kernel), so
// a cached entry or attribute can only go stale through a path that does not
// exist. An hour keeps `stat`, `find` and path walks off the FUSE channel for
// a working session while still bounding memory the kernel spends on them.
const (
	DefaultEntryTimeout    = time.Hour
	DefaultAttrTimeout     = time.Hour
	DefaultNegativeTimeout = time.Hour
	DefaultWriteBufferSize = 4 << 20
	// DefaultWriteBufferTotal bounds the write buffers of all files
	// together (sixteen files' worth).
	DefaultWriteBufferTotal = 64 << 20
	// DefaultFlushAge is half the engine's default commit interval (5s).
	DefaultFlushAge = 2500 * time.Millisecond
)

// Options configure an FS. The zero value is usable: EnsureDefaults fills
// every unset field with the default named in its comment.
type Options struct {
	// EntryTimeout is how long the kernel may cache a name -> inode lookup.
	// Default 1h (DefaultEntryTimeout); negative: do not cache.
	EntryTimeout time.Duration
	// AttrTimeout is how long the kernel may cache an inode's attributes.
	// Default 1h (DefaultAttrTimeout); negative: do not cache.
	AttrTimeout time.Duration
	// NegativeTimeout is how long the kernel may cache "no such name".
	// Default 1h (DefaultNegativeTimeout); negative: do not cache (lookups
	// of missing names then return ENOENT instead of a negative entry).
	NegativeTimeout time.Duration

	// WriteBufferSize bounds the dirty data buffered per inode before it is
	// flushed to the engine as one batch. Default 4 MiB
	// (DefaultWriteBufferSize); range [4KiB, 1GiB].
	WriteBufferSize int
	// WriteBufferTotal bounds the dirty data buffered for all inodes
	// together: past it, a write flushes its own file's buffer at once, so
	// many files written and kept open cannot hold memory without bound.
	// Default 64 MiB (DefaultWriteBufferTotal), and at least
	// WriteBufferSize.
	WriteBufferTotal int

	// FlushAge is how long buffered writes may wait in a write buffer
	// before a background flusher hands them to the engine and forces the
	// journal (every FlushAge/2): an open file's writes are durable within
	// FlushAge plus a force, as the engine's commit interval promises for
	// what reaches it. Default: DefaultFlushAge; negative: never (only
	// flush, fsync, close or a full buffer write them).
	FlushAge time.Duration

	// Logger receives operation failures (always with op and ino). Default:
	// discard.
	Logger *slog.Logger

	// ReadOnly refuses every change with EROFS and does not reclaim orphans
	// at New.
	ReadOnly bool

	// WritebackCache makes MountOptions ask the kernel for its writeback
	// cache (CAP_WRITEBACK_CACHE): writes are gathered in the page cache and
	// sent in large chunks; the kernel keeps size and mtime while pages are
	// dirty and sends them with SETATTR. Default false.
	WritebackCache bool

	// Atime is when a read updates the access time (Linux's relatime by
	// default; see atime.go). Only reads that reach lsmfs count: the
	// kernel serves cached pages without asking.
	Atime AtimePolicy
	// NoDirAtime leaves directories' access times alone (nodiratime).
	NoDirAtime bool

	// Clock gives the time stamped on inodes. Default time.Now.
	Clock func() time.Time
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.EntryTimeout == 0 {
		o.EntryTimeout = DefaultEntryTimeout
	}
	if o.AttrTimeout == 0 {
		o.AttrTimeout = DefaultAttrTimeout
	}
	if o.NegativeTimeout == 0 {
		o.NegativeTimeout = DefaultNegativeTimeout
	}
	if o.WriteBufferSize == 0 {
		o.WriteBufferSize = DefaultWriteBufferSize
	}
	if o.WriteBufferTotal == 0 {
		o.WriteBufferTotal = max(DefaultWriteBufferTotal, o.WriteBufferSize)
	}
	if o.FlushAge == 0 {
		o.FlushAge = DefaultFlushAge
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o
}

// Validate reports the first out-of-range option by name.
func (o *Options) Validate() error {
	if o.WriteBufferSize < 4<<10 || o.WriteBufferSize > 1<<30 {
		return fmt.Errorf("fs: write buffer size %d out of range [4KiB, 1GiB]", o.WriteBufferSize)
	}
	if o.WriteBufferTotal < o.WriteBufferSize {
		return fmt.Errorf("fs: write buffer total %d below the write buffer size %d", o.WriteBufferTotal, o.WriteBufferSize)
	}
	return nil
}

// String prints the effective options, one per line, for `lsmfs stats`.
func (o *Options) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "entry_timeout=%s\nattr_timeout=%s\nnegative_timeout=%s\n",
		timeout(o.EntryTimeout), timeout(o.AttrTimeout), timeout(o.NegativeTimeout))
	fmt.Fprintf(&b, "write_buffer_size=%d\nwrite_buffer_total=%d\nflush_age=%s\nread_only=%v\nwriteback_cache=%v\n",
		o.WriteBufferSize, o.WriteBufferTotal, timeout(o.FlushAge), o.ReadOnly, o.WritebackCache)
	fmt.Fprintf(&b, "atime=%s\ndiratime=%v\n", o.Atime, !o.NoDirAtime)
	return b.String()
}

// timeout is the kernel cache duration an option stands for.
func timeout(d time.Duration) time.Duration { return max(d, 0) }
