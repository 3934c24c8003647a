package fs_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestConcurrentCreateWrite: 16 goroutines, each in its own directory,
// create files and write them at once (what `cp` and untar do), append,
// fsync and unlink, while the engine rotates, flushes and compacts
// underneath: every operation succeeds, and every surviving file reads back
// what was written, also after a remount, and the keyspace checks clean.
func TestConcurrentCreateWrite(t *testing.T) {
	dur := 3 * time.Second
	if d, err := time.ParseDuration(os.Getenv("LSMFS_CONCURRENT")); err == nil {
		dur = d
	}
	// The daemon's engine: the OS, a block cache, 4 KiB value threshold.
	dir := t.TempDir()
	o := &lsm.Options{FS: vfs.Default, UUID: testUUID, MemtableSize: 16 << 20, CacheSize: 64 << 20,
		Journal: lsm.JournalOptions{Size: 64 << 20}}
	if err := lsm.Format(dir, o); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Format(db, fs.FormatOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := fs.New(db, fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, db: db, fs: f, raw: f.Raw()}
	t.Cleanup(e.close)
	deadline := time.Now().Add(dur)
	type file struct {
		name string
		data []byte
	}
	const workers = 16
	dirs := make([]uint64, workers)
	kept := make([][]file, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		dir := e.mustMkdir(1, fmt.Sprintf("w%02d", w))
		dirs[w] = dir
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			var files []file
			defer func() { kept[w] = files }()
			for i := 0; time.Now().Before(deadline) && !t.Failed(); i++ {
				name := fmt.Sprintf("f%d", i)
				ino, fh, err := e.create(dir, name, 0o644, 1 /* O_WRONLY */)
				if err != 0 {
					t.Errorf("worker %d: create %s: %v", w, name, err)
					return
				}
				size := []int{100, 4000, 40000, 200000}[rng.IntN(4)]
				data := pattern(size, byte(w*31+i)) // not zeros: a hole would pass
				for off := 0; off < size; off += 128 << 10 {
					end := min(off+128<<10, size)
					if err := e.write(ino, fh, uint64(off), data[off:end]); err != 0 {
						t.Errorf("worker %d: write %s (ino %d) at %d: %v", w, name, ino, off, err)
						return
					}
				}
				if rng.IntN(8) == 0 {
					if err := e.fsync(ino, fh); err != 0 {
						t.Errorf("worker %d: fsync %s: %v", w, name, err)
						return
					}
				}
				e.release(ino, fh)
				files = append(files, file{name, data})
				if len(files) > 40 {
					k := rng.IntN(len(files))
					if err := e.unlink(dir, files[k].name); err != 0 {
						t.Errorf("worker %d: unlink %s: %v", w, files[k].name, err)
						return
					}
					files = append(files[:k], files[k+1:]...)
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	readBack := func(when string) {
		for w, files := range kept {
			for _, fl := range files {
				out, err := e.lookup(dirs[w], fl.name)
				if err != 0 {
					t.Fatalf("%s: lookup w%02d/%s: %v", when, w, fl.name, err)
				}
				fh := e.mustOpen(out.NodeId, 0 /* O_RDONLY */)
				got := e.mustRead(out.NodeId, fh, 0, len(fl.data)+1)
				e.release(out.NodeId, fh)
				if !bytes.Equal(got, fl.data) {
					t.Fatalf("%s: w%02d/%s: %d bytes read back, %d written (or other bytes)", when, w, fl.name, len(got), len(fl.data))
				}
			}
		}
	}
	readBack("after the run")
	e.check()
	if err := e.fs.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if e.db, err = lsm.Open(dir, o); err != nil {
		t.Fatal(err)
	}
	e.fs = nil
	e.open()
	readBack("after a remount")
	e.check()
}
