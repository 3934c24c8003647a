package tests

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lsmfs/lsmfs/mount"
)

// TestReadahead checks that a mount gets its readahead (the kernel's own for
// a FUSE mount is 128 KiB) and that it reaches the kernel: a file read in
// sequence from a cold page cache arrives in READ requests of 1 MiB, not
// 128 KiB, and the daemon serves most of them from its own read-ahead.
func TestReadahead(t *testing.T) {
	f := newFS(t, fsOptions{})
	if got, err := mount.Readahead(f.mnt); err != nil || got != mount.DefaultReadahead {
		t.Errorf("readahead of a default mount = %d, %v; want %d", got, err, mount.DefaultReadahead)
	}
	const mib = 16
	shTimeout(t, f.mnt, "dd if=/dev/urandom of=f bs=1M count=16 conv=fsync status=none", time.Minute)
	f.remount() // a new mount starts with an empty page cache
	dropSegmentCache(t, f.dataDir)
	st := statsJSON(t, f.mnt)
	before, aheads := opCount(st, "read"), st.ValueLog.ReadAheads
	shTimeout(t, f.mnt, "cat f > /dev/null", time.Minute)
	st = statsJSON(t, f.mnt)
	reads := opCount(st, "read") - before
	// The daemon reads a stream's next runs ahead (vlog's streams): all
	// but the first few of the 16 come from there. (Only where the data
	// directory takes O_DIRECT; the test's does.)
	if got := st.ValueLog.ReadAheads - aheads; got < mib/2 {
		t.Errorf("%d of %d MiB read ahead by the daemon, want %d or more", got, mib, mib/2)
	}
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

// dropSegmentCache lets the page cache drop the clean pages of the value
// log's segments in dataDir, as a cold start would find them: a run the page
// cache holds is copied from it, not read around it or ahead.
func dropSegmentCache(t *testing.T, dataDir string) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dataDir, "*.vlog"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no value log segments in %s: %v", dataDir, err)
	}
	for _, p := range segs {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
		if err != nil {
			t.Fatalf("fadvise %s: %v", p, err)
		}
	}
}
