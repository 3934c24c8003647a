package vfs

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWritevAllResumes: writevAll, given a pwritev that writes a random
// number of bytes at a time (cutting buffers in the middle), is interrupted
// (EINTR) now and then, and never takes more than iovMax buffers, writes
// exactly the joined buffers at the offset; a pwritev that writes nothing
// or fails ends it with the bytes written so far.
func TestWritevAllResumes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 50; round++ {
		var bufs [][]byte
		var want []byte
		for i := range 1 + rng.IntN(3000) {
			b := bytes.Repeat([]byte{byte(i + round)}, rng.IntN(300))
			bufs = append(bufs, b)
			want = append(want, b...)
		}
		const base = 1000
		file := make([]byte, base+len(want))
		calls := 0
		n, err := writevAll(bufs, base, func(b [][]byte, off int64) (int, error) {
			calls++
			if len(b) > iovMax {
				t.Fatalf("round %d: %d buffers in one call", round, len(b))
			}
			if rng.IntN(10) == 0 {
				return 0, unix.EINTR
			}
			limit := 1 + rng.IntN(2000)
			w := 0
			for _, p := range b {
				k := min(len(p), limit-w)
				copy(file[off+int64(w):], p[:k])
				w += k
				if w == limit {
					break
				}
			}
			return w, nil
		})
		if err != nil || n != len(want) {
			t.Fatalf("round %d: wrote %d, %v; want %d", round, n, err, len(want))
		}
		if !bytes.Equal(file[base:], want) {
			t.Fatalf("round %d: the bytes written differ from the joined buffers (%d calls)", round, calls)
		}
	}
	bufs := [][]byte{make([]byte, 100), make([]byte, 100)}
	calls := 0
	n, err := writevAll(bufs, 0, func(b [][]byte, off int64) (int, error) {
		calls++
		if calls == 1 {
			return 150, nil
		}
		return 0, nil
	})
	if n != 150 || !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("a write of nothing: %d, %v; want 150, io.ErrShortWrite", n, err)
	}
	n, err = writevAll([][]byte{make([]byte, 10)}, 0, func([][]byte, int64) (int, error) { return 0, unix.ENOSPC })
	if n != 0 || !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("a failed write: %d, %v; want 0, ENOSPC", n, err)
	}
}
