package sstable

import (
	"math/rand/v2"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

// TestCompareNext checks the shared-prefix comparison used by the data
// block check against CompareEncoded, on keys built to share prefixes and
// to differ only in their trailers.
func TestCompareNext(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randKey := func() []byte {
		u := make([]byte, rng.IntN(5))
		for i := range u {
			u[i] = "ab\x00\xff"[rng.IntN(4)]
		}
		seq := rng.Uint64N(4)
		if rng.IntN(4) == 0 {
			seq = base.MaxSeqNum - rng.Uint64N(2)
		}
		return base.MakeInternalKey(u, seq, base.Kind(rng.IntN(4))).Encode()
	}
	for range 200000 {
		a, b := randKey(), randKey()
		shared := 0
		for shared < len(a) && shared < len(b) && a[shared] == b[shared] {
			shared++
		}
		// The writer shares maximally; a reader must also accept less.
		shared -= rng.IntN(shared + 1)
		got, ok := compareNext(a, shared, b[shared:])
		if !ok {
			t.Fatalf("compareNext(%x, %d, %x) not ok", a, shared, b[shared:])
		}
		if want := base.CompareEncoded(a, b); got != want {
			t.Fatalf("compareNext(%x, %x, shared %d) = %d, want %d", a, b, shared, got, want)
		}
	}
	if _, ok := compareNext([]byte("12345678"), 2, []byte("x")); ok {
		t.Fatal("short key accepted")
	}
}
