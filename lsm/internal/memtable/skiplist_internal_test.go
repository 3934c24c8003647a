package memtable

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

// keyStreams are the orders of insertion the hint tests and benchmarks use:
// each returns the user key of the i-th add.
var keyStreams = map[string]func(rng *rand.Rand, i int) []byte{
	"ascending":  func(_ *rand.Rand, i int) []byte { return inoKey('I', uint64(i)) },
	"descending": func(_ *rand.Rand, i int) []byte { return inoKey('I', uint64(1<<30-i)) },
	"versions":   func(rng *rand.Rand, i int) []byte { return inoKey('I', rng.Uint64N(8)) },
	"random":     func(rng *rand.Rand, i int) []byte { return inoKey('I', rng.Uint64N(1<<20)) },
	// Keys of 0 to 3 bytes: prefixes of 0 (the head's), and equal ones.
	"short": func(rng *rand.Rand, i int) []byte {
		k := make([]byte, rng.IntN(4))
		for j := range k {
			k[j] = byte(rng.IntN(3))
		}
		return k
	},
	// The keys of the harness's unlink step, file after file, the files of
	// 100 directories in turn: the entry, the parent's record, the file's
	// record and its block.
	"unlink": func(_ *rand.Rand, i int) []byte { return unlinkKey(i/4, i%4, uint64(i/4%100)) },
	// The same keys for rm -rf: directory after directory.
	"rmtree": func(_ *rand.Rand, i int) []byte { return unlinkKey(i/4, i%4, uint64(i/4/200)) },
}

// unlinkKey is the part-th key of the unlink of file in directory parent.
func unlinkKey(file, part int, parent uint64) []byte {
	ino := 1000 + uint64(file)
	switch part {
	case 0:
		return fmt.Appendf(inoKey('D', parent), "f%06d", file)
	case 1:
		return inoKey('I', parent)
	case 2:
		return inoKey('I', ino)
	}
	return binary.BigEndian.AppendUint64(inoKey('B', ino), 0)
}

func inoKey(fam byte, ino uint64) []byte { return binary.BigEndian.AppendUint64([]byte{fam}, ino) }

// checkSkiplist fails t unless every level of s is in strictly ascending
// order, every node is linked at each level below its height, and level 0
// holds exactly want (sorted).
func checkSkiplist(t *testing.T, s *skiplist, want [][]byte) {
	t.Helper()
	var prevCount int
	for l := maxHeight - 1; l >= 0; l-- {
		count, tall := 0, 0
		var last []byte
		for nd := s.next(s.head, l); nd != 0; nd = s.next(nd, l) {
			if h := int(s.a.buf[nd+fHeight]); h <= l {
				t.Fatalf("level %d links node %d of height %d", l, nd, h)
			} else if h > l+1 {
				tall++
			}
			k := s.key(nd)
			if last != nil && compareKeys(last, k) >= 0 {
				t.Fatalf("level %d out of order: %q then %q", l, last, k)
			}
			if l == 0 && (count >= len(want) || compareKeys(k, want[count]) != 0) {
				t.Fatalf("level 0 entry %d is %q, want the model's", count, k)
			}
			last = k
			count++
		}
		// Each node of this level that is taller was linked above.
		if tall != prevCount {
			t.Fatalf("level %d has %d nodes taller than it, level %d has %d nodes", l, tall, l+1, prevCount)
		}
		prevCount = count
	}
	if prevCount != len(want) {
		t.Fatalf("level 0 has %d entries, want %d", prevCount, len(want))
	}
}

// TestSkiplistHintsKeepOrder adds each stream, and all of them interleaved
// at random, with sequence numbers in order and shuffled, and checks every
// level of the list against a sorted model.
func TestSkiplistHintsKeepOrder(t *testing.T) {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range keyStreams {
			if !yield(n) {
				return
			}
		}
	})
	names = append(names, "mixed")
	for _, name := range names {
		for _, shuffled := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/shuffled=%v", name, shuffled), func(t *testing.T) {
				seed := rand.Uint64()
				t.Logf("seed %d", seed)
				rng := rand.New(rand.NewPCG(seed, 5))
				s, err := newSkiplist(newArena(8<<20), true)
				if err != nil {
					t.Fatal(err)
				}
				const n = 30000
				seqs := make([]base.SeqNum, n)
				for i := range seqs {
					seqs[i] = base.SeqNum(i + 1)
				}
				if shuffled {
					rng.Shuffle(n, func(i, j int) { seqs[i], seqs[j] = seqs[j], seqs[i] })
				}
				counts := map[string]int{}
				var want [][]byte
				for i := range n {
					stream := name
					if name == "mixed" {
						stream = names[rng.IntN(len(names)-1)]
					}
					counts[stream]++
					uk := keyStreams[stream](rng, counts[stream])
					k := base.MakeInternalKey(uk, seqs[i], base.KindSet).Append(nil)
					if _, err := s.add(k, []byte("v")); err != nil {
						t.Fatal(err)
					}
					want = append(want, k)
				}
				slices.SortFunc(want, compareKeys)
				checkSkiplist(t, s, want)
			})
		}
	}
}

// BenchmarkAddStream fills 8 MiB segments from each key stream: the cost of
// an insert where hints help (ordered streams, interleaved) and where they
// cannot (random keys).
func BenchmarkAddStream(b *testing.B) {
	for _, name := range []string{"ascending", "unlink", "rmtree", "versions", "random"} {
		b.Run(name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			m := New(8 << 20)
			val := make([]byte, 24)
			b.ResetTimer()
			for i := range b.N {
				k := keyStreams[name](rng, i)
				if err := m.Add(base.MakeInternalKey(k, base.SeqNum(i+1), base.KindSet), val); err != nil {
					b.StopTimer()
					m = New(8 << 20)
					b.StartTimer()
				}
			}
		})
	}
}
