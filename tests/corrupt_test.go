package tests

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// TestCorruptDataDir is the end-to-end corrupt-input test: a populated data
// directory (tables, value log, manifest, and journal records a SIGKILL
// left unflushed) is copied again and again, random bytes are flipped in
// one file of the copy, and the real binary mounts it: the mount either
// fails with a one-line message, or serves — then every file is read, the
// daemon must survive it (no panic), an I/O error must be logged as
// corruption, and if anything read differs from what was written, lsmfs
// fsck must exit 4. fsck never exits otherwise than 0 or 4 on a damaged
// copy. 12 copies by default, 100 with LSMFS_LONG=1 (the library-level
// fs.TestCorruptInput flips 300).
func TestCorruptDataDir(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 12))
	iterations := 12
	if long() {
		iterations = 100
	}
	base := newFS(t, fsOptions{mountOpts: "memtable_size=256K"})
	want := map[string][]byte{}
	for i := 0; i < 60; i++ {
		dir := fmt.Sprintf("d%d", i%4)
		if err := os.MkdirAll(base.path(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		p := fmt.Sprintf("%s/f%02d", dir, i)
		data := content(int64(i+1), []int{30, 3000, 20000, 150000}[i%4])
		if err := writeNew(base.path(p), data); err != nil { // fsynced
			t.Fatal(err)
		}
		want[p] = data
	}
	// Everything is durable (an fsync forces the journal, which holds the
	// batches in order); the kill leaves journal records to replay.
	base.kill()
	base.noFsck = true

	names, err := os.ReadDir(base.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range names {
		if n := e.Name(); strings.HasSuffix(n, ".sst") || strings.HasSuffix(n, ".vlog") ||
			strings.HasPrefix(n, "MANIFEST-") || n == "CURRENT" || n == "journal" {
			files = append(files, n)
		}
	}
	sort.Strings(files)
	outcomes := map[string]int{}
	for it := 0; it < iterations; it++ {
		file := files[rng.IntN(len(files))]
		f := &testFS{t: t, dataDir: filepath.Join(t.TempDir(), "data"), mnt: filepath.Join(t.TempDir(), "mnt"), noFsck: true}
		f.logFile = f.dataDir + ".log"
		if err := os.Mkdir(f.mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := runTimeout("cp", "-a", base.dataDir, f.dataDir); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.cleanup)
		what := flipFile(t, rng, filepath.Join(f.dataDir, file))
		outcome := corruptMount(t, f, want)
		outcomes[outcome]++
		t.Logf("copy %d: %s: %s", it, what, outcome)
		if t.Failed() {
			t.Fatalf("copy %d failed (seed %d)", it, seed)
		}
	}
	t.Logf("%d damaged copies: %v", iterations, outcomes)
}

// flipFile flips 1 to 8 random bytes of a file (journal: mostly in its
// first 64 KiB, where the superblocks and frames are).
func flipFile(t *testing.T, rng *rand.Rand, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	span := len(b)
	if filepath.Base(path) == "journal" && rng.IntN(4) != 0 {
		span = min(span, 64<<10)
	}
	var offs []int
	for i := 0; i < 1+rng.IntN(8); i++ {
		off := rng.IntN(max(span, 1))
		b[off] ^= byte(1 + rng.IntN(255))
		offs = append(offs, off)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s (%d bytes) flipped at %v", filepath.Base(path), len(b), offs)
}

// corruptMount mounts a damaged copy and checks what happens.
func corruptMount(t *testing.T, f *testFS, want map[string][]byte) string {
	t.Helper()
	stderr, code := lsmfsRun("mount", "-o", "log="+f.logFile, f.dataDir, f.mnt)
	if code != 0 {
		if lines := strings.Split(strings.TrimSpace(stderr), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "lsmfs: ") {
			t.Errorf("a refused mount must say why in one line starting with \"lsmfs: \": %q", stderr)
		}
		if pid := findDaemon(f.mnt); pid != 0 {
			t.Errorf("a daemon (%d) is left after a refused mount", pid)
		}
		return "mount refused"
	}
	f.pid = findDaemon(f.mnt)
	damage, eio := "", false
	for p, data := range want {
		b, err := os.ReadFile(f.path(p))
		switch {
		case errors.Is(err, syscall.EIO):
			eio = true
			if damage == "" {
				damage = fmt.Sprintf("read %s: EIO", p)
			}
		case err != nil:
			if damage == "" {
				damage = fmt.Sprintf("read %s: %v", p, err)
			}
		case !bytes.Equal(b, data):
			if damage == "" {
				damage = fmt.Sprintf("%s differs (%d bytes, want %d)", p, len(b), len(data))
			}
		}
	}
	filepath.WalkDir(f.mnt, func(p string, d fs.DirEntry, err error) error { return nil }) // readdir of everything
	if f.pid == 0 || isZombie(f.pid) {
		t.Errorf("the daemon died while serving a damaged copy%s", f.logTail())
		f.pid = 0
		f.forceUnmount()
		return "daemon died"
	}
	if err := f.unmountErr(); err != nil {
		t.Errorf("unmount of a damaged copy: %v%s", err, f.logTail())
		f.forceUnmount()
		return "unmount failed"
	}
	if eio {
		if log, _ := os.ReadFile(f.logFile); !bytes.Contains(log, []byte("corrupt")) {
			t.Errorf("EIO served but the daemon log names no corruption%s", f.logTail())
		}
	}
	out, fsckErr, code := lsmfsOut("fsck", f.dataDir)
	switch {
	case code != 0 && code != 4:
		t.Errorf("fsck of a damaged copy: exit %d, want 0 or 4: %s%s", code, out, fsckErr)
	case damage != "" && code != 4:
		t.Errorf("served damaged data (%s) but fsck exits %d:\n%s", damage, code, out)
	}
	switch {
	case damage != "":
		return "served, damage seen, fsck found it"
	case code == 4:
		return "served intact, fsck found damage"
	}
	return "served intact, fsck clean (unused bytes)"
}
