package base

import (
	"errors"
	"fmt"
)

// ErrCorrupt is matched (errors.Is) by every error that reports bytes on
// disk that fail a checksum or do not decode.
var ErrCorrupt = errors.New("lsm: corruption")

// CorruptionError names the file and offset of bad bytes. It matches
// ErrCorrupt.
type CorruptionError struct {
	File   string // file name, e.g. "000012.sst"
	Offset int64  // byte offset of the bad structure, -1 if unknown
	Reason string
}

func (e *CorruptionError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("lsm: corruption in %s at offset %d: %s", e.File, e.Offset, e.Reason)
	}
	return fmt.Sprintf("lsm: corruption in %s: %s", e.File, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// Corruptf returns a CorruptionError.
func Corruptf(file string, off int64, format string, args ...any) error {
	return &CorruptionError{File: file, Offset: off, Reason: fmt.Sprintf(format, args...)}
}
