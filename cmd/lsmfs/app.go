package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

// Main runs the lsmfs command line (args as in os.Args) and returns its
// error; exitCode maps it to the process exit status.
//
// Besides its subcommands, lsmfs accepts the argument order that mount(8)
// helpers get: `lsmfs DATADIR MOUNTPOINT [-o OPTS]`, which mount.fuse3 runs
// for `mount -t fuse.lsmfs DATADIR MOUNTPOINT -o OPTS` and for fstab lines of
// type fuse.lsmfs.
func Main(args []string) error {
	return run(context.Background(), args, os.Stdout, os.Stderr)
}

// run is Main with its output streams.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	app := newApp(stdout, stderr)
	if len(args) >= 3 && !strings.HasPrefix(args[1], "-") && app.Command(args[1]) == nil {
		return runMount8(ctx, args[1:])
	}
	return app.RunContext(ctx, args)
}

func newApp(stdout, stderr io.Writer) *cli.App {
	return &cli.App{
		Writer:    stdout,
		ErrWriter: stderr,
		Name:      "lsmfs",
		Usage:     "a log-structured filesystem served by FUSE",
		UsageText: "lsmfs COMMAND [options] ARGS...\n" +
			"lsmfs DATADIR MOUNTPOINT [-o OPTIONS]   (the mount(8) form; same as lsmfs mount)",
		Description: `lsmfs keeps every file, directory, extended attribute and data block in an
embedded LSM-tree engine whose write-ahead journal can live on its own device.

   lsmfs mkfs /srv/lsmfs                       # make a filesystem
   lsmfs mount /srv/lsmfs /mnt/lsmfs           # mount it (returns once it is ready)
   lsmfs stats /mnt/lsmfs                      # what the daemon is doing
   lsmfs compact /mnt/lsmfs                    # give back the space of deleted data now
   lsmfs umount /mnt/lsmfs                     # unmount, wait until flushed and closed
   lsmfs fsck /srv/lsmfs                       # check it while unmounted

With the binary in /usr/local/bin (go build -o /usr/local/bin/lsmfs ./cmd/lsmfs),
mount(8) and /etc/fstab work through mount.fuse3 (package fuse3):

   mount -t fuse.lsmfs /srv/lsmfs /mnt/lsmfs -o cache_size=512M
   /srv/lsmfs  /mnt/lsmfs  fuse.lsmfs  defaults,nofail  0  0      # /etc/fstab

Prometheus metrics: mount with -o metrics=127.0.0.1:9567. The full reference
(every command, mount option and metric) is docs/lsmfs.md (lsmfs docs).

Exit status: 0 success, 1 failure, 2 usage error, 32 mount failed;
fsck (as e2fsck): 0 clean, 4 problems found, 8 could not check, 16 usage
error, 32 interrupted.`,
		HideHelpCommand: true,
		Commands: []*cli.Command{mkfsCommand(), mountCommand(), umountCommand(), fsckCommand(),
			statsCommand(), compactCommand(), docsCommand()},
		// Errors go back to Main; only main exits.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError:   usageError,
	}
}

// usageError is the OnUsageError of every command: it does not print the
// whole help, it returns one line with the usage exit code.
func usageError(c *cli.Context, err error, isSubcommand bool) error {
	name := "lsmfs"
	if c.Command != nil && c.Command.Name != "" {
		name += " " + c.Command.Name
	}
	return withCode(exitUsage, fmt.Errorf("%s: %w (see %s --help)", name, err, name))
}

// usagef returns a usage error for the current command.
func usagef(c *cli.Context, format string, args ...any) error {
	return usageError(c, fmt.Errorf(format, args...), true)
}
