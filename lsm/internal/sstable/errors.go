package sstable

import "errors"

// Sentinel errors of the writer. Corruption found by the reader is reported
// as a *base.CorruptionError (errors.Is(err, base.ErrCorrupt)) naming the
// file and offset.
var (
	// ErrOutOfOrder is returned by Writer.Add when a key is not strictly
	// greater (CompareInternal) than the previous one.
	ErrOutOfOrder = errors.New("sstable: keys out of order")
	// ErrBadKind is returned by Writer.Add for a kind other than SET, DEL
	// or VPTR.
	ErrBadKind = errors.New("sstable: kind not allowed among point keys")
	// ErrTooLarge is returned by Writer.Add for an entry that cannot fit in
	// a block of the format's maximum size.
	ErrTooLarge = errors.New("sstable: entry too large")
	// ErrBadTombstone is returned by AddRangeTombstone for an empty or
	// inverted span, and by Close when the spans are not fragmented (two
	// spans overlap without having equal bounds) or repeat a (start, seq).
	ErrBadTombstone = errors.New("sstable: bad range tombstone")
	// ErrWriterClosed is returned by every Writer method after Close or
	// Abort.
	ErrWriterClosed = errors.New("sstable: writer closed")
	// ErrBadOptions is returned (by every Writer method) when
	// WriterOptions.Validate fails.
	ErrBadOptions = errors.New("sstable: bad options")
)
