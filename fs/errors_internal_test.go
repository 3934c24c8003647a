package fs

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"

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
