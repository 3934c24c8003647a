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
	"sync"
	"testing"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/internal/vlog"
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
	_, db := formatOpen(t, opts)
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
		// Each passes over the keys skip names; the Value scan below
		// sees them all.
		mod := 2 + rng.IntN(5)
		skip := func(k []byte) bool { return k[len(k)-1]%byte(mod) == 0 }
		var want []string
		for _, k := range scan(m, lo, hi) {
			if !skip([]byte(k)) {
				want = append(want, k)
			}
		}
		var got []string
		err := it.Each(skip, func(k, v []byte) error {
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
		if err := it.Error(); err != nil || n != len(scan(m, lo, hi)) {
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
	if err := it.Each(nil, func(k, v []byte) error {
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

// TestIterEachRuns: values written back to back are read as runs: one read
// of the value log per run of at most vlog.MaxRun bytes within one segment
// (counted through an ErrorFS), bypassing the block cache (no lookups at
// all). An append to a key or value by fn does not reach the next one; fn's
// error in the middle of a run ends Each at once; a damaged value in the
// middle of a run is reported as corruption, not returned; Each on a
// closed iterator is ErrClosed.
func TestIterEachRuns(t *testing.T) {
	var vlogReads []vfs.Op
	var mu sync.Mutex
	fs := vfs.NewMem()
	efs := vfs.NewErrorFS(fs, vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpRead && strings.HasSuffix(op.Path, ".vlog") {
			mu.Lock()
			vlogReads = append(vlogReads, op)
			mu.Unlock()
		}
		return nil
	}))
	const segSize = 2 << 20
	opts := &lsm.Options{FS: efs, UUID: [16]byte{4}, ValueThreshold: 64, VlogSegmentSize: segSize,
		Journal: lsm.JournalOptions{Size: 64 << 20}}
	_, db := formatOpen(t, opts)
	defer db.Close()
	const n, size = 300, 16 << 10 // 4.8 MiB in 3 segments: runs split by MaxRun and by segment
	val := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, size) }
	for i := 0; i < n; i += 20 {
		b := lsm.NewBatch()
		for j := i; j < i+20; j++ {
			b.Set([]byte(fmt.Sprintf("b%03d", j)), val(j))
		}
		if err := db.Apply(b, false); err != nil {
			t.Fatal(err)
		}
	}
	each := func(fn func(i int, k, v []byte) error) error {
		it := db.NewIter(nil)
		defer it.Close()
		i := 0
		return it.Each(nil, func(k, v []byte) error {
			if want := fmt.Sprintf("b%03d", i); string(k) != want || !bytes.Equal(v, val(i)) {
				return fmt.Errorf("entry %d: key %q (want %q), value differs %v", i, k, want, !bytes.Equal(v, val(i)))
			}
			i++
			return fn(i-1, k, v)
		})
	}
	m0 := db.Metrics()
	mu.Lock()
	vlogReads = nil
	mu.Unlock()
	// fn appends to what it is given: the next key and value stay intact.
	if err := each(func(i int, k, v []byte) error {
		_ = append(k, "ZZZZ"...)
		_ = append(v, "ZZZZ"...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	m1 := db.Metrics()
	if d := (m1.Cache.Hits + m1.Cache.Misses) - (m0.Cache.Hits + m0.Cache.Misses); d > 4 {
		t.Errorf("Each of %d adjacent values made %d cache lookups, want at most 4 (runs of one)", n, d)
	}
	if d := m1.Vlog.DiskReads - m0.Vlog.DiskReads; d != n {
		t.Errorf("Each read %d values from the value log, want %d", d, n)
	}
	mu.Lock()
	reads := append([]vfs.Op(nil), vlogReads...)
	mu.Unlock()
	total := 0
	for _, op := range reads {
		if op.Len > vlog.MaxRun {
			t.Errorf("read %s is longer than MaxRun", op)
		}
		total += op.Len
	}
	// At least 5 runs, and few more.
	if len(reads) < n*size/vlog.MaxRun+1 || len(reads) > 12 {
		t.Errorf("Each made %d value-log reads (%d bytes) for %d values of %d bytes: %v", len(reads), total, n, size, reads)
	}
	// fn's error in the middle of a run.
	stop := errors.New("stop")
	calls := 0
	if err := each(func(i int, k, v []byte) error {
		if calls++; i == 30 {
			return stop
		}
		return nil
	}); err != stop || calls != 31 {
		t.Fatalf("Each after fn's error at entry 30: %v after %d calls", err, calls)
	}
	// Closed.
	it := db.NewIter(nil)
	it.Close()
	if err := it.Each(nil, func(k, v []byte) error { return nil }); err != lsm.ErrClosed {
		t.Fatalf("Each on a closed iterator: %v", err)
	}
	// Damage one byte of value 40.
	names, err := fs.List("/db")
	if err != nil {
		t.Fatal(err)
	}
	damaged := false
	for _, name := range names {
		if !strings.HasSuffix(name, ".vlog") {
			continue
		}
		f, err := fs.OpenReadWrite("/db/" + name)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, 2*segSize)
		k, _ := f.ReadAt(data, 0)
		if at := bytes.Index(data[:k], val(40)); at >= 0 {
			if _, err := f.WriteAt([]byte{0xff}, int64(at+100)); err != nil {
				t.Fatal(err)
			}
			damaged = true
		}
		f.Close()
	}
	if !damaged {
		t.Fatal("value 40 not found in any segment")
	}
	err = each(func(i int, k, v []byte) error { return nil })
	var ce *lsm.CorruptionError
	if !errors.Is(err, lsm.ErrCorrupt) || !errors.As(err, &ce) {
		t.Fatalf("Each over a damaged value: %v, want ErrCorrupt", err)
	}
	t.Logf("%d values in %d reads; damage reported as: %v", n, len(reads), err)
}
