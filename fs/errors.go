package fs

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/lsm"
)

var (
	// ErrCorrupt is matched (errors.Is) by every error caused by a key or value
	// of the lsmfs keyspace that does not decode. errors.As with *CorruptError
	// gives the key.
	ErrCorrupt = errors.New("fs: corrupt")
	// ErrNotFormatted is returned by New for an engine that holds no lsmfs
	// superblock.
	ErrNotFormatted = errors.New("fs: not formatted (no superblock)")
	// ErrFormatted is returned by Format for an engine that is not empty.
	ErrFormatted = errors.New("fs: already formatted")
	// ErrClosed is returned by Close on a closed FS.
	ErrClosed = errors.New("fs: closed")
)

// CorruptError describes bytes in the keyspace that do not decode.
type CorruptError struct {
	What   string // e.g. "inode value", "dentry key"
	Key    []byte // the key holding the bad bytes, when known
	Reason string
}

func (e *CorruptError) Error() string {
	if e.Key != nil {
		return fmt.Sprintf("fs: corrupt %s at key %q: %s", e.What, e.Key, e.Reason)
	}
	return fmt.Sprintf("fs: corrupt %s: %s", e.What, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// withKey returns err with key attached if it is a *CorruptError without one.
func withKey(err error, key []byte) error {
	var ce *CorruptError
	if errors.As(err, &ce) && ce.Key == nil {
		c := *ce
		c.Key = append([]byte(nil), key...)
		return &c
	}
	return err
}

// errno is the one place an error becomes the status a FUSE operation
// returns:
//   - a bare syscall.Errno is the operation's own answer (ENOENT, EEXIST,
//     ENOTEMPTY, ...) and passes through;
//   - lsm.ErrNotFound is ENOENT and lsm.ErrReadOnly EROFS;
//   - everything else is a failure below the filesystem: it is logged with
//     the operation and the inode first, then reported as ENOSPC or EDQUOT
//     when that is its cause (so callers see a full disk as such), and as
//     EIO otherwise (corruption, I/O errors, a closed engine, and an engine
//     that stopped accepting writes, lsm.ErrFailed, whatever the cause).
func (f *FS) errno(op string, ino uint64, err error) fuse.Status {
	if err == nil {
		return fuse.OK
	}
	if e, ok := err.(syscall.Errno); ok {
		return fuse.Status(e)
	}
	switch {
	case errors.Is(err, lsm.ErrNotFound):
		return fuse.ENOENT
	case errors.Is(err, lsm.ErrReadOnly):
		return fuse.EROFS
	}
	corrupt := errors.Is(err, ErrCorrupt) || errors.Is(err, lsm.ErrCorrupt)
	if ok, dropped := f.errLog.allow(); ok {
		args := []any{"op", op, "ino", ino, "err", err, "corrupt", corrupt}
		if dropped > 0 {
			args = append(args, "suppressed", dropped)
		}
		f.log.Error("fs: operation failed", args...)
	}
	var e syscall.Errno
	if !corrupt && !errors.Is(err, lsm.ErrFailed) && errors.As(err, &e) && (e == syscall.ENOSPC || e == syscall.EDQUOT) {
		return fuse.Status(e)
	}
	return fuse.EIO
}

// errLogBurst is how many failure lines errno writes in a second.
const errLogBurst = 20

// errLog bounds the failure lines errno writes: on a full disk every write
// fails, and each would be a line in syslog. Past errLogBurst lines in a
// second the lines are counted instead; the next line written says how
// many were dropped (suppressed=N).
type errLog struct {
	mu         sync.Mutex
	now        func() time.Time // tests set it; nil: time.Now
	window     time.Time        // start of the current second
	n          int              // lines written in it
	suppressed int
}

// allow reports whether a line may be written now, and how many were
// dropped since the last one.
func (l *errLog) allow() (ok bool, dropped int) {
	now := time.Now()
	if l.now != nil {
		now = l.now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.window) >= time.Second {
		l.window, l.n = now, 0
	}
	if l.n >= errLogBurst {
		l.suppressed++
		return false, 0
	}
	l.n++
	dropped, l.suppressed = l.suppressed, 0
	return true, dropped
}
