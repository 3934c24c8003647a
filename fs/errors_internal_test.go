package fs

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

func TestErrno(t *testing.T) {
	var log bytes.Buffer
	f := &FS{log: slog.New(slog.NewTextHandler(&log, nil))}
	for _, c := range []struct {
		err    error
		want   fuse.Status
		logged bool
	}{
		{nil, fuse.OK, false},
		{syscall.ENOTEMPTY, fuse.Status(syscall.ENOTEMPTY), false},
		{lsm.ErrNotFound, fuse.ENOENT, false},
		{fmt.Errorf("get: %w", lsm.ErrNotFound), fuse.ENOENT, false},
		{lsm.ErrReadOnly, fuse.EROFS, false},
		{fmt.Errorf("apply: %w", vfs.ErrNoSpace), fuse.Status(syscall.ENOSPC), true},
		{fmt.Errorf("apply: %w", lsm.ErrNoSpace), fuse.Status(syscall.ENOSPC), true},
		{fmt.Errorf("apply: %w: %w", lsm.ErrFailed, vfs.ErrNoSpace), fuse.EIO, true},
		{fmt.Errorf("apply: %w: %w", lsm.ErrFailed, syscall.EIO), fuse.EIO, true},
		{fmt.Errorf("read table: %w", syscall.EIO), fuse.EIO, true},
		{&CorruptError{What: "inode value", Reason: "x"}, fuse.EIO, true},
		{fmt.Errorf("block: %w", lsm.ErrCorrupt), fuse.EIO, true},
		{lsm.ErrClosed, fuse.EIO, true},
	} {
		log.Reset()
		if got := f.errno("op", 42, c.err); got != c.want {
			t.Errorf("errno(%v) = %v, want %v", c.err, got, c.want)
		}
		if logged := log.Len() > 0; logged != c.logged {
			t.Errorf("errno(%v): logged %v, want %v", c.err, logged, c.logged)
		}
		if c.logged && !(strings.Contains(log.String(), "op=op") && strings.Contains(log.String(), "ino=42")) {
			t.Errorf("errno(%v): log line lacks op and ino: %s", c.err, log.String())
		}
	}
}

// TestErrnoLogIsBounded: a flood of failures (a full disk fails every
// write) writes at most errLogBurst lines a second; the first line of the
// next second says how many were dropped.
func TestErrnoLogIsBounded(t *testing.T) {
	var log bytes.Buffer
	now := time.Unix(1000, 0)
	f := &FS{log: slog.New(slog.NewTextHandler(&log, nil))}
	f.errLog.now = func() time.Time { return now }
	full := fmt.Errorf("apply: %w", vfs.ErrNoSpace)
	for range 1000 {
		if got := f.errno("write", 7, full); got != fuse.Status(syscall.ENOSPC) {
			t.Fatalf("errno = %v, want ENOSPC", got)
		}
	}
	if n := strings.Count(log.String(), "\n"); n != errLogBurst {
		t.Fatalf("%d lines for 1000 failures in one second, want %d", n, errLogBurst)
	}
	log.Reset()
	now = now.Add(time.Second)
	f.errno("write", 7, full)
	if want := fmt.Sprintf("suppressed=%d", 1000-errLogBurst); !strings.Contains(log.String(), want) {
		t.Fatalf("the next second's line %q does not say %s", log.String(), want)
	}
}
