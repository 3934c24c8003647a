package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/lsmfs/lsmfs/mount"
)

// mountRequest is a parsed `lsmfs mount` (or mount(8) form) command line.
type mountRequest struct {
	dataDir, mountpoint string
	optLists            []string // -o values, in order
	foreground          bool
	readyFD             int  // >= 0: report readiness on this fd (set by the parent)
	fake                bool // mount(8) -f: check everything, do not mount
	// format lets the mount format an empty or missing DATADIR: lsmfs
	// mount does, the mount(8) form (mount.fuse3, fstab, systemd) never.
	format bool
}

func mountCommand() *cli.Command {
	return &cli.Command{
		Name:      "mount",
		Usage:     "mount DATADIR on MOUNTPOINT; in the background, returning once the mount is ready",
		ArgsUsage: "DATADIR MOUNTPOINT",
		Description: `Mounts the lsmfs in DATADIR on MOUNTPOINT. By default the daemon detaches and
the command returns once the kernel serves the mount, or fails with the reason
on one line (exit 32). An empty or missing DATADIR is formatted with the
defaults first (mount(8), fstab and systemd mounts never format: they fail on
an empty DATADIR, as they would on a data disk that failed to mount under it).
Unmount with umount MOUNTPOINT or fusermount3 -u MOUNTPOINT;
the daemon then flushes, forces and checkpoints the journal, closes the engine
and exits; lsmfs umount MOUNTPOINT also waits for that. SIGINT or SIGTERM to
the daemon unmounts too (lazily if the mount is busy).

The daemon logs (log/slog, one line per event, each with mountpoint=) to
syslog, or to the log= file, or to stderr with --foreground; -o debug adds a
trace of every FUSE operation. Logging to syslog, its standard error (where a
crash prints its stack traces) goes to DATADIR/stderr.log. It serves lsmfs stats and compact on the
control socket DATADIR/lsmfs.sock, and Prometheus metrics with -o metrics=.

Examples:
   lsmfs mount /srv/lsmfs /mnt/lsmfs
   lsmfs mount -o journal=/dev/nvme1n1p1,cache_size=1G /srv/lsmfs /mnt/lsmfs
   lsmfs mount --foreground -o debug /srv/lsmfs /mnt/lsmfs   # stay attached, log to stderr
   lsmfs /srv/lsmfs /mnt/lsmfs -o ro                          # the mount(8) argument order
   mount -t fuse.lsmfs /srv/lsmfs /mnt/lsmfs -o ro            # through mount(8) and mount.fuse3
   lsmfs mount -o metrics=127.0.0.1:9567 /srv/lsmfs /mnt/lsmfs  # Prometheus metrics

-o takes a comma-separated list and may be repeated; later options win. A comma
inside a value is written \,. Unknown or malformed options are refused.

` + mount.OptionsHelp(),
		Flags:        mountFlags(),
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			args := c.Args().Slice()
			if len(args) < 2 {
				return usagef(c, "want DATADIR MOUNTPOINT, got %d arguments", len(args))
			}
			req := mountRequest{
				dataDir:    args[0],
				mountpoint: args[1],
				optLists:   c.Generic("o").(*optionLists).lists,
				foreground: c.Bool("foreground"),
				readyFD:    c.Int("ready-fd"),
				format:     !c.Bool("no-format"),
			}
			if err := parseTrailingMountArgs(args[2:], &req); err != nil {
				return usageError(c, err, true)
			}
			return runMount(c.Context, req)
		},
	}
}

// mountFlags are the flags of lsmfs mount.
func mountFlags() []cli.Flag {
	return []cli.Flag{
		&cli.GenericFlag{
			Name:    "o",
			Aliases: []string{"options"},
			Usage:   "mount `OPTIONS`, comma-separated (see the list below); repeatable",
			Value:   &optionLists{},
		},
		&cli.BoolFlag{
			Name:  "foreground",
			Usage: "stay in the foreground and log to stderr; SIGINT/SIGTERM unmount",
		},
		&cli.BoolFlag{
			Name:   "no-format",
			Usage:  "internal: fail on an empty DATADIR instead of formatting it (the daemon of a mount(8) mount)",
			Hidden: true,
		},
		&cli.IntFlag{
			Name:   "ready-fd",
			Usage:  "internal: the daemon reports readiness on this file descriptor",
			Value:  -1,
			Hidden: true,
		},
	}
}

// optionLists collects repeated -o values without splitting them (values
// may hold escaped commas; mount.ParseOptions splits).
type optionLists struct{ lists []string }

func (o *optionLists) Set(v string) error { o.lists = append(o.lists, v); return nil }
func (o *optionLists) String() string     { return strings.Join(o.lists, ",") }

// runMount mounts as req says: in this process (foreground, or as the
// daemon started by daemonize), or by starting a daemon and waiting for it.
func runMount(ctx context.Context, req mountRequest) error {
	cfg, err := mount.ParseOptions(req.optLists...)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		return withCode(exitUsage, err)
	}
	if err := cfg.Abs(); err != nil {
		return withCode(exitMountFailed, err)
	}
	if req.fake {
		return nil
	}
	cfg.Format = req.format
	if req.foreground || req.readyFD >= 0 {
		return serve(ctx, req, cfg)
	}
	return daemonize(req, cfg)
}

// runMount8 handles `lsmfs DATADIR MOUNTPOINT [-o OPTS] [-n] [-s] [-f] [-v]
// [-t TYPE]`, the helper calling convention of mount(8) and mount.fuse3.
func runMount8(ctx context.Context, args []string) error {
	req := mountRequest{dataDir: args[0], mountpoint: args[1], readyFD: -1}
	if err := parseTrailingMountArgs(args[2:], &req); err != nil {
		return withCode(exitUsage, fmt.Errorf("%w (usage: lsmfs DATADIR MOUNTPOINT [-o OPTIONS])", err))
	}
	return runMount(ctx, req)
}

// parseTrailingMountArgs parses what may follow DATADIR MOUNTPOINT: -o OPTS
// (or -oOPTS, repeatable), --foreground, and the flags mount(8) gives its
// helpers: -n (no mtab; lsmfs writes none), -s (sloppy; lsmfs stays strict),
// -v (verbose; ignored), -f (fake: check the options, do not mount) and
// -t TYPE (fuse.lsmfs, fuse or lsmfs).
func parseTrailingMountArgs(args []string, req *mountRequest) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" || a == "--options" || a == "-t":
			if i+1 >= len(args) {
				return fmt.Errorf("%s needs a value", a)
			}
			i++
			if a == "-t" {
				if t := args[i]; t != "fuse.lsmfs" && t != "fuse" && t != "lsmfs" {
					return fmt.Errorf("-t %s: lsmfs mounts only type fuse.lsmfs", t)
				}
				continue
			}
			req.optLists = append(req.optLists, args[i])
		case strings.HasPrefix(a, "-o"):
			req.optLists = append(req.optLists, strings.TrimPrefix(a, "-o"))
		case strings.HasPrefix(a, "--options="):
			req.optLists = append(req.optLists, strings.TrimPrefix(a, "--options="))
		case a == "--foreground":
			req.foreground = true
		case a == "-f":
			req.fake = true
		case a == "-n", a == "-s", a == "-v":
		default:
			return fmt.Errorf("unexpected argument %q after DATADIR MOUNTPOINT", a)
		}
	}
	return nil
}
