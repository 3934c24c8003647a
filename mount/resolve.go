package mount

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Target is what a command such as `lsmfs stats PATH` was pointed at: an
// lsmfs mount point or a data directory.
type Target struct {
	// DataDir is the data directory (absolute).
	DataDir string
	// Mountpoint is set when PATH is a mount point of lsmfs.
	Mountpoint string
}

// ErrNotLsmfs is returned by Resolve for a path that is neither an lsmfs
// mount point nor an lsmfs data directory.
var ErrNotLsmfs = errors.New("not an lsmfs mount point or data directory")

// Resolve finds the data directory behind path: path itself if it holds an
// engine (a CURRENT file) or a control socket; or, for the mount point of a
// fuse.lsmfs mount, its source in /proc/self/mountinfo (the data directory,
// unless fsname= changed it), else the DATADIR argument of the daemon serving
// it (found in /proc/*/cmdline). It never touches the mount itself.
func Resolve(path string) (Target, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Target{}, err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if source, fstype, ok := mountAt(abs); ok {
		if !strings.HasPrefix(fstype, "fuse.") && fstype != "fuse" {
			if isDataDir(abs) {
				// A data directory that is the mount point of its own
				// disk.
				return Target{DataDir: abs}, nil
			}
			return Target{}, fmt.Errorf("%s: a %s mount: %w", path, fstype, ErrNotLsmfs)
		}
		if isDataDir(source) {
			return Target{DataDir: source, Mountpoint: abs}, nil
		}
		if dir := daemonDataDir(abs); dir != "" {
			return Target{DataDir: dir, Mountpoint: abs}, nil
		}
		return Target{}, fmt.Errorf("%s: a %s mount whose data directory (source %q) is not found: %w", path, fstype, source, ErrNotLsmfs)
	}
	if isDataDir(abs) {
		return Target{DataDir: abs}, nil
	}
	if _, err := os.Stat(abs); err != nil {
		return Target{}, err
	}
	return Target{}, fmt.Errorf("%s: %w", path, ErrNotLsmfs)
}

// isDataDir reports whether dir holds an lsmfs engine or control socket.
func isDataDir(dir string) bool {
	if !filepath.IsAbs(dir) {
		return false
	}
	for _, name := range []string{"CURRENT", ControlSocketName} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

// mountAt returns the source and type of the last mount on mnt, from
// /proc/self/mountinfo.
func mountAt(mnt string) (source, fstype string, ok bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		i := slices.Index(fields, "-")
		if len(fields) < 5 || i < 0 || i+2 >= len(fields) || unescapeMountinfo(fields[4]) != mnt {
			continue
		}
		source, fstype, ok = unescapeMountinfo(fields[i+2]), fields[i+1], true
	}
	return source, fstype, ok
}

// daemonDataDir returns the DATADIR argument of the lsmfs daemon serving mnt
// (`lsmfs mount --foreground ... DATADIR MOUNTPOINT`), or "".
func daemonDataDir(mnt string) string {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if len(args) < 4 || args[1] != "mount" || !slices.Contains(args, "--foreground") {
			continue
		}
		cwd, _ := os.Readlink(filepath.Join(filepath.Dir(p), "cwd"))
		abs := func(s string) string {
			if !filepath.IsAbs(s) {
				s = filepath.Join(cwd, s)
			}
			if real, err := filepath.EvalSymlinks(s); err == nil {
				s = real
			}
			return s
		}
		if dir := abs(args[len(args)-2]); abs(args[len(args)-1]) == mnt && isDataDir(dir) {
			return dir
		}
	}
	return ""
}

// DeadMountError explains a mount of t whose control socket does not
// answer: if no lsmfs daemon serves t.Mountpoint any more (it crashed or was
// killed) the mount is dead, and says how to detach it; otherwise the daemon
// lacks the socket. Both match ErrNotServing.
func DeadMountError(t Target) error {
	if daemonDataDir(t.Mountpoint) == "" {
		return fmt.Errorf("%s: the lsmfs daemon serving it is gone (it crashed or was killed), so the mount is dead: "+
			"detach it with umount %s (or fusermount3 -u -z %s), then check the data directory with lsmfs fsck %s: %w",
			t.Mountpoint, t.Mountpoint, t.Mountpoint, t.DataDir, ErrNotServing)
	}
	return fmt.Errorf("%s is mounted but its daemon does not answer on %s (an lsmfs older than the control socket, or the socket could not be made: see the daemon's log): %w",
		t.Mountpoint, filepath.Join(t.DataDir, ControlSocketName), ErrNotServing)
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of
// /proc/self/mountinfo.
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
