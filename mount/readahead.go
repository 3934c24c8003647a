package mount

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// MaxReadahead bounds the readahead= option.
const MaxReadahead = 1 << 30

// readaheadKB is the read_ahead_kb that c asks for.
func (c *Config) readaheadKB() int64 {
	switch {
	case c.Readahead < 0:
		return 0
	case c.Readahead == 0:
		return DefaultReadahead >> 10
	}
	return (c.Readahead + 1<<10 - 1) >> 10
}

// bdiReadahead is the file that holds the readahead of the FUSE mount on
// mountpoint: every FUSE mount has its own backing device info, named by
// the mount's st_dev (Documentation/ABI/stable/sysfs-class-bdi). The kernel
// starts it at 128 KiB and lowers it to the max_readahead of FUSE_INIT; it
// never raises it, so it is written after the mount.
func bdiReadahead(mountpoint string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(mountpoint, &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev)), nil
}

// setReadahead writes kb to the readahead of the mount on mountpoint.
func setReadahead(mountpoint string, kb int64) error {
	p, err := bdiReadahead(mountpoint)
	if err != nil {
		return fmt.Errorf("set readahead: %w", err)
	}
	if err := os.WriteFile(p, []byte(fmt.Sprintf("%d\n", kb)), 0); err != nil {
		return fmt.Errorf("set readahead: %w", err)
	}
	return nil
}

// Readahead reads the kernel's readahead of the mount on mountpoint, in
// bytes.
func Readahead(mountpoint string) (int64, error) {
	p, err := bdiReadahead(mountpoint)
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	var kb int64
	if _, err := fmt.Sscan(string(b), &kb); err != nil {
		return 0, fmt.Errorf("%s: %q: %w", p, b, err)
	}
	return kb << 10, nil
}
