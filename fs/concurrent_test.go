package fs_test

import (
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
// underneath: every operation succeeds and reads back what was written.
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
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		dir := e.mustMkdir(1, fmt.Sprintf("w%02d", w))
		_ = dir
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			type file struct {
				name string
				size int
			}
			var files []file
			for i := 0; time.Now().Before(deadline) && !t.Failed(); i++ {
				name := fmt.Sprintf("f%d", i)
				ino, fh, err := e.create(dir, name, 0o644, 1 /* O_WRONLY */)
				if err != 0 {
					t.Errorf("worker %d: create %s: %v", w, name, err)
					return
				}
				size := []int{100, 4000, 40000, 200000}[rng.IntN(4)]
				data := make([]byte, size)
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
				files = append(files, file{name, size})
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
}
