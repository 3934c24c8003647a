package mount

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// CheckDataDir refuses a data directory that other users may write to: a
// daemon (often root) creates, truncates and reads the engine's files
// there, and whoever can add or replace entries could make it read their
// data or, through a planted link, write elsewhere (the engine's opens
// also refuse symbolic links). It returns a warning for a directory owned
// by another user than the caller. A missing directory passes: formatting
// creates it with mode 0700.
func CheckDataDir(dir string) (warning string, err error) {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("data directory: %w", err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("data directory %s is not a directory", dir)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return "", fmt.Errorf("data directory %s has mode %#o: other users may write to it; make it private (chmod 700 %s)", dir, perm, dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Sprintf("data directory %s is owned by uid %d, not by this process's uid %d: its owner can change the filesystem's files", dir, st.Uid, os.Geteuid()), nil
	}
	return "", nil
}
