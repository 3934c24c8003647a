//go:build !linux

package journal

import (
	"errors"
	"fmt"
	"os"
)

// OpenBlockDevice is only supported on Linux.
func OpenBlockDevice(path string) (Device, int64, error) {
	return nil, 0, fmt.Errorf("journal: open block device %s: %w", path, errors.ErrUnsupported)
}

type fileDevice struct{ *os.File }

func (d fileDevice) Size() (int64, error) {
	fi, err := d.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// OpenFile opens an existing regular file as a journal target; the force is
// fsync(2) here (fdatasync on Linux).
func OpenFile(path string) (Device, int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("journal: open file: %w", err)
	}
	d := fileDevice{f}
	size, err := d.Size()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("journal: open file %s: %w", path, err)
	}
	return d, size, nil
}

// CreateFile creates a zero-filled file of size bytes (see the Linux
// version).
func CreateFile(path string, size int64) (Device, error) {
	size = (size + BlockSize - 1) / BlockSize * BlockSize
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: create file: %w", err)
	}
	if _, err := f.WriteAt(make([]byte, size), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: create file %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: create file %s: %w", path, err)
	}
	return fileDevice{f}, nil
}
