package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncfs makes everything written under dir's filesystem durable. Linux
// sends syncfs(2) to virtiofs only, not to other FUSE filesystems, so on an
// lsmfs mount it does nothing: an fsync of the directory forces lsmfs's
// journal (every change closed files made), and syncfs covers the rest.
func syncfs(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	return unix.Syncfs(int(f.Fd()))
}
