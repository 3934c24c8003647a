package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncfs makes everything written under dir's filesystem durable.
func syncfs(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}
