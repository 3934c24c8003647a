package lsm_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// populated returns a MemFS holding a closed engine with tables in several
// levels, and the key/value pairs it holds.
func populated(t *testing.T) (*vfs.MemFS, *lsm.Options, map[string]string) {
	fs := vfs.NewMem()
	opts := &lsm.Options{FS: fs, UUID: [16]byte{7}, MemtableSize: 256 << 10, TargetFileSize: 64 << 10,
		BlockSize: 2 << 10, LBaseMaxBytes: 128 << 10, CacheSize: -1, Journal: lsm.JournalOptions{Size: 4 << 20}}
	if err := lsm.Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := 0; i < 3000; i++ {
		b := lsm.NewBatch()
		k, v := fmt.Sprintf("key%05d", i*7%3000), fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i%200))
		b.Set([]byte(k), []byte(v))
		want[k] = v
		if err := db.Apply(b, false); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	b := lsm.NewBatch()
	b.DeleteRange([]byte("key00100"), []byte("key00200"))
	db.Apply(b, false)
	for i := 100; i < 200; i++ {
		delete(want, fmt.Sprintf("key%05d", i))
	}
	if err := db.Compact([]byte("key00000"), []byte("key01000")); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return fs, opts, want
}

func flipByte(t *testing.T, fs *vfs.MemFS, path string, off int64, mask byte) {
	f, err := fs.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= mask
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	f.Sync()
}

// checkCorrupted opens the engine and reads everything: each answer must be
// right or an error matching ErrCorrupt. It returns whether damage was seen.
func checkCorrupted(t *testing.T, fs *vfs.MemFS, opts *lsm.Options, want map[string]string, what string) bool {
	t.Helper()
	o := *opts
	o.FS = fs
	o.ReadOnly = true
	db, err := lsm.Open("/db", &o)
	if err != nil {
		if !errors.Is(err, lsm.ErrCorrupt) {
			t.Fatalf("%s: open: %v does not match ErrCorrupt", what, err)
		}
		return true
	}
	defer db.Close()
	damaged := false
	for k, v := range want {
		got, err := db.Get([]byte(k))
		switch {
		case err == nil && string(got) != v:
			t.Fatalf("%s: get %s: wrong value", what, k)
		case err != nil && !errors.Is(err, lsm.ErrCorrupt):
			t.Fatalf("%s: get %s: %v does not match ErrCorrupt", what, k, err)
		case err != nil:
			damaged = true
		}
	}
	it := db.NewIter(nil)
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if v, ok := want[string(it.Key())]; !ok || v != string(it.Value()) {
			t.Fatalf("%s: scan returned wrong entry %q", what, it.Key())
		}
		n++
	}
	if err := it.Error(); err != nil {
		if !errors.Is(err, lsm.ErrCorrupt) {
			t.Fatalf("%s: scan: %v does not match ErrCorrupt", what, err)
		}
		damaged = true
	} else if n != len(want) {
		t.Fatalf("%s: scan saw %d of %d keys without an error", what, n, len(want))
	}
	it.Close()
	return damaged
}

func TestCorruption(t *testing.T) {
	base, opts, want := populated(t)
	names, err := base.List("/db")
	if err != nil {
		t.Fatal(err)
	}
	if checkCorrupted(t, base.CrashClone(), opts, want, "clean") {
		t.Fatal("the undamaged copy is reported as corrupt") // else every later check would pass
	}
	seed := envSeed(t)
	rng := rand.New(rand.NewPCG(seed, 3))
	for _, name := range names {
		if name == "LOCK" || name == "journal" {
			continue
		}
		fi, err := base.Stat("/db/" + name)
		if err != nil {
			t.Fatal(err)
		}
		size := fi.Size()
		positions := []int64{}
		if size <= 512 {
			for i := int64(0); i < size; i++ {
				positions = append(positions, i)
			}
		} else {
			for i := 0; i < 150; i++ {
				positions = append(positions, rng.Int64N(size))
			}
			for i := int64(1); i <= 64 && i <= size; i++ {
				positions = append(positions, size-i) // the footer
			}
		}
		detected := 0
		for _, off := range positions {
			fs := base.CrashClone()
			flipByte(t, fs, "/db/"+name, off, byte(1<<rng.IntN(8)))
			if checkCorrupted(t, fs, opts, want, fmt.Sprintf("%s flipped at %d", name, off)) {
				detected++
			}
		}
		t.Logf("%s (%d bytes): %d flips, %d reported as corruption, the rest read back correctly", name, size, len(positions), detected)
	}
}

// TestFailedOpenWritesNothing: an Open that fails on a damaged table or an
// unformatted directory leaves every file as it was.
func TestFailedOpenWritesNothing(t *testing.T) {
	snapshot := func(fs *vfs.MemFS) string { return fs.String() }

	empty := vfs.NewMem()
	empty.MkdirAll("/x")
	before := snapshot(empty)
	if _, err := lsm.Open("/x", &lsm.Options{FS: empty}); !errors.Is(err, lsm.ErrNotFormatted) {
		t.Fatalf("open of an empty directory: %v", err)
	}
	if after := snapshot(empty); after != before {
		t.Fatalf("open of an empty directory changed it:\n%s", after)
	}

	base, opts, _ := populated(t)
	fs := base.CrashClone()
	names, _ := fs.List("/db")
	var table string
	for _, n := range names {
		if strings.HasSuffix(n, ".sst") {
			table = "/db/" + n
		}
	}
	fi, _ := fs.Stat(table)
	flipByte(t, fs, table, fi.Size()-10, 0xff) // the footer's magic
	before = snapshot(fs)
	o := *opts
	o.FS = fs
	if _, err := lsm.Open("/db", &o); !errors.Is(err, lsm.ErrCorrupt) {
		t.Fatalf("open with a damaged table: %v", err)
	}
	if after := snapshot(fs); after != before {
		t.Fatalf("a failed open changed the directory:\nbefore\n%s\nafter\n%s", before, after)
	}
}

// envSeed returns a random seed, or LSMFS_SEED's, and logs how to replay it.
func envSeed(t testing.TB) uint64 {
	t.Helper()
	seed := rand.Uint64()
	if s := os.Getenv("LSMFS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LSMFS_SEED: %v", err)
		}
		seed = n
	}
	t.Logf("seed %d (replay with LSMFS_SEED=%d)", seed, seed)
	return seed
}
