package fs_test

import (
	"bytes"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm/vfs"
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
	e.remountMatches(t, seed, ino, model)
}

// writev writes data, in pieces, as one WRITE request.
func (e *env) writev(ino, fh, off uint64, pieces [][]byte) syscall.Errno {
	n := 0
	for _, p := range pieces {
		n += len(p)
	}
	in := fuse.WriteIn{InHeader: e.hdr(ino), Fh: fh, Offset: off, Size: uint32(n)}
	got, st := e.raw.Writev(nil, &in, pieces)
	if st == fuse.OK && int(got) != n {
		e.t.Fatalf("short write: %d of %d", got, n)
	}
	return errno(st)
}

// scribble overwrites b, as go-fuse reuses a request's buffer once its
// WRITE is answered.
func scribble(b []byte) {
	for i := range b {
		b[i] = 0xee
	}
}

// TestLentWrites: a write of 1 MiB or more that ends at a block boundary,
// or a synchronous one, to a clean buffer lends its whole blocks to the
// buffer instead of copying them (writeLocked), and is flushed before it
// returns. Random such writes
// (aligned and not, over stored blocks and past the end, their data in one
// to three pieces) each have their bytes overwritten once answered: no read
// then, nor after a remount, may differ from the model. Seeded: LSMFS_SEED
// replays.
func TestLentWrites(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 12))
	e := newFileEnv(t, fs.Options{})
	ino, fh := e.mustCreate(1, "f")
	sfh := e.mustOpen(ino, syscall.O_WRONLY|syscall.O_SYNC)
	var model []byte
	for step := 0; step < 40; step++ {
		h, n := fh, 1<<20+rng.IntN(64<<10)
		switch rng.IntN(4) {
		case 0: // synchronous: lent whatever its size
			h, n = sfh, 1+rng.IntN(5*bs)
			if rng.IntN(2) == 0 {
				n += 1 << 20
			}
		case 1: // ends inside a block: buffered, copied
		default:
			n = n / bs * bs
		}
		off := rng.IntN(len(model) + bs)
		if rng.IntN(2) == 0 {
			off = off / bs * bs
			n = max(bs, n/bs*bs)
		}
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		var pieces [][]byte
		for rest := data; len(rest) > 0; {
			k := len(rest)
			if len(pieces) < 2 && rng.IntN(2) == 0 {
				k = rng.IntN(len(rest) + 1)
			}
			pieces, rest = append(pieces, rest[:k]), rest[k:]
		}
		if errno := e.writev(ino, h, uint64(off), pieces); errno != 0 {
			t.Fatalf("seed %d step %d: write %d at %d: %v", seed, step, n, off, errno)
		}
		if end := off + n; end > len(model) {
			model = append(model, make([]byte, end-len(model))...)
		}
		copy(model[off:], data)
		scribble(data)
		roff := rng.IntN(len(model))
		got := e.mustRead(ino, fh, uint64(roff), 2<<20)
		if want := model[roff:min(roff+2<<20, len(model))]; !bytes.Equal(got, want) {
			t.Fatalf("seed %d step %d: read at %d differs from the model", seed, step, roff)
		}
	}
	e.release(ino, sfh)
	e.release(ino, fh)
	e.check()
	e.remountMatches(t, seed, ino, model)
}

// TestFailedLentWrite: a lent write that fails (no space) leaves the file as
// it was, and its blocks, the writer's bytes, are not kept: a later write
// that the buffer copies must not land in them.
func TestFailedLentWrite(t *testing.T) {
	mem := vfs.NewMem()
	o := engineOptions(nil)
	o.SpaceReserve = 8 << 20
	e, _ := faultEnvOpts(t, o, mem, fs.Options{})
	ino, fh := e.mustCreate(1, "a")
	first := pattern(3*bs, 1)
	e.mustWrite(ino, fh, 0, first)
	if errno := e.fsync(ino, fh); errno != 0 {
		t.Fatal(errno)
	}
	fillDevice(t, mem)
	lent := pattern(1<<20, 2)
	if errno := e.write(ino, fh, 3*bs, lent); errno != syscall.ENOSPC {
		t.Fatalf("a lent write on a full device: %v, want ENOSPC", errno)
	}
	unfillDevice(mem)
	scribble(lent)
	// Small writes, copied into pooled block buffers (a buffer's worth).
	var want []byte
	for i := range 4 {
		small := pattern(bs, byte(3+i))
		e.mustWrite(ino, fh, uint64(i*bs), small)
		want = append(want, small...)
	}
	scribble(lent)
	if got := e.mustRead(ino, fh, 0, 8*bs); !bytes.Equal(got, want) {
		t.Fatalf("read after the failed lent write: %d bytes, differs", len(got))
	}
	if errno := e.fsync(ino, fh); errno != 0 {
		t.Fatal(errno)
	}
	if got := e.mustRead(ino, fh, 0, 8*bs); !bytes.Equal(got, want) {
		t.Fatalf("read after fsync: %d bytes, differs", len(got))
	}
	e.check()
}

// remountMatches remounts and checks that file ino reads as model and that
// Check is clean.
func (e *env) remountMatches(t *testing.T, seed, ino uint64, model []byte) {
	t.Helper()
	e.remount()
	fh := e.mustOpen(ino, 0)
	if got := e.mustRead(ino, fh, 0, len(model)+1); !bytes.Equal(got, model) {
		t.Fatalf("seed %d: the file differs from the model after a remount", seed)
	}
	e.release(ino, fh)
	e.check()
}
