package journal

import (
	"errors"
	"fmt"
	"io"
	"unsafe"
)

// Device is what a journal lives on: a block device, a regular file, or the
// engine's vfs.File (which satisfies it structurally). The journal issues
// only BlockSize-aligned I/O from BlockSize-aligned buffers, so the same code
// drives O_DIRECT devices.
//
// ReadAt may be called concurrently with WriteAt and Sync. The journal never
// calls WriteAt and Sync concurrently with each other.
type Device interface {
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	// Sync makes every byte written so far durable (fdatasync). It is the
	// journal's only durability primitive: a device that loses synced bytes
	// breaks the journal's promises.
	Sync() error
	Close() error
}

// sizer is implemented by devices that know their length (vfs.File, and the
// devices returned by OpenFile and OpenBlockDevice). Format uses it when
// FormatOptions.Size is 0.
type sizer interface {
	Size() (int64, error)
}

// deviceSize asks dev for its size, if it can tell.
func deviceSize(dev Device) (int64, error) {
	s, ok := dev.(sizer)
	if !ok {
		return 0, fmt.Errorf("%w: device size unknown (set the Size option)", ErrGeometry)
	}
	n, err := s.Size()
	if err != nil {
		return 0, fmt.Errorf("journal: device size: %w", err)
	}
	return n, nil
}

// alignedBuf returns a zeroed n-byte slice (n rounded up to BlockSize) whose
// first byte sits on a BlockSize boundary in memory, as O_DIRECT requires.
func alignedBuf(n int) []byte {
	n = (n + BlockSize - 1) / BlockSize * BlockSize
	if n == 0 {
		n = BlockSize
	}
	b := make([]byte, n+BlockSize)
	skip := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) % BlockSize); r != 0 {
		skip = BlockSize - r
	}
	return b[skip : skip+n : skip+n]
}

// isAligned reports whether b starts on a BlockSize boundary in memory.
func isAligned(b []byte) bool {
	return len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%BlockSize == 0
}

// readFull reads len(p) bytes at off. Bytes past the end of the device (a
// file not yet written that far) read as zeros: an unwritten region of a
// file and a zeroed region of a device mean the same to the journal.
func readFull(dev Device, p []byte, off int64) error {
	n, err := dev.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		clear(p[n:])
		return nil
	}
	return fmt.Errorf("journal: read %d bytes at off=%d: %w", len(p), off, err)
}

// writeFull writes p at off; a short write is an error.
func writeFull(dev Device, p []byte, off int64) error {
	n, err := dev.WriteAt(p, off)
	if err != nil {
		return fmt.Errorf("journal: write %d bytes at off=%d: %w", len(p), off, err)
	}
	if n != len(p) {
		return fmt.Errorf("journal: write %d bytes at off=%d: %w (short write: %d bytes)", len(p), off, io.ErrShortWrite, n)
	}
	return nil
}
