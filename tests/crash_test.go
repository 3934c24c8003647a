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
	"syscall"
	"testing"
	"time"
)

// The crash test: a writer process creates, appends, renames, replaces and
// unlinks files on the mount, fsyncing after each operation, and logs on
// stdout each operation before it starts and an acknowledgement after its
// fsyncs returned. The test SIGKILLs the daemon after a seeded random number
// of log lines, detaches the dead mount, remounts, and checks that every
// acknowledged operation survived exactly, and that the one operation in
// flight either happened or did not (partially written data only as a
// prefix of what was written). fsck in cleanup checks the tree (no dangling
// entry, link counts, no orphan left).

const (
	crashWriterEnv = "LSMFS_CRASH_WRITER" // the writer's directory, relative to the mount
	crashMountEnv  = "LSMFS_CRASH_MOUNT"
	crashSeedEnv   = "LSMFS_CRASH_SEED"
	crashIDEnv     = "LSMFS_CRASH_IDBASE"
)

// crashRecord is one line of the writer's log.
type crashRecord struct {
	Op   string `json:"op,omitempty"` // mkdir, create, append, rename, replace, unlink, orphan
	Path string `json:"path,omitempty"`
	To   string `json:"to,omitempty"`  // rename target
	Tmp  string `json:"tmp,omitempty"` // replace: the temporary file renamed over Path
	ID   int64  `json:"id,omitempty"`  // content identity (create, replace)
	Len  int    `json:"len,omitempty"` // create, replace: length; append: bytes appended
	Ack  bool   `json:"ack,omitempty"` // the previous op's fsyncs returned
	Err  string `json:"err,omitempty"` // the writer stopped
}

// crashFile is the content of a file: the first Len bytes of content(ID).
type crashFile struct {
	ID  int64
	Len int
}

// content returns the first n bytes of the deterministic content of id.
func content(id int64, n int) []byte {
	b := make([]byte, n)
	fillContent(id, 0, b)
	return b
}

// fillContent fills b with the bytes of content(id) at offset off, a
// multiple of 8: word k is splitmix64 of (id, k), so any range can be made
// without the bytes before it.
func fillContent(id, off int64, b []byte) {
	k := uint64(off / 8)
	for i := 0; i < len(b); i += 8 {
		z := uint64(id)*0xd1b54a32d192ed03 + (k+1)*0x9e3779b97f4a7c15
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(z >> (8 * j))
		}
		k++
	}
}

func TestCrash(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	iterations := 8
	if long() {
		iterations = 100
	}
	f := newFS(t, fsOptions{})
	model := map[string]crashFile{} // path -> acknowledged content
	dirs := map[string]bool{}       // acknowledged directories
	for it := 0; it < iterations; it++ {
		killAfter := 1 + rng.IntN(400) // log lines
		dir := fmt.Sprintf("iter%02d", it)
		wseed := rng.Uint64()
		t.Logf("iteration %d: writer seed %d, SIGKILL after %d log lines", it, wseed, killAfter)
		records := runCrashIteration(t, f, dir, wseed, int64(it+1)*1_000_000, killAfter)
		f.mount()
		verifyCrash(t, f, records, model, dirs)
		if t.Failed() {
			t.Fatalf("iteration %d failed (seed %d)", it, seed)
		}
	}
	f.unmount()
	f.mount() // a clean remount must show the same
	verifyCrash(t, f, nil, model, dirs)
}

// runCrashIteration starts the writer in dir, kills the daemon after
// killAfter log lines, detaches the mount, and returns the writer's log.
func runCrashIteration(t *testing.T, f *testFS, dir string, seed uint64, idBase int64, killAfter int) []crashRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	w := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	w.Env = append(os.Environ(),
		crashWriterEnv+"="+dir, crashMountEnv+"="+f.mnt,
		crashSeedEnv+"="+strconv.FormatUint(seed, 10), crashIDEnv+"="+strconv.FormatInt(idBase, 10))
	w.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // it writes until the mount fails
	var stderr bytes.Buffer
	w.Stderr = &stderr
	out, err := w.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	var records []crashRecord
	killed := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var r crashRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("writer log line %q: %v", sc.Text(), err)
		}
		records = append(records, r)
		if r.Err != "" && !killed {
			w.Wait()
			t.Fatalf("the writer failed before the crash, after %d log lines: %s\n%s%s", len(records), r.Err, stderr.String(), f.logTail())
		}
		if len(records) == killAfter && !killed {
			f.kill()
			killed = true
		}
	}
	werr := w.Wait()
	if !killed {
		t.Fatalf("the writer exited (%v) after %d log lines, before the crash:\n%s", werr, len(records), stderr.String())
	}
	return records
}

// verifyCrash applies the acknowledged records to the model, checks the
// mount against it (and the one pending record's allowed outcomes), then
// resolves the pending record to what the mount shows.
func verifyCrash(t *testing.T, f *testFS, records []crashRecord, model map[string]crashFile, dirs map[string]bool) {
	t.Helper()
	var pending *crashRecord
	for i := range records {
		r := &records[i]
		switch {
		case r.Ack:
			applyCrashRecord(pending, model, dirs)
			pending = nil
		case r.Op != "":
			pending = r
		}
	}
	read := func(p string) ([]byte, bool) {
		b, err := os.ReadFile(f.path(p))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false
		}
		if err != nil {
			t.Errorf("read %s: %v", p, err)
			return nil, false
		}
		return b, true
	}
	// prefixOf reports whether b is content(id) of a length in [lo, hi].
	prefixOf := func(b []byte, id int64, lo, hi int) bool {
		return len(b) >= lo && len(b) <= hi && bytes.Equal(b, content(id, len(b)))
	}
	errs := 0
	fail := func(format string, args ...any) {
		if errs++; errs <= 20 {
			t.Errorf(format, args...)
		}
	}
	explained := map[string]bool{}
	touched := map[string]bool{}
	if pending != nil {
		for _, p := range []string{pending.Path, pending.To, pending.Tmp} {
			if p != "" {
				touched[p] = true
				explained[p] = true
			}
		}
		t.Logf("operation in flight at the crash: %+v", *pending)
	}
	paths := make([]string, 0, len(model))
	for p := range model {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		explained[p] = true
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
		explained[d] = true
		if fi, err := os.Stat(f.path(d)); err != nil || !fi.IsDir() {
			fail("acknowledged directory %s: %v", d, err)
		}
	}
	if pending != nil {
		r := *pending
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
				if r.Op == "create" {
					model[r.Path] = crashFile{r.ID, len(b)}
				} else {
					// An orphan caught between create and unlink is an
					// ordinary file now; forget it in the next rounds.
					if err := os.Remove(f.path(r.Path)); err != nil {
						t.Errorf("remove %s: %v", r.Path, err)
					}
				}
			}
		case "append":
			old := model[r.Path]
			b, ok := read(r.Path)
			if !ok || !prefixOf(b, old.ID, old.Len, old.Len+r.Len) {
				fail("append in flight to %s: %d bytes (present %v); want content %d of %d to %d bytes",
					r.Path, len(b), ok, old.ID, old.Len, old.Len+r.Len)
			} else {
				model[r.Path] = crashFile{old.ID, len(b)}
			}
		case "rename":
			src := model[r.Path]
			oldDst, dstExisted := model[r.To]
			bs, okS := read(r.Path)
			bd, okD := read(r.To)
			srcWant := content(src.ID, src.Len)
			switch {
			case okS && bytes.Equal(bs, srcWant) && (!dstExisted && !okD || dstExisted && okD && bytes.Equal(bd, content(oldDst.ID, oldDst.Len))):
				// not done
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
					if err := os.Remove(f.path(r.Tmp)); err != nil {
						t.Errorf("remove %s: %v", r.Tmp, err)
					}
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
	// Nothing else may exist.
	filepath.WalkDir(f.mnt, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			fail("walk %s: %v", p, err)
			return nil
		}
		rel, _ := filepath.Rel(f.mnt, p)
		if rel == "." {
			return nil
		}
		if _, ok := model[rel]; !ok && !dirs[rel] && !explained[rel] {
			fail("unexpected %s on the mount after the crash", rel)
		}
		return nil
	})
}

// applyCrashRecord applies an acknowledged record to the model.
func applyCrashRecord(r *crashRecord, model map[string]crashFile, dirs map[string]bool) {
	if r == nil {
		return
	}
	switch r.Op {
	case "mkdir":
		dirs[r.Path] = true
	case "create":
		model[r.Path] = crashFile{r.ID, r.Len}
	case "append":
		c := model[r.Path]
		c.Len += r.Len
		model[r.Path] = c
	case "rename":
		model[r.To] = model[r.Path]
		delete(model, r.Path)
	case "replace":
		model[r.Path] = crashFile{r.ID, r.Len}
	case "unlink":
		delete(model, r.Path)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// testSeed returns LSMFS_SEED or a fresh seed, and logs it.
func testSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("LSMFS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LSMFS_SEED=%q: %v", s, err)
		}
		seed = n
	}
	t.Logf("seed %d (replay with LSMFS_SEED=%d)", seed, seed)
	return seed
}

// crashWriterMain is the writer process (TestMain runs it when
// crashWriterEnv is set). It works until a system call fails, which happens
// when the daemon is killed, and then logs the error and exits 1.
func crashWriterMain() int {
	dir := os.Getenv(crashWriterEnv)
	mnt := os.Getenv(crashMountEnv)
	seed, _ := strconv.ParseUint(os.Getenv(crashSeedEnv), 10, 64)
	nextID, _ := strconv.ParseInt(os.Getenv(crashIDEnv), 10, 64)
	rng := rand.New(rand.NewPCG(seed, 1))
	w := &crashWriter{mnt: mnt, enc: json.NewEncoder(os.Stdout)}
	err := w.run(rng, dir, nextID)
	w.enc.Encode(crashRecord{Err: err.Error()})
	return 1
}

type crashWriter struct {
	mnt   string
	enc   *json.Encoder        // one Write per line on unbuffered stdout
	files []string             // live files, for picking
	state map[string]crashFile // their content
}

func (w *crashWriter) abs(p string) string { return filepath.Join(w.mnt, p) }

func (w *crashWriter) log(r crashRecord) {
	if err := w.enc.Encode(r); err != nil {
		os.Exit(2)
	}
}

func (w *crashWriter) ack() { w.log(crashRecord{Ack: true}) }

func (w *crashWriter) run(rng *rand.Rand, dir string, nextID int64) error {
	w.state = map[string]crashFile{}
	subdirs := []string{dir, dir + "/a", dir + "/b", dir + "/a/c"}
	for _, d := range subdirs {
		w.log(crashRecord{Op: "mkdir", Path: d})
		if err := os.Mkdir(w.abs(d), 0o755); err != nil {
			return err
		}
		if err := syncDir(w.abs(filepath.Dir(d))); err != nil {
			return err
		}
		w.ack()
	}
	size := func() int {
		if rng.IntN(4) == 0 {
			return rng.IntN(1 << 20)
		}
		return rng.IntN(4 << 10)
	}
	pick := func() (int, string) {
		i := rng.IntN(len(w.files))
		return i, w.files[i]
	}
	for {
		nextID++
		id := nextID
		op := rng.IntN(100)
		if len(w.files) == 0 {
			op = 0
		}
		var err error
		switch {
		case op < 30: // create
			p := fmt.Sprintf("%s/f%d", subdirs[rng.IntN(len(subdirs))], id)
			n := size()
			w.log(crashRecord{Op: "create", Path: p, ID: id, Len: n})
			if err = writeNew(w.abs(p), content(id, n)); err == nil {
				err = syncDir(filepath.Dir(w.abs(p)))
			}
			w.files = append(w.files, p)
			w.state[p] = crashFile{id, n}
		case op < 55: // append
			_, p := pick()
			n := size()
			c := w.state[p]
			w.log(crashRecord{Op: "append", Path: p, Len: n})
			err = appendSync(w.abs(p), content(c.ID, c.Len+n)[c.Len:])
			w.state[p] = crashFile{c.ID, c.Len + n}
		case op < 70: // rename, to a new name or over another file
			i, p := pick()
			to := fmt.Sprintf("%s/r%d", subdirs[rng.IntN(len(subdirs))], id)
			j := -1
			if rng.IntN(3) == 0 {
				j, to = pick()
			}
			if to == p {
				continue
			}
			w.log(crashRecord{Op: "rename", Path: p, To: to})
			if err = os.Rename(w.abs(p), w.abs(to)); err == nil {
				if err = syncDir(filepath.Dir(w.abs(p))); err == nil {
					err = syncDir(filepath.Dir(w.abs(to)))
				}
			}
			w.state[to] = w.state[p]
			delete(w.state, p)
			w.files[i] = to
			if j >= 0 {
				w.files = append(w.files[:j], w.files[j+1:]...)
			}
		case op < 85: // replace: write a temporary, fsync, rename over
			_, p := pick()
			tmp := fmt.Sprintf("%s/.tmp%d", filepath.Dir(p), id)
			n := size()
			w.log(crashRecord{Op: "replace", Path: p, Tmp: tmp, ID: id, Len: n})
			if err = writeNew(w.abs(tmp), content(id, n)); err == nil {
				if err = os.Rename(w.abs(tmp), w.abs(p)); err == nil {
					err = syncDir(filepath.Dir(w.abs(p)))
				}
			}
			w.state[p] = crashFile{id, n}
		case op < 95: // unlink
			i, p := pick()
			w.log(crashRecord{Op: "unlink", Path: p})
			if err = os.Remove(w.abs(p)); err == nil {
				err = syncDir(filepath.Dir(w.abs(p)))
			}
			w.files = append(w.files[:i], w.files[i+1:]...)
			delete(w.state, p)
		default: // orphan: unlinked while open, written and synced
			p := fmt.Sprintf("%s/o%d", subdirs[rng.IntN(len(subdirs))], id)
			n := size()
			w.log(crashRecord{Op: "orphan", Path: p, ID: id, Len: n})
			err = orphan(w.abs(p), content(id, n))
		}
		if err != nil {
			return err
		}
		w.ack()
	}
}

// writeNew creates p exclusively with data and fsyncs it.
func writeNew(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// appendSync appends data to p with O_APPEND and fsyncs.
func appendSync(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

// orphan creates p, writes half of data, unlinks p, writes the rest, fsyncs
// and closes: an inode that lives only while open.
func orphan(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	half := len(data) / 2
	if _, err := f.Write(data[:half]); err != nil {
		return err
	}
	if err := os.Remove(p); err != nil {
		return err
	}
	if _, err := f.Write(data[half:]); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

// syncDir fsyncs a directory.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return d.Close()
}
