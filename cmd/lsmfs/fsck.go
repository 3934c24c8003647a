package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
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
		Usage:     "check (and with --repair, fix) the lsmfs in DATADIR (unmounted) and print a summary",
		ArgsUsage: "DATADIR",
		Description: `Opens the engine in DATADIR read-only and checks it.

The engine: every data block of every table (checksums, key order, the
bounds the manifest records), every live value-log pointer (the value is read
and its checksum compared), the manifest and the journal frames after the
checkpoint (checksummed when the engine opens), and the files the manifest
does not name (garbage a crash leaves; the next mount removes it).

The filesystem: every directory entry names a live inode of the right type
in a live directory; link counts equal the entries naming each inode;
directories form a tree (one name each, parent pointers leading to the root);
no data block lies beyond its file's size; stored-byte and xattr counts match
the keys; no data, xattr or symlink key belongs to a missing inode; no orphan
(an inode unlinked while open) is left unaccounted.

With --repair, fsck opens DATADIR writable (which replays the journal and
removes garbage files) and fixes what is safe: entries naming missing inodes,
keys of missing inodes, orphans (reclaimed: nothing is mounted, so nothing
holds them open), link counts, directory sizes and parent pointers, a missing
root directory (made again), and inodes no entry reaches, which go to
/lost+found as "#INODE" (a directory with its subtree). It prints each change.
It does not touch undecodable records (nor the names and data of an inode whose
record does not decode) or damaged tables and value-log segments: those are
reported and left.

The filesystem must not be mounted; if its daemon is still closing after an
unmount, fsck waits for it (--wait). On a terminal it shows its progress on
stderr.

Exit status (as e2fsck): 0 no problems, 1 problems corrected (--repair) and
none left, 4 problems found and left uncorrected, 8 operational error (not an
lsmfs data directory, mounted, unreadable), 16 usage error, 32 interrupted.

Examples:
   lsmfs fsck /srv/lsmfs
   umount /mnt/lsmfs && lsmfs fsck /srv/lsmfs
   lsmfs fsck --repair /srv/lsmfs
   lsmfs fsck /srv/lsmfs || echo "fsck exit $?"`,
		Flags: append(engineFlags(), &cli.BoolFlag{
			Name:  "repair",
			Usage: "fix what can be fixed safely, and say what changed",
		}),
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

// fsckResult is what one check found.
type fsckResult struct {
	engine lsm.CheckReport
	fs     fs.Report
}

func (r *fsckResult) problems() int {
	return len(r.engine.Problems) + r.engine.Omitted + len(r.fs.Problems) + r.fs.Omitted
}

func fsck(c *cli.Context, path string) error {
	dataDir := path
	if t, err := mount.Resolve(path); err == nil {
		if t.Mountpoint != "" {
			return withCode(exitFsckOperational, fmt.Errorf("%s is mounted (data directory %s): unmount it first", t.Mountpoint, t.DataDir))
		}
		dataDir = t.DataDir
	}
	w := c.App.Writer
	res, err := fsckCheck(c, dataDir, true)
	if err != nil {
		return err
	}
	printFsck(w, dataDir, res)
	if !c.Bool("repair") {
		if n := res.problems(); n > 0 {
			return withCode(exitFsckErrors, fmt.Errorf("%s: %d problems found", dataDir, n))
		}
		return nil
	}

	// Repair: a writable open replays the journal and removes the garbage
	// files; fs.Repair fixes the keyspace.
	if res.problems() == 0 && len(res.engine.Garbage) == 0 {
		return nil
	}
	db, _, err := openEngine(c, dataDir, false)
	if err != nil {
		return withCode(exitFsckOperational, fmt.Errorf("%s: open for repair: %w", dataDir, err))
	}
	// From here to the report of the changes, SIGINT and SIGTERM stop the
	// repair between its batches: the engine then closes cleanly and what
	// was written is listed. (During the open they end the process, as a
	// crash would: the journal's replay is redone at the next open.)
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var changes []string
	for _, g := range res.engine.Garbage {
		if _, err := os.Stat(filepath.Join(dataDir, g)); errors.Is(err, os.ErrNotExist) {
			changes = append(changes, "removed garbage file "+g)
		}
	}
	if len(res.fs.Problems) > 0 || res.fs.Omitted > 0 {
		fixed, err := fs.RepairContext(ctx, db)
		changes = append(changes, fixed...)
		if err != nil {
			cerr := db.Close()
			for _, ch := range changes {
				fmt.Fprintf(w, "%s: repaired: %s\n", dataDir, ch)
			}
			switch {
			case !errors.Is(err, context.Canceled):
				return withCode(exitFsckErrors, fmt.Errorf("%s: repair: %w", dataDir, errors.Join(err, cerr)))
			case cerr != nil:
				return withCode(exitFsckOperational, fmt.Errorf("%s: close after the interrupted repair: %w", dataDir, cerr))
			}
			return withCode(exitFsckCancelled, fmt.Errorf("%s: repair interrupted after %d changes; run lsmfs fsck --repair again to finish", dataDir, len(changes)))
		}
	}
	if err := db.Close(); err != nil {
		return withCode(exitFsckOperational, fmt.Errorf("%s: close after repair: %w", dataDir, err))
	}
	for _, ch := range changes {
		fmt.Fprintf(w, "%s: repaired: %s\n", dataDir, ch)
	}
	if ctx.Err() != nil {
		return withCode(exitFsckCancelled, fmt.Errorf("%s: interrupted after the repair (%d changes made), before the check after it", dataDir, len(changes)))
	}
	stop()
	after, err := fsckCheck(c, dataDir, false)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: after repair:\n", dataDir)
	printFsck(w, dataDir, after)
	if n := after.problems(); n > 0 {
		return withCode(exitFsckErrors, fmt.Errorf("%s: %d changes made, %d problems left", dataDir, len(changes), n))
	}
	if len(changes) > 0 {
		// e2fsck's 1: corrected. main reports it on stderr like any
		// outcome with a nonzero status.
		return withCode(exitFsckFixed, fmt.Errorf("%s: %d changes made; no problems left", dataDir, len(changes)))
	}
	return nil
}

func printFsck(w io.Writer, dataDir string, r *fsckResult) {
	fmt.Fprintf(w, "%s: %v", dataDir, r.fs)
	fmt.Fprintf(w, "%s: %v", dataDir, r.engine.String())
}

// fsckCheck opens dataDir read-only and runs both checkers, with a progress
// bar on a terminal.
func fsckCheck(c *cli.Context, dataDir string, wait bool) (*fsckResult, error) {
	db, _, err := openEngine(c, dataDir, true)
	if err != nil {
		if errors.Is(err, lsm.ErrCorrupt) {
			return nil, withCode(exitFsckErrors, fmt.Errorf("%s: %w", dataDir, err))
		}
		return nil, withCode(exitFsckOperational, err)
	}
	defer db.Close()

	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	type outcome struct {
		res fsckResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		var o outcome
		if o.res.engine, o.err = db.Check(); o.err == nil {
			o.res.fs, o.err = fs.Check(db)
		}
		done <- o
	}()
	// Progress: table bytes read against twice the tables' size (the
	// engine check reads each table once, the keyspace scan about once).
	var total uint64
	for _, l := range db.Metrics().Levels {
		total += l.Bytes
	}
	total = max(2*total, 1)
	start := db.Metrics().TableBytesRead
	bar := newProgress(c.App.ErrWriter, int64(total), "checking "+dataDir, true)
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
			bar.set(int64(min(read, total-1)), int64(total), "checking "+dataDir)
		case <-ctx.Done():
			bar.done()
			return nil, withCode(exitFsckCancelled, fmt.Errorf("%s: check interrupted", dataDir))
		}
	}
	bar.done()
	if out.err != nil {
		if errors.Is(out.err, lsm.ErrCorrupt) {
			return nil, withCode(exitFsckErrors, fmt.Errorf("%s: %w", dataDir, out.err))
		}
		return nil, withCode(exitFsckOperational, fmt.Errorf("check %s: %w", dataDir, out.err))
	}
	return &out.res, nil
}
