package lsm

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

var (
	// ErrNotFound is returned by Get when the key has no live value.
	ErrNotFound = errors.New("lsm: not found")
	// ErrClosed is returned by every call on a closed DB, snapshot or iterator.
	ErrClosed = errors.New("lsm: closed")
	// ErrCorrupt is matched (errors.Is) by every error caused by bytes on disk
	// that fail a checksum or do not decode. errors.As with *CorruptionError
	// gives the file and offset.
	ErrCorrupt = base.ErrCorrupt
	// ErrReadOnly is returned by writes to a DB opened read-only.
	ErrReadOnly = errors.New("lsm: read-only")
	// ErrBatchTooLarge is returned by Apply for a batch larger than a quarter of
	// the journal or of MemtableSize.
	ErrBatchTooLarge = errors.New("lsm: batch too large")
	// ErrNotFormatted is returned by Open for a directory that holds no engine
	// (no CURRENT file).
	ErrNotFormatted = errors.New("lsm: not formatted")
	// ErrFailed is matched by the sticky error of an engine that stopped
	// accepting writes (fail-stop) after a write or force failed: the batch
	// that met the failure and every later write return it, wrapping the
	// cause, until the engine is reopened. Reads go on. See space.go.
	ErrFailed = errors.New("lsm: failed, writes refused until reopened")
	// ErrNoSpace is returned by writes while the data device is full: free
	// space below Options.SpaceReserve, or a write failed with ENOSPC. It
	// matches syscall.ENOSPC. It is not sticky: batches that delete are still
	// applied, and writes succeed again once space is freed. See space.go.
	ErrNoSpace = fmt.Errorf("lsm: no space left on the data device: %w", syscall.ENOSPC)
)

// CorruptionError names the file and offset of bad bytes; it matches
// ErrCorrupt.
type CorruptionError = base.CorruptionError
