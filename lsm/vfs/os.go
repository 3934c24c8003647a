package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// Default is the operating system's filesystem.
var Default FS = osFS{}

type osFS struct{}

type osFile struct {
	*os.File
}

func (f osFile) Sync() error {
	return unix.Fdatasync(int(f.Fd()))
}

func (f osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (f osFile) Preallocate(size int64) error {
	old, err := f.Size()
	if err != nil {
		return err
	}
	if size <= old {
		return nil
	}
	// fallocate reserves the blocks at once (ENOSPC now, not at the first
	// overwrite, and in few extents), but as unwritten extents: every first
	// write into one would make fdatasync commit the extent's conversion to
	// the filesystem's own journal. Writing the zeros converts them here.
	err = unix.Fallocate(int(f.Fd()), 0, old, size-old)
	if err != nil && !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return err
	}
	return writeZeros(f.File, old, size)
}

// writeZeros writes zeros over [from, to) of f.
func writeZeros(f *os.File, from, to int64) error {
	zeros := make([]byte, min(to-from, 1<<20))
	for off := from; off < to; {
		n, err := f.WriteAt(zeros[:min(int64(len(zeros)), to-off)], off)
		if err != nil {
			return fmt.Errorf("write zeros at %d: %w", off, err)
		}
		off += int64(n)
	}
	return nil
}

// iovMax is the most buffers one pwritev(2) takes (IOV_MAX on Linux).
const iovMax = 1024

// WriteAtv writes bufs back to back at off with pwritev(2) (see
// VectorWriterAt), resuming after short writes.
func (f osFile) WriteAtv(bufs [][]byte, off int64) (int, error) {
	fd := int(f.Fd())
	total, err := writevAll(bufs, off, func(b [][]byte, off int64) (int, error) {
		return unix.Pwritev(fd, b, off)
	})
	if err != nil {
		return total, &os.PathError{Op: "pwritev", Path: f.Name(), Err: err}
	}
	return total, nil
}

// writevAll writes bufs back to back at off with pwritev, at most iovMax
// buffers a call, until all are written or it fails: a short write
// resumes where it stopped, EINTR retries, and a write of nothing is
// io.ErrShortWrite. It returns the bytes written.
func writevAll(bufs [][]byte, off int64, pwritev func([][]byte, int64) (int, error)) (int, error) {
	total := 0
	for len(bufs) > 0 {
		if len(bufs[0]) == 0 {
			bufs = bufs[1:]
			continue
		}
		n, err := pwritev(bufs[:min(len(bufs), iovMax)], off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return total, err
		}
		if n <= 0 {
			return total, io.ErrShortWrite
		}
		total += n
		off += int64(n)
		for n > 0 {
			k := min(n, len(bufs[0]))
			n -= k
			if k == len(bufs[0]) {
				bufs = bufs[1:]
			} else {
				bufs[0] = bufs[0][k:]
			}
		}
	}
	return total, nil
}

// StartWriteback asks the kernel to start writing the file's dirty pages in
// [off, off+n) to the device, without waiting for them (see WriteBacker).
func (f osFile) StartWriteback(off, n int64) error {
	return unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// DropCache lets the kernel drop the file's clean cached pages in
// [off, off+n) (see CacheDropper).
func (f osFile) DropCache(off, n int64) error {
	return unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED)
}

// Files are opened with O_NOFOLLOW: the engine never makes symbolic links,
// and one planted in its directory must not lead a daemon running as root
// to truncate or write another file.
func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	return readFile{osFile{f}, &directFD{}}, nil
}

func (osFS) OpenReadWrite(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error             { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string) error            { return os.MkdirAll(dir, 0o700) }
func (osFS) Stat(name string) (os.FileInfo, error) {
	return os.Stat(name)
}

func (osFS) List(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if errors.Is(err, unix.EROFS) {
		// A read-only filesystem (read-only media, a snapshot): flock
		// works on a descriptor open for reading, and without a lock file
		// there nothing can write the directory either.
		f, err = os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			return io.NopCloser(nil), nil
		}
	}
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", name, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return f, nil
}

func (osFS) Usage(dir string) (total, free uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize), nil
}

// ErrLocked is returned by Lock when another holder has the lock.
var ErrLocked = errors.New("vfs: locked by another process")

// Join is filepath.Join, re-exported so that callers build paths one way.
func Join(elem ...string) string { return filepath.Join(elem...) }
