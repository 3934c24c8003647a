package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lsmfs/lsmfs/bench/internal/mounted"
	"github.com/lsmfs/lsmfs/mount"
)

// The systems under test. Every system gets a fresh base directory per round
// (under -dir); the FUSE ones get a fresh daemon, so a round starts from an
// empty filesystem and a daemon's peak RSS is that round's.
const (
	sysExt4        = "ext4"
	sysPassthrough = "passthrough"
	sysCeiling     = "ceiling"
	sysLsmfs       = "lsmfs"
)

var allSystems = []string{sysExt4, sysPassthrough, sysCeiling, sysLsmfs}

type counts struct {
	ops   map[string]uint64
	xattr map[string]uint64
	// extra holds lsmfs's engine counters (journal_forces,
	// journal_records, journal_force_seconds).
	extra map[string]float64
}

func (c counts) total() uint64 {
	var t uint64
	for _, v := range c.ops {
		t += v
	}
	return t
}

// sub returns c - base.
func (c counts) sub(base counts) counts {
	d := counts{ops: map[string]uint64{}, xattr: map[string]uint64{}, extra: map[string]float64{}}
	for k, v := range c.extra {
		d.extra[k] = v - base.extra[k]
	}
	for k, v := range c.ops {
		if v > base.ops[k] {
			d.ops[k] = v - base.ops[k]
		}
	}
	for k, v := range c.xattr {
		if v > base.xattr[k] {
			d.xattr[k] = v - base.xattr[k]
		}
	}
	return d
}

// system is one mounted (or plain) filesystem under test.
type system struct {
	name string
	base string // scratch directory of this round
	root string // where the workloads run
	pid  int    // serving process (0: none)
	// counts returns the FUSE requests so far (nil: not a FUSE system).
	counts func() (counts, error)
	// pprofAddr is the profiling variant's pprof address.
	pprofAddr string
	stop      func() error
}

// peakRSS returns the serving process's VmHWM in bytes.
func (s *system) peakRSS() uint64 {
	if s.pid == 0 {
		return 0
	}
	return procField(fmt.Sprintf("/proc/%d/status", s.pid), "VmHWM:") * 1024
}

// ioBytes returns the serving process's read_bytes and write_bytes
// (/proc/PID/io: what it made the block layer read and write).
func (s *system) ioBytes() (read, write uint64) {
	if s.pid == 0 {
		return 0, 0
	}
	p := fmt.Sprintf("/proc/%d/io", s.pid)
	return procField(p, "read_bytes:"), procField(p, "write_bytes:")
}

// cpuTime returns the serving process's user+system CPU time.
func (s *system) cpuTime() time.Duration {
	if s.pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces): utime and
	// stime are fields 14 and 15 of the line, 12 and 13 after ")".
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(u+st) * time.Second / 100 // USER_HZ
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

// starter starts the systems; lsmfsBin is the product's binary.
type starter struct {
	dir      string // parent of the per-round directories
	lsmfsBin string
	self     string // this executable
	// profiled runs lsmfs as the profiling variant (serve.go) instead of
	// the product binary.
	profiled bool
}

// baseName returns the system a variant belongs to: "ceiling+noflush" and
// "lsmfs:writeback_cache" are variants of ceiling and lsmfs.
func baseName(name string) string {
	if i := strings.IndexAny(name, "+:"); i >= 0 {
		return name[:i]
	}
	return name
}

// start starts a system. Besides the four, it starts variants for
// experiments: "ceiling+L1+L2..." is the ceiling with levers (serve.go), and
// "lsmfs:O1+O2..." is lsmfs mounted with -o O1,O2,... where ra=KB, bs=N,
// bin=PATH, GOMEMLIMIT=X, GOGC=N and GODEBUG=X are the harness's: ra sets the mount's
// readahead after mounting, bs formats with lsmfs mkfs --block-size N
// first, bin runs another lsmfs binary (a build to compare), the others go
// to the daemon's environment.
func (st *starter) start(name string) (*system, error) {
	base, err := os.MkdirTemp(st.dir, "fsbench-"+baseName(name)+"-")
	if err != nil {
		return nil, err
	}
	s := &system{name: name, base: base}
	fail := func(err error) (*system, error) {
		os.RemoveAll(base)
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	mnt := filepath.Join(base, "mnt")
	switch baseName(name) {
	case sysExt4:
		s.root = filepath.Join(base, "root")
		if err := os.Mkdir(s.root, 0o755); err != nil {
			return fail(err)
		}
		s.stop = func() error { return nil }
	case sysPassthrough, sysCeiling:
		sock := filepath.Join(base, "counts.sock")
		var args []string
		if baseName(name) == sysPassthrough {
			src := filepath.Join(base, "src")
			if err := os.Mkdir(src, 0o755); err != nil {
				return fail(err)
			}
			mode := "default"
			if name == sysPassthrough+"+nopt" {
				mode = "nopt"
			} else if name != sysPassthrough {
				return fail(fmt.Errorf("unknown passthrough variant (want passthrough+nopt)"))
			}
			args = []string{"passthrough", src, mnt, sock, mode}
		} else {
			lv := "none"
			if _, l, ok := strings.Cut(name, "+"); ok {
				lv = l
			}
			args = []string{"ceiling", mnt, sock, lv}
		}
		cmd, _, err := st.child(mnt, args...)
		if err != nil {
			return fail(err)
		}
		s.root, s.pid = mnt, cmd.Process.Pid
		s.counts = func() (counts, error) { return unixCounts(sock) }
		s.stop = func() error { return stopChild(cmd, mnt) }
	case sysLsmfs:
		dataDir := filepath.Join(base, "data")
		if st.profiled {
			cmd, addr, err := st.child(mnt, "lsmfs", dataDir, mnt)
			if err != nil {
				return fail(err)
			}
			s.root, s.pid, s.pprofAddr = mnt, cmd.Process.Pid, addr
			s.stop = func() error { return stopChild(cmd, mnt) }
		} else {
			var opts, env []string
			ra, bs, bin := 0, "", st.lsmfsBin
			if _, o, ok := strings.Cut(name, ":"); ok {
				for _, x := range strings.Split(o, "+") {
					k, v, _ := strings.Cut(x, "=")
					switch k {
					case "ra":
						ra, _ = strconv.Atoi(v)
					case "bs":
						bs = v
					case "bin":
						bin = v
					case "GOMEMLIMIT", "GOGC", "GODEBUG":
						env = append(env, x)
					default:
						opts = append(opts, x)
					}
				}
			}
			if bs != "" {
				if err := os.MkdirAll(dataDir, 0o755); err != nil {
					return fail(err)
				}
				if out, err := exec.Command(bin, "mkfs", "--block-size", bs, dataDir).CombinedOutput(); err != nil {
					return fail(fmt.Errorf("mkfs --block-size %s: %v: %s", bs, err, out))
				}
			}
			d, err := mounted.MountEnv(bin, dataDir, mnt, strings.Join(opts, ","), env)
			if err != nil {
				return fail(err)
			}
			s.root, s.pid = mnt, d.PID()
			s.stop = d.Unmount
			if ra > 0 {
				if err := setReadahead(mnt, ra); err != nil {
					d.Unmount()
					return fail(err)
				}
			}
		}
		s.counts = func() (counts, error) { return lsmfsCounts(dataDir) }
	default:
		return fail(fmt.Errorf("unknown system"))
	}
	stop := s.stop
	s.stop = func() error {
		err := stop()
		if rerr := os.RemoveAll(base); err == nil {
			err = rerr
		}
		return err
	}
	return s, nil
}

// child starts `self __serve args...` and waits for its readiness line; it
// returns the text after "ok".
func (st *starter) child(mnt string, args ...string) (*exec.Cmd, string, error) {
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return nil, "", err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(st.self, append([]string{serveCmd}, args...)...)
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return nil, "", err
	}
	w.Close()
	line, _ := bufio.NewReader(r).ReadString('\n')
	r.Close()
	line = strings.TrimSpace(line)
	rest, ok := strings.CutPrefix(line, "ok")
	if !ok {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, "", fmt.Errorf("%s: %q", args[0], line)
	}
	return cmd, strings.TrimSpace(rest), nil
}

// stopChild unmounts mnt and waits for the serving child.
func stopChild(cmd *exec.Cmd, mnt string) error {
	out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput()
	if err != nil {
		syscall.Unmount(mnt, syscall.MNT_DETACH)
		cmd.Process.Signal(syscall.SIGTERM)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case werr := <-done:
		if err != nil {
			return fmt.Errorf("unmount %s: %v: %s", mnt, err, out)
		}
		return werr
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		return fmt.Errorf("server of %s did not exit after unmount", mnt)
	}
}

func unixCounts(sock string) (counts, error) {
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}}
	resp, err := c.Get("http://counts/v1/stats")
	if err != nil {
		return counts{}, err
	}
	defer resp.Body.Close()
	var j countsJSON
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
		return counts{}, err
	}
	out := counts{ops: map[string]uint64{}, xattr: j.GetxattrNames}
	for _, o := range j.Ops {
		out.ops[o.Op] = o.Count
	}
	return out, nil
}

// lsmfsCounts reads lsmfs's own per-operation counters from its control
// socket (what `lsmfs stats --json` shows).
func lsmfsCounts(dataDir string) (counts, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := mount.NewControl(dataDir).Stats(ctx)
	if err != nil {
		return counts{}, err
	}
	out := counts{ops: map[string]uint64{}, extra: map[string]float64{
		"journal_forces":        float64(s.Journal.Forces),
		"journal_records":       float64(s.Journal.Records),
		"journal_force_seconds": s.Journal.ForceSeconds,
	}}
	for _, o := range s.Ops {
		out.ops[o.Op] = o.Count
	}
	return out, nil
}

// hostDevice is the block device that holds the scratch directories, for
// device-level write counts: /proc/PID/io's write_bytes counts what a
// process dirtied, a whole folio at a time, and the page cache's large
// folios make a 4 KiB write into a big file count up to megabytes (the
// journal's 4 KiB frames counted 0.8 MiB each on Linux 6.18, while the
// device took 5 MB for 1,184 of them).
type hostDevice struct {
	dir  string // the directory to syncfs before reading the counters
	stat string // /sys/dev/block/MAJ:MIN/stat, "" when unknown
}

func newHostDevice(dir string) hostDevice {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return hostDevice{}
	}
	p := fmt.Sprintf("/sys/dev/block/%d:%d/stat", unix.Major(st.Dev), unix.Minor(st.Dev))
	if _, err := os.Stat(p); err != nil {
		return hostDevice{}
	}
	return hostDevice{dir: dir, stat: p}
}

// written syncs the host filesystem (so that what a step left dirty is
// counted in it) and returns the bytes the device has written since boot.
func (d hostDevice) written() uint64 {
	if d.stat == "" {
		return 0
	}
	if f, err := os.Open(d.dir); err == nil {
		unix.Syncfs(int(f.Fd()))
		f.Close()
	}
	b, err := os.ReadFile(d.stat)
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 7 {
		return 0
	}
	n, _ := strconv.ParseUint(f[6], 10, 64) // sectors written
	return n * 512
}
