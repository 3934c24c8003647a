package fs_test

// Durability bugs a durability audit found, each fixed; every test here
// failed before its fix. Helpers are in durability_test.go.

import (
	"bytes"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestDurBufferedWriteWithinCommitInterval: README "Writes without a sync
// request are forced within commit_interval" holds for a file that stays
// open: its buffered writes are flushed and forced by the background
// flusher (fs.Options.FlushAge, half the commit interval). Only flush,
// fsync, release or a full buffer wrote them, so after many commit
// intervals a power loss kept the file (its create was forced) but none of
// its data.
func TestDurBufferedWriteWithinCommitInterval(t *testing.T) {
	e, _, o := durEnv(t, 20*time.Millisecond)
	ino, fh := e.mustCreate(1, "log")
	data := pattern(1000, 1)
	e.mustWrite(ino, fh, 0, data)
	time.Sleep(300 * time.Millisecond) // 15 commit intervals
	c := remountAfterCrash(t, e.mem, o)
	wantBytes(t, "file written 15 commit intervals before the crash, still open", fileAfterCrash(t, c, 1, "log"), data)
	_ = fh
}

// TestDurRenameOverOpenDirtyFile: the replace-by-rename idiom without fsync,
// with the temporary still open when it is renamed (write, rename, close):
// after a crash the target holds the old contents or the new, never less.
// The rename's batch reached the journal while the temporary's bytes stayed
// in its write buffer until close, so any force in between (another file's
// fsync, the commit interval) made the rename durable without the data.
// Now the rename writes the buffer first, as ext4's auto_da_alloc does.
func TestDurRenameOverOpenDirtyFile(t *testing.T) {
	for _, force := range []string{"another file's fsync", "the commit interval"} {
		t.Run(force, func(t *testing.T) {
			ci := time.Hour
			if force == "the commit interval" {
				ci = 20 * time.Millisecond
			}
			e, _, o := durEnv(t, ci)
			old := pattern(3000, 20)
			ino, fh := e.mustCreate(1, "target")
			e.mustWrite(ino, fh, 0, old)
			wantErr(t, "fsync", e.fsync(ino, fh), 0)
			e.release(ino, fh)

			tmp, tfh := e.mustCreate(1, "target.tmp")
			fresh := pattern(5000, 21)
			e.mustWrite(tmp, tfh, 0, fresh) // buffered
			wantErr(t, "rename over target", e.rename(1, "target.tmp", 1, "target", 0), 0)
			if force == "the commit interval" {
				time.Sleep(200 * time.Millisecond)
			} else {
				other, ofh := e.mustCreate(1, "other")
				wantErr(t, "another file's fsync", e.fsync(other, ofh), 0)
			}
			c := remountAfterCrash(t, e.mem, o)
			got := fileAfterCrash(t, c, 1, "target")
			if !bytes.Equal(got, old) && !bytes.Equal(got, fresh) {
				t.Fatalf("target after the crash: %d bytes, neither the old (%d) nor the new contents (%d)", len(got), len(old), len(fresh))
			}
		})
	}
}

// TestDurNoSpaceAtCloseThenLost: write(2) succeeds into the daemon's
// buffer; the flush at close(2) and the retry at release fail with ENOSPC;
// the release drops the buffer. The next fsync of the file, on a new
// descriptor once space is back, reports the loss (as Linux reports a
// writeback error to the next fsync); it succeeded on a file without the
// data.
func TestDurNoSpaceAtCloseThenLost(t *testing.T) {
	e, efs, _ := durEnv(t, time.Hour)
	ino, fh := e.mustCreate(1, "f")
	wantErr(t, "fsync", e.fsync(ino, fh), 0)
	e.mustWrite(ino, fh, 0, pattern(8000, 14)) // buffered: write(2) succeeds
	efs.SetInjector(vfs.Randomly(1, 1, &vfs.InjectedError{Errno: syscall.ENOSPC},
		vfs.And(vfs.Kinds(vfs.OpWrite), vfs.PathContains(".vlog"))))
	closeErr := e.flush(ino, fh)
	e.raw.Release(nil, &fuse.ReleaseIn{InHeader: e.hdr(ino), Fh: fh})
	efs.SetInjector(nil)
	fh2 := e.mustOpen(ino, syscall.O_RDWR)
	fsyncErr := e.fsync(ino, fh2)
	size := e.attr(ino).Size
	t.Logf("close: %v; fsync on a new handle: %v; size after: %d (8000 written)", closeErr, fsyncErr, size)
	if closeErr != syscall.ENOSPC {
		t.Fatalf("close: %v, want ENOSPC", closeErr)
	}
	if fsyncErr == 0 && size != 8000 {
		t.Errorf("fsync reports success while the 8000 bytes written (write(2) returned success) are gone: the ENOSPC was reported once, to close(2), then the data was dropped at release")
	}
}

// TestDurFallocateThroughSyncHandle: fallocate through an O_SYNC or O_DSYNC
// descriptor is durable on return, as on XFS (XFS_PREALLOC_SYNC); it was
// applied without a force.
func TestDurFallocateThroughSyncHandle(t *testing.T) {
	e, _, o := durEnv(t, time.Hour)
	ino, fh := e.mustCreate(1, "f")
	wantErr(t, "fsync", e.fsync(ino, fh), 0)
	s := e.mustOpen(ino, syscall.O_RDWR|syscall.O_DSYNC)
	wantErr(t, "fallocate", e.fallocate(ino, s, 0, 3*bs, 0), 0)
	c := remountAfterCrash(t, e.mem, o)
	out, errno := c.lookup(1, "f")
	if errno != 0 || out.Attr.Size != 3*bs {
		t.Fatalf("after fallocate through an O_DSYNC handle and a crash: size %d, %v; want %d", out.Attr.Size, errno, 3*bs)
	}
}
