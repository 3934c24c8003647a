package fs_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
)

// TestConcurrentOps runs random operations from several goroutines on a
// small shared tree (names collide on purpose, directories move in and out
// of each other), then checks the filesystem. Under -race it also checks the
// locking; a lock-order bug shows up as a hang.
func TestConcurrentOps(t *testing.T) {
	seed := testSeed(t)
	e := newEnv(t, fs.Options{WriteBufferSize: 16 << 10}, fs.FormatOptions{BlockSize: bs})
	dirs := []uint64{1, e.mustMkdir(1, "d1"), e.mustMkdir(1, "d2")}
	names := []string{"a", "b", "c", "d"}
	const workers, steps = 6, 400
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			h := func(ino uint64) fuse.InHeader { return fuse.InHeader{NodeId: ino} }
			for i := 0; i < steps; i++ {
				dir := dirs[rng.IntN(len(dirs))]
				name := names[rng.IntN(len(names))]
				var st fuse.Status
				switch rng.IntN(10) {
				case 0, 1:
					in := fuse.CreateIn{InHeader: h(dir), Mode: 0o644, Flags: syscall.O_RDWR}
					var out fuse.CreateOut
					if st = e.raw.Create(nil, &in, name, &out); st == fuse.OK {
						data := pattern(rng.IntN(3*bs), byte(i))
						win := fuse.WriteIn{InHeader: h(out.NodeId), Fh: out.Fh, Offset: uint64(rng.IntN(bs))}
						e.raw.Write(nil, &win, data)
						rin := fuse.ReadIn{InHeader: h(out.NodeId), Fh: out.Fh, Size: 2 * bs}
						e.raw.Read(nil, &rin, make([]byte, 2*bs))
						if rng.IntN(3) == 0 {
							hd := h(dir)
							e.raw.Unlink(nil, &hd, name) // unlink while open
						}
						e.raw.Release(nil, &fuse.ReleaseIn{InHeader: h(out.NodeId), Fh: out.Fh})
					}
				case 2:
					hd := h(dir)
					st = e.raw.Unlink(nil, &hd, name)
				case 3:
					in := fuse.MkdirIn{InHeader: h(dir), Mode: 0o755}
					st = e.raw.Mkdir(nil, &in, name, &fuse.EntryOut{})
				case 4:
					hd := h(dir)
					st = e.raw.Rmdir(nil, &hd, name)
				case 5, 6:
					in := fuse.RenameIn{InHeader: h(dir), Newdir: dirs[rng.IntN(len(dirs))], Flags: uint32(rng.IntN(3))}
					st = e.raw.Rename(nil, &in, name, names[rng.IntN(len(names))])
				case 7:
					hd := h(dir)
					var out fuse.EntryOut
					if st = e.raw.Lookup(nil, &hd, name, &out); st == fuse.OK && out.NodeId != 0 {
						in := fuse.LinkIn{InHeader: h(dirs[rng.IntN(len(dirs))]), Oldnodeid: out.NodeId}
						st = e.raw.Link(nil, &in, names[rng.IntN(len(names))], &fuse.EntryOut{})
						xin := fuse.SetXAttrIn{InHeader: h(out.NodeId)}
						e.raw.SetXAttr(nil, &xin, "user.x", []byte("v"))
					}
				case 8:
					in := fuse.OpenIn{InHeader: h(dir)}
					var out fuse.OpenOut
					if st = e.raw.OpenDir(nil, &in, &out); st == fuse.OK {
						rin := fuse.ReadIn{InHeader: h(dir), Fh: out.Fh, Size: 4096}
						e.raw.ReadDirPlus(nil, &rin, fuse.NewDirEntryList(make([]byte, 4096), 0))
						e.raw.ReleaseDir(&fuse.ReleaseIn{InHeader: h(dir), Fh: out.Fh})
					}
				case 9:
					in := fuse.GetAttrIn{InHeader: h(dir)}
					st = e.raw.GetAttr(nil, &in, &fuse.AttrOut{})
				}
				if st == fuse.EIO {
					errs <- fmt.Errorf("worker %d step %d: EIO", w, i)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("seed %d: %v", seed, err)
	}
	r := mustCheck(t, e)
	t.Logf("%s", r)
}
