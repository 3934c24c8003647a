package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestCrashConcurrent is the crash test with 8 writer processes at once
// (each the writer of crash_test.go, in a directory of its own): the daemon
// is SIGKILLed after a seeded random number of log lines across all
// writers, 50 times in a row (LSMFS_CRASH_ITERATIONS=N to change it). After
// each kill: lsmfs fsck on the crashed data directory (exit 0), a remount,
// and a content check — every acknowledged operation of every writer
// survived exactly, each writer's one operation in flight happened or not
// (a partial write only as a prefix), and nothing else is on the mount. The
// iteration's directories are then removed (and the removal forced), so
// every check reads only one iteration's files.
func TestCrashConcurrent(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 8))
	iterations := 50
	if s := os.Getenv("LSMFS_CRASH_ITERATIONS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("LSMFS_CRASH_ITERATIONS=%q: %v", s, err)
		}
		iterations = n
	}
	const writers = 8
	f := newFS(t, fsOptions{})
	start := time.Now()
	var fsckTime, verifyTime time.Duration
	totalAcked := 0
	for it := 0; it < iterations; it++ {
		killAfter := 40 + rng.IntN(280)
		seeds := make([]uint64, writers)
		for w := range seeds {
			seeds[w] = rng.Uint64()
		}
		streams := runCrashWriters(t, f, it, seeds, killAfter)
		// fsck the crashed data directory as it is.
		t0 := time.Now()
		if out, err := lsmfs("fsck", f.dataDir); err != nil {
			t.Fatalf("iteration %d: fsck after SIGKILL: %v\n%s", it, err, out)
		}
		fsckTime += time.Since(t0)
		f.mount()
		t0 = time.Now()
		acked := verifyCrashStreams(t, f, streams)
		verifyTime += time.Since(t0)
		totalAcked += acked
		if t.Failed() {
			t.Fatalf("iteration %d failed (seed %d, writer seeds %v, kill after %d lines)", it, seed, seeds, killAfter)
		}
		dir := fmt.Sprintf("c%02d", it)
		if err := os.RemoveAll(f.path(dir)); err != nil {
			t.Fatalf("remove %s: %v", dir, err)
		}
		if err := syncDir(f.mnt); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d SIGKILLs with %d concurrent writers in %s (%d acknowledged operations checked; fsck %s, content checks %s)",
		iterations, writers, time.Since(start).Round(time.Millisecond), totalAcked, fsckTime.Round(time.Millisecond), verifyTime.Round(time.Millisecond))
}

// runCrashWriters starts one writer per seed in c<it>/w<k>, SIGKILLs the
// daemon once they logged killAfter lines in all, detaches the dead mount,
// and returns each writer's log.
func runCrashWriters(t *testing.T, f *testFS, it int, seeds []uint64, killAfter int) [][]crashRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	if err := os.Mkdir(f.path(fmt.Sprintf("c%02d", it)), 0o755); err != nil {
		t.Fatal(err)
	}
	type line struct {
		w int
		r crashRecord
	}
	lines := make(chan line)
	var cmds []*exec.Cmd
	var stderrs []*bytes.Buffer
	var readers sync.WaitGroup
	for w, seed := range seeds {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(),
			crashWriterEnv+"="+fmt.Sprintf("c%02d/w%d", it, w), crashMountEnv+"="+f.mnt,
			crashSeedEnv+"="+strconv.FormatUint(seed, 10),
			crashIDEnv+"="+strconv.FormatInt(int64(it*len(seeds)+w+1)*1_000_000_000, 10))
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // it writes until the mount fails
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, stderrs = append(cmds, cmd), append(stderrs, &stderr)
		readers.Add(1)
		go func(w int) {
			defer readers.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var r crashRecord
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					r = crashRecord{Err: fmt.Sprintf("bad log line %q: %v", sc.Text(), err)}
				}
				lines <- line{w, r}
			}
		}(w)
	}
	go func() {
		readers.Wait()
		close(lines)
	}()
	streams := make([][]crashRecord, len(seeds))
	n := 0
	killed := false
	for l := range lines {
		streams[l.w] = append(streams[l.w], l.r)
		n++
		if l.r.Err != "" && !killed {
			f.kill()
			for _, c := range cmds {
				c.Wait()
			}
			t.Fatalf("writer %d failed before the crash, after %d log lines: %s\n%s%s", l.w, n, l.r.Err, stderrs[l.w], f.logTail())
		}
		if n == killAfter && !killed {
			f.kill()
			killed = true
		}
	}
	for _, c := range cmds {
		c.Wait()
	}
	if !killed {
		t.Fatalf("the writers exited after %d log lines, before the crash", n)
	}
	return streams
}

// verifyCrashStreams checks the mount against the acknowledged records of
// every writer and resolves each writer's operation in flight; it returns
// the number of acknowledged operations.
func verifyCrashStreams(t *testing.T, f *testFS, streams [][]crashRecord) int {
	t.Helper()
	model := map[string]crashFile{}
	dirs := map[string]bool{}
	var pendings []crashRecord
	acked := 0
	for _, records := range streams {
		var pending *crashRecord
		for i := range records {
			r := &records[i]
			switch {
			case r.Ack:
				applyCrashRecord(pending, model, dirs)
				pending = nil
				acked++
			case r.Op != "":
				pending = r
			}
		}
		if pending != nil {
			pendings = append(pendings, *pending)
		}
	}
	errs := 0
	fail := func(format string, args ...any) {
		if errs++; errs <= 20 {
			t.Errorf(format, args...)
		}
	}
	read := func(p string) ([]byte, bool) {
		b, err := os.ReadFile(f.path(p))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false
		}
		if err != nil {
			fail("read %s: %v", p, err)
			return nil, false
		}
		return b, true
	}
	prefixOf := func(b []byte, id int64, lo, hi int) bool {
		return len(b) >= lo && len(b) <= hi && bytes.Equal(b, content(id, len(b)))
	}
	touched := map[string]bool{}
	for _, r := range pendings {
		for _, p := range []string{r.Path, r.To, r.Tmp} {
			if p != "" {
				touched[p] = true
			}
		}
	}
	paths := make([]string, 0, len(model))
	for p := range model {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if touched[p] {
			continue
		}
		want := model[p]
		b, ok := read(p)
		switch {
		case !ok:
			fail("acknowledged file %s is missing", p)
		case !bytes.Equal(b, content(want.ID, want.Len)):
			fail("acknowledged file %s: %d bytes, want %d bytes of content %d (first difference at %d)",
				p, len(b), want.Len, want.ID, firstDiff(b, content(want.ID, want.Len)))
		}
	}
	for d := range dirs {
		if fi, err := os.Stat(f.path(d)); err != nil || !fi.IsDir() {
			fail("acknowledged directory %s: %v", d, err)
		}
	}
	// Each writer's operation in flight happened or not.
	for _, r := range pendings {
		switch r.Op {
		case "mkdir":
			if _, err := os.Stat(f.path(r.Path)); err == nil {
				dirs[r.Path] = true
			}
		case "create", "orphan":
			if b, ok := read(r.Path); ok {
				if !prefixOf(b, r.ID, 0, r.Len) {
					fail("%s in flight: %s has %d bytes that are not a prefix of content %d", r.Op, r.Path, len(b), r.ID)
				}
				model[r.Path] = crashFile{r.ID, len(b)}
			}
		case "append":
			old := model[r.Path]
			b, ok := read(r.Path)
			if !ok || !prefixOf(b, old.ID, old.Len, old.Len+r.Len) {
				fail("append in flight to %s: %d bytes (present %v); want content %d of %d to %d bytes",
					r.Path, len(b), ok, old.ID, old.Len, old.Len+r.Len)
			}
			model[r.Path] = crashFile{old.ID, len(b)}
		case "rename":
			src := model[r.Path]
			oldDst, dstExisted := model[r.To]
			bs, okS := read(r.Path)
			bd, okD := read(r.To)
			srcWant := content(src.ID, src.Len)
			switch {
			case okS && bytes.Equal(bs, srcWant) && (!dstExisted && !okD || dstExisted && okD && bytes.Equal(bd, content(oldDst.ID, oldDst.Len))):
			case !okS && okD && bytes.Equal(bd, srcWant):
				delete(model, r.Path)
				model[r.To] = src
			default:
				fail("rename %s -> %s in flight: source present %v (%d bytes), target present %v (%d bytes); want exactly before or after",
					r.Path, r.To, okS, len(bs), okD, len(bd))
			}
		case "replace":
			old := model[r.Path]
			b, ok := read(r.Path)
			switch {
			case ok && bytes.Equal(b, content(old.ID, old.Len)):
				if tb, tok := read(r.Tmp); tok {
					if !prefixOf(tb, r.ID, 0, r.Len) {
						fail("replace in flight: temporary %s holds %d bytes that are not a prefix of content %d", r.Tmp, len(tb), r.ID)
					}
					model[r.Tmp] = crashFile{r.ID, len(tb)}
				}
			case ok && bytes.Equal(b, content(r.ID, r.Len)):
				if _, tok := read(r.Tmp); tok {
					fail("replace in flight: %s was renamed over %s but still exists", r.Tmp, r.Path)
				}
				model[r.Path] = crashFile{r.ID, r.Len}
			default:
				fail("replace in flight: %s present %v with %d bytes; want the old content %d or the new content %d", r.Path, ok, len(b), old.ID, r.ID)
			}
		case "unlink":
			b, ok := read(r.Path)
			switch {
			case !ok:
				delete(model, r.Path)
			case !bytes.Equal(b, content(model[r.Path].ID, model[r.Path].Len)):
				fail("unlink in flight: %s holds other content", r.Path)
			}
		}
	}
	// Nothing else may exist (the writers' directories hold only what they
	// made).
	filepath.WalkDir(f.mnt, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			fail("walk %s: %v", p, err)
			return nil
		}
		rel, _ := filepath.Rel(f.mnt, p)
		if rel == "." || !strings.Contains(rel, "/") {
			return nil // the mount root and the iteration directories
		}
		if _, ok := model[rel]; !ok && !dirs[rel] {
			fail("unexpected %s on the mount after the crash", rel)
		}
		return nil
	})
	return acked
}
