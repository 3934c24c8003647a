package tests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestNoSpaceModelMounted: on a nearly full data device, through the
// kernel, writes (through read-write handles, which the kernel caches, and
// write-only ones, which it does not), truncates, punched holes and fsyncs
// either succeed or fail with ENOSPC, and one that fails changes nothing
// any read sees (README "Durability"); filler files come and go so that
// space runs out and comes back. Every read is compared with a model, also
// after a remount, and fsck is clean.
func TestNoSpaceModelMounted(t *testing.T) {
	f, _ := newSmallFS(t, "96m")
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0xf11))

	type file struct {
		path   string
		rw, wo *os.File
		data   []byte
	}
	var files []*file
	for i := range 3 {
		p := f.path(fmt.Sprint("m", i))
		rw, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		wo, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rw.Close(); wo.Close() })
		files = append(files, &file{path: p, rw: rw, wo: wo})
	}
	// Fill the device with 1 MiB files until a write gets ENOSPC.
	var fillers []string
	fill := func() {
		for i := 0; i < 200; i++ {
			p := f.path(fmt.Sprint("filler", rng.Uint32()))
			err := os.WriteFile(p, content(int64(i), 1<<20), 0o644)
			if err == nil {
				fillers = append(fillers, p)
				continue
			}
			os.Remove(p)
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling: %v%s", err, f.logTail())
			}
			return
		}
	}
	fill()
	if len(fillers) < 10 {
		t.Fatalf("only %d filler files before ENOSPC", len(fillers))
	}

	stats := map[string]int{}
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: %s; last ops %v%s", seed, fmt.Sprintf(format, args...), log[max(0, len(log)-10):], f.logTail())
	}
	ok := func(what, detail string, err error) bool {
		t.Helper()
		log = append(log, fmt.Sprintf("%s %s: %v", what, detail, err))
		switch {
		case err == nil:
			stats[what]++
			return true
		case errors.Is(err, syscall.ENOSPC):
			stats[what+" ENOSPC"]++
			return false
		}
		fail("%s %s: %v, want success or ENOSPC", what, detail, err)
		return false
	}
	grow := func(fl *file, n int) {
		if n > len(fl.data) {
			fl.data = append(fl.data, make([]byte, n-len(fl.data))...)
		}
	}
	const span = 1 << 20
	steps := 600
	if long() {
		steps = 6000
	}
	for step := 0; step < steps; step++ {
		fl := files[rng.IntN(len(files))]
		switch op := rng.IntN(20); {
		case op < 7:
			off := rng.IntN(span)
			data := content(int64(step)+1000, 8*(1+rng.IntN(8<<10/8))) // up to 64 KiB, one request
			h, how := fl.rw, "rw"
			if rng.IntN(2) == 0 {
				h, how = fl.wo, "wo"
			}
			n, err := h.WriteAt(data, int64(off))
			if err != nil && n != 0 {
				fail("write %d@%d (%s): %d bytes written and %v", len(data), off, how, n, err)
			}
			if ok("write", fmt.Sprintf("%d@%d %s", len(data), off, how), err) {
				grow(fl, off+len(data))
				copy(fl.data[off:], data)
			}
		case op < 9:
			size := rng.IntN(span)
			if ok("truncate", fmt.Sprint(size), fl.rw.Truncate(int64(size))) {
				if size < len(fl.data) {
					fl.data = fl.data[:size]
				} else {
					grow(fl, size)
				}
			}
		case op < 10:
			off, n := rng.IntN(span), 1+rng.IntN(64<<10)
			err := unix.Fallocate(int(fl.rw.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(off), int64(n))
			if ok("punch", fmt.Sprintf("%d@%d", n, off), err) && off < len(fl.data) {
				clear(fl.data[off:min(off+n, len(fl.data))])
			}
		case op < 12:
			ok("fsync", fl.path, fl.rw.Sync())
		case op < 13:
			// Space comes back (the engine accepts writes again once
			// statfs shows more than its reserve), or runs out again.
			if len(fillers) > 0 && rng.IntN(3) > 0 {
				for range min(len(fillers), 2+rng.IntN(7)) {
					i := rng.IntN(len(fillers))
					if err := os.Remove(fillers[i]); err != nil {
						fail("rm %s: %v", fillers[i], err)
					}
					fillers = append(fillers[:i], fillers[i+1:]...)
					stats["rm filler"]++
				}
				// The space comes back once the engine has turned the
				// deletions into free space (a reclaim pass): wait for it.
				probe := f.path("probe")
				for try := 0; ; try++ {
					err := writeFileSync(probe, content(9, 4096))
					if err == nil {
						stats["space back"]++
						break
					}
					if !errors.Is(err, syscall.ENOSPC) {
						fail("probe: %v", err)
					}
					if try == 50 {
						stats["space not back"]++
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
			} else {
				fill()
			}
		default:
			off := rng.IntN(len(fl.data) + 1)
			n := rng.IntN(64 << 10)
			got := make([]byte, n)
			m, err := fl.rw.ReadAt(got, int64(off))
			if err != nil && !errors.Is(err, io.EOF) {
				fail("read %d@%d: %v", n, off, err)
			}
			if want := fl.data[off:min(off+n, len(fl.data))]; !bytes.Equal(got[:m], want) {
				fail("read %d@%d of %s: %d bytes differ from the model's %d", n, off, fl.path, m, len(want))
			}
			log = append(log, fmt.Sprintf("read %d@%d", n, off))
		}
		if st, err := fl.rw.Stat(); err != nil || st.Size() != int64(len(fl.data)) {
			fail("%s: size %d (%v), model %d", fl.path, st.Size(), err, len(fl.data))
		}
	}
	// Room for the last fsyncs, then everything must be there.
	for _, p := range fillers {
		os.Remove(p)
	}
	for _, fl := range files {
		var err error
		for try := 0; try < 50; try++ { // a failed flush is retried after a backoff
			if err = fl.rw.Sync(); !errors.Is(err, syscall.ENOSPC) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			fail("fsync %s with space again: %v", fl.path, err)
		}
		fl.rw.Close()
		fl.wo.Close()
	}
	f.remount()
	for _, fl := range files {
		got, err := os.ReadFile(fl.path)
		if err != nil || !bytes.Equal(got, fl.data) {
			fail("%s after a remount: %d bytes (%v), differ from the model's %d", fl.path, len(got), err, len(fl.data))
		}
	}
	t.Logf("seed %d: %v", seed, stats)
}

// writeFileSync writes data to a new file p and fsyncs it.
func writeFileSync(p string, data []byte) error {
	fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = fh.Write(data)
	return errors.Join(err, fh.Sync(), fh.Close())
}
