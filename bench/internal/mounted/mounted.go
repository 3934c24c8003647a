// Package mounted builds the lsmfs binary and runs a daemon in the
// foreground as a child process, for benchmarks that need its PID (for
// /proc/PID/io and RSS) and a real mount.
package mounted

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Build compiles the product's cmd/lsmfs (in its own module, which the
// bench module replaces with ../) into dir.
func Build(dir string) (string, error) {
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/lsmfs/lsmfs").Output()
	if err != nil {
		return "", fmt.Errorf("find the lsmfs module: %w", err)
	}
	bin := filepath.Join(dir, "lsmfs")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/lsmfs")
	cmd.Dir = strings.TrimSpace(string(root))
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build lsmfs: %w", err)
	}
	return bin, nil
}

// Daemon is a mounted lsmfs served by a child process.
type Daemon struct {
	Bin, DataDir, Mnt string
	cmd               *exec.Cmd
}

// Mount mkfs'es dataDir (with extra mkfs flags) unless it is formatted,
// mounts it on mnt with -o opts in the foreground, and returns once the
// daemon reports the mount ready.
func Mount(bin, dataDir, mnt, opts string, mkfsArgs ...string) (*Daemon, error) {
	return MountEnv(bin, dataDir, mnt, opts, nil, mkfsArgs...)
}

// MountEnv is Mount with extra environment variables (KEY=VALUE) for the
// daemon, e.g. GOMEMLIMIT or GOGC.
func MountEnv(bin, dataDir, mnt, opts string, env []string, mkfsArgs ...string) (*Daemon, error) {
	if _, err := os.Stat(filepath.Join(dataDir, "CURRENT")); err != nil {
		args := append([]string{"mkfs"}, mkfsArgs...)
		if out, err := exec.Command(bin, append(args, dataDir)...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("mkfs: %v: %s", err, out)
		}
	}
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	args := []string{"mount", "--foreground", "--ready-fd=3"}
	if opts != "" {
		args = append(args, "-o", opts)
	}
	cmd := exec.Command(bin, append(args, dataDir, mnt)...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stderr = os.Stderr
	// A benchmark killed outright takes its daemon along: SIGTERM unmounts.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w.Close()
	line, _ := bufio.NewReader(r).ReadString('\n')
	r.Close()
	if !strings.HasPrefix(line, "ok") {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("mount: %q", strings.TrimSpace(line))
	}
	return &Daemon{Bin: bin, DataDir: dataDir, Mnt: mnt, cmd: cmd}, nil
}

// PID is the daemon's process id.
func (d *Daemon) PID() int { return d.cmd.Process.Pid }

// Unmount unmounts and waits for the daemon to exit.
func (d *Daemon) Unmount() error {
	if out, err := exec.Command("fusermount3", "-u", d.Mnt).CombinedOutput(); err != nil {
		syscall.Unmount(d.Mnt, syscall.MNT_DETACH)
		d.cmd.Process.Signal(syscall.SIGTERM)
		d.cmd.Wait()
		return fmt.Errorf("unmount %s: %v: %s", d.Mnt, err, out)
	}
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Minute):
		d.cmd.Process.Kill()
		return fmt.Errorf("daemon did not exit after unmount")
	}
}

// IO returns the daemon's /proc/PID/io field (e.g. "write_bytes").
func (d *Daemon) IO(field string) uint64 {
	return procField(fmt.Sprintf("/proc/%d/io", d.PID()), field+":")
}

// PeakRSS returns the daemon's peak resident set size in bytes.
func (d *Daemon) PeakRSS() uint64 {
	return procField(fmt.Sprintf("/proc/%d/status", d.PID()), "VmHWM:") * 1024
}

func procField(path, prefix string) uint64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), prefix); ok {
			n, _ := strconv.ParseUint(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

// DropCaches writes back and drops the kernel's page cache.
func DropCaches() {
	syscall.Sync()
	os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0)
}
