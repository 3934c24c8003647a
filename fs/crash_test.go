package fs_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm"
)

// TestCrashRecovery runs seeded random operations, then simulates power loss
// (MemFS.CrashClone keeps only what was synced) and reopens the engine and
// the FS on the clone: New must succeed and reclaim orphans, Check must be
// clean, and every file fsynced and not touched since must hold exactly its
// fsynced bytes under its name. LSMFS_SEED=N replays one seed.
func TestCrashRecovery(t *testing.T) {
	seeds := []uint64{}
	if s := os.Getenv("LSMFS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, n)
	} else {
		for i := 0; i < 20; i++ {
			seeds = append(seeds, rand.Uint64())
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { crashOnce(t, seed) })
	}
}

type crashFile struct {
	ino    uint64
	fh     uint64 // 0: closed
	data   []byte // current contents
	synced []byte // contents at the last fsync
	stable bool   // fsynced and untouched since
	name   string
}

func crashOnce(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	e := newEnv(t, fs.Options{WriteBufferSize: 16 << 10}, fs.FormatOptions{BlockSize: bs})
	var files []*crashFile
	next := 0
	for step := 0; step < 200; step++ {
		switch op := rng.IntN(10); {
		case op < 2 || len(files) == 0:
			name := fmt.Sprint("f", next)
			next++
			flags := uint32(syscall.O_RDWR)
			if rng.IntN(5) == 0 {
				flags |= syscall.O_SYNC
			}
			ino, fh, err := e.create(1, name, 0o644, flags)
			if err != 0 {
				t.Fatalf("seed %d: create: %v", seed, err)
			}
			files = append(files, &crashFile{ino: ino, fh: fh, name: name})
		case op < 5:
			f := files[rng.IntN(len(files))]
			if f.fh == 0 {
				f.fh = e.mustOpen(f.ino, syscall.O_RDWR)
			}
			off := rng.IntN(len(f.data) + bs)
			data := pattern(1+rng.IntN(3*bs), byte(step))
			e.mustWrite(f.ino, f.fh, uint64(off), data)
			if end := off + len(data); end > len(f.data) {
				f.data = append(f.data, make([]byte, end-len(f.data))...)
			}
			copy(f.data[off:], data)
			f.stable = false
		case op < 7:
			f := files[rng.IntN(len(files))]
			if f.fh == 0 {
				f.fh = e.mustOpen(f.ino, syscall.O_RDWR)
			}
			wantErr(t, "fsync", e.fsync(f.ino, f.fh), 0)
			f.synced, f.stable = bytes.Clone(f.data), true
		case op < 8:
			f := files[rng.IntN(len(files))]
			if f.fh != 0 {
				e.release(f.ino, f.fh)
				f.fh = 0
			}
		case op < 9:
			i := rng.IntN(len(files))
			f := files[i]
			wantErr(t, "unlink", e.unlink(1, f.name), 0)
			files = append(files[:i], files[i+1:]...)
			if f.fh != 0 && rng.IntN(2) == 0 {
				continue // an orphan left open across the crash
			}
			if f.fh != 0 {
				e.release(f.ino, f.fh)
			}
		default:
			f := files[rng.IntN(len(files))]
			name := fmt.Sprint("f", next)
			next++
			wantErr(t, "rename", e.rename(1, f.name, 1, name, 0), 0)
			f.name, f.stable = name, false
		}
	}

	// Power loss: only what was synced survives.
	clone := e.mem.CrashClone()
	c := &env{t: t, mem: clone, clock: e.clock, opts: e.opts}
	db, err := lsm.Open(testDir, engineOptions(clone))
	if err != nil {
		t.Fatalf("seed %d: reopen after crash: %v", seed, err)
	}
	c.db = db
	c.open()
	t.Cleanup(c.close)
	r := mustCheck(t, c)
	if r.Orphans != 0 {
		t.Fatalf("seed %d: orphans left after New: %s", seed, r)
	}
	for _, f := range files {
		if !f.stable {
			continue
		}
		out, err := c.lookup(1, f.name)
		if err != 0 || out.NodeId != f.ino {
			t.Fatalf("seed %d: fsynced %s (ino %d) after crash: ino %d, %v", seed, f.name, f.ino, out.NodeId, err)
		}
		fh := c.mustOpen(f.ino, syscall.O_RDONLY)
		got := c.mustRead(f.ino, fh, 0, len(f.synced)+bs)
		c.release(f.ino, fh)
		if !bytes.Equal(got, f.synced) {
			t.Fatalf("seed %d: %s after crash: %d bytes, fsynced %d (or different bytes)", seed, f.name, len(got), len(f.synced))
		}
	}
}
