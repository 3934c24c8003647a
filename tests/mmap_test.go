package tests

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMmap checks that shared and private mappings of files on lsmfs agree
// with read(2) and write(2): what a shared mapping writes is what reads
// return (before and after msync, and after a remount), what writes write
// is what the mapping shows, private mappings keep their changes to
// themselves, a mapping extended by ftruncate holds zeros, and a read-only
// descriptor cannot be mapped for shared writing.
func TestMmap(t *testing.T) {
	f := newFS(t, fsOptions{})
	page := os.Getpagesize()
	size := 5*page + 1234 // not a multiple of the page size
	want := make([]byte, size)
	fillContent(1, 0, want)
	path := f.path("mapped")
	if err := os.WriteFile(path, want, 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("shared", func(t *testing.T) {
		fd := openFD(t, path, unix.O_RDWR)
		m := mmap(t, fd, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if !bytes.Equal(m, want) {
			t.Fatal("a shared mapping does not show the file's bytes")
		}
		// Writes through the mapping, across page boundaries and in the
		// last partial page, are seen by read(2) on another descriptor.
		for i, off := range []int{0, page - 3, 2*page + 100, size - 10} {
			n := min(7, size-off)
			copy(m[off:off+n], bytes.Repeat([]byte{byte('a' + i)}, n))
			copy(want[off:off+n], m[off:off+n])
		}
		checkRead(t, path, want, "after writes through a shared mapping, before msync")
		if err := unix.Msync(m, unix.MS_SYNC); err != nil {
			t.Fatal(err)
		}
		checkRead(t, path, want, "after msync")
		// pwrite(2) shows in the mapping.
		data := []byte("written with pwrite")
		if _, err := unix.Pwrite(fd, data, int64(3*page-5)); err != nil {
			t.Fatal(err)
		}
		copy(want[3*page-5:], data)
		if !bytes.Equal(m, want) {
			t.Fatal("the shared mapping does not show a pwrite")
		}
		if err := unix.Munmap(m); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("private", func(t *testing.T) {
		fd := openFD(t, path, unix.O_RDONLY)
		m := mmap(t, fd, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
		if !bytes.Equal(m, want) {
			t.Fatal("a private mapping does not show the file's bytes")
		}
		copy(m[10:], "private change")
		copy(m[size-5:], "XXXXX")
		checkRead(t, path, want, "after writes to a private mapping")
		if err := unix.Munmap(m); err != nil {
			t.Fatal(err)
		}
		m = mmap(t, fd, size, unix.PROT_READ, unix.MAP_PRIVATE)
		if !bytes.Equal(m, want) {
			t.Fatal("a new mapping shows a private mapping's changes")
		}
		unix.Munmap(m)
		// A read-only descriptor cannot back a writable shared mapping.
		if _, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); !errors.Is(err, unix.EACCES) {
			t.Fatalf("shared writable mapping of an O_RDONLY descriptor: %v, want EACCES", err)
		}
	})

	t.Run("extend", func(t *testing.T) {
		fd := openFD(t, path, unix.O_RDWR)
		newSize := size + 3*page
		if err := unix.Ftruncate(fd, int64(newSize)); err != nil {
			t.Fatal(err)
		}
		want = append(want, make([]byte, newSize-size)...)
		m := mmap(t, fd, newSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if !bytes.Equal(m, want) {
			t.Fatal("the mapping of an extended file does not show zeros past the old end")
		}
		copy(m[size+page:], "in the extension")
		copy(want[size+page:], "in the extension")
		// fsync (not msync) writes the mapping's dirty pages too.
		if err := unix.Fsync(fd); err != nil {
			t.Fatal(err)
		}
		unix.Munmap(m)
		checkRead(t, path, want, "after writing the extension through a mapping")
	})

	f.remount()
	checkRead(t, path, want, "after a remount")
	fd := openFD(t, path, unix.O_RDONLY)
	m := mmap(t, fd, len(want), unix.PROT_READ, unix.MAP_SHARED)
	if !bytes.Equal(m, want) {
		t.Fatal("a mapping after the remount does not show the file")
	}
	unix.Munmap(m)
}

// openFD opens path and closes it in cleanup (before the unmount).
func openFD(t *testing.T, path string, flags int) int {
	t.Helper()
	fd, err := unix.Open(path, flags, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func mmap(t *testing.T, fd, size, prot, flags int) []byte {
	t.Helper()
	m, err := unix.Mmap(fd, 0, size, prot, flags)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	// A mapping keeps the file open: one left by a failed test would keep
	// the mount busy. (Munmap of an unmapped region only returns EINVAL.)
	t.Cleanup(func() { unix.Munmap(m) })
	return m
}

// checkRead reads path with read(2) and compares it with want.
func checkRead(t *testing.T, path string, want []byte, when string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: read(2) returns %d bytes that differ from the expected %d at offset %d",
			when, len(got), len(want), firstDiff(got, want))
	}
}
