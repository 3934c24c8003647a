package tests

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestNoSpaceMounted puts the data directory on a 256 MiB tmpfs and fills
// the mounted lsmfs: writers get ENOSPC (not EIO) through the kernel, the
// daemon keeps serving, rm works when full, and once it has freed space new
// writes succeed again; fsck is clean at the end.
func TestNoSpaceMounted(t *testing.T) {
	requireMount(t)
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.Mkdir(small, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := runTimeout("mount", "-t", "tmpfs", "-o", "size=256m,mode=0700", "tmpfs", small); err != nil {
		t.Skipf("skipped: cannot mount a tmpfs for the data directory: %v", err)
	}
	t.Cleanup(func() {
		if _, err := runTimeout("umount", small); err != nil {
			t.Errorf("umount the tmpfs: %v", err)
		}
	})
	f := &testFS{t: t, dataDir: filepath.Join(small, "data"), mnt: filepath.Join(dir, "mnt"), logFile: filepath.Join(dir, "daemon.log")}
	if err := os.Mkdir(f.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.cleanup) // before the tmpfs goes: registered after it
	if _, err := lsmfs("mkfs", "--journal-size", "16M", f.dataDir); err != nil {
		t.Fatal(err)
	}
	f.mount()

	chunk := content(7, 1<<20)
	writeSync := func(p string) error {
		fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		_, err = fh.Write(chunk)
		return errors.Join(err, fh.Sync(), fh.Close())
	}
	var names []string
	var err error
	for i := 0; i < 400; i++ {
		p := f.path(fmt.Sprintf("f%03d", i))
		if err = writeSync(p); err != nil {
			os.Remove(p)
			break
		}
		names = append(names, p)
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the filesystem: %v after %d files of 1 MiB; want ENOSPC%s", err, len(names), f.logTail())
	}
	t.Logf("ENOSPC after %d files of 1 MiB: %v", len(names), err)
	// Still serving: reads and listings work, more data fails with ENOSPC.
	if b, err := os.ReadFile(names[0]); err != nil || len(b) != len(chunk) {
		t.Fatalf("read when full: %d bytes, %v", len(b), err)
	}
	if err := writeSync(f.path("more")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write when full: %v, want ENOSPC", err)
	}
	os.Remove(f.path("more"))
	// rm works when full.
	for _, p := range names[:len(names)*3/4] {
		if err := os.Remove(p); err != nil {
			t.Fatalf("rm when full: %v", err)
		}
	}
	// Space comes back.
	deadline := time.Now().Add(time.Minute)
	for {
		err = writeSync(f.path("after"))
		if err == nil || !errors.Is(err, syscall.ENOSPC) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		ls, _ := runTimeout("sh", "-c", "ls -l "+f.dataDir+"; df "+small+"; "+lsmfsBin+" stats "+f.mnt)
		t.Fatalf("write after rm: %v\n%s%s", err, ls, f.logTail())
	}
	for i := 0; i < 8; i++ {
		if err := writeSync(f.path(fmt.Sprintf("again%d", i))); err != nil {
			t.Fatalf("write %d after rm: %v", i, err)
		}
	}
	f.remount()
	if b, err := os.ReadFile(f.path("again7")); err != nil || len(b) != len(chunk) {
		t.Fatalf("after remount: %d bytes, %v", len(b), err)
	}
}
