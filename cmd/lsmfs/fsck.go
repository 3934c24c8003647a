package main

import (
	"errors"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/mount"
)

func fsckCommand() *cli.Command {
	return &cli.Command{
		Name:      "fsck",
		Usage:     "check the lsmfs in DATADIR (unmounted) and print a summary",
		ArgsUsage: "DATADIR",
		Description: `Opens the engine in DATADIR read-only and checks the filesystem: every
directory entry names a live inode of the right type, link counts match the
entries, no data, xattr or symlink key belongs to a missing inode, and no
orphan is left. It changes nothing. The filesystem must not be mounted; if its
daemon is still closing after an unmount, fsck waits for it (--wait). On a
terminal it shows its progress on stderr.

Exit status (as e2fsck): 0 no problems, 1 problems corrected (never: fsck
does not repair yet), 4 problems found and left uncorrected, 8 operational
error (not an lsmfs data directory, mounted, unreadable), 16 usage error,
32 interrupted.

Examples:
   lsmfs fsck /srv/lsmfs
   umount /mnt/lsmfs && lsmfs fsck /srv/lsmfs
   lsmfs fsck /srv/lsmfs || echo "fsck exit $?"`,
		Flags:        engineFlags(),
		OnUsageError: fsckUsageError,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fsckUsageError(c, fmt.Errorf("want DATADIR, got %d arguments", c.NArg()), true)
			}
			return fsck(c, c.Args().First())
		},
	}
}

// fsckUsageError is usageError with e2fsck's usage exit status.
func fsckUsageError(c *cli.Context, err error, isSubcommand bool) error {
	return withCode(exitFsckUsage, usageError(c, err, isSubcommand))
}

func fsck(c *cli.Context, path string) error {
	dataDir := path
	if t, err := mount.Resolve(path); err == nil {
		if t.Mountpoint != "" {
			return withCode(exitFsckOperational, fmt.Errorf("%s is mounted (data directory %s): unmount it first", t.Mountpoint, t.DataDir))
		}
		dataDir = t.DataDir
	}
	db, _, err := openEngine(c, dataDir, true)
	if err != nil {
		if errors.Is(err, lsm.ErrCorrupt) {
			return withCode(exitFsckErrors, fmt.Errorf("%s: %w", dataDir, err))
		}
		return withCode(exitFsckOperational, err)
	}
	defer db.Close()

	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	type outcome struct {
		report fs.Report
		err    error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := fs.Check(db)
		done <- outcome{r, err}
	}()
	// Progress: table bytes read against the tables' size (a full scan
	// reads each about once).
	var total uint64
	for _, l := range db.Metrics().Levels {
		total += l.Bytes
	}
	start := db.Metrics().TableBytesRead
	bar := newProgress(c.App.ErrWriter, int64(max(total, 1)), "checking "+dataDir, true)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var out outcome
wait:
	for {
		select {
		case out = <-done:
			break wait
		case <-tick.C:
			read := db.Metrics().TableBytesRead - start
			bar.set(int64(min(read, max(total, 1)-1)), int64(max(total, 1)), "checking "+dataDir)
		case <-ctx.Done():
			bar.done()
			return withCode(exitFsckCancelled, fmt.Errorf("%s: check interrupted", dataDir))
		}
	}
	bar.done()
	if out.err != nil {
		if errors.Is(out.err, lsm.ErrCorrupt) {
			return withCode(exitFsckErrors, fmt.Errorf("%s: %w", dataDir, out.err))
		}
		return withCode(exitFsckOperational, fmt.Errorf("check %s: %w", dataDir, out.err))
	}
	fmt.Fprintf(c.App.Writer, "%s: %v\n", dataDir, out.report)
	if !out.report.OK() {
		return withCode(exitFsckErrors, fmt.Errorf("%s: problems found", dataDir))
	}
	return nil
}
