package main

import (
	"errors"
	"fmt"

	"github.com/dustin/go-humanize"
	"github.com/urfave/cli/v2"

	"github.com/lsmfs/lsmfs/mount"
)

func compactCommand() *cli.Command {
	return &cli.Command{
		Name:      "compact",
		Usage:     "compact the tree and clean the value log now, giving back the space of deleted data",
		ArgsUsage: "MOUNTPOINT|DATADIR",
		Description: `Compacts every table down to the last level (dropping deleted and overwritten
versions, after flushing the memtables) and then cleans the value log (rewriting
the live values of every sealed segment that holds dead ones, and removing
those segments). Background compaction and cleaning do the same gradually;
compact does it now, e.g. after deleting much data.

On a mounted filesystem the daemon does the work (through its control socket),
and the filesystem stays in use; interrupting lsmfs compact does not stop it.
An unmounted DATADIR is opened and compacted by lsmfs compact itself. On a
terminal it shows its progress on stderr; it prints what it did.

Examples:
   lsmfs compact /mnt/lsmfs
   lsmfs compact /srv/lsmfs                    # unmounted`,
		Flags:        engineFlags(),
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef(c, "want MOUNTPOINT or DATADIR, got %d arguments", c.NArg())
			}
			return compact(c, c.Args().First())
		},
	}
}

func compact(c *cli.Context, path string) error {
	t, err := mount.Resolve(path)
	if err != nil {
		return err
	}
	bar := newProgress(c.App.ErrWriter, 1, "compacting", true)
	defer bar.done()
	progress := func(p mount.CompactProgress) {
		desc := "compacting tables"
		if p.Phase == "clean" {
			desc = "cleaning value log"
		}
		bar.set(int64(p.Done), int64(p.Total), desc)
	}
	res, err := mount.NewControl(t.DataDir).Compact(c.Context, progress)
	if errors.Is(err, mount.ErrNotServing) && t.Mountpoint == "" {
		db, _, oerr := openEngine(c, t.DataDir, false)
		if oerr != nil {
			return oerr
		}
		res, err = mount.Compact(db, t.DataDir, progress)
		if cerr := db.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close %s: %w", t.DataDir, cerr)
		}
	} else if errors.Is(err, mount.ErrNotServing) {
		err = mount.DeadMountError(t)
	}
	if err != nil {
		return err
	}
	bar.done()
	b := humanize.IBytes
	fmt.Fprintf(c.App.Writer, "lsmfs: compacted %s in %.1fs: tables %d -> %d (%s -> %s), value log %s -> %s (%d segments cleaned), disk %s -> %s\n",
		t.DataDir, res.Seconds, res.TablesBefore, res.TablesAfter, b(res.TableBytesBefore), b(res.TableBytesAfter),
		b(res.VlogBytesBefore), b(res.VlogBytesAfter), res.SegmentsCleaned, b(res.DiskBytesBefore), b(res.DiskBytesAfter))
	return nil
}
