package lsm_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestIterEach checks Iterator.Each against a model map: random batches of
// consecutive keys (so that the value log holds runs of values back to
// back), values below and above the threshold, overwrites, deletes, range
// deletes and flushes; every few batches a random range is read with Each
// and with Value, and both must match the model. A snapshot iterator sees
// its own version. fn's error stops Each at once.
func TestIterEach(t *testing.T) {
	seed := uint64(rand.Int64())
	if s := os.Getenv("LSMFS_EACH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d (LSMFS_EACH_SEED repeats a run)", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	opts := &lsm.Options{FS: vfs.NewMem(), UUID: [16]byte{3}, ValueThreshold: 64,
		Journal: lsm.JournalOptions{Size: 64 << 20}}
	if err := lsm.Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const nkeys = 400
	key := func(i int) string { return fmt.Sprintf("k%04d", i) }
	model := map[string][]byte{}
	scan := func(m map[string][]byte, lo, hi int) (keys []string) {
		for k := range m {
			if k >= key(lo) && k < key(hi) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		return keys
	}
	check := func(it *lsm.Iterator, m map[string][]byte, lo, hi int, what string) {
		t.Helper()
		want := scan(m, lo, hi)
		var got []string
		err := it.Each(func(k, v []byte) error {
			if w, ok := m[string(k)]; !ok || !bytes.Equal(v, w) {
				return fmt.Errorf("key %s: %d bytes %.20q, want %d bytes (present %v)", k, len(v), v, len(w), ok)
			}
			got = append(got, string(k))
			return nil
		})
		if err != nil {
			t.Fatalf("%s: Each [%d,%d): %v", what, lo, hi, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: Each [%d,%d) gave %d keys, want %d", what, lo, hi, len(got), len(want))
		}
		// Value agrees.
		n := 0
		for ok := it.First(); ok; ok = it.Next() {
			if !bytes.Equal(it.Value(), m[string(it.Key())]) {
				t.Fatalf("%s: Value(%s) differs", what, it.Key())
			}
			n++
		}
		if err := it.Error(); err != nil || n != len(want) {
			t.Fatalf("%s: Value scan: %d keys, %v", what, n, err)
		}
	}
	bounds := func(lo, hi int) *lsm.IterOptions {
		return &lsm.IterOptions{LowerBound: []byte(key(lo)), UpperBound: []byte(key(hi))}
	}
	for round := 0; round < 300; round++ {
		b := lsm.NewBatch()
		switch r := rng.IntN(10); {
		case r < 7: // a run of consecutive keys
			start, n := rng.IntN(nkeys), 1+rng.IntN(40)
			for i := start; i < min(start+n, nkeys); i++ {
				size := 64 + rng.IntN(4<<10)
				if rng.IntN(5) == 0 {
					size = rng.IntN(64) // inline, breaking the run
				}
				v := []byte(strings.Repeat(fmt.Sprintf("%d.%d ", round, i), size/4+1)[:size])
				b.Set([]byte(key(i)), v)
				model[key(i)] = v
			}
		case r < 9:
			i := rng.IntN(nkeys)
			b.Delete([]byte(key(i)))
			delete(model, key(i))
		default:
			lo := rng.IntN(nkeys)
			hi := min(lo+1+rng.IntN(20), nkeys)
			b.DeleteRange([]byte(key(lo)), []byte(key(hi)))
			for i := lo; i < hi; i++ {
				delete(model, key(i))
			}
		}
		if err := db.Apply(b, rng.IntN(4) == 0); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(40) == 0 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if round%10 != 9 {
			continue
		}
		lo := rng.IntN(nkeys)
		hi := lo + 1 + rng.IntN(nkeys-lo)
		snap := db.NewSnapshot()
		frozen := maps(model)
		it := db.NewIter(bounds(lo, hi))
		check(it, model, lo, hi, fmt.Sprintf("round %d", round))
		it.Close()
		// Change what the snapshot covers, then read it.
		b = lsm.NewBatch()
		for i := lo; i < hi; i++ {
			b.Set([]byte(key(i)), []byte(strings.Repeat("x", 100)))
			model[key(i)] = []byte(strings.Repeat("x", 100))
		}
		if err := db.Apply(b, false); err != nil {
			t.Fatal(err)
		}
		sit := snap.NewIter(bounds(lo, hi))
		check(sit, frozen, lo, hi, fmt.Sprintf("round %d snapshot", round))
		sit.Close()
		snap.Close()
	}
	// fn's error ends Each at once.
	stop := errors.New("stop")
	it := db.NewIter(nil)
	defer it.Close()
	calls := 0
	if err := it.Each(func(k, v []byte) error {
		if calls++; calls == 3 {
			return stop
		}
		return nil
	}); err != stop || calls != 3 {
		t.Fatalf("Each after fn's error: %v, %d calls", err, calls)
	}
}

func maps(m map[string][]byte) map[string][]byte {
	c := make(map[string][]byte, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// TestIterEachRuns: values written back to back are read as one run, which
// bypasses the block cache (no lookups at all), and a damaged value in the
// middle of a run is reported as corruption, not returned.
func TestIterEachRuns(t *testing.T) {
	fs := vfs.NewMem()
	opts := &lsm.Options{FS: fs, UUID: [16]byte{4}, ValueThreshold: 64, Journal: lsm.JournalOptions{Size: 64 << 20}}
	if err := lsm.Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := lsm.NewBatch()
	val := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 16<<10) }
	const n = 60 // 960 KiB: one run
	for i := 0; i < n; i++ {
		b.Set([]byte(fmt.Sprintf("b%03d", i)), val(i))
	}
	if err := db.Apply(b, true); err != nil {
		t.Fatal(err)
	}
	each := func() error {
		it := db.NewIter(nil)
		defer it.Close()
		i := 0
		return it.Each(func(k, v []byte) error {
			if !bytes.Equal(v, val(i)) {
				return fmt.Errorf("value %d differs", i)
			}
			i++
			return nil
		})
	}
	m0 := db.Metrics()
	if err := each(); err != nil {
		t.Fatal(err)
	}
	m1 := db.Metrics()
	if d := (m1.Cache.Hits + m1.Cache.Misses) - (m0.Cache.Hits + m0.Cache.Misses); d != 0 {
		t.Fatalf("Each of %d adjacent values made %d cache lookups, want 0 (one run)", n, d)
	}
	if d := m1.Vlog.DiskReads - m0.Vlog.DiskReads; d != n {
		t.Fatalf("Each read %d values from the value log, want %d", d, n)
	}
	// Damage one byte of value 40.
	names, err := fs.List("/db")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !strings.HasSuffix(n, ".vlog") {
			continue
		}
		f, err := fs.OpenReadWrite("/db/" + n)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, 1<<21)
		k, _ := f.ReadAt(data, 0)
		at := bytes.Index(data[:k], val(40))
		if at < 0 {
			t.Fatal("value 40 not found in the segment")
		}
		if _, err := f.WriteAt([]byte{0xff}, int64(at+100)); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if err := each(); !errors.Is(err, lsm.ErrCorrupt) {
		t.Fatalf("Each over a damaged value: %v, want ErrCorrupt", err)
	}
}
