package memtable_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/memtable"
	"github.com/lsmfs/lsmfs/lsm/internal/rangedel"
)

type entry struct {
	k base.InternalKey
	v []byte
}

func TestMemtableMatchesSortedModel(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	m := memtable.New(1 << 20)
	var model []entry
	seq := uint64(1)
	for i := 0; i < 3000; i++ {
		k := []byte(fmt.Sprintf("key%04d", rng.IntN(500)))
		v := []byte(fmt.Sprintf("v%d", i))
		kind := base.KindSet
		if rng.IntN(5) == 0 {
			kind, v = base.KindDelete, nil
		}
		ik := base.MakeInternalKey(k, seq, kind)
		seq++
		if err := m.Add(ik, v); err != nil {
			t.Fatal(err)
		}
		model = append(model, entry{ik.Clone(), v})
	}
	sort.Slice(model, func(i, j int) bool { return base.CompareInternal(model[i].k, model[j].k) < 0 })
	it := m.NewIter()
	i := 0
	for ok := it.First(); ok; ok = it.Next() {
		if base.CompareInternal(it.Key(), model[i].k) != 0 || !bytes.Equal(it.Value(), model[i].v) {
			t.Fatalf("entry %d: got %v want %v", i, it.Key(), model[i].k)
		}
		i++
	}
	if i != len(model) {
		t.Fatalf("iterated %d of %d", i, len(model))
	}
	// Backwards.
	i = len(model) - 1
	for ok := it.Last(); ok; ok = it.Prev() {
		if base.CompareInternal(it.Key(), model[i].k) != 0 {
			t.Fatalf("reverse entry %d: got %v want %v", i, it.Key(), model[i].k)
		}
		i--
	}
	if i != -1 {
		t.Fatalf("reverse stopped at %d", i)
	}
	// Get at random snapshots.
	for n := 0; n < 2000; n++ {
		k := []byte(fmt.Sprintf("key%04d", rng.IntN(510)))
		snap := uint64(rng.IntN(int(seq)))
		var want *entry
		for j := range model {
			if bytes.Equal(model[j].k.UserKey, k) && model[j].k.Seq() <= snap {
				want = &model[j]
				break
			}
		}
		got, v, ok := m.Get(k, snap)
		if ok != (want != nil) || (ok && (got.Trailer != want.k.Trailer || !bytes.Equal(v, want.v))) {
			t.Fatalf("Get(%s,%d) = %v %v, want %v", k, snap, got, ok, want)
		}
	}
	// SeekGE / SeekLT against the model.
	for n := 0; n < 500; n++ {
		k := []byte(fmt.Sprintf("key%04d", rng.IntN(510)))
		j := sort.Search(len(model), func(j int) bool { return bytes.Compare(model[j].k.UserKey, k) >= 0 })
		if ok := it.SeekGE(k); ok != (j < len(model)) || (ok && base.CompareInternal(it.Key(), model[j].k) != 0) {
			t.Fatalf("SeekGE(%s) wrong", k)
		}
		if ok := it.SeekLT(k); ok != (j > 0) || (ok && base.CompareInternal(it.Key(), model[j-1].k) != 0) {
			t.Fatalf("SeekLT(%s) wrong", k)
		}
	}
}

func TestMemtableFull(t *testing.T) {
	m := memtable.New(64 << 10)
	var err error
	for i := 0; err == nil; i++ {
		err = m.Add(base.MakeInternalKey([]byte(fmt.Sprint(i)), uint64(i+1), base.KindSet), make([]byte, 100))
	}
	if err != memtable.ErrFull {
		t.Fatalf("got %v, want ErrFull", err)
	}
	if m.Size() > m.Capacity() {
		t.Fatalf("size %d > capacity %d", m.Size(), m.Capacity())
	}
}

func TestMemtableTombstones(t *testing.T) {
	m := memtable.New(1 << 20)
	add := func(s, e string, seq uint64) {
		if err := m.Add(base.MakeInternalKey([]byte(s), seq, base.KindRangeDelete), []byte(e)); err != nil {
			t.Fatal(err)
		}
	}
	add("b", "f", 5)
	add("d", "h", 9)
	got := fmt.Sprint(m.Tombstones())
	want := "[{[98] [100] 5} {[100] [102] 9} {[100] [102] 5} {[102] [104] 9}]"
	if got != want {
		t.Fatalf("got %s want %s", got, want)
	}
	add("a", "z", 3)
	if n := len(m.Tombstones()); n != 9 {
		t.Fatalf("after third tombstone: %d fragments: %v", n, m.Tombstones())
	}
}

// TestTombstonesAddedOneByOne: the cached fragments, extended with each
// tombstone added over a span of its own and redone otherwise, must equal
// fragmenting every tombstone at once, after each addition. The mix: new
// spans apart from the others (file deletions), spans overlapping earlier
// ones, empty spans, and sequence numbers below the largest seen.
func TestTombstonesAddedOneByOne(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		m := memtable.New(1 << 20)
		var all []base.RangeTombstone
		seq := uint64(100)
		key := func(i int) []byte { return binary.BigEndian.AppendUint32([]byte("b"), uint32(i)) }
		for i := range 300 {
			lo := rng.IntN(5000)
			hi := lo + 1 + rng.IntN(3)
			switch r := rng.IntN(100); {
			case r < 10:
				hi = lo + rng.IntN(400) // may cover many
			case r < 13:
				hi = lo // empty
			}
			s := seq + 1
			if rng.IntN(20) == 0 {
				s = seq - uint64(rng.IntN(50)) // out of order
			} else {
				seq = s
			}
			if err := m.Add(base.MakeInternalKey(key(lo), base.SeqNum(s), base.KindRangeDelete), key(hi)); err != nil {
				t.Fatal(err)
			}
			all = append(all, base.RangeTombstone{Start: key(lo), End: key(hi), Seq: base.SeqNum(s)})
			if rng.IntN(4) == 0 && i != 299 {
				continue // several additions before the next read
			}
			want := rangedel.Fragment(slices.Clone(all))
			same := func(a, b base.RangeTombstone) bool {
				return bytes.Equal(a.Start, b.Start) && bytes.Equal(a.End, b.End) && a.Seq == b.Seq
			}
			if got := m.Tombstones(); !slices.EqualFunc(got, want, same) {
				t.Fatalf("seed %d, after %d tombstones:\ngot  %v\nwant %v", seed, i+1, got, want)
			}
		}
	}
}

// TestTombstonesWhileAdding: readers asking for the fragments while the
// writer adds tombstones (each its own batch, published after it is added)
// must find every published one. A cache labelled with the tombstones its
// walk found could miss one linked behind the walk and then serve a reader
// that counted it.
func TestTombstonesWhileAdding(t *testing.T) {
	m := memtable.New(4 << 20)
	const n = 3000
	starts := make([][]byte, n)
	rng := rand.New(rand.NewPCG(5, 6))
	for i, k := range rng.Perm(n) {
		starts[i] = binary.BigEndian.AppendUint32([]byte("b"), uint32(2*k))
	}
	var published atomic.Int64 // tombstones published: their batches are visible
	var wg sync.WaitGroup
	var failed atomic.Bool
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			for p := published.Load(); p < n && !failed.Load(); p = published.Load() {
				if p == 0 {
					continue
				}
				frags := m.Tombstones()
				for _, i := range []int64{p - 1, rng.Int64N(p)} {
					if got := rangedel.MaxCovering(frags, starts[i], base.SeqNum(p)); got != base.SeqNum(i+1) {
						t.Errorf("with %d published, tombstone %d (seq %d) reads as seq %d", p, i, i+1, got)
						failed.Store(true)
						return
					}
				}
			}
		}()
	}
	for i := range n {
		end := append(bytes.Clone(starts[i]), 0)
		if err := m.Add(base.MakeInternalKey(starts[i], base.SeqNum(i+1), base.KindRangeDelete), end); err != nil {
			t.Fatal(err)
		}
		published.Store(int64(i + 1))
	}
	wg.Wait()
}

// BenchmarkTombstonesOneByOne: an rm -rf's pattern, a tombstone over each
// deleted file's blocks and a read (which asks for the fragments) between
// additions. One op is 300 additions and reads.
func BenchmarkTombstonesOneByOne(b *testing.B) {
	for b.Loop() {
		m := memtable.New(1 << 20)
		for i := range 300 {
			lo := binary.BigEndian.AppendUint64([]byte("b"), uint64(i))
			hi := binary.BigEndian.AppendUint64([]byte("b"), uint64(i)+1)
			if err := m.Add(base.MakeInternalKey(lo, base.SeqNum(i+1), base.KindRangeDelete), hi); err != nil {
				b.Fatal(err)
			}
			if len(m.Tombstones()) != i+1 {
				b.Fatal("fragments lost")
			}
		}
	}
}

// TestConcurrentReaders runs readers against the single writer; run with -race.
func TestConcurrentReaders(t *testing.T) {
	m := memtable.New(8 << 20)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			it := m.NewIter()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var prev base.InternalKey
				first := true
				for ok := it.First(); ok; ok = it.Next() {
					if !first && base.CompareInternal(prev, it.Key()) >= 0 {
						t.Errorf("order violated: %v then %v", prev, it.Key())
						return
					}
					prev, first = it.Key().Clone(), false
				}
				m.Get([]byte("k00050"), base.MaxSeqNum)
			}
		}()
	}
	for i := 0; i < 20000; i++ {
		k := []byte(fmt.Sprintf("k%05d", (i*7919)%10007))
		if err := m.Add(base.MakeInternalKey(k, uint64(i+1), base.KindSet), k); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}

func BenchmarkAdd(b *testing.B) {
	m := memtable.New(1 << 30)
	k := make([]byte, 24)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		binary.BigEndian.PutUint64(k, uint64(i)*0x9e3779b97f4a7c15)
		if err := m.Add(base.MakeInternalKey(k, uint64(i+1), base.KindSet), k[:16]); err != nil {
			b.Fatal(err)
		}
	}
}

func TestFlatMatchesSkiplist(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 9))
	m := memtable.New(4 << 20)
	for i := 0; i < 5000; i++ {
		k := []byte(fmt.Sprintf("k%d", rng.IntN(800)))
		if err := m.Add(base.MakeInternalKey(k, uint64(i+1), base.Kind(rng.IntN(2))), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	m.Add(base.MakeInternalKey([]byte("k1"), 9000, base.KindRangeDelete), []byte("k5"))
	var b memtable.FlatBuilder
	it := m.NewIter()
	for ok := it.First(); ok; ok = it.Next() {
		b.Add(it.Key(), it.Value())
	}
	f := b.Finish(m.Tombstones())
	if f.Len() != int(m.Count()) || len(f.Tombstones()) != len(m.Tombstones()) {
		t.Fatalf("flat has %d entries %d tombstones", f.Len(), len(f.Tombstones()))
	}
	if f.Size() >= m.Size() {
		t.Errorf("flat segment (%d B) not smaller than the skiplist (%d B)", f.Size(), m.Size())
	}
	// Each entry is what a Get of its key at its own sequence number finds,
	// in both.
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		for _, get := range []func([]byte, uint64) (base.InternalKey, []byte, bool){m.Get, f.Get} {
			if g, v, found := get(k.UserKey, k.Seq()); !found || g.Trailer != k.Trailer || !bytes.Equal(v, it.Value()) {
				t.Fatalf("Get(%s,%d): %v %v", k.UserKey, k.Seq(), g, found)
			}
		}
	}
	fi := f.NewIter()
	for n := 0; n < 3000; n++ {
		k := []byte(fmt.Sprintf("k%d", rng.IntN(850)))
		snap := uint64(rng.IntN(6000))
		k1, v1, ok1 := m.Get(k, snap)
		k2, v2, ok2 := f.Get(k, snap)
		if ok1 != ok2 || k1.Trailer != k2.Trailer || !bytes.Equal(v1, v2) {
			t.Fatalf("Get(%s,%d): skiplist %v %v, flat %v %v", k, snap, k1, ok1, k2, ok2)
		}
		a, b := it.SeekGE(k), fi.SeekGE(k)
		if a != b || (a && base.CompareInternal(it.Key(), fi.Key()) != 0) {
			t.Fatalf("SeekGE(%s) differs", k)
		}
		for j := 0; j < 5 && a; j++ {
			a, b = it.Next(), fi.Next()
			if a != b || (a && base.CompareInternal(it.Key(), fi.Key()) != 0) {
				t.Fatalf("Next after SeekGE(%s) differs", k)
			}
		}
		a, b = it.SeekLT(k), fi.SeekLT(k)
		if a != b || (a && base.CompareInternal(it.Key(), fi.Key()) != 0) {
			t.Fatalf("SeekLT(%s) differs", k)
		}
		for j := 0; j < 5 && a; j++ {
			a, b = it.Prev(), fi.Prev()
			if a != b || (a && base.CompareInternal(it.Key(), fi.Key()) != 0) {
				t.Fatalf("Prev after SeekLT(%s) differs", k)
			}
		}
	}
	t.Logf("skiplist %d B, flat %d B for %d entries; %d duplicate versions", m.Size(), f.Size(), f.Len(), f.DuplicateKeys())
}

// TestGetRacingInsertBefore inserts each key just before a key that a reader
// keeps looking up. A lookup must find its key whatever lands in front of it
// meanwhile: an earlier seekGE read its predecessor's next pointer twice, and
// an insert between the two reads made Get return the new, smaller key's
// node and report the looked-up key missing (issue 6's transient ENOENT).
func TestGetRacingInsertBefore(t *testing.T) {
	const n = 100_000
	key := func(i int) []byte { return binary.BigEndian.AppendUint64([]byte{'I'}, uint64(i)) }
	m := memtable.New(64 << 20)
	seq := base.SeqNum(1)
	for i := 0; i < n; i += 2 {
		if err := m.Add(base.MakeInternalKey(key(i), seq, base.KindSet), []byte("v")); err != nil {
			t.Fatal(err)
		}
		seq++
	}
	snap := seq
	var next atomic.Int64 // the odd key the writer inserts next
	next.Store(1)
	var misses atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			it := m.NewIter()
			for {
				select {
				case <-stop:
					return
				default:
				}
				// The even key after the odd key about to be inserted.
				i := int(next.Load()) + 1
				if i >= n {
					return
				}
				k := key(i)
				if _, _, ok := m.Get(k, snap); !ok {
					misses.Add(1)
				}
				if !it.SeekGE(k) || !bytes.Equal(it.Key().UserKey, k) {
					misses.Add(1)
				}
			}
		}()
	}
	for i := 1; i < n; i += 2 {
		if err := m.Add(base.MakeInternalKey(key(i), seq, base.KindSet), []byte("v")); err != nil {
			t.Fatal(err)
		}
		seq++
		next.Store(int64(i + 2))
	}
	close(stop)
	wg.Wait()
	if k := misses.Load(); k > 0 {
		t.Fatalf("%d lookups of a present key missed it while a smaller key was inserted in front of it", k)
	}
}

// TestFlatBuilderGrow: a skiplist's PointBytes and Count size a FlatBuilder
// exactly (the Flat's data is its PointBytes), so building copies nothing
// twice: a few allocations for any number of entries, not one per append
// growth step.
func TestFlatBuilderGrow(t *testing.T) {
	m := memtable.New(4 << 20)
	for i := 0; i < 20000; i++ {
		if err := m.Add(base.MakeInternalKey([]byte(fmt.Sprintf("key%06d", i)), uint64(i+1), base.KindSet), bytes.Repeat([]byte{'v'}, i%50)); err != nil {
			t.Fatal(err)
		}
	}
	build := func() *memtable.Flat {
		var b memtable.FlatBuilder
		b.Grow(int(m.PointBytes()), int(m.Count()))
		it := m.NewIter()
		for ok := it.First(); ok; ok = it.Next() {
			b.Add(it.Key(), it.Value())
		}
		return b.Finish(nil)
	}
	if f := build(); f.PointBytes() != m.PointBytes() || f.Len() != int(m.Count()) {
		t.Fatalf("flat: %d bytes, %d entries; skiplist: %d bytes, %d entries", f.PointBytes(), f.Len(), m.PointBytes(), m.Count())
	}
	if allocs := testing.AllocsPerRun(5, func() { build() }); allocs > 10 {
		t.Errorf("building a flat segment of 20,000 entries allocates %.0f times", allocs)
	}
}

// TestFlatSearchKeyShapes checks a Flat's search, by groups of a key's first
// byte and the 8 bytes after it, against a sorted model, with keys of every
// shape: empty, one byte, first bytes 0x00 and 0xff, families with inode
// numbers that differ only in their last byte, names with zero bytes, tails
// shorter than, as long as and longer than 8 bytes, and several versions of
// each; probes include keys absent from the Flat and from their group.
func TestFlatSearchKeyShapes(t *testing.T) {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 13))
	randKey := func() []byte {
		switch rng.IntN(7) {
		case 0:
			return []byte{}
		case 1:
			return []byte{byte(rng.IntN(256))}
		case 2:
			return []byte{[]byte{0x00, 0xff}[rng.IntN(2)], byte(rng.IntN(3))}
		case 3: // an inode-like key
			return binary.BigEndian.AppendUint64([]byte{"DIB"[rng.IntN(3)]}, uint64(rng.IntN(600)))
		case 4: // a directory entry: parent and name, zero bytes included
			k := binary.BigEndian.AppendUint64([]byte{'D'}, uint64(rng.IntN(4)))
			for range rng.IntN(6) {
				k = append(k, []byte{0, 'a', 'b', 0xff}[rng.IntN(4)])
			}
			return k
		case 5: // a tail shorter than 8 bytes
			k := []byte{'I'}
			for range rng.IntN(8) {
				k = append(k, byte(rng.IntN(3)))
			}
			return k
		}
		k := make([]byte, rng.IntN(20))
		for i := range k {
			k[i] = byte(rng.IntN(256))
		}
		return k
	}
	var model []entry
	for i := range 4000 {
		model = append(model, entry{base.MakeInternalKey(randKey(), uint64(i+1), base.KindSet), []byte(fmt.Sprint(i))})
	}
	sort.Slice(model, func(i, j int) bool { return base.CompareInternal(model[i].k, model[j].k) < 0 })
	var b memtable.FlatBuilder
	for _, e := range model {
		b.Add(e.k, e.v)
	}
	f := b.Finish(nil)
	it := f.NewIter()
	for n := range 20000 {
		var k []byte
		if n%2 == 0 {
			k = model[rng.IntN(len(model))].k.UserKey
		} else {
			k = randKey()
		}
		j := sort.Search(len(model), func(j int) bool { return bytes.Compare(model[j].k.UserKey, k) >= 0 })
		if ok := it.SeekGE(k); ok != (j < len(model)) || (ok && base.CompareInternal(it.Key(), model[j].k) != 0) {
			t.Fatalf("SeekGE(%x) = %v %v, want entry %d", k, ok, it.Key(), j)
		}
		if ok := it.SeekLT(k); ok != (j > 0) || (ok && base.CompareInternal(it.Key(), model[j-1].k) != 0) {
			t.Fatalf("SeekLT(%x) = %v %v, want entry %d", k, ok, it.Key(), j-1)
		}
		snap := uint64(rng.IntN(4100))
		var want *entry
		for i := j; i < len(model) && bytes.Equal(model[i].k.UserKey, k); i++ {
			if model[i].k.Seq() <= snap {
				want = &model[i]
				break
			}
		}
		got, v, ok := f.Get(k, snap)
		if ok != (want != nil) || (ok && (got.Trailer != want.k.Trailer || !bytes.Equal(v, want.v))) {
			t.Fatalf("Get(%x, %d) = %v %v, want %v", k, snap, got, ok, want)
		}
	}
}

// BenchmarkFlatGet looks up random keys of a Flat made of a full 8 MiB
// segment of inode-like keys (the engine's flattened segments), and of
// directory entries (20 directories' names).
func BenchmarkFlatGet(b *testing.B) {
	keys := map[string]func(i int) []byte{
		"inodes": func(i int) []byte { return binary.BigEndian.AppendUint64([]byte{'I'}, uint64(i)) },
		"entries": func(i int) []byte {
			return fmt.Appendf(binary.BigEndian.AppendUint64([]byte{'D'}, uint64(i%20)), "f%06d", i)
		},
	}
	for _, name := range []string{"inodes", "entries"} {
		b.Run(name, func(b *testing.B) {
			key := keys[name]
			m := memtable.New(8 << 20)
			n := 0
			for ; ; n++ {
				if err := m.Add(base.MakeInternalKey(key(n), base.SeqNum(n+1), base.KindSet), make([]byte, 24)); err != nil {
					break
				}
			}
			var fb memtable.FlatBuilder
			it := m.NewIter()
			for ok := it.First(); ok; ok = it.Next() {
				fb.Add(it.Key(), it.Value())
			}
			f := fb.Finish(nil)
			rng := rand.New(rand.NewPCG(1, 2))
			b.ResetTimer()
			for range b.N {
				if _, _, ok := f.Get(key(rng.IntN(n)), base.MaxSeqNum); !ok {
					b.Fatal("missing key")
				}
			}
		})
	}
}
