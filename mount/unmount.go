package mount

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"
)

// lazyUnmount detaches mountpoint from the namespace even if it is busy:
// umount2(MNT_DETACH) as root, else fusermount3 -u -z.
func lazyUnmount(mountpoint string) error {
	if os.Geteuid() == 0 {
		if err := unix.Unmount(mountpoint, unix.MNT_DETACH); err == nil {
			return nil
		}
	}
	bin, err := exec.LookPath("fusermount3")
	if err != nil {
		if bin, err = exec.LookPath("fusermount"); err != nil {
			return fmt.Errorf("fusermount3 not found: %w", err)
		}
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "-u", "-z", mountpoint)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s -u -z %s: %w: %s", bin, mountpoint, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
