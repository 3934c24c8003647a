package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
	"github.com/lsmfs/lsmfs/mount"
)

// Opening an unmounted data directory
//
// `umount` returns as soon as the kernel has detached the mount; the daemon
// then flushes, forces and closes the engine, and only then releases the
// data directory's lock (a plain umount sends no FUSE DESTROY that would let
// the kernel wait for it). So `umount MNT && lsmfs fsck DATADIR` can find the
// directory still locked for a moment. The commands that open a data
// directory (fsck, stats, compact) therefore tell the two cases apart:
//
//   - a daemon answers on the control socket: the filesystem is mounted; fail
//     at once, naming the mount point;
//   - no daemon answers but the lock is held: a daemon is closing (or
//     another lsmfs command has the directory); try again every 50 ms, up
//     to --wait (default 10s), saying so on stderr (mount.OpenWhenUnlocked,
//     which a mount uses for the same case).
//
// `lsmfs umount MOUNTPOINT` is the other way round: it returns only after
// the daemon has exited.

// defaultLockWait is how long a command waits for a closing daemon.
const defaultLockWait = 10 * time.Second

// errMounted is returned by openEngine for a data directory a daemon serves.
var errMounted = errors.New("mounted")

// engineFlags are the flags of the commands that open a data directory
// themselves when it is not mounted.
func engineFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name:        "journal",
			Usage:       "the journal `DEV|FILE`, if it is no longer where mkfs recorded it",
			DefaultText: "recorded at mkfs",
		},
		&cli.DurationFlag{
			Name:  "wait",
			Usage: "wait up to `DURATION` for the lock of a daemon that is still closing after an unmount",
			Value: defaultLockWait,
		},
	}
}

// openEngine opens the engine in dataDir (read-only if readOnly) for a
// command, waiting up to c's --wait for the lock of a closing daemon. A
// mounted data directory gives an error matching errMounted.
func openEngine(c *cli.Context, dataDir string, readOnly bool) (*lsm.DB, *lsm.Options, error) {
	if warning, err := mount.CheckDataDir(dataDir); err != nil {
		return nil, nil, err
	} else if warning != "" {
		fmt.Fprintf(c.App.ErrWriter, "lsmfs: warning: %s\n", warning)
	}
	opts := &lsm.Options{ReadOnly: readOnly, Journal: lsm.JournalOptions{Path: c.String("journal")}}
	db, err := lsm.Open(dataDir, opts)
	if err == nil || !errors.Is(err, vfs.ErrLocked) {
		return db, opts, err
	}
	ctx, cancel := context.WithTimeout(c.Context, 2*time.Second)
	s, live := mount.LiveDaemon(ctx, dataDir)
	cancel()
	if live {
		return nil, nil, fmt.Errorf("%s is mounted on %s (daemon pid %d): %w", dataDir, s.Mountpoint, s.PID, errMounted)
	}
	wait := c.Duration("wait")
	if wait <= 0 {
		return nil, nil, inUse(dataDir, err)
	}
	fmt.Fprintf(c.App.ErrWriter, "lsmfs: %s is locked: waiting up to %s for its daemon to finish closing\n", dataDir, wait)
	db, err = mount.OpenWhenUnlocked(c.Context, wait, func() (*lsm.DB, error) { return lsm.Open(dataDir, opts) })
	if errors.Is(err, vfs.ErrLocked) {
		return nil, nil, inUse(dataDir, err)
	}
	return db, opts, err
}

func inUse(dataDir string, err error) error {
	return fmt.Errorf("%s is in use (locked by another process: a daemon still closing, or another lsmfs command): %w", dataDir, err)
}
