package tests

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// mkfs accepted --journal-size 4M with --block-size 1M, but a batch holding
// one full 1 MiB block is larger than such a journal's largest record:
// every write that filled a block failed with EIO (at write or close) and
// its data was lost. mkfs now refuses the combination, saying what to
// change; a journal of the size it names works.
func TestLimitsSmallJournalBigBlocks(t *testing.T) {
	requireMount(t)
	dir := t.TempDir()
	out, err := lsmfs("mkfs", "--journal-size", "4M", "--block-size", "1048576", filepath.Join(dir, "small"))
	if err == nil || !strings.Contains(out+err.Error(), "--journal-size") {
		t.Fatalf("mkfs --journal-size 4M --block-size 1M: %v %s; want a refusal naming --journal-size", err, out)
	}
	f := newFS(t, fsOptions{mkfsArgs: []string{"--journal-size", "5M", "--block-size", "1048576"}})
	if err := os.WriteFile(f.path("f"), bytes.Repeat([]byte{1}, 1<<20), 0o644); err != nil {
		t.Fatalf("write one full 1 MiB block with a 5 MiB journal: %v", err)
	}
}

// An O_DIRECT write crossing the maximum file size (2^62) writes what fits
// (ext4: a short count at its own limit), not EFBIG for the whole write.
func TestLimitsDirectWriteCrossingMax(t *testing.T) {
	f := newFS(t, fsOptions{})
	fd, err := unix.Open(f.path("f"), unix.O_CREAT|unix.O_RDWR|unix.O_DIRECT, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	n, err := unix.Pwrite(fd, []byte("abcdef"), 1<<62-3)
	if err != nil || n != 3 {
		t.Fatalf("O_DIRECT pwrite of 6 bytes at 2^62-3: %d, %v; want 3", n, err)
	}
}
