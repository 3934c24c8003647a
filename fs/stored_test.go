package fs_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lsmfs/lsmfs/fs"
)

// TestStoredUnderOverwrites: st_blocks (the inode's stored bytes) must
// follow a model of the file's block lengths through whole-block
// overwrites of a file without holes (whose old lengths the flush takes
// from the inode instead of reading them), of a file with holes or short
// blocks (which it must read), and through truncations and writes past the
// end that change which kind a file is. Each seed checks the contents, the
// st_blocks of every flush and, at the end, the whole filesystem (Check
// sums the blocks of each inode).
func TestStoredUnderOverwrites(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			e := newFileEnv(t, fs.Options{})
			rng := rand.New(rand.NewPCG(seed, 11))
			ino, fh := e.mustCreate(1, "f")
			var data []byte // the file's bytes
			var lens []int  // stored length of each block, 0 for none
			grow := func(n int) {
				for len(lens) < n {
					lens = append(lens, 0)
				}
			}
			write := func(off int, b []byte) {
				e.mustWrite(ino, fh, uint64(off), b)
				if end := off + len(b); end > len(data) {
					data = append(data, make([]byte, end-len(data))...)
				}
				copy(data[off:], b)
				for pos := off; pos < off+len(b); {
					idx, in := pos/bs, pos%bs
					n := min(bs-in, off+len(b)-pos)
					grow(idx + 1)
					lens[idx] = max(lens[idx], in+n)
					pos += n
				}
			}
			truncate := func(size int) {
				if err := e.truncate(ino, uint64(size)); err != 0 {
					t.Fatalf("truncate to %d: %v", size, err)
				}
				if size < len(data) {
					data = data[:size]
					for i := range lens {
						lens[i] = max(0, min(lens[i], size-i*bs))
					}
				} else {
					data = append(data, make([]byte, size-len(data))...)
				}
			}
			// A file without holes, its last block short.
			write(0, pattern(20*bs+700, byte(seed)))
			if err := e.fsync(ino, fh); err != 0 {
				t.Fatalf("fsync: %v", err)
			}
			// Whole blocks of it rewritten, the short last one too: no
			// stored block is looked up.
			before := e.fs.BaseReads()
			for _, idx := range []int{3, 7, 20, 3} {
				write(idx*bs, pattern(bs, byte(idx)))
			}
			if err := e.fsync(ino, fh); err != 0 {
				t.Fatalf("fsync: %v", err)
			}
			if n := e.fs.BaseReads() - before; n != 0 {
				t.Fatalf("rewriting whole blocks of a file without holes looked up %d stored blocks", n)
			}
			for step := range 300 {
				blocks := (len(data) + bs - 1) / bs
				switch r := rng.IntN(100); {
				case r < 50 && blocks > 0:
					// Whole blocks, some of them at the short last one.
					idx := rng.IntN(blocks)
					write(idx*bs, pattern(bs*(1+rng.IntN(3)), byte(step)))
				case r < 70:
					// Part of a block.
					off := rng.IntN(len(data) + 1)
					write(off, pattern(1+rng.IntN(bs), byte(step)))
				case r < 76:
					// Past the end: a hole.
					write(len(data)+rng.IntN(3*bs), pattern(1+rng.IntN(2*bs), byte(step)))
				case r < 82:
					truncate(rng.IntN(len(data) + 2*bs))
				case r < 88:
					// Fill every hole and short block: no holes again.
					for i := range lens {
						if end := min(len(data), (i+1)*bs); lens[i] < end-i*bs {
							write(i*bs+lens[i], pattern(end-i*bs-lens[i], byte(step)))
						}
					}
				default:
					if err := e.fsync(ino, fh); err != 0 {
						t.Fatalf("step %d: fsync: %v", step, err)
					}
					var stored uint64
					for _, l := range lens {
						stored += uint64(l)
					}
					if a := e.attr(ino); a.Size != uint64(len(data)) || a.Blocks != (stored+511)/512 {
						t.Fatalf("step %d: size %d, st_blocks %d; want %d and %d (%d bytes stored)", step, a.Size, a.Blocks, len(data), (stored+511)/512, stored)
					}
				}
			}
			e.release(ino, fh)
			fh = e.mustOpen(ino, 0)
			if got := e.mustRead(ino, fh, 0, len(data)+bs); !bytes.Equal(got, data) {
				t.Fatalf("contents differ (%d bytes read, %d written)", len(got), len(data))
			}
			e.release(ino, fh)
			e.check()
		})
	}
}
