package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// lsmfsRun runs the binary under test and returns its stderr and exit code.
func lsmfsRun(args ...string) (stderr string, code int) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, lsmfsBin, args...)
	var eb bytes.Buffer
	cmd.Stderr = &eb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return eb.String(), 0
	case errors.As(err, &ee):
		return eb.String(), ee.ExitCode()
	}
	return err.Error(), -1
}

// expectMountFailure runs lsmfs mount and checks that it fails with a
// one-line message containing want, leaves nothing mounted and no daemon.
func expectMountFailure(t *testing.T, f *testFS, opts, want string) {
	t.Helper()
	args := []string{"mount"}
	if opts != "" {
		args = append(args, "-o", opts)
	}
	stderr, code := lsmfsRun(append(args, f.dataDir, f.mnt)...)
	if code == 0 {
		f.pid = findDaemon(f.mnt)
		t.Errorf("lsmfs mount -o %q %s succeeded; want a failure naming %q", opts, f.dataDir, want)
		f.unmount()
		return
	}
	t.Logf("lsmfs mount: exit %d: %s", code, strings.TrimSpace(stderr))
	if lines := strings.Split(strings.TrimSpace(stderr), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "lsmfs: ") {
		t.Errorf("stderr is not one line starting with \"lsmfs: \":\n%s", stderr)
	}
	if !strings.Contains(strings.ToLower(stderr), strings.ToLower(want)) {
		t.Errorf("stderr %q does not name the problem (%q)", strings.TrimSpace(stderr), want)
	}
	if pid := findDaemon(f.mnt); pid != 0 {
		t.Errorf("a daemon (%d) is left after a failed mount", pid)
	}
	if typ := mountType(f.mnt); typ != "" {
		t.Errorf("%s is mounted (%s) after a failed mount", f.mnt, typ)
	}
}

// unformatted returns a testFS over dataDir without mkfs (no fsck in cleanup).
func unformatted(t *testing.T, dataDir string) *testFS {
	dir := t.TempDir()
	f := &testFS{t: t, dataDir: dataDir, mnt: filepath.Join(dir, "mnt"), logFile: filepath.Join(dir, "daemon.log"), noFsck: true}
	must(t, os.Mkdir(f.mnt, 0o755))
	t.Cleanup(f.cleanup)
	return f
}

// fileChecksum hashes a file or a whole block device.
func fileChecksum(t *testing.T, p string) string {
	fh, err := os.Open(p)
	must(t, err)
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestBadInput(t *testing.T) {
	requireMount(t)

	t.Run("not-lsmfs", func(t *testing.T) {
		data := filepath.Join(t.TempDir(), "data")
		must(t, os.MkdirAll(filepath.Join(data, "photos"), 0o755))
		must(t, os.WriteFile(filepath.Join(data, "notes.txt"), []byte("not a filesystem\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(data, "photos", "cat.jpg"), content(1, 10000), 0o644))
		before := dirChecksum(t, data)
		f := unformatted(t, data)
		expectMountFailure(t, f, "", "not an lsmfs")
		if _, code := lsmfsRun("mkfs", data); code == 0 {
			t.Errorf("lsmfs mkfs of a non-empty directory succeeded")
		}
		if stderr, code := lsmfsRun("fsck", data); code != 8 {
			t.Errorf("lsmfs fsck of a directory that is not lsmfs: exit %d (%s), want 8", code, strings.TrimSpace(stderr))
		}
		if same, diff := sameDir(before, dirChecksum(t, data)); !same {
			t.Errorf("the directory changed:\n%s", diff)
		}
	})

	t.Run("foreign-journal-file", func(t *testing.T) {
		dir := t.TempDir()
		ja, jb := filepath.Join(dir, "journal-a"), filepath.Join(dir, "journal-b")
		a := newFS(t, fsOptions{journal: ja, noMount: true})
		b := newFS(t, fsOptions{journal: jb, noMount: true})
		sums := func() string {
			return dirChecksum(t, a.dataDir) + dirChecksum(t, b.dataDir) + fileChecksum(t, ja) + fileChecksum(t, jb)
		}
		before := sums()
		expectMountFailure(t, b, "journal="+ja, "uuid")
		if same, diff := sameDir(before, sums()); !same {
			t.Errorf("a data directory or journal changed:\n%s", diff)
		}
	})

	t.Run("foreign-journal-device", func(t *testing.T) {
		a := newFS(t, fsOptions{journal: "loop", noMount: true})
		b := newFS(t, fsOptions{noMount: true})
		devSum, aSum, bSum := fileChecksum(t, a.journal), dirChecksum(t, a.dataDir), dirChecksum(t, b.dataDir)
		expectMountFailure(t, b, "journal="+a.journal, "uuid")
		if fileChecksum(t, a.journal) != devSum {
			t.Errorf("the journal device changed")
		}
		for _, d := range []struct{ dir, sum string }{{a.dataDir, aSum}, {b.dataDir, bSum}} {
			if same, diff := sameDir(d.sum, dirChecksum(t, d.dir)); !same {
				t.Errorf("%s changed:\n%s", d.dir, diff)
			}
		}
	})

	t.Run("mkfs-journal-over-a-filesystem", func(t *testing.T) {
		// mkfs --journal naming a device that holds a filesystem (a typo in
		// the device name) is refused and leaves it alone; --force formats.
		mkfs, err := exec.LookPath("mkfs.ext4")
		if err != nil {
			if mkfs, err = exec.LookPath("/usr/sbin/mkfs.ext4"); err != nil {
				t.Fatalf("mkfs.ext4 not found (package e2fsprogs): %v", err)
			}
		}
		dev := newLoopDevice(t, 64<<20)
		if out, err := runTimeout(mkfs, "-q", dev); err != nil {
			t.Fatalf("mkfs.ext4: %v: %s", err, out)
		}
		sum := fileChecksum(t, dev)
		data := filepath.Join(t.TempDir(), "data")
		stderr, code := lsmfsRun("mkfs", "--journal", dev, data)
		if code == 0 || !strings.Contains(stderr, "ext4 filesystem") || !strings.Contains(stderr, "--force") {
			t.Errorf("mkfs --journal over ext4: exit %d (%s), want a refusal naming ext4 and --force", code, strings.TrimSpace(stderr))
		}
		if fileChecksum(t, dev) != sum {
			t.Errorf("the refused mkfs changed the device")
		}
		if stderr, code := lsmfsRun("mkfs", "--force", "--journal", dev, data); code != 0 {
			t.Errorf("mkfs --force --journal over ext4: exit %d (%s)", code, strings.TrimSpace(stderr))
		}
		if stderr, code := lsmfsRun("fsck", data); code != 0 {
			t.Errorf("fsck after mkfs --force: exit %d (%s)", code, strings.TrimSpace(stderr))
		}
	})

	t.Run("corrupt-table", func(t *testing.T) {
		f := newFS(t, fsOptions{mountOpts: "memtable_size=256K"})
		// In a subprocess with a timeout: with tiny memtables a stalled
		// engine would otherwise hang the test.
		shTimeout(t, f.mnt, "for i in $(seq 64); do head -c 131072 /dev/urandom > f$i; done", 2*time.Minute)
		f.unmount()
		tables, _ := filepath.Glob(filepath.Join(f.dataDir, "*.sst"))
		if len(tables) == 0 {
			f.noFsck = true
			t.Fatalf("no .sst table in DATADIR after writing 8 MiB with memtable_size=256K and unmounting")
		}
		// Flip the magic in the footer of the largest table.
		table := largest(t, tables)
		b, err := os.ReadFile(table)
		must(t, err)
		for i := len(b) - 12; i < len(b)-4; i++ {
			b[i] ^= 0xff
		}
		must(t, os.WriteFile(table, b, 0o644))
		before := dirChecksum(t, f.dataDir)
		expectMountFailure(t, f, "", "corrupt")
		if stderr, code := lsmfsRun("fsck", f.dataDir); code != 4 {
			t.Errorf("lsmfs fsck of a corrupt table: exit %d (%s), want 4", code, strings.TrimSpace(stderr))
		}
		if same, diff := sameDir(before, dirChecksum(t, f.dataDir)); !same {
			t.Errorf("the data directory changed:\n%s", diff)
		}
		f.noFsck = true // it is corrupt on purpose
	})

	t.Run("bad-options", func(t *testing.T) {
		f := newFS(t, fsOptions{noMount: true})
		before := dirChecksum(t, f.dataDir)
		for opts, want := range map[string]string{
			"bogus":                 `unknown mount option "bogus"`,
			"cache_size=12X":        `"cache_size=12X"`,
			"rw,commit_interval=-5": `"commit_interval=-5"`,
			"block_size=4096":       "mkfs",
			"nodefault_permissions": "default_permissions",
		} {
			stderr, code := lsmfsRun("mount", "-o", opts, f.dataDir, f.mnt)
			if code != 2 || !strings.Contains(stderr, want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("lsmfs mount -o %s: exit %d, stderr %q; want exit 2 and one line naming %s", opts, code, stderr, want)
			}
		}
		if _, code := lsmfsRun("mount", f.dataDir); code != 2 {
			t.Errorf("lsmfs mount with one argument: exit %d, want 2", code)
		}
		missing := unformatted(t, f.dataDir)
		missing.mnt = filepath.Join(t.TempDir(), "does-not-exist")
		expectMountFailure(t, missing, "", "does-not-exist")
		if same, diff := sameDir(before, dirChecksum(t, f.dataDir)); !same {
			t.Errorf("the data directory changed:\n%s", diff)
		}
	})
}

func largest(t *testing.T, files []string) string {
	var best string
	var size int64 = -1
	for _, p := range files {
		fi, err := os.Stat(p)
		must(t, err)
		if fi.Size() > size {
			best, size = p, fi.Size()
		}
	}
	return best
}
