package fs_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/journal"
	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestCorruptInput flips random bytes in copies of a populated data
// directory — tables, manifest, CURRENT, value log, journal — many times.
// Each time, the mount (lsm.Open, fs.New) either refuses with an error
// naming the damage, or serves; when it serves, the whole tree is walked and
// every file read (errors allowed: EIO), and if anything read differs from
// what was written, fsck (DB.Check and fs.Check) must report a problem.
// Nothing may panic. LSMFS_SEED=N replays; LSMFS_LONG=1 flips more.
func TestCorruptInput(t *testing.T) {
	seed := testSeed(t)
	iterations := 300
	if os.Getenv("LSMFS_LONG") != "" {
		iterations = 3000
	}
	rng := rand.New(rand.NewPCG(seed, 13))
	base, want := populatedImage(t)

	names, err := base.List(testDir)
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string][]string{}
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, ".sst"):
			byKind["table"] = append(byKind["table"], n)
		case strings.HasSuffix(n, ".vlog"):
			byKind["value log"] = append(byKind["value log"], n)
		case strings.HasPrefix(n, "MANIFEST-"):
			byKind["manifest"] = append(byKind["manifest"], n)
		case n == "CURRENT":
			byKind["CURRENT"] = append(byKind["CURRENT"], n)
		case n == "journal":
			byKind["journal"] = append(byKind["journal"], n)
		}
	}
	kinds := []string{"table", "value log", "manifest", "CURRENT", "journal"}
	for _, k := range kinds {
		if len(byKind[k]) == 0 {
			t.Fatalf("the image has no %s file: %v", k, names)
		}
	}
	stats := map[string]int{}
	for it := 0; it < iterations; it++ {
		kind := kinds[rng.IntN(len(kinds))]
		file := byKind[kind][rng.IntN(len(byKind[kind]))]
		img := base.CrashClone()
		desc := flipRandom(t, rng, img, testDir+"/"+file, kind)
		outcome := corruptOnce(img, want)
		stats[kind+": "+outcome.what]++
		if outcome.fail != "" {
			t.Fatalf("iteration %d (seed %d): %s: %s", it, seed, desc, outcome.fail)
		}
	}
	keys := make([]string, 0, len(stats))
	for k := range stats {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %-44s %d", k, stats[k])
	}
	t.Logf("%d corrupted copies:%s", iterations, b.String())
}

// imageFile is what the populated image holds at a path.
type imageFile struct {
	data    []byte
	symlink string
	dir     bool
}

// populatedImage builds a data directory with tables in several levels,
// value-log segments, a manifest and journal records not yet in tables, and
// returns its state after a crash (all synced) with the tree it holds.
func populatedImage(t *testing.T) (*vfs.MemFS, map[string]imageFile) {
	e := newEnv(t, fs.Options{WriteBufferSize: 16 << 10}, fs.FormatOptions{BlockSize: bs})
	want := map[string]imageFile{}
	rng := rand.New(rand.NewPCG(1, 2))
	dirs := []uint64{1}
	paths := map[uint64]string{1: ""}
	for i := 0; i < 4; i++ {
		p := dirs[rng.IntN(len(dirs))]
		name := fmt.Sprintf("d%d", i)
		ino := e.mustMkdir(p, name)
		dirs = append(dirs, ino)
		paths[ino] = paths[p] + "/" + name
		want[paths[ino]] = imageFile{dir: true}
	}
	for round := 0; round < 3; round++ {
		for i := 0; i < 25; i++ {
			p := dirs[rng.IntN(len(dirs))]
			name := fmt.Sprintf("f%d-%d", round, i)
			ino, fh := e.mustCreate(p, name)
			data := pattern([]int{10, 60, 3000, 9000, 40000}[rng.IntN(5)], byte(i+round))
			e.mustWrite(ino, fh, 0, data)
			if rng.IntN(3) == 0 {
				wantErr(t, "setxattr", e.setxattr(ino, "user.k", []byte(name), 0), 0)
			}
			e.release(ino, fh)
			want[paths[p]+"/"+name] = imageFile{data: data}
		}
		target := fmt.Sprintf("target-%d", round)
		if _, errno := e.symlink(1, target, fmt.Sprintf("l%d", round)); errno != 0 {
			t.Fatal(errno)
		}
		want[fmt.Sprintf("/l%d", round)] = imageFile{symlink: target}
		if round < 2 {
			if err := e.db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if round == 0 {
			if err := e.db.Compact(nil, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := e.db.SyncJournal(); err != nil {
		t.Fatal(err)
	}
	return e.mem.CrashClone(), want
}

// flipRandom flips 1 to 8 bytes of one file of img and describes it.
func flipRandom(t *testing.T, rng *rand.Rand, img *vfs.MemFS, path, kind string) string {
	f, err := img.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, _ := f.Size()
	span := size
	if kind == "journal" && rng.IntN(4) != 0 {
		span = min(size, 64<<10) // superblocks and the frames written
	}
	var offs []int64
	for i := 0; i < 1+rng.IntN(8); i++ {
		off := rng.Int64N(max(span, 1))
		b := []byte{0}
		f.ReadAt(b, off)
		b[0] ^= byte(1 + rng.IntN(255))
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s %s (%d bytes): flipped bytes at %v", kind, path, size, offs)
}

type corruptOutcome struct {
	what string // refused, served clean, served with damage found, served undamaged
	fail string
}

// corruptOnce mounts a damaged image and classifies what happened.
func corruptOnce(img *vfs.MemFS, want map[string]imageFile) corruptOutcome {
	o := engineOptions(img)
	db, err := lsm.Open(testDir, o)
	if err != nil {
		if !errors.Is(err, lsm.ErrCorrupt) && !errors.Is(err, journal.ErrCorrupt) {
			return corruptOutcome{fail: fmt.Sprintf("the engine refused without naming corruption: %v", err)}
		}
		return corruptOutcome{what: "engine refused (corruption named)"}
	}
	defer db.Close()
	f, err := fs.New(db, fs.Options{})
	if err != nil {
		if !errors.Is(err, lsm.ErrCorrupt) && !errors.Is(err, fs.ErrCorrupt) {
			return corruptOutcome{fail: fmt.Sprintf("fs.New refused without naming corruption: %v", err)}
		}
		return corruptOutcome{what: "fs refused (corruption named)"}
	}
	defer f.Close()
	damage := readTree(f.Raw(), want)
	er, eerr := db.Check()
	fr, ferr := fs.Check(db)
	found := eerr != nil || ferr != nil || !er.OK() || !fr.OK()
	// A damaged last journal frame cannot be told from one a crash tore:
	// the batch it held is dropped, and fsck says so.
	torn := false
	for _, n := range er.Notes {
		torn = torn || strings.Contains(n, "torn")
	}
	switch {
	case damage != "" && !found && torn:
		return corruptOutcome{what: "served, last journal frame dropped as torn (fsck notes it)"}
	case damage != "" && !found:
		return corruptOutcome{fail: fmt.Sprintf("served damaged data (%s), but fsck found nothing:\n%s%s", damage, er.String(), fr.String())}
	case damage != "":
		return corruptOutcome{what: "served, damage seen and found by fsck"}
	case found:
		return corruptOutcome{what: "served intact, fsck reports damage"}
	}
	return corruptOutcome{what: "served intact (unused bytes)"}
}

// readTree walks the tree through raw FUSE calls and compares it with want;
// it returns the first difference or error, or "".
func readTree(raw fuse.RawFileSystem, want map[string]imageFile) string {
	seen := map[string]bool{}
	var walk func(ino uint64, path string) string
	walk = func(ino uint64, path string) string {
		var oo fuse.OpenOut
		if st := raw.OpenDir(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: ino}}, &oo); st != fuse.OK {
			return fmt.Sprintf("opendir %s: %v", path, st)
		}
		defer raw.ReleaseDir(&fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: ino}, Fh: oo.Fh})
		var names []string
		off := uint64(0)
		for {
			out := fuse.NewDirEntryList(make([]byte, 4096), off)
			if st := raw.ReadDir(nil, &fuse.ReadIn{InHeader: fuse.InHeader{NodeId: ino}, Fh: oo.Fh, Offset: off, Size: 4096}, out); st != fuse.OK {
				return fmt.Sprintf("readdir %s: %v", path, st)
			}
			ents, err := fuse.ParseDirEntries(out.Bytes())
			if err != nil {
				return fmt.Sprintf("readdir %s: %v", path, err)
			}
			if len(ents) == 0 {
				break
			}
			for _, e := range ents {
				if e.Name != "." && e.Name != ".." {
					names = append(names, e.Name)
				}
			}
			off = ents[len(ents)-1].Off
		}
		for _, name := range names {
			p := path + "/" + name
			seen[p] = true
			w, ok := want[p]
			if !ok {
				return "unexpected " + p
			}
			var e fuse.EntryOut
			if st := raw.Lookup(nil, &fuse.InHeader{NodeId: ino}, name, &e); st != fuse.OK {
				return fmt.Sprintf("lookup %s: %v", p, st)
			}
			switch {
			case w.dir:
				if e.Attr.Mode&syscall.S_IFMT != syscall.S_IFDIR {
					return p + " is not a directory"
				}
				if msg := walk(e.NodeId, p); msg != "" {
					return msg
				}
			case w.symlink != "":
				target, st := raw.Readlink(nil, &fuse.InHeader{NodeId: e.NodeId})
				if st != fuse.OK || string(target) != w.symlink {
					return fmt.Sprintf("readlink %s: %q, %v", p, target, st)
				}
			default:
				if e.Attr.Size != uint64(len(w.data)) {
					return fmt.Sprintf("%s: size %d, want %d", p, e.Attr.Size, len(w.data))
				}
				var fo fuse.OpenOut
				if st := raw.Open(nil, &fuse.OpenIn{InHeader: fuse.InHeader{NodeId: e.NodeId}, Flags: syscall.O_RDONLY}, &fo); st != fuse.OK {
					return fmt.Sprintf("open %s: %v", p, st)
				}
				buf := make([]byte, len(w.data)+1)
				res, st := raw.Read(nil, &fuse.ReadIn{InHeader: fuse.InHeader{NodeId: e.NodeId}, Fh: fo.Fh, Size: uint32(len(buf))}, buf)
				var got []byte
				if st == fuse.OK {
					got, st = res.Bytes(make([]byte, len(buf)))
				}
				raw.Release(nil, &fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: e.NodeId}, Fh: fo.Fh})
				if st != fuse.OK {
					return fmt.Sprintf("read %s: %v", p, st)
				}
				if !bytes.Equal(got, w.data) {
					return fmt.Sprintf("%s: content differs", p)
				}
			}
		}
		return ""
	}
	if msg := walk(1, ""); msg != "" {
		return msg
	}
	for p := range want {
		if !seen[p] {
			return "missing " + p
		}
	}
	return ""
}

// testSeed returns the seed of a randomized test: LSMFS_SEED, or the clock.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("LSMFS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seed = n
	}
	t.Logf("seed %d (replay with LSMFS_SEED=%d)", seed, seed)
	return seed
}
