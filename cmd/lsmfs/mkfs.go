package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/mount"
)

func mkfsCommand() *cli.Command {
	return &cli.Command{
		Name:      "mkfs",
		Usage:     "make a new, empty lsmfs in DATADIR",
		ArgsUsage: "DATADIR",
		Description: `Makes a new lsmfs in DATADIR, which must be missing or empty (a lost+found
directory is allowed). The journal is a file in DATADIR unless --journal names
another file or a block device, which is then formatted whole. A --journal
holding a filesystem (ext4, XFS, btrfs, ...), a partition table, another
lsmfs's journal or, in a regular file, any non-zero byte is refused unless
--force is given; a block device that is mounted or in use is always refused.
The journal's superblock records the filesystem's UUID, and a mount refuses a journal of
another filesystem. The UUID is random. The root directory belongs to the user
running mkfs, mode 0755.

Examples:
   lsmfs mkfs /srv/lsmfs
   lsmfs mkfs --journal /dev/nvme1n1p1 /srv/lsmfs     # journal on its own device
   lsmfs mkfs --force --journal /dev/nvme1n1p1 /srv/lsmfs  # ... which held an old filesystem
   lsmfs mkfs --journal-size 1G --block-size 65536 /srv/lsmfs`,
		Flags:        mkfsFlags(),
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef(c, "want DATADIR, got %d arguments", c.NArg())
			}
			dataDir := c.Args().First()
			journalSize, err := mount.ParseSize(c.String("journal-size"))
			if err != nil {
				return usagef(c, "--journal-size: %v", err)
			}
			blockSize := c.Int("block-size")
			if blockSize <= 0 {
				return usagef(c, "--block-size %d: must be positive", blockSize)
			}
			// mkfs writes only superblocks and a preallocated journal file,
			// so it is quick even on a large device; on a terminal a
			// spinner shows it is at work all the same.
			stop := spin(c.App.ErrWriter, "formatting "+dataDir)
			uuid, err := mount.Format(dataDir, mount.FormatOptions{
				Journal:     c.String("journal"),
				JournalSize: journalSize,
				BlockSize:   blockSize,
				RootUID:     uint32(os.Getuid()),
				RootGID:     uint32(os.Getgid()),
				Force:       c.Bool("force"),
			})
			stop()
			if err != nil {
				return withCode(exitFailure, err)
			}
			journal := c.String("journal")
			if journal == "" {
				journal = dataDir + "/journal"
			}
			fmt.Fprintf(c.App.Writer, "lsmfs: made %s: uuid %s, journal %s\n", dataDir, mount.FormatUUID(uuid), journal)
			return nil
		},
	}
}

// mkfsFlags are the flags of lsmfs mkfs.
func mkfsFlags() []cli.Flag {
	def := (&lsm.Options{}).EnsureDefaults()
	return []cli.Flag{
		&cli.StringFlag{
			Name:        "journal",
			Usage:       "put the journal in `DEV|FILE` (a block device is formatted whole)",
			DefaultText: "DATADIR/journal",
		},
		&cli.StringFlag{
			Name:  "journal-size",
			Usage: "ring `SIZE` of a file journal (K, M, G suffixes); a device journal uses the whole device",
			Value: mount.FormatSize(def.Journal.Size),
		},
		&cli.BoolFlag{
			Name:    "force",
			Aliases: []string{"f"},
			Usage:   "format the --journal file or device even if it holds a filesystem, another lsmfs journal or (a file) any data",
		},
		&cli.IntFlag{
			Name:  "block-size",
			Usage: "filesystem data block size in bytes (`N`, a power of two from 4096 to 1048576); fixed for the life of the filesystem",
			Value: fs.DefaultBlockSize,
		},
	}
}
