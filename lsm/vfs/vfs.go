package vfs

import (
	"io"
	"os"
)

// File is an open file. ReadAt may be called concurrently with anything;
// the other methods are called by one goroutine at a time.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Writer
	io.Closer
	// Sync makes the file's data (and the metadata needed to read it back,
	// such as its size) durable.
	Sync() error
	// Size returns the current length of the file.
	Size() (int64, error)
	// Truncate changes the size of the file.
	Truncate(size int64) error
	// Preallocate reserves space for the file up to size bytes without
	// changing what reads return for written ranges; the size becomes at
	// least size. On the operating system's filesystem the new range is
	// written with zeros, not left as unwritten extents, so that later
	// overwrites and their fdatasync need no metadata commit.
	Preallocate(size int64) error
}

// WriteBacker is a File that can start writing back a range of its dirty
// pages without waiting (sync_file_range(2) with SYNC_FILE_RANGE_WRITE). It
// promises nothing about durability: a writer of a long file uses it so that
// its next Sync finds little left to write. Files that do not implement it
// skip the hint.
type WriteBacker interface {
	StartWriteback(off, n int64) error
}

// VectorWriterAt is a File that writes several buffers at an offset in one
// call (pwritev(2)), as WriteAt would write them joined, without the
// caller copying them together first. It may change bufs' elements (the
// slices, never the bytes they hold).
type VectorWriterAt interface {
	WriteAtv(bufs [][]byte, off int64) (int, error)
}

// WriteAtv writes bufs back to back at off of f: with one vectored write
// where f is a VectorWriterAt, else joined into one WriteAt (so a file that
// injects faults or records writes sees one write, as before). It returns
// the bytes written; short of all of them, an error.
func WriteAtv(f File, bufs [][]byte, off int64) (int, error) {
	if vw, ok := f.(VectorWriterAt); ok {
		return vw.WriteAtv(bufs, off)
	}
	var n int
	for _, b := range bufs {
		n += len(b)
	}
	joined := make([]byte, 0, n)
	for _, b := range bufs {
		joined = append(joined, b...)
	}
	return f.WriteAt(joined, off)
}

// CacheDropper is a File whose cached pages of a range can be let go
// (posix_fadvise(2) with POSIX_FADV_DONTNEED): a reader that has handed the
// data on to a cache of its own, or to the kernel's page cache of a FUSE
// file, uses it so that the same bytes are not held twice. Only clean
// pages wholly inside the range go; it changes nothing a read returns.
// Files that do not implement it skip the advice.
type CacheDropper interface {
	DropCache(off, n int64) error
}

// FS is the filesystem the engine lives on.
type FS interface {
	// Create creates or truncates the named file for reading and writing,
	// with mode 0600.
	Create(name string) (File, error)
	// Open opens an existing file for reading.
	Open(name string) (File, error)
	// OpenReadWrite opens an existing file for reading and writing.
	OpenReadWrite(name string) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Rename atomically replaces newname with oldname (once the directory
	// is synced, durably).
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its parents with mode 0700.
	MkdirAll(dir string) error
	// List returns the names in dir, sorted.
	List(dir string) ([]string, error)
	// Stat returns the size of the named file and whether it is a directory.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the directory's entries durable.
	SyncDir(dir string) error
	// Lock takes an exclusive advisory lock on the named file, creating it if
	// needed. It fails at once if another process (or another Lock call)
	// holds it.
	Lock(name string) (io.Closer, error)
	// Usage reports the total and free bytes of the filesystem holding dir.
	Usage(dir string) (total, free uint64, err error)
}
