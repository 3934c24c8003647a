package sstable_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/sstable"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

var seedFlag = flag.Uint64("seed", 0, "seed for randomized tests (0: from the clock)")

// testSeed returns the seed to use and logs it, so that a failure can be
// replayed with -seed.
func testSeed(t testing.TB) uint64 {
	t.Helper()
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed=%d)", s, s)
	return s
}

// kv is a point entry of the model.
type kv struct {
	key   base.InternalKey
	value []byte
}

func (e kv) String() string { return fmt.Sprintf("%s=%q", e.key, e.value) }

// bytesFile is a ReadableFile over a byte slice.
type bytesFile struct{ *bytes.Reader }

func (bytesFile) Close() error { return nil }

func newBytesFile(b []byte) bytesFile { return bytesFile{bytes.NewReader(b)} }

var fixedClock = func() time.Time { return time.Unix(1700000000, 0) }

// writeTable writes a table to a MemFS and returns its bytes and Meta.
func writeTable(t testing.TB, opts sstable.WriterOptions, kvs []kv, tombs []base.RangeTombstone) ([]byte, *sstable.Meta) {
	t.Helper()
	fs := vfs.NewMem()
	f, err := fs.Create("t.sst")
	if err != nil {
		t.Fatal(err)
	}
	if opts.Clock == nil {
		opts.Clock = fixedClock
	}
	w := sstable.NewWriter(f, opts)
	for _, e := range kvs {
		if err := w.Add(e.key, e.value); err != nil {
			t.Fatalf("Add(%s): %v", e.key, err)
		}
	}
	for _, tb := range tombs {
		if err := w.AddRangeTombstone(tb); err != nil {
			t.Fatalf("AddRangeTombstone: %v", err)
		}
	}
	m, err := w.Close()
	if err != nil {
		t.Fatalf("Close: %v", err)
	}
	rf, err := fs.Open("t.sst")
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	data := make([]byte, m.Size)
	if _, err := rf.ReadAt(data, 0); err != nil {
		t.Fatal(err)
	}
	return data, m
}

func openBytes(t testing.TB, data []byte, opts sstable.ReaderOptions) *sstable.Reader {
	t.Helper()
	r, err := sstable.Open(newBytesFile(data), int64(len(data)), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return r
}

// randomUserKeys returns n distinct sorted user keys over a small alphabet,
// so that keys share prefixes; some contain 0xff bytes and one may be empty.
func randomUserKeys(rng *rand.Rand, n int) [][]byte {
	const alphabet = "abc\x00\xff"
	seen := map[string]bool{}
	var keys [][]byte
	for len(keys) < n {
		l := rng.IntN(10)
		if rng.IntN(20) == 0 {
			l = 20 + rng.IntN(200)
		}
		k := make([]byte, l)
		for i := range k {
			if rng.IntN(4) == 0 {
				k[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				k[i] = 'a' + byte(rng.IntN(3))
			}
		}
		if !seen[string(k)] {
			seen[string(k)] = true
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	return keys
}

// randomKVs returns sorted entries: each user key with 1..maxVersions
// versions of random kinds.
func randomKVs(rng *rand.Rand, nKeys, maxVersions, maxValue int) []kv {
	var kvs []kv
	for _, uk := range randomUserKeys(rng, nKeys) {
		nv := 1 + rng.IntN(maxVersions)
		seqs := map[uint64]bool{}
		for len(seqs) < nv {
			s := rng.Uint64N(1000)
			switch rng.IntN(50) {
			case 0:
				s = base.MaxSeqNum
			case 1:
				s = 0
			}
			seqs[s] = true
		}
		for s := range seqs {
			kind := []base.Kind{base.KindSet, base.KindSet, base.KindDelete, base.KindValuePointer}[rng.IntN(4)]
			var v []byte
			if kind != base.KindDelete {
				v = randomValue(rng, maxValue)
			}
			kvs = append(kvs, kv{base.MakeInternalKey(uk, s, kind), v})
		}
	}
	slices.SortFunc(kvs, func(a, b kv) int { return base.CompareInternal(a.key, b.key) })
	return kvs
}

// randomValue returns a value that is sometimes compressible.
func randomValue(rng *rand.Rand, maxLen int) []byte {
	n := rng.IntN(maxLen + 1)
	v := make([]byte, n)
	if rng.IntN(2) == 0 {
		for i := range v {
			v[i] = byte(rng.IntN(256))
		}
	} else {
		for i := range v {
			v[i] = "value-"[i%6]
		}
	}
	return v
}

// randomSeekKey returns a key near the model's keys, or an arbitrary one.
func randomSeekKey(rng *rand.Rand, kvs []kv) []byte {
	if len(kvs) == 0 || rng.IntN(5) == 0 {
		return []byte([]string{"", "a", "b", "c", "\xff\xff\xff\xff", "ab", "\x00"}[rng.IntN(7)])
	}
	k := bytes.Clone(kvs[rng.IntN(len(kvs))].key.UserKey)
	switch rng.IntN(4) {
	case 0:
		k = append(k, byte(rng.IntN(256)))
	case 1:
		if len(k) > 0 {
			k = k[:len(k)-1]
		}
	case 2:
		if len(k) > 0 {
			k[len(k)-1]++
		}
	}
	return k
}

// model is a trivially correct iterator over a sorted slice, with the same
// positioning rules as sstable.Iterator.
type model struct {
	kvs []kv
	pos int // -1: before first; len(kvs): after last
	set bool
}

func (m *model) valid() bool { return m.set && m.pos >= 0 && m.pos < len(m.kvs) }

func (m *model) first() bool { m.set, m.pos = true, 0; return m.valid() }

func (m *model) last() bool { m.set, m.pos = true, len(m.kvs)-1; return m.valid() }

func (m *model) seekGE(k []byte) bool {
	m.set = true
	m.pos, _ = slices.BinarySearchFunc(m.kvs, k, func(e kv, k []byte) int { return bytes.Compare(e.key.UserKey, k) })
	return m.valid()
}

func (m *model) seekLT(k []byte) bool {
	m.seekGE(k)
	m.pos--
	return m.valid()
}

func (m *model) next() bool {
	if !m.set || m.pos >= len(m.kvs) {
		return false
	}
	m.pos++
	return m.valid()
}

func (m *model) prev() bool {
	if !m.set || m.pos < 0 {
		return false
	}
	m.pos--
	return m.valid()
}

func (m *model) current() string {
	if !m.valid() {
		return "."
	}
	return m.kvs[m.pos].String()
}

func iterCurrent(it base.InternalIterator, ok bool) string {
	if !ok {
		if err := it.Error(); err != nil {
			return "err: " + err.Error()
		}
		return "."
	}
	return kv{it.Key(), it.Value()}.String()
}

// runOps runs n random positioning ops on it and the model and fails on the
// first difference, printing the op history.
func runOps(t testing.TB, rng *rand.Rand, it base.InternalIterator, kvs []kv, n int) {
	t.Helper()
	m := &model{kvs: kvs}
	var hist []string
	for i := range n {
		var op string
		var got bool
		var want bool
		switch r := rng.IntN(20); {
		case r < 1:
			op, got, want = "first", it.First(), m.first()
		case r < 2:
			op, got, want = "last", it.Last(), m.last()
		case r < 5:
			k := randomSeekKey(rng, kvs)
			op, got, want = fmt.Sprintf("seek-ge %q", k), it.SeekGE(k), m.seekGE(k)
		case r < 8:
			k := randomSeekKey(rng, kvs)
			op, got, want = fmt.Sprintf("seek-lt %q", k), it.SeekLT(k), m.seekLT(k)
		case r < 14:
			op, got, want = "next", it.Next(), m.next()
		default:
			op, got, want = "prev", it.Prev(), m.prev()
		}
		g, w := iterCurrent(it, got), m.current()
		hist = append(hist, fmt.Sprintf("%s -> %s", op, g))
		if len(hist) > 20 {
			hist = hist[1:]
		}
		if got != want || g != w {
			t.Fatalf("op %d: %s: got %s, want %s\nlast ops:\n  %s", i, op, g, w, strings.Join(hist, "\n  "))
		}
	}
}

// scanAll returns every entry forward and checks the backward scan agrees.
func scanAll(it base.InternalIterator) ([]string, error) {
	var fwd []string
	for ok := it.First(); ok; ok = it.Next() {
		fwd = append(fwd, kv{it.Key(), it.Value()}.String())
	}
	if err := it.Error(); err != nil {
		return fwd, err
	}
	var bwd []string
	for ok := it.Last(); ok; ok = it.Prev() {
		bwd = append(bwd, kv{it.Key(), it.Value()}.String())
	}
	if err := it.Error(); err != nil {
		return fwd, err
	}
	slices.Reverse(bwd)
	if !slices.Equal(fwd, bwd) {
		return fwd, fmt.Errorf("forward scan (%d entries) and backward scan (%d entries) differ", len(fwd), len(bwd))
	}
	return fwd, nil
}

func kvStrings(kvs []kv) []string {
	s := make([]string, len(kvs))
	for i, e := range kvs {
		s[i] = e.String()
	}
	return s
}

func isCorrupt(err error) bool { return errors.Is(err, base.ErrCorrupt) }

var _ = io.Discard
