package fs_test

// Tests from a review of the write path (writebuf.go, node_file.go,
// node_attr.go); each failed on the code it was written against.

import (
	"bytes"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestTruncateReadsOnlyCutBlocks: shrinking a large file (or punching
// a large hole) must not read the data it deletes. zeroRange called
// it.Value() for every block in the range only to learn its length, and a
// block kept in the value log is read by Value: truncating a 4 MiB file to
// 1 byte read all 4 MiB back from disk (a 10 GiB file: 10 GiB), where
// ext4 frees extents without reading them. Iterator.ValueLen gives the
// length without the read.
func TestTruncateReadsOnlyCutBlocks(t *testing.T) {
	e := newFileEnv(t, fs.Options{})
	ino, fh := e.mustCreate(1, "big")
	const size = 4 << 20
	for off := 0; off < size; off += 1 << 20 {
		e.mustWrite(ino, fh, uint64(off), pattern(1<<20, byte(off>>20)))
	}
	e.release(ino, fh)
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"punch 3 MiB", func() error {
			fh := e.mustOpen(ino, 2)
			defer e.release(ino, fh)
			if err := e.fallocate(ino, fh, 100, 3<<20, 3); err != 0 {
				return err
			}
			return nil
		}},
		{"truncate to 1 byte", func() error {
			if err := e.truncate(ino, 1); err != 0 {
				return err
			}
			return nil
		}},
	} {
		before := e.db.Metrics().Vlog.DiskBytes
		if err := tc.do(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		read := e.db.Metrics().Vlog.DiskBytes - before
		t.Logf("%s: read %d bytes from the value log", tc.name, read)
		if read > 2*bs+512 { // two blocks and their record headers
			t.Errorf("%s read %d bytes of file data; at most the 2 blocks it cuts (%d bytes) need reading", tc.name, read, 2*bs)
		}
	}
	e.check()
}

// TestTruncateToZeroOnFullDisk: a process's buffered writes cannot be
// written (ENOSPC: the value log is full); ftruncate(fd, 0), the usual way
// to free the space a runaway log took, must still work, as on ext4: the
// truncation needs none of the buffered bytes. setattr flushed the buffer
// first and failed with the flush's ENOSPC, so the file could not be
// truncated while another process held it open with unwritten data (open
// with O_TRUNC, which discards the buffer, worked).
func TestTruncateToZeroOnFullDisk(t *testing.T) {
	o := durOptions(time.Hour)
	o.ValueThreshold = 4 << 10 // as mounted: data blocks in the value log, inodes in the tree
	e, efs := faultEnv(t, &o, vfs.NewMem())
	ino, fh := e.mustCreate(1, "log")
	e.mustWrite(ino, fh, 0, pattern(3*bs, 1))
	wantErr(t, "fsync", e.fsync(ino, fh), 0)
	e.mustWrite(ino, fh, 3*bs, pattern(2*bs, 2)) // buffered
	efs.SetInjector(vfs.Randomly(1, 1, &vfs.InjectedError{Errno: syscall.ENOSPC},
		vfs.And(vfs.Kinds(vfs.OpWrite), vfs.PathContains(".vlog"))))
	defer efs.SetInjector(nil)
	err := e.truncate(ino, 0)
	size := e.attr(ino).Size
	t.Logf("truncate to 0 with a full value log: %v; size after: %d", err, size)
	if err != 0 || size != 0 {
		t.Fatalf("ftruncate(fd, 0) on a full disk: %v, size %d; want success and size 0", err, size)
	}
}

// TestCopyFileRangeSyncFailureReported: copy_file_range into an
// O_DSYNC descriptor is durable on return, or fails. The final synced flush
// failed (ENOSPC from the value log) and copyFileRange returned the error
// with the count, but CopyFileRange reports an error only when the count is
// 0: the caller was told every byte was copied, durably, while none had even
// reached the engine. The kernel does not fsync after a FUSE
// copy_file_range (it relies on the filesystem), so nobody else reports it.
func TestCopyFileRangeSyncFailureReported(t *testing.T) {
	e, efs, _ := durEnv(t, time.Hour)
	e.fs.Close()
	e.opts.WriteBufferSize = 1 << 20 // the copy stays buffered until the final synced flush
	e.open()
	src, sfh := e.mustCreate(1, "src")
	data := pattern(128<<10, 3) // a synced batch over 64 KiB keeps its values in the value log
	e.mustWrite(src, sfh, 0, data)
	wantErr(t, "fsync src", e.fsync(src, sfh), 0)
	dst, _ := e.mustCreate(1, "dst")
	dfh := e.mustOpen(dst, syscall.O_RDWR|syscall.O_DSYNC)
	efs.SetInjector(vfs.Randomly(1, 1, &vfs.InjectedError{Errno: syscall.ENOSPC},
		vfs.And(vfs.Kinds(vfs.OpWrite), vfs.PathContains(".vlog"))))
	in := fuse.CopyFileRangeIn{InHeader: e.hdr(src), FhIn: sfh, NodeIdOut: dst, FhOut: dfh, Len: uint64(len(data))}
	n, st := e.raw.CopyFileRange(nil, &in)
	efs.SetInjector(nil)
	t.Logf("copy_file_range into an O_DSYNC handle, value log full: %d bytes, %v", n, st)
	if st == fuse.OK {
		t.Fatalf("copy_file_range into an O_DSYNC handle returned success (%d bytes) though its synced flush failed", n)
	}
}

// TestFlushNearBatchLimit: the fs side of
// lsm TestBatchJustUnderJournalLimit. Without value
// separation (value_threshold above the block size) and with a 4 MiB
// journal, closing a file with 254 buffered blocks (about 1 MiB, under the
// engine's batch limit but over the journal's frame limit) does not split
// the flush (no ErrBatchTooLarge): the engine fails and refuses every
// write until remount.
func TestFlushNearBatchLimit(t *testing.T) {
	o := &lsm.Options{UUID: testUUID, MemtableSize: 4 << 20, CacheSize: -1,
		ValueThreshold: -1, Journal: lsm.JournalOptions{Size: 4 << 20}}
	e, _ := faultEnvOpts(t, o, vfs.NewMem(), fs.Options{})
	ino, fh := e.mustCreate(1, "f")
	e.mustWrite(ino, fh, 0, pattern(254*bs, 1)) // buffered (4 MiB buffer)
	ferr := e.flush(ino, fh)
	_, _, cerr := e.create(1, "g", 0o644, syscall.O_RDWR)
	t.Logf("close of 254 buffered blocks: %v; then creating another file: %v", ferr, cerr)
	if ferr != 0 || cerr != 0 {
		t.Fatalf("closing a file with 254 buffered blocks failed (%v): the flush batch passed the engine's size check and failed the journal's, and the engine stopped", ferr)
	}
}

// TestWriteBufferTotalBounded: many files written and kept open hold at
// most WriteBufferTotal of buffers between them (plus the write that
// crosses it), not WriteBufferSize each: a thousand writers of 4 MiB
// files held 4 GiB, far past the daemon's memory bound. Past the total, a
// write flushes its own file's buffer.
func TestWriteBufferTotalBounded(t *testing.T) {
	e := newFileEnv(t, fs.Options{WriteBufferSize: 64 << 10, WriteBufferTotal: 128 << 10})
	type file struct {
		ino, fh uint64
		data    []byte
	}
	var files []file
	for i := 0; i < 40; i++ {
		ino, fh := e.mustCreate(1, fmt.Sprintf("f%d", i))
		data := pattern(48<<10, byte(i))
		for off := 0; off < len(data); off += 16 << 10 {
			e.mustWrite(ino, fh, uint64(off), data[off:off+16<<10])
			if b := e.fs.Buffered(); b > 128<<10+16<<10 {
				t.Fatalf("file %d: %d bytes buffered, bound 128 KiB plus one 16 KiB write", i, b)
			}
		}
		files = append(files, file{ino, fh, data})
	}
	for _, f := range files {
		if got := e.mustRead(f.ino, f.fh, 0, len(f.data)+1); !bytes.Equal(got, f.data) {
			t.Fatalf("inode %d reads back wrong", f.ino)
		}
		e.release(f.ino, f.fh)
	}
	if b := e.fs.Buffered(); b != 0 {
		t.Errorf("%d bytes buffered with every file closed", b)
	}
	e.check()
}
