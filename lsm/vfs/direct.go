package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DirectAlign is the alignment DirectReader asks of offsets, lengths and
// buffer addresses: 4096, the largest logical block size of common devices
// (512 suffices for most, 4096 for all 4Kn disks).
const DirectAlign = 4096

// ErrNoDirect is returned by DirectReader.ReadAtDirect where the file
// cannot be read around the page cache (its filesystem refuses O_DIRECT,
// or asks a larger alignment); the caller reads it with ReadAt instead.
var ErrNoDirect = errors.New("vfs: direct reads not supported")

// DirectReader is a File that can be read around the operating system's page
// cache (O_DIRECT): the device writes straight into the caller's buffer, and
// nothing is cached. A reader of a long stream of bytes it hands on at once
// (a FUSE file's data, which the kernel caches in the FUSE file's own pages)
// uses it to skip a copy and the page cache's churn. Reads see every write
// made through other descriptors (the kernel writes dirty pages of the range
// back first).
type DirectReader interface {
	// Cached reports whether the page cache holds all of [off, off+n) (then a
	// ReadAt is a copy, cheaper than going to the device). It reports false
	// if it cannot tell.
	Cached(off, n int64) bool
	// ReadAtDirect is ReadAt around the page cache. off, len(p) and p's
	// address must be multiples of DirectAlign (see AlignedBuffer). Like
	// ReadAt it returns fewer bytes only with an error (io.EOF at the end
	// of the file). ErrNoDirect means the file cannot be read this way.
	ReadAtDirect(p []byte, off int64) (int, error)
}

// AlignedBuffer returns a buffer of n bytes whose address is a multiple of
// DirectAlign.
func AlignedBuffer(n int) []byte {
	b := make([]byte, n+DirectAlign)
	skip := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % DirectAlign); r != 0 {
		skip = DirectAlign - r
	}
	return b[skip : skip+n : skip+n]
}

// readFile is an OS file opened for reading (Open): a DirectReader.
type readFile struct {
	osFile
	direct *directFD
}

// directFD is the second descriptor, opened with O_DIRECT at the first
// direct read, of a file opened for reading. An open that fails for want
// of descriptors or memory is tried again at the next read; a filesystem
// that refuses O_DIRECT is not asked again.
type directFD struct {
	mu     sync.RWMutex // held shared by reads, exclusively to open and close
	fd     int          // valid if opened
	opened bool
	shut   bool
	// refused is set once the filesystem refused O_DIRECT (at the open or
	// at a read): later reads fail at once with ErrNoDirect.
	refused atomic.Bool
}

// open opens d's descriptor if it is not open, shut or refused.
func (d *directFD) open(f readFile) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.opened || d.shut || d.refused.Load() {
		return
	}
	// The same open file through /proc, so a rename or a planted link
	// cannot swap it.
	fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	switch {
	case err == nil:
		d.fd, d.opened = fd, true
	case err == unix.EINVAL || err == unix.EOPNOTSUPP:
		d.refused.Store(true)
	}
}

// noCachestat is set once cachestat(2) is found missing (Linux before 6.5)
// or refused (a seccomp filter): Cached then reports false without asking.
var noCachestat atomic.Bool

// Cached asks cachestat(2). Where it is missing it reports false: every long
// run is then read around the cache, a run just written too (the kernel
// writes its dirty pages back first).
func (f readFile) Cached(off, n int64) bool {
	if noCachestat.Load() {
		return false
	}
	var st unix.Cachestat_t
	r := unix.CachestatRange{Off: uint64(off), Len: uint64(n)}
	if err := unix.Cachestat(uint(f.Fd()), &r, &st, 0); err != nil {
		if err == unix.ENOSYS || err == unix.EPERM {
			noCachestat.Store(true)
		}
		return false
	}
	pages := (uint64(off+n) + uint64(os.Getpagesize()) - 1) / uint64(os.Getpagesize())
	pages -= uint64(off) / uint64(os.Getpagesize())
	return st.Cache >= pages
}

func (f readFile) ReadAtDirect(p []byte, off int64) (int, error) {
	d := f.direct
	if off%DirectAlign != 0 || len(p)%DirectAlign != 0 ||
		uintptr(unsafe.Pointer(unsafe.SliceData(p)))%DirectAlign != 0 {
		return 0, fmt.Errorf("direct read of %s at %d: %w", f.Name(), off, unix.EINVAL)
	}
	d.mu.RLock()
	if !d.opened {
		d.mu.RUnlock()
		d.open(f)
		d.mu.RLock()
	}
	defer d.mu.RUnlock()
	if !d.opened || d.shut || d.refused.Load() {
		return 0, ErrNoDirect
	}
	total := 0
	for total < len(p) {
		n, err := unix.Pread(d.fd, p[total:], off+int64(total))
		if err == unix.EINTR {
			continue
		}
		if err == unix.EINVAL && total == 0 {
			d.refused.Store(true)
			return 0, ErrNoDirect
		}
		if err != nil {
			return total, &os.PathError{Op: "pread direct", Path: f.Name(), Err: err}
		}
		if n == 0 {
			return total, io.EOF
		}
		total += n
		if n%DirectAlign != 0 {
			return total, io.EOF // the file ends inside the last block read
		}
	}
	return total, nil
}

// Close closes the file and its direct descriptor.
func (f readFile) Close() error {
	d := f.direct
	d.mu.Lock()
	if d.opened && !d.shut {
		unix.Close(d.fd)
	}
	d.shut = true
	d.mu.Unlock()
	return f.File.Close()
}
