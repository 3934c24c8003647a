package tests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDaemon covers the daemon's life: formatting on first mount, signals,
// unmount while busy, a second mount of the same data directory, and
// flushing unsynced data at unmount.
func TestDaemon(t *testing.T) {
	requireMount(t)

	t.Run("first-mount-formats", func(t *testing.T) {
		dir := t.TempDir()
		f := unformatted(t, filepath.Join(dir, "new-data"))
		f.noFsck = false
		expectMountFailure(t, f, "journal="+filepath.Join(dir, "j"), "mkfs --journal")
		if _, err := os.Stat(f.dataDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a refused first mount created %s: %v", f.dataDir, err)
		}
		expectMountFailure(t, f, "ro", "read-only")
		f.mount()
		must(t, os.WriteFile(f.path("hello"), []byte("hello"), 0o644))
		f.remount()
		if b, err := os.ReadFile(f.path("hello")); err != nil || string(b) != "hello" {
			t.Errorf("after remount: %q, %v", b, err)
		}
	})

	t.Run("sigterm-unmounts", func(t *testing.T) {
		f := newFS(t, fsOptions{})
		data := content(5, 3<<20)
		must(t, os.WriteFile(f.path("unsynced"), data, 0o644))
		pid := f.pid
		must(t, syscall.Kill(pid, syscall.SIGTERM))
		if err := waitUnmounted(f.mnt, exitTimeout); err != nil {
			t.Fatal(err)
		}
		if err := waitExit(pid, exitTimeout); err != nil {
			t.Fatal(err)
		}
		f.pid = 0
		if log, _ := os.ReadFile(f.logFile); !strings.Contains(string(log), "unmounted and closed") {
			t.Errorf("the daemon did not log a clean close:%s", f.logTail())
		}
		f.mount()
		if b, err := os.ReadFile(f.path("unsynced")); err != nil || !bytes.Equal(b, data) {
			t.Errorf("unsynced data after SIGTERM and remount: %d bytes, %v; want %d bytes", len(b), err, len(data))
		}
	})

	t.Run("crash-output-kept", func(t *testing.T) {
		// Logging to syslog (no log=), a daemon's standard error goes to
		// DATADIR/stderr.log, so the runtime's dump on a crash (SIGQUIT
		// here; a panic alike) is kept; before, it went to /dev/null. The
		// next mount moves it to stderr.log.old.
		f := newFS(t, fsOptions{noMount: true})
		mountNoLog := func() {
			t.Helper()
			if _, err := lsmfs("mount", f.dataDir, f.mnt); err != nil {
				t.Fatal(err)
			}
			if f.pid = findDaemon(f.mnt); f.pid == 0 { // kill(0) would signal the test's process group
				t.Fatalf("no daemon serves %s", f.mnt)
			}
		}
		mountNoLog()
		x, err := os.Create(f.path("x"))
		must(t, err)
		_, err = x.WriteString("x")
		must(t, err)
		must(t, x.Sync())
		must(t, x.Close())
		pid := f.pid
		must(t, syscall.Kill(pid, syscall.SIGQUIT))
		if err := waitExit(pid, exitTimeout); err != nil {
			t.Fatal(err)
		}
		f.pid = 0
		if out, err := exec.Command("fusermount3", "-u", "-z", f.mnt).CombinedOutput(); err != nil {
			t.Fatalf("fusermount3 -u -z %s: %v: %s", f.mnt, err, out)
		}
		stderr := filepath.Join(f.dataDir, "stderr.log")
		crash, _ := os.ReadFile(stderr)
		if !strings.Contains(string(crash), "SIGQUIT") || !strings.Contains(string(crash), "goroutine ") {
			t.Errorf("%s after SIGQUIT: %q, want the runtime's dump", stderr, crash)
		}
		mountNoLog()
		if old, _ := os.ReadFile(stderr + ".old"); string(old) != string(crash) {
			t.Errorf("after the next mount, %s.old holds %d bytes, want the %d of the dump", stderr, len(old), len(crash))
		}
		if b, err := os.ReadFile(stderr); err != nil || len(b) != 0 {
			t.Errorf("after the next mount, %s: %q, %v; want it empty", stderr, b, err)
		}
		if b, err := os.ReadFile(f.path("x")); err != nil || string(b) != "x" {
			t.Errorf("a synced file after the crash: %q, %v", b, err)
		}
	})

	t.Run("dead-mount", func(t *testing.T) {
		// After the daemon is killed, stats, compact and a new mount on
		// the dead mount say that it is dead and how to detach it (mount
		// used to stack a new mount over it, which umount then detached).
		f := newFS(t, fsOptions{})
		must(t, syscall.Kill(f.pid, syscall.SIGKILL))
		if err := waitExit(f.pid, exitTimeout); err != nil {
			t.Fatal(err)
		}
		f.pid = 0
		for _, args := range [][]string{{"stats", f.mnt}, {"compact", f.mnt}} {
			if stderr, code := lsmfsRun(args...); code == 0 || !strings.Contains(stderr, "daemon serving it is gone") || !strings.Contains(stderr, "umount "+f.mnt) {
				t.Errorf("lsmfs %s on a dead mount: exit %d (%s), want it to say the daemon is gone and to umount", args[0], code, strings.TrimSpace(stderr))
			}
		}
		if stderr, code := lsmfsRun("mount", "-o", f.options(""), f.dataDir, f.mnt); code != 32 || !strings.Contains(stderr, "dead FUSE mount") {
			t.Errorf("lsmfs mount on a dead mount: exit %d (%s), want 32 naming the dead mount", code, strings.TrimSpace(stderr))
			if pid := findDaemon(f.mnt); pid != 0 {
				f.pid = pid
				f.unmount()
			}
		}
		if out, err := exec.Command("umount", f.mnt).CombinedOutput(); err != nil {
			t.Fatalf("umount of the dead mount: %v: %s", err, out)
		}
		f.mount()
	})

	t.Run("data-directory-is-a-mount-point", func(t *testing.T) {
		// A data directory that is the mount point of its own disk (here a
		// tmpfs) is a data directory to stats and compact, not "a tmpfs
		// mount".
		dir := filepath.Join(t.TempDir(), "data")
		must(t, os.Mkdir(dir, 0o755))
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=512m", "tmpfs", dir).CombinedOutput(); err != nil {
			t.Fatalf("mount tmpfs: %v: %s", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", dir).Run() })
		if _, err := lsmfs("mkfs", dir); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{"stats", "compact"} {
			if stderr, code := lsmfsRun(cmd, dir); code != 0 {
				t.Errorf("lsmfs %s of a data directory that is a mount point: exit %d (%s)", cmd, code, strings.TrimSpace(stderr))
			}
		}
	})

	t.Run("sighup-foreground-unmounts", func(t *testing.T) {
		// A daemon run in the foreground whose terminal goes away (SIGHUP)
		// unmounts cleanly, as for SIGTERM; it used to die without writing
		// its buffers.
		f := newFS(t, fsOptions{})
		f.unmount()
		cmd := exec.Command(lsmfsBin, "mount", "--foreground", "-o", f.options(""), f.dataDir, f.mnt)
		must(t, cmd.Start())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-exited
		})
		for deadline := time.Now().Add(exitTimeout); mountType(f.mnt) != "fuse.lsmfs"; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the foreground daemon did not mount %s:%s", f.mnt, f.logTail())
			}
		}
		data := content(6, 1<<20)
		must(t, os.WriteFile(f.path("closed"), data, 0o644)) // closed, not synced
		must(t, cmd.Process.Signal(syscall.SIGHUP))
		if err := waitUnmounted(f.mnt, exitTimeout); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			if err != nil {
				t.Errorf("the foreground daemon after SIGHUP: %v%s", err, f.logTail())
			}
		case <-time.After(exitTimeout):
			t.Fatalf("the foreground daemon did not exit after SIGHUP%s", f.logTail())
		}
		f.mount()
		if b, err := os.ReadFile(f.path("closed")); err != nil || !bytes.Equal(b, data) {
			t.Errorf("a closed file after SIGHUP and remount: %d bytes, %v; want %d bytes", len(b), err, len(data))
		}
	})

	t.Run("data-inside-mountpoint-refused", func(t *testing.T) {
		dir := t.TempDir()
		f := unformatted(t, filepath.Join(dir, "data"))
		f.mnt = dir // the data directory below the mount point
		expectMountFailure(t, f, "", "inside the mount point")
		g := unformatted(t, dir)
		g.mnt = dir // the data directory is the mount point
		expectMountFailure(t, g, "", "inside the mount point")
	})

	t.Run("read-only-data-directory", func(t *testing.T) {
		// A data directory on a read-only filesystem (read-only media, a
		// snapshot) can be checked and mounted read-only: the lock file
		// used to be opened for writing ("in use by another process").
		f := newFS(t, fsOptions{})
		must(t, os.WriteFile(f.path("kept"), []byte("kept"), 0o644))
		f.unmount()
		ro := filepath.Join(t.TempDir(), "ro")
		must(t, os.Mkdir(ro, 0o755))
		if out, err := exec.Command("mount", "--bind", f.dataDir, ro).CombinedOutput(); err != nil {
			t.Fatalf("mount --bind: %v: %s", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", ro).Run() })
		if out, err := exec.Command("mount", "-o", "remount,ro,bind", ro).CombinedOutput(); err != nil {
			t.Fatalf("remount read-only: %v: %s", err, out)
		}
		if out, err := lsmfs("fsck", ro); err != nil {
			t.Fatalf("fsck of a read-only data directory: %v\n%s", err, out)
		}
		g := unformatted(t, ro)
		if err := g.tryMount("ro"); err != nil {
			t.Fatalf("mount -o ro of a read-only data directory: %v%s", err, g.logTail())
		}
		if b, err := os.ReadFile(g.path("kept")); err != nil || string(b) != "kept" {
			t.Errorf("read from the read-only mount: %q, %v", b, err)
		}
		g.unmount()
	})

	t.Run("sigterm-busy-detaches", func(t *testing.T) {
		f := newFS(t, fsOptions{})
		fh, err := os.Create(f.path("open"))
		must(t, err)
		defer fh.Close()
		pid := f.pid
		must(t, syscall.Kill(pid, syscall.SIGTERM))
		// Busy: the daemon detaches the mount lazily and serves the open
		// file until it is closed.
		if err := waitUnmounted(f.mnt, exitTimeout); err != nil {
			t.Fatal(err)
		}
		if _, err := fh.WriteString("still served"); err != nil {
			t.Errorf("write to a file open across the lazy unmount: %v", err)
		}
		must(t, fh.Close())
		if err := waitExit(pid, exitTimeout); err != nil {
			t.Fatal(err)
		}
		f.pid = 0
		f.mount()
		if b, err := os.ReadFile(f.path("open")); err != nil || string(b) != "still served" {
			t.Errorf("after remount: %q, %v", b, err)
		}
	})

	t.Run("second-mount-refused", func(t *testing.T) {
		f := newFS(t, fsOptions{})
		other := unformatted(t, f.dataDir)
		expectMountFailure(t, other, "", "in use")
		if typ := mountType(f.mnt); typ != "fuse.lsmfs" {
			t.Errorf("the first mount is gone (%q)", typ)
		}
	})

	t.Run("umount-flushes", func(t *testing.T) {
		f := newFS(t, fsOptions{})
		// Many small unsynced writes, then umount(8) at once.
		for i := range 200 {
			must(t, os.WriteFile(f.path(fmt.Sprintf("small%03d", i)), content(int64(i), i*37), 0o644))
		}
		fh, err := os.OpenFile(f.path("appended"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		must(t, err)
		for i := range 1000 {
			_, err := io.WriteString(fh, fmt.Sprintf("line %d\n", i))
			must(t, err)
		}
		must(t, fh.Close())
		f.unmount()
		f.mount()
		for i := range 200 {
			if b, err := os.ReadFile(f.path(fmt.Sprintf("small%03d", i))); err != nil || !bytes.Equal(b, content(int64(i), i*37)) {
				t.Errorf("small%03d after remount: %d bytes, %v", i, len(b), err)
			}
		}
		if b, err := os.ReadFile(f.path("appended")); err != nil || strings.Count(string(b), "\n") != 1000 {
			t.Errorf("appended after remount: %d lines, %v", strings.Count(string(b), "\n"), err)
		}
	})
}

// waitUnmounted waits until nothing is mounted on mnt. It sleeps in poll(2)
// on /proc/self/mountinfo, which the kernel wakes at every mount table
// change. The file is opened with a raw open(2): an *os.File would be
// registered with Go's netpoller, whose epoll would consume the wakeup.
func waitUnmounted(mnt string, timeout time.Duration) error {
	fd, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 64<<10)
	for {
		if mountType(mnt) == "" {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%s is still mounted %s later", mnt, timeout)
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
		if _, err := unix.Poll(fds, int(left/time.Millisecond)+1); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("poll mountinfo: %w", err)
		}
		for { // read to the end, as the poll protocol asks
			n, err := unix.Pread(fd, buf, 0)
			if err != nil {
				return err
			}
			if n < len(buf) {
				break
			}
			buf = make([]byte, 2*len(buf))
		}
	}
}
