package rangedel_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/rangedel"
)

func TestFragmentMatchesNaive(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for iter := 0; iter < 500; iter++ {
		n := rng.IntN(8)
		var ts []base.RangeTombstone
		for i := 0; i < n; i++ {
			a, b := rng.IntN(20), rng.IntN(20)
			if a > b {
				a, b = b, a
			}
			ts = append(ts, base.RangeTombstone{Start: key(a), End: key(b), Seq: uint64(rng.IntN(10) + 1)})
		}
		orig := append([]base.RangeTombstone(nil), ts...)
		frags := rangedel.Fragment(ts)
		// Disjoint-or-identical and sorted.
		for i := 1; i < len(frags); i++ {
			p, c := frags[i-1], frags[i]
			same := string(p.Start) == string(c.Start) && string(p.End) == string(c.End)
			if same && p.Seq <= c.Seq {
				t.Fatalf("iter %d: seqs not descending in %v", iter, frags)
			}
			if !same && string(p.End) > string(c.Start) {
				t.Fatalf("iter %d: overlapping fragments %v", iter, frags)
			}
		}
		for k := 0; k < 21; k++ {
			for snap := uint64(0); snap <= 11; snap++ {
				want := uint64(0)
				for _, t := range orig {
					if t.Seq <= snap && string(t.Start) <= string(key(k)) && string(key(k)) < string(t.End) && t.Seq > want {
						want = t.Seq
					}
				}
				if got := rangedel.MaxCovering(frags, key(k), snap); got != want {
					t.Fatalf("iter %d: key %d snap %d: got %d want %d (ts %v frags %v)", iter, k, snap, got, want, orig, frags)
				}
			}
		}
		lo, hi := rng.IntN(21), rng.IntN(21)
		for _, f := range rangedel.Overlapping(frags, key(lo), key(hi)) {
			if !(string(f.Start) < string(key(hi)) && string(f.End) > string(key(lo))) {
				t.Fatalf("Overlapping returned %v for [%d,%d)", f, lo, hi)
			}
		}
	}
}

func key(i int) []byte { return []byte(fmt.Sprintf("k%02d", i)) }
