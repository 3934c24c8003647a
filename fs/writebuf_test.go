package fs_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/lsmfs/lsmfs/fs"
)

// TestPartialBlockWrites writes random ranges (partial blocks, whole blocks,
// across block boundaries, some past the end) into a file whose blocks are
// stored, reading ranges back before any flush (the buffer then holds only
// the written spans of a block and merges the stored bytes on the fly),
// fsyncing now and then (which reads the stored blocks and merges), and
// compares every read with a byte-slice model; Check then verifies the
// stored-byte count. Seeded: LSMFS_SEED replays.
func TestPartialBlockWrites(t *testing.T) {
	const bs = 4096
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 11))
	e := newEnv(t, fs.Options{WriteBufferSize: 64 << 10}, fs.FormatOptions{BlockSize: bs})
	ino, fh := e.mustCreate(1, "f")
	model := make([]byte, 40*bs+123)
	for i := range model {
		model[i] = byte(rng.Uint32())
	}
	// A hole: blocks 10-12 are never stored.
	clear(model[10*bs : 13*bs])
	e.mustWrite(ino, fh, 0, model[:10*bs])
	e.mustWrite(ino, fh, 13*bs, model[13*bs:])
	if err := e.fsync(ino, fh); err != 0 {
		t.Fatal(err)
	}
	e.release(ino, fh)
	fh = e.mustOpen(ino, 2 /* O_RDWR */)
	for step := 0; step < 3000; step++ {
		switch r := rng.IntN(10); {
		case r < 6: // write
			off := rng.IntN(len(model) + bs)
			n := 1 + rng.IntN(3*bs)
			if rng.IntN(4) == 0 {
				off, n = off/bs*bs, bs // a whole block
			}
			data := make([]byte, n)
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			if end := off + n; end > len(model) {
				model = append(model, make([]byte, end-len(model))...)
			}
			copy(model[off:], data)
			e.mustWrite(ino, fh, uint64(off), data)
		case r < 9: // read
			off := rng.IntN(len(model))
			n := 1 + rng.IntN(3*bs)
			got := e.mustRead(ino, fh, uint64(off), n)
			want := model[off:min(off+n, len(model))]
			if !bytes.Equal(got, want) {
				t.Fatalf("seed %d step %d: read %d bytes at %d: differs from the model (got %d bytes)", seed, step, n, off, len(got))
			}
		default:
			if err := e.fsync(ino, fh); err != 0 {
				t.Fatal(err)
			}
		}
		if a := e.attr(ino); a.Size != uint64(len(model)) {
			t.Fatalf("step %d: size %d, model %d", step, a.Size, len(model))
		}
	}
	e.release(ino, fh)
	fh = e.mustOpen(ino, 0)
	if got := e.mustRead(ino, fh, 0, len(model)+1); !bytes.Equal(got, model) {
		t.Fatalf("seed %d: the file differs from the model after the last flush", seed)
	}
	e.release(ino, fh)
	e.check()
	e.remount()
	fh = e.mustOpen(ino, 0)
	if got := e.mustRead(ino, fh, 0, len(model)+1); !bytes.Equal(got, model) {
		t.Fatalf("seed %d: the file differs from the model after a remount", seed)
	}
	e.release(ino, fh)
	e.check()
}
