package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

func fsckCommand() *cli.Command {
	return &cli.Command{
		Name:      "fsck",
		Usage:     "check the lsmfs in DATADIR (unmounted) and print a summary",
		ArgsUsage: "DATADIR",
		Description: `Opens the engine in DATADIR read-only and checks the filesystem: every
directory entry names a live inode of the right type, link counts match the
entries, no data, xattr or symlink key belongs to a missing inode, and no
orphan is left. It changes nothing. The filesystem must not be mounted.

Exit status (as e2fsck): 0 no problems, 4 problems found (left uncorrected),
8 operational error (not an lsmfs data directory, mounted, unreadable),
2 usage error.

Examples:
   lsmfs fsck /srv/lsmfs
   lsmfs fsck /srv/lsmfs || echo "fsck exit $?"`,
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef(c, "want DATADIR, got %d arguments", c.NArg())
			}
			return fsck(c, c.Args().First())
		},
	}
}

func fsck(c *cli.Context, dataDir string) error {
	db, err := lsm.Open(dataDir, &lsm.Options{ReadOnly: true})
	if err != nil {
		switch {
		case errors.Is(err, lsm.ErrCorrupt):
			return withCode(exitFsckErrors, fmt.Errorf("%s: %w", dataDir, err))
		case errors.Is(err, vfs.ErrLocked):
			return withCode(exitFsckOperational, fmt.Errorf(
				"%s is in use: mounted, or its daemon is still closing after an unmount; check it unmounted", dataDir))
		}
		return withCode(exitFsckOperational, err)
	}
	defer db.Close()
	report, err := fs.Check(db)
	if err != nil {
		if errors.Is(err, lsm.ErrCorrupt) {
			return withCode(exitFsckErrors, fmt.Errorf("%s: %w", dataDir, err))
		}
		return withCode(exitFsckOperational, fmt.Errorf("check %s: %w", dataDir, err))
	}
	fmt.Fprintf(c.App.Writer, "%s: %v\n", dataDir, report)
	if !report.OK() {
		return withCode(exitFsckErrors, fmt.Errorf("%s: problems found", dataDir))
	}
	return nil
}
