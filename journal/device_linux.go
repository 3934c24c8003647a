//go:build linux

package journal

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// OpenBlockDevice opens a raw block device (e.g. /dev/nvme1n1p1) as a journal
// target and returns it with its size in bytes (ioctl BLKGETSIZE64).
//
// The device is opened O_DIRECT, so frames bypass the page cache, and O_EXCL,
// so a device mounted or held by another journal is refused (EBUSY). The
// force is fdatasync(2), which the block layer turns into a cache flush of
// the device; O_DSYNC is not used, so the superblock and frame writes are
// plain writes ordered by that flush. I/O must be BlockSize-aligned in
// offset, length and buffer address (the journal always issues it so);
// unaligned reads are served through an aligned bounce buffer and unaligned
// writes fail with ErrUnaligned.
func OpenBlockDevice(path string) (Device, int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_DIRECT|unix.O_EXCL|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("journal: open block device: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("journal: open block device: %w", err)
	}
	if fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice != 0 {
		f.Close()
		return nil, 0, fmt.Errorf("journal: open block device %s: not a block device (mode %v)", path, fi.Mode())
	}
	fd := int(f.Fd())
	size, err := unix.IoctlGetUint64(fd, unix.BLKGETSIZE64)
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("journal: open block device %s: BLKGETSIZE64: %w", path, err)
	}
	ssz, err := unix.IoctlGetInt(fd, unix.BLKSSZGET)
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("journal: open block device %s: BLKSSZGET: %w", path, err)
	}
	if ssz <= 0 || ssz > BlockSize || BlockSize%ssz != 0 {
		f.Close()
		return nil, 0, fmt.Errorf("journal: open block device %s: logical sector size %d does not divide %d", path, ssz, BlockSize)
	}
	return &blockDevice{f: f, size: int64(size)}, int64(size), nil
}

// blockDevice is an O_DIRECT block device.
type blockDevice struct {
	f    *os.File
	size int64
}

func aligned(p []byte, off int64) bool {
	return off%BlockSize == 0 && len(p)%BlockSize == 0 && isAligned(p)
}

func (d *blockDevice) ReadAt(p []byte, off int64) (int, error) {
	if aligned(p, off) {
		return d.f.ReadAt(p, off)
	}
	start := off / BlockSize * BlockSize
	end := (off + int64(len(p)) + BlockSize - 1) / BlockSize * BlockSize
	buf := alignedBuf(int(end - start))
	n, err := d.f.ReadAt(buf, start)
	avail := int64(n) - (off - start)
	if avail < 0 {
		avail = 0
	}
	c := copy(p, buf[off-start:off-start+min(avail, int64(len(p)))])
	if c < len(p) && err == nil {
		err = fmt.Errorf("journal: short read at off=%d", off)
	}
	return c, err
}

func (d *blockDevice) WriteAt(p []byte, off int64) (int, error) {
	if !aligned(p, off) {
		return 0, fmt.Errorf("%w: write of %d bytes at off=%d", ErrUnaligned, len(p), off)
	}
	return d.f.WriteAt(p, off)
}

func (d *blockDevice) Sync() error          { return unix.Fdatasync(int(d.f.Fd())) }
func (d *blockDevice) Size() (int64, error) { return d.size, nil }
func (d *blockDevice) Close() error         { return d.f.Close() }
func (d *blockDevice) String() string       { return "blockdev:" + d.f.Name() }

// fileDevice is a regular file opened by OpenFile or CreateFile.
type fileDevice struct {
	f *os.File
}

func (d *fileDevice) ReadAt(p []byte, off int64) (int, error)  { return d.f.ReadAt(p, off) }
func (d *fileDevice) WriteAt(p []byte, off int64) (int, error) { return d.f.WriteAt(p, off) }
func (d *fileDevice) Sync() error                              { return unix.Fdatasync(int(d.f.Fd())) }
func (d *fileDevice) Close() error                             { return d.f.Close() }
func (d *fileDevice) String() string                           { return "file:" + d.f.Name() }

func (d *fileDevice) Size() (int64, error) {
	fi, err := d.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// OpenFile opens an existing regular file as a journal target (for tools and
// tests; the engine opens DATADIR/journal through its own vfs) and returns it
// with its size. The force is fdatasync(2). The page cache is used (no
// O_DIRECT).
func OpenFile(path string) (Device, int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("journal: open file: %w", err)
	}
	d := &fileDevice{f: f}
	size, err := d.Size()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("journal: open file %s: %w", path, err)
	}
	return d, size, nil
}

// CreateFile creates (or truncates) a regular file of size bytes (rounded up
// to BlockSize) filled with written zeros, fsyncs it and its directory, and
// returns it as a Device ready for Format. Writing the zeros (instead of
// fallocate) gives the file real allocated blocks, so that later frame
// writes are overwrites and fdatasync need not commit filesystem metadata.
func CreateFile(path string, size int64) (Device, error) {
	size = (size + BlockSize - 1) / BlockSize * BlockSize
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: create file: %w", err)
	}
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(zeros)) {
		n := min(int64(len(zeros)), size-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			f.Close()
			return nil, fmt.Errorf("journal: create file %s: %w", path, err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: create file %s: fsync: %w", path, err)
	}
	if dir, err := os.Open(filepath.Dir(path)); err == nil {
		err = dir.Sync()
		dir.Close()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("journal: create file %s: fsync dir: %w", path, err)
		}
	}
	return &fileDevice{f: f}, nil
}
