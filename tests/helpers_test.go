package tests

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// commandTimeout bounds every lsmfs and tool invocation, so that a hung
	// daemon fails the test instead of the whole run.
	commandTimeout = 5 * time.Minute
	// exitTimeout bounds how long a daemon may take to exit after unmount.
	exitTimeout = time.Minute
)

// long reports whether LSMFS_LONG=1 asks for the long variants.
func long() bool { return os.Getenv("LSMFS_LONG") == "1" }

// requireMount skips t, saying why, where lsmfs cannot be mounted for real;
// with LSMFS_REQUIRE_MOUNT=1 (.ci/test sets it) it fails instead, so that a
// machine without FUSE cannot pass the suite by skipping every end-to-end
// test.
func requireMount(t testing.TB) {
	t.Helper()
	if os.Getenv("LSMFS_REQUIRE_MOUNT") == "1" {
		t = skipIsFatal{t}
	}
	if os.Geteuid() != 0 {
		t.Skip("skipped: the end-to-end tests need root (mounts, loop devices, chown); run them as root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("skipped: no /dev/fuse (%v); load the fuse module or run in a container with --device /dev/fuse", err)
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("skipped: fusermount3 not found; install the fuse3 package")
	}
}

// fsOptions describe a test filesystem.
type fsOptions struct {
	// journal is "" (the default file in DATADIR), "loop" (a loop device
	// over a file in t.TempDir()), or a path for mkfs --journal.
	journal string
	// mkfsArgs are more lsmfs mkfs flags.
	mkfsArgs []string
	// mountOpts are -o options for every mount (log= is added).
	mountOpts string
	// noMount leaves the filesystem unmounted after mkfs.
	noMount bool
}

// testFS is an lsmfs made in t.TempDir() and mounted by the lsmfs daemon.
type testFS struct {
	t         *testing.T
	dataDir   string
	mnt       string
	journal   string // the journal device or file, "" for the default
	mountOpts string
	logFile   string
	pid       int // the daemon, while mounted
	noFsck    bool
}

// newFS makes and mounts a filesystem. Cleanup unmounts it (clean unmount,
// daemon gone, mount gone), then runs lsmfs fsck; each failure fails t.
func newFS(t *testing.T, o fsOptions) *testFS {
	t.Helper()
	requireMount(t)
	dir := t.TempDir()
	f := &testFS{
		t:         t,
		dataDir:   filepath.Join(dir, "data"),
		mnt:       filepath.Join(dir, "mnt"),
		mountOpts: o.mountOpts,
		logFile:   filepath.Join(dir, "daemon.log"),
	}
	if err := os.Mkdir(f.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	switch o.journal {
	case "":
	case "loop":
		f.journal = newLoopDevice(t, 64<<20) // registered before f.cleanup: detached after it
	default:
		f.journal = o.journal
	}
	t.Cleanup(f.cleanup)
	args := append([]string{"mkfs"}, o.mkfsArgs...)
	if f.journal != "" {
		args = append(args, "--journal", f.journal)
	}
	if _, err := lsmfs(append(args, f.dataDir)...); err != nil {
		t.Fatalf("%v", err)
	}
	if !o.noMount {
		f.mount()
	}
	return f
}

// path returns the path of rel on the mount.
func (f *testFS) path(rel ...string) string {
	return filepath.Join(append([]string{f.mnt}, rel...)...)
}

// options returns the -o list for a mount: the test's, plus the log file.
func (f *testFS) options(extra string) string {
	opts := []string{"log=" + f.logFile}
	if os.Getenv("LSMFS_DEBUG") == "1" {
		opts = append(opts, "debug")
	}
	for _, o := range []string{f.mountOpts, extra} {
		if o != "" {
			opts = append(opts, o)
		}
	}
	return strings.Join(opts, ",")
}

// tryMount runs lsmfs mount with extra -o options and, on success, records
// the daemon. It returns lsmfs's error (with its stderr) on failure.
func (f *testFS) tryMount(extra string) error {
	if _, err := lsmfs("mount", "-o", f.options(extra), f.dataDir, f.mnt); err != nil {
		return err
	}
	f.pid = findDaemon(f.mnt)
	if f.pid == 0 {
		return fmt.Errorf("lsmfs mount returned, but no daemon serves %s", f.mnt)
	}
	if typ := mountType(f.mnt); typ != "fuse.lsmfs" {
		return fmt.Errorf("lsmfs mount returned, but %s is not a fuse.lsmfs mount (%q)", f.mnt, typ)
	}
	return nil
}

// mount mounts the filesystem or fails t.
func (f *testFS) mount() {
	f.t.Helper()
	if err := f.tryMount(""); err != nil {
		f.t.Fatalf("mount: %v%s", err, f.logTail())
	}
}

// unmount unmounts cleanly, or fails t.
func (f *testFS) unmount() {
	f.t.Helper()
	if err := f.unmountErr(); err != nil {
		f.t.Fatalf("unmount: %v%s", err, f.logTail())
	}
}

// remount unmounts and mounts again.
func (f *testFS) remount() {
	f.t.Helper()
	f.unmount()
	f.mount()
}

// unmountErr unmounts with fusermount3 -u and checks that the daemon exits
// (having flushed and closed) and the mount is gone.
func (f *testFS) unmountErr() error {
	if out, err := exec.Command("fusermount3", "-u", f.mnt).CombinedOutput(); err != nil {
		return fmt.Errorf("fusermount3 -u %s: %v: %s (held by: %s)", f.mnt, err, bytes.TrimSpace(out), holders(f.mnt))
	}
	if f.pid != 0 {
		if err := waitExit(f.pid, exitTimeout); err != nil {
			return fmt.Errorf("after unmount: %w", err)
		}
		f.pid = 0
	}
	if typ := mountType(f.mnt); typ != "" {
		return fmt.Errorf("after unmount: %s is still mounted (%s)", f.mnt, typ)
	}
	return nil
}

// kill SIGKILLs the daemon, detaches the dead mount lazily, and waits for the
// daemon to be gone.
func (f *testFS) kill() {
	f.t.Helper()
	if f.pid == 0 {
		f.t.Fatal("kill: not mounted")
	}
	if err := syscall.Kill(f.pid, syscall.SIGKILL); err != nil {
		f.t.Fatalf("kill daemon %d: %v", f.pid, err)
	}
	if err := waitExit(f.pid, exitTimeout); err != nil {
		f.t.Fatalf("kill: %v", err)
	}
	f.pid = 0
	if out, err := exec.Command("fusermount3", "-u", "-z", f.mnt).CombinedOutput(); err != nil {
		f.t.Fatalf("fusermount3 -u -z %s after kill: %v: %s", f.mnt, err, out)
	}
	if typ := mountType(f.mnt); typ != "" {
		f.t.Fatalf("after kill and lazy unmount: %s is still mounted (%s)", f.mnt, typ)
	}
}

// cleanup unmounts (forcing it if need be) and runs fsck.
func (f *testFS) cleanup() {
	if f.pid != 0 || mountType(f.mnt) != "" {
		if err := f.unmountErr(); err != nil {
			f.t.Errorf("cleanup: %v%s", err, f.logTail())
			f.forceUnmount()
			return
		}
	}
	if f.t.Failed() {
		f.t.Logf("daemon log:%s", f.logTail())
	}
	if !f.noFsck {
		f.fsck()
	}
}

// forceUnmount gets rid of a mount that would not unmount cleanly.
func (f *testFS) forceUnmount() {
	exec.Command("fusermount3", "-u", "-z", f.mnt).Run()
	if f.pid != 0 {
		syscall.Kill(f.pid, syscall.SIGKILL)
		waitExit(f.pid, exitTimeout)
		f.pid = 0
	}
}

// fsck runs lsmfs fsck on the (unmounted) data directory and fails t on
// any problem.
func (f *testFS) fsck() {
	f.t.Helper()
	out, err := lsmfs("fsck", f.dataDir)
	switch {
	case err != nil:
		f.t.Errorf("fsck: %v\n%s", err, out)
	case !strings.Contains(out, " orphans=0"):
		// Orphans (unlinked while open) are reclaimed at release or at
		// the next mount: none may be left after a clean unmount.
		f.t.Errorf("fsck: orphans left after a clean unmount: %s", out)
	default:
		f.t.Logf("fsck: %s", strings.TrimSpace(out))
	}
}

// logTail returns the end of the daemon log, for failure messages.
func (f *testFS) logTail() string {
	b, err := os.ReadFile(f.logFile)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return "\n--- daemon log (tail) ---\n" + string(b)
}

// lsmfs runs the binary under test and returns its stdout; the error
// includes the exit status and stderr.
func lsmfs(args ...string) (string, error) {
	return runTimeout(lsmfsBin, args...)
}

// runTimeout runs a command with commandTimeout.
func runTimeout(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v: %s", filepath.Base(name), strings.Join(args, " "), err,
			strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// sh runs a shell command in dir and fails t on error.
func sh(t testing.TB, dir, script string) string {
	t.Helper()
	return shTimeout(t, dir, script, commandTimeout)
}

// shTimeout is sh with a timeout, after which the test fails instead of
// hanging. A process waiting on a hung daemon cannot always be killed (an
// exiting process flushes its files uninterruptibly), so the timeout also
// kills the daemon of the lsmfs mount holding dir, which aborts the FUSE
// connection, and then the script's process group.
func shTimeout(t testing.TB, dir, script string, timeout time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-ec", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if mnt := lsmfsMountOf(dir); mnt != "" {
			if pid := findDaemon(mnt); pid != 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 10 * time.Second
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=lsmfs", "GIT_AUTHOR_EMAIL=tests@lsmfs.invalid",
		"GIT_COMMITTER_NAME=lsmfs", "GIT_COMMITTER_EMAIL=tests@lsmfs.invalid",
		"GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "LC_ALL=C",
		// No background gc or maintenance: it would keep the mount busy.
		"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=gc.auto", "GIT_CONFIG_VALUE_0=0",
		"GIT_CONFIG_KEY_1=maintenance.auto", "GIT_CONFIG_VALUE_1=false")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("sh -c %q in %s: timed out after %s (the daemon was killed to abort its FUSE connection)\n%s", script, dir, timeout, out)
	}
	if err != nil {
		t.Fatalf("sh -c %q in %s: %v\n%s", script, dir, err, out)
	}
	return string(out)
}

// newLoopDevice attaches a loop device over a new file of size bytes in
// t.TempDir() and detaches it in cleanup.
func newLoopDevice(t *testing.T, size int64) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "journal.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	out, err := runTimeout("losetup", "-f", "--show", img)
	if err != nil {
		t.Fatalf("loop device: %v", err)
	}
	dev := strings.TrimSpace(out)
	t.Cleanup(func() {
		if _, err := runTimeout("losetup", "-d", dev); err != nil {
			t.Errorf("detach %s: %v", dev, err)
		}
	})
	return dev
}

// holders names the processes whose working directory, root or open files
// are on mnt, to explain a busy mount.
func holders(mnt string) string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		links, _ := filepath.Glob(p + "/fd/*")
		links = append(links, p+"/cwd", p+"/root")
		for _, l := range links {
			if target, err := os.Readlink(l); err == nil && (target == mnt || strings.HasPrefix(target, mnt+"/")) {
				comm, _ := os.ReadFile(p + "/comm")
				out = append(out, fmt.Sprintf("%s[%s] %s", strings.TrimSpace(string(comm)), filepath.Base(p), target))
				break
			}
		}
	}
	if len(out) == 0 {
		return "no process found"
	}
	return strings.Join(out, ", ")
}

// findDaemon returns the pid of the lsmfs daemon serving mnt, or 0.
func findDaemon(mnt string) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if len(args) < 3 || filepath.Base(args[0]) != "lsmfs" || args[1] != "mount" ||
			args[len(args)-1] != mnt || !slices.Contains(args, "--foreground") {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil && !isZombie(pid) {
			return pid
		}
	}
	return 0
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}

// waitExit waits (without polling: a pidfd becomes readable when the
// process ends) until pid has exited, and reaps it if it is our child (this
// process is a subreaper, so orphaned daemons are).
func waitExit(pid int, timeout time.Duration) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(timeout)
	for {
		n, err := unix.Poll(fds, int(time.Until(deadline)/time.Millisecond))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll pidfd %d: %w", pid, err)
		}
		if n == 0 {
			return fmt.Errorf("daemon %d still running %s after it should have exited", pid, timeout)
		}
		break
	}
	var ws unix.WaitStatus
	unix.Wait4(pid, &ws, unix.WNOHANG, nil) // ECHILD if not ours: fine
	return nil
}

// lsmfsMountOf returns the mount point of the fuse.lsmfs mount holding path
// ("" if none), from /proc/self/mountinfo, without touching the mount.
func lsmfsMountOf(path string) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	best := ""
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		i := slices.Index(fields, "-")
		if len(fields) < 5 || i < 0 || i+1 >= len(fields) || fields[i+1] != "fuse.lsmfs" {
			continue
		}
		mnt := unescapeMountinfo(fields[4])
		if (path == mnt || strings.HasPrefix(path, mnt+"/")) && len(mnt) > len(best) {
			best = mnt
		}
	}
	return best
}

// mountType returns the filesystem type mounted at mnt ("" if none), from
// /proc/self/mountinfo (the last mount on mnt wins).
func mountType(mnt string) string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	typ := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || unescapeMountinfo(fields[4]) != mnt {
			continue
		}
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) {
				typ = fields[i+1]
			}
		}
	}
	return typ
}

func unescapeMountinfo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// dirChecksum records every name, type, mode, size and content hash under
// dir, so that a test can show a directory was left untouched (and say what
// changed: see sameDir).
func dirChecksum(t testing.TB, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sum := ""
		switch {
		case fi.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			h := sha256.New()
			if _, err := io.Copy(h, f); err != nil {
				return err
			}
			sum = hex.EncodeToString(h.Sum(nil))[:16]
		case fi.Mode()&fs.ModeSymlink != 0:
			if sum, err = os.Readlink(p); err != nil {
				return err
			}
		}
		fmt.Fprintf(&b, "%q %v %d %s\n", rel, fi.Mode(), fi.Size(), sum)
		return nil
	})
	if err != nil {
		t.Fatalf("checksum %s: %v", dir, err)
	}
	return b.String()
}

// sameDir reports the lines that differ between two dirChecksum results.
func sameDir(before, after string) (bool, string) {
	if before == after {
		return true, ""
	}
	b, a := strings.Split(before, "\n"), strings.Split(after, "\n")
	var diff []string
	for _, l := range b {
		if !slices.Contains(a, l) {
			diff = append(diff, "- "+l)
		}
	}
	for _, l := range a {
		if !slices.Contains(b, l) {
			diff = append(diff, "+ "+l)
		}
	}
	return false, strings.Join(diff, "\n")
}

// skipIsFatal turns t's skips into failures (requireMount under CI).
type skipIsFatal struct{ testing.TB }

func (s skipIsFatal) Skip(args ...any) {
	s.Helper()
	s.Fatal(args...)
}

func (s skipIsFatal) Skipf(format string, args ...any) {
	s.Helper()
	s.Fatalf(format, args...)
}
