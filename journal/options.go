package journal

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults of Options (applied by EnsureDefaults).
const (
	// DefaultCommitInterval bounds how long a record enqueued with sync=false
	// may stay in memory (like ext4's commit=).
	DefaultCommitInterval = 5 * time.Second
	// DefaultMaxFrameBytes is the payload size at which the pending frame is
	// handed to the committer without waiting for a sync request.
	DefaultMaxFrameBytes = 1 << 20
)

// Options configure Open. The zero value is usable after EnsureDefaults.
type Options struct {
	// UUID is the filesystem the journal must belong to. Open fails with a
	// *UUIDMismatchError (errors.Is ErrUUIDMismatch) naming both UUIDs when the
	// superblock names another. Zero accepts any owner (tools).
	UUID [16]byte

	// Size is the device size in bytes; Open checks that the ring recorded in
	// the superblock fits in it. 0 skips the check (a regular file may be
	// shorter than its ring until frames are written that far).
	Size int64

	// CommitInterval is the longest time a record enqueued with sync=false
	// waits before the committer writes and forces its frame. Default 5s.
	CommitInterval time.Duration

	// MaxFrameBytes is the payload size (records plus their length prefixes,
	// before compression) at which the pending frame is committed without
	// waiting for a sync request or the commit interval. One Enqueue call
	// larger than this gets a frame of its own. Default 1 MiB; clamped to a
	// quarter of the ring.
	MaxFrameBytes int

	// DisableCompression stores every payload raw. By default (false) a
	// payload is LZ4-compressed when that makes it smaller.
	DisableCompression bool

	// OnPressure, if set, is called when the live part of the ring (records
	// not yet checkpointed) exceeds half the ring, and whenever a writer
	// starts waiting for space: the engine should flush memtables and call
	// Checkpoint. It runs on a goroutine of its own, never under a journal
	// lock and never on the committer; calls do not overlap, and a call made
	// while one is running is coalesced into one more call. It may call any
	// Journal method except Close.
	OnPressure func()

	// Logger receives recovery and failure messages. Default: discard.
	Logger *slog.Logger

	// BeforeForce, if set, is called by the committer before it writes each
	// frame (outside journal locks). The engine uses it to force the value
	// log, so that a frame whose records point into the value log is never
	// durable before the bytes it points to (ordered mode). An error fails
	// the journal like a failed force.
	BeforeForce func() error

	// ReadOnly opens for Replay only: nothing is ever written to the device,
	// and Enqueue, Append, Sync and Checkpoint fail with ErrReadOnly.
	ReadOnly bool
}

// EnsureDefaults fills zero fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.CommitInterval == 0 {
		o.CommitInterval = DefaultCommitInterval
	}
	if o.MaxFrameBytes == 0 {
		o.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports options that cannot work, naming the field.
func (o *Options) Validate() error {
	switch {
	case o.Size < 0:
		return fmt.Errorf("journal: option Size=%d: negative", o.Size)
	case o.CommitInterval < 0:
		return fmt.Errorf("journal: option CommitInterval=%v: negative", o.CommitInterval)
	case o.MaxFrameBytes < 0:
		return fmt.Errorf("journal: option MaxFrameBytes=%d: negative", o.MaxFrameBytes)
	case o.MaxFrameBytes > maxPayloadLen:
		return fmt.Errorf("journal: option MaxFrameBytes=%d: above %d", o.MaxFrameBytes, maxPayloadLen)
	}
	return nil
}

// String renders the options for logs.
func (o Options) String() string {
	return fmt.Sprintf("uuid=%s size=%d commit_interval=%v max_frame_bytes=%d compression=%v",
		FormatUUID(o.UUID), o.Size, o.CommitInterval, o.MaxFrameBytes, !o.DisableCompression)
}

// FormatOptions configure Format.
type FormatOptions struct {
	// UUID is the owning filesystem, recorded in the superblock.
	UUID [16]byte
	// Size is the number of bytes of the device the journal may use
	// (superblock and ring; rounded down to BlockSize). 0: the whole device,
	// which must then tell its size (a Size() (int64, error) method).
	Size int64
	// Nonce distinguishes this format from earlier ones of the same device:
	// it seeds every frame checksum, so frames left over from before never
	// validate. 0 (the normal case) draws a random nonce; set it only to build
	// reproducible test images.
	Nonce uint64
}
