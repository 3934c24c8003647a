package journal

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers match them with errors.Is; the errors returned by
// the journal wrap them with context (offset, sequence number, LSN).
var (
	// ErrCorrupt is returned by Open and Replay when the live log is damaged in
	// a way a crash cannot explain: a frame that fails validation while a later
	// frame (higher sequence number) exists, a sequence or LSN discontinuity
	// between valid frames, or a superblock copy with the right magic that
	// fails its checksum while no other copy is valid. It is never returned
	// for a torn tail (see ErrTornFrame).
	ErrCorrupt = errors.New("journal: corrupt")

	// ErrTornFrame describes the last frame of the log when it fails
	// validation and nothing after it does: what a crash during a frame write
	// leaves behind. Open stops the log before it and succeeds; the frame is
	// reported in Recovery().TailErr, which wraps ErrTornFrame.
	ErrTornFrame = errors.New("journal: torn frame")

	// ErrInvalidFrame is returned by the frame decoder for bytes that are not
	// a valid frame (bad magic, version, flags, lengths, checksum, payload).
	// Open turns it into ErrTornFrame at the tail or ErrCorrupt in the middle.
	ErrInvalidFrame = errors.New("journal: invalid frame")

	// ErrInvalidSuperblock is returned by the superblock decoder for bytes
	// that are not a valid superblock copy.
	ErrInvalidSuperblock = errors.New("journal: invalid superblock")

	// ErrNotFormatted is returned by Open when neither superblock copy carries
	// the journal magic: the device was never formatted (see Format).
	ErrNotFormatted = errors.New("journal: not formatted")

	// ErrUnsupportedVersion is returned by Open for a superblock written by a
	// newer format version.
	ErrUnsupportedVersion = errors.New("journal: unsupported format version")

	// ErrUUIDMismatch is returned by Open when the journal belongs to another
	// filesystem. The concrete error is a *UUIDMismatchError naming both UUIDs.
	ErrUUIDMismatch = errors.New("journal: uuid mismatch")

	// ErrGeometry is returned by Format and Open when the ring does not fit
	// the device (too small, or the device shrank since Format).
	ErrGeometry = errors.New("journal: bad geometry")

	// ErrRecordTooLarge is returned by Enqueue and Append when the records of
	// one call would make a frame larger than a quarter of the ring.
	ErrRecordTooLarge = errors.New("journal: record too large")

	// ErrCheckpointAhead is returned by Checkpoint for an LSN that was never
	// enqueued.
	ErrCheckpointAhead = errors.New("journal: checkpoint beyond the last enqueued lsn")

	// ErrClosed is returned by every call on a closed journal, and to writers
	// whose records could not be written before Close (ring full).
	ErrClosed = errors.New("journal: closed")

	// ErrFailed marks the sticky error of a journal whose device failed a
	// write or a force. Every later Enqueue, Append, Sync and Checkpoint
	// returns it (wrapping the device error) until the journal is reopened.
	ErrFailed = errors.New("journal: failed (reopen to recover)")

	// ErrUnaligned is returned by the block device target for I/O that is not
	// aligned to 4096 bytes (offset, length and buffer address).
	ErrUnaligned = errors.New("journal: unaligned direct I/O")
)

// UUIDMismatchError is returned by Open when the superblock names another
// owner than Options.UUID. It matches ErrUUIDMismatch with errors.Is.
type UUIDMismatchError struct {
	Want  [16]byte // Options.UUID
	Found [16]byte // UUID in the superblock
}

func (e *UUIDMismatchError) Error() string {
	return fmt.Sprintf("journal: uuid mismatch: the journal belongs to filesystem %s, expected %s",
		FormatUUID(e.Found), FormatUUID(e.Want))
}

// Is reports whether target is ErrUUIDMismatch.
func (e *UUIDMismatchError) Is(target error) bool { return target == ErrUUIDMismatch }

// FormatUUID renders u in the canonical 8-4-4-4-12 hex form.
func FormatUUID(u [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// ErrReadOnly is returned by writes to a journal opened with
// Options.ReadOnly.
var ErrReadOnly = errors.New("journal: read-only")
