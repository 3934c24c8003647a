package fs_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestNoSpaceModel: README "A write(2) that fails (ENOSPC, EIO) has no
// effect ... what earlier writes put in the file's buffer stays there for
// the next flush", against a model, while the data device refuses random
// writes of value-log segments and tables with ENOSPC (also short ones).
// Writes, overwrites of whole blocks of files that store every byte (the
// flush that skips lookups), truncates, punched holes, zeroed and
// reserved ranges, copy_file_range, flushes and fsyncs either succeed or
// fail with ENOSPC and change nothing a read or getattr sees; the engine
// never fails. After the injection stops, every file is
// fsynced and must read as the model, also after a power loss.
func TestNoSpaceModel(t *testing.T) {
	base := testSeed(t)
	for round := 0; round < 8; round++ {
		seed := base + uint64(round)
		t.Run(fmt.Sprint(seed), func(t *testing.T) { noSpaceModel(t, seed) })
	}
}

func noSpaceModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5bace))
	mem := vfs.NewMem()
	o := csEngineOptions(nil)
	age := []time.Duration{-1, 50 * time.Microsecond}[rng.IntN(2)]
	// With 256 KiB buffers an fsync's batch can pass the 64 KiB that a
	// synchronous batch keeps inline, and then its values go to the value
	// log too.
	buf := []int{16 << 10, 256 << 10}[rng.IntN(2)]
	e, efs := faultEnvOpts(t, o, mem, fs.Options{WriteBufferSize: buf, FlushAge: age})
	type file struct {
		ino, fh uint64
		data    []byte
	}
	var files []*file
	for i := 0; i < 3; i++ {
		ino, fh := e.mustCreate(1, fmt.Sprint("f", i))
		files = append(files, &file{ino: ino, fh: fh})
	}
	p := []float64{0.05, 0.2, 0.5}[rng.IntN(3)]
	efs.SetInjector(randomNoSpace(seed, p))

	stats := map[string]int{}
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: %s; last ops %v", seed, fmt.Sprintf(format, args...), log[max(0, len(log)-10):])
	}
	// ok checks an op's errno: 0 or ENOSPC, never EIO (the engine must not
	// fail); it reports whether the op took effect.
	ok := func(what, detail string, errno syscall.Errno) bool {
		t.Helper()
		log = append(log, fmt.Sprintf("%s %s=%v", what, detail, errno))
		switch errno {
		case 0:
			stats[what]++
			return true
		case syscall.ENOSPC:
			stats[what+" ENOSPC"]++
			return false
		}
		fail("%s: errno %v; want 0 or ENOSPC (engine: %q)", what, errno, e.db.Metrics().BackgroundError)
		return false
	}
	grow := func(f *file, n int) {
		if n > len(f.data) {
			f.data = append(f.data, make([]byte, n-len(f.data))...)
		}
	}
	for step := 0; step < 400; step++ {
		f := files[rng.IntN(len(files))]
		switch op := rng.IntN(17); {
		case op < 4:
			off := rng.IntN(12 * bs)
			data := pattern(1+rng.IntN(2*bs), byte(step))
			if ok("write", fmt.Sprintf("%d@%d of %d", len(data), off, f.ino), e.write(f.ino, f.fh, uint64(off), data)) {
				grow(f, off+len(data))
				copy(f.data[off:], data)
			}
		case op < 7:
			// Whole blocks over the stored ones (appending where the file
			// is shorter): the flush of a file storing every byte skips
			// the lookups of the blocks it replaces.
			first := rng.IntN(len(f.data)/bs + 1)
			n := 1 + rng.IntN(4)
			off := first * bs
			data := pattern(n*bs, byte(step))
			if ok("write", fmt.Sprintf("%d@%d of %d", len(data), off, f.ino), e.write(f.ino, f.fh, uint64(off), data)) {
				grow(f, off+len(data))
				copy(f.data[off:], data)
			}
		case op < 8:
			size := rng.IntN(12 * bs)
			if ok("truncate", fmt.Sprintf("%d of %d", size, f.ino), e.truncate(f.ino, uint64(size))) {
				if size < len(f.data) {
					f.data = f.data[:size]
				} else {
					grow(f, size)
				}
			}
		case op < 9:
			off, n := rng.IntN(12*bs), 1+rng.IntN(3*bs)
			if ok("punch", fmt.Sprintf("%d@%d of %d", n, off, f.ino), e.fallocate(f.ino, f.fh, uint64(off), uint64(n), 3)) && off < len(f.data) {
				clear(f.data[off:min(off+n, len(f.data))])
			}
		case op < 10:
			// Zero a range (keeping the size or not), or reserve one.
			off, n := rng.IntN(12*bs), 1+rng.IntN(3*bs)
			mode := []uint32{0x10, 0x11, 0, 1}[rng.IntN(4)] // ZERO_RANGE, KEEP_SIZE
			if ok("fallocate", fmt.Sprintf("mode %#x %d@%d of %d", mode, n, off, f.ino), e.fallocate(f.ino, f.fh, uint64(off), uint64(n), mode)) {
				if mode&0x10 != 0 && off < len(f.data) {
					clear(f.data[off:min(off+n, len(f.data))])
				}
				if mode&1 == 0 {
					grow(f, off+n)
				}
			}
		case op < 11:
			// copy_file_range from another file (the kernel clips the
			// length to the source's size).
			src := files[rng.IntN(len(files))]
			if src == f {
				break
			}
			soff := rng.IntN(len(src.data) + 1)
			n := min(rng.IntN(3*bs), len(src.data)-soff)
			dst := rng.IntN(12 * bs)
			in := fuse.CopyFileRangeIn{InHeader: e.hdr(src.ino), FhIn: src.fh, OffIn: uint64(soff),
				NodeIdOut: f.ino, FhOut: f.fh, OffOut: uint64(dst), Len: uint64(n)}
			got, st := e.raw.CopyFileRange(nil, &in)
			if ok("copy", fmt.Sprintf("%d@%d of %d to %d of %d", n, soff, src.ino, dst, f.ino), errno(st)) && n > 0 {
				if int(got) != n {
					fail("copy_file_range copied %d, want %d", got, n)
				}
				grow(f, dst+n)
				copy(f.data[dst:], src.data[soff:soff+n])
			}
		case op < 12:
			ok("flush", fmt.Sprint(f.ino), e.flush(f.ino, f.fh))
		case op < 14:
			ok("fsync", fmt.Sprint(f.ino), e.fsync(f.ino, f.fh))
		default:
			off := rng.IntN(len(f.data) + 1)
			n := rng.IntN(3 * bs)
			got, errno := e.read(f.ino, f.fh, uint64(off), n)
			if errno != 0 {
				fail("read %d@%d: %v", n, off, errno)
			}
			if want := f.data[off:min(off+n, len(f.data))]; !bytes.Equal(got, want) {
				fail("read %d@%d of ino %d: differs from the model", n, off, f.ino)
			}
			log = append(log, fmt.Sprintf("read %d@%d of %d", n, off, f.ino))
		}
		if a := e.attr(f.ino); a.Size != uint64(len(f.data)) {
			fail("ino %d: size %d, model %d", f.ino, a.Size, len(f.data))
		}
	}
	efs.Enable(false)
	stats["injected"] = int(efs.Injected())
	if stats["injected"] == 0 {
		t.Fatalf("seed %d: no write failed", seed)
	}
	// Flushes that failed are retried after a backoff (up to 2 s), and
	// writes that need one fail until then: a flush now (as a reclaim
	// pass or Close does) retries at once.
	if err := e.db.Flush(); err != nil {
		fail("flush after the injection: %v", err)
	}
	for _, f := range files {
		wantErr(t, "fsync", e.fsync(f.ino, f.fh), 0)
		if got := e.mustRead(f.ino, f.fh, 0, len(f.data)+10); !bytes.Equal(got, f.data) {
			fail("ino %d after the injection: differs from the model", f.ino)
		}
	}
	c := remountAfterCrash(t, mem, *csEngineOptions(nil))
	for i, f := range files {
		ino := c.mustLookup(1, fmt.Sprint("f", i))
		fh := c.mustOpen(ino, syscall.O_RDONLY)
		if got := c.mustRead(ino, fh, 0, len(f.data)+10); !bytes.Equal(got, f.data) {
			fail("f%d after a power loss: %d bytes, differs from the model (%d bytes)", i, len(got), len(f.data))
		}
		c.release(ino, fh)
	}
	t.Logf("p %.2f, flush age %v, buffer %d: %v", p, age, buf, stats)
}

// randomNoSpace fails a share p of the writes to value-log segments and
// tables with ENOSPC, half of them short, drawn from seed. It is safe for
// the concurrent calls of background flushes.
func randomNoSpace(seed uint64, p float64) vfs.Injector {
	var mu sync.Mutex
	draw := rand.New(rand.NewPCG(seed, 7))
	return vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind != vfs.OpWrite || !strings.HasSuffix(op.Path, ".vlog") && !strings.HasSuffix(op.Path, ".sst") {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if draw.Float64() >= p {
			return nil
		}
		return []error{vfs.ENOSPC, vfs.ShortENOSPC}[draw.IntN(2)]
	})
}
