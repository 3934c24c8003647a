package tests

import (
	"testing"
	"time"

	"github.com/lsmfs/lsmfs/mount"
)

// TestReadahead checks that a mount gets its readahead (the kernel's own for
// a FUSE mount is 128 KiB) and that it reaches the kernel: a file read in
// sequence from a cold page cache arrives in READ requests of 1 MiB, not
// 128 KiB.
func TestReadahead(t *testing.T) {
	f := newFS(t, fsOptions{})
	if got, err := mount.Readahead(f.mnt); err != nil || got != mount.DefaultReadahead {
		t.Errorf("readahead of a default mount = %d, %v; want %d", got, err, mount.DefaultReadahead)
	}
	const mib = 16
	shTimeout(t, f.mnt, "dd if=/dev/urandom of=f bs=1M count=16 conv=fsync status=none", time.Minute)
	f.remount() // a new mount starts with an empty page cache
	before := opCount(statsJSON(t, f.mnt), "read")
	shTimeout(t, f.mnt, "cat f > /dev/null", time.Minute)
	reads := opCount(statsJSON(t, f.mnt), "read") - before
	// 16 requests of 1 MiB, and a few smaller ones while the kernel's
	// window grows; 128 KiB requests would be 128.
	if reads < mib || reads > 2*mib {
		t.Errorf("reading %d MiB in sequence took %d READ requests; want %d to %d", mib, reads, mib, 2*mib)
	}

	for _, tc := range []struct {
		opt  string
		want int64
	}{{"readahead=4M", 4 << 20}, {"readahead=0", 0}, {"readahead=100K", 100 << 10}} {
		f.unmount()
		if err := f.tryMount(tc.opt); err != nil {
			t.Fatalf("mount -o %s: %v", tc.opt, err)
		}
		if got, err := mount.Readahead(f.mnt); err != nil || got != tc.want {
			t.Errorf("-o %s: readahead %d, %v; want %d", tc.opt, got, err, tc.want)
		}
	}
}
