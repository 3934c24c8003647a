package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/lsmfs/lsmfs/mount"
)

func umountCommand() *cli.Command {
	return &cli.Command{
		Name:      "umount",
		Usage:     "unmount MOUNTPOINT and wait until the daemon has flushed, closed and exited",
		ArgsUsage: "MOUNTPOINT",
		Description: `Unmounts like umount(8) (as root) or fusermount3 -u, then waits until the daemon
serving the mount has flushed its buffers, checkpointed the journal, closed the
engine and exited. After it returns, the data directory is unlocked and the
journal device is free: lsmfs fsck, a new mount or detaching the device work at
once. Plain umount(8) returns before that (the daemon finishes on its own in
the background).

A busy mount is not unmounted (exit 1, naming who holds it) unless --lazy
detaches it, in which case the daemon exits when the last open file is closed;
--timeout bounds the wait.

Examples:
   lsmfs umount /mnt/lsmfs && lsmfs fsck /srv/lsmfs
   lsmfs umount --lazy --timeout 5m /mnt/lsmfs`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "lazy", Aliases: []string{"l"}, Usage: "detach a busy mount now; the daemon exits when it is no longer used"},
			&cli.DurationFlag{Name: "timeout", Usage: "wait up to `DURATION` for the daemon to exit", Value: time.Minute},
		},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef(c, "want MOUNTPOINT, got %d arguments", c.NArg())
			}
			return umount(c, c.Args().First())
		},
	}
}

func umount(c *cli.Context, path string) error {
	t, err := mount.Resolve(path)
	if err != nil {
		return err
	}
	if t.Mountpoint == "" {
		return fmt.Errorf("%s is not mounted", path)
	}
	ctx, cancel := context.WithTimeout(c.Context, 5*time.Second)
	s, err := mount.NewControl(t.DataDir).Stats(ctx)
	cancel()
	pid := s.PID
	if err != nil {
		fmt.Fprintf(c.App.ErrWriter, "lsmfs: %s: cannot reach the daemon (%v); unmounting without waiting for it\n", t.Mountpoint, err)
		pid = 0
	}
	// The daemon is not our child: a pidfd tells when it exits.
	pidfd := -1
	if pid > 0 {
		if pidfd, err = unix.PidfdOpen(pid, 0); err != nil {
			pidfd = -1
		} else {
			defer unix.Close(pidfd)
		}
	}
	if err := unmountPath(t.Mountpoint, c.Bool("lazy")); err != nil {
		return err
	}
	if pidfd < 0 {
		return nil
	}
	timeout := c.Duration("timeout")
	deadline := time.Now().Add(timeout)
	for {
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait for daemon %d: %w", pid, err)
		}
		if n == 0 {
			return fmt.Errorf("%s is unmounted, but its daemon (pid %d) is still running after %s (busy files with --lazy, or a slow flush: see its log)", t.Mountpoint, pid, timeout)
		}
		return nil
	}
}

// unmountPath unmounts mnt: umount2(2) as root, else fusermount3 -u.
func unmountPath(mnt string, lazy bool) error {
	if os.Geteuid() == 0 {
		flags := 0
		if lazy {
			flags = unix.MNT_DETACH
		}
		err := unix.Unmount(mnt, flags)
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("unmount %s: busy (a process uses it; see fuser -vm %s, or use --lazy)", mnt, mnt)
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", mnt, err)
		}
		return nil
	}
	args := []string{"-u"}
	if lazy {
		args = append(args, "-z")
	}
	var stderr bytes.Buffer
	cmd := exec.Command("fusermount3", append(args, mnt)...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("fusermount3 %s %s: %v: %s", strings.Join(args, " "), mnt, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
