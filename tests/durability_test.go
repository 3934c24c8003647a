package tests

import (
	"bytes"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Durability on a real mount. A SIGKILL of the daemon loses what it holds in
// memory (not the data directory's page cache): a write that the commit
// interval or a sync should have forced to the journal file must survive it.

// TestDurMountedSyncPaths: on a real mount (default and writeback_cache),
// with commit_interval=1h and a SIGKILL of the daemon right after: fsync
// through a read-only descriptor of what another descriptor wrote (still
// open), fdatasync, and O_SYNC / O_DSYNC writes are durable on return.
func TestDurMountedSyncPaths(t *testing.T) {
	for _, mode := range []string{"default", "writeback_cache"} {
		opts := "commit_interval=1h"
		if mode == "writeback_cache" {
			opts += ",writeback_cache"
		}
		for _, how := range []string{"fsync-rdonly", "fdatasync", "O_SYNC", "O_DSYNC"} {
			t.Run(mode+"/"+how, func(t *testing.T) {
				f := newFS(t, fsOptions{mountOpts: opts})
				data := bytes.Repeat([]byte("durable "), 1000)
				flags := os.O_RDWR | os.O_CREATE
				switch how {
				case "O_SYNC":
					flags |= unix.O_SYNC
				case "O_DSYNC":
					flags |= unix.O_DSYNC
				}
				w, err := os.OpenFile(f.path("f"), flags, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.Write(data); err != nil {
					t.Fatal(err)
				}
				switch how {
				case "fsync-rdonly":
					r, err := os.Open(f.path("f"))
					if err != nil {
						t.Fatal(err)
					}
					if err := r.Sync(); err != nil {
						t.Fatal(err)
					}
					r.Close()
				case "fdatasync":
					if err := unix.Fdatasync(int(w.Fd())); err != nil {
						t.Fatal(err)
					}
				}
				f.kill() // w stays open: nothing else flushes its buffer
				w.Close()
				f.mount()
				got, err := os.ReadFile(f.path("f"))
				if err != nil || !bytes.Equal(got, data) {
					t.Errorf("%s: after the daemon died: %d bytes (%v), want %d", how, len(got), err, len(data))
				}
			})
		}
	}
}

// TestDurMountedCommitIntervalOpenFile: README "Writes without a sync
// request are forced within commit_interval", for a file kept open too: a
// file written and kept open for 10 commit intervals, then the daemon dies,
// keeps its bytes, as the file written and closed at the same time does.
// They sat in the daemon's write buffer, which nothing flushed on a timer.
func TestDurMountedCommitIntervalOpenFile(t *testing.T) {
	f := newFS(t, fsOptions{mountOpts: "commit_interval=200ms"})
	data := bytes.Repeat([]byte("0123456789abcdef"), 64) // 1 KiB
	open, err := os.Create(f.path("open"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.path("closed"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // 10 commit intervals
	f.kill()
	open.Close() // the connection is gone: its error is expected
	f.mount()
	for _, name := range []string{"closed", "open"} {
		got, err := os.ReadFile(f.path(name))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: %d bytes (%v), want the %d written 10 commit intervals before", name, len(got), err, len(data))
		}
	}
}
