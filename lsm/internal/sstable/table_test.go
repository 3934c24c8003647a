package sstable_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/lsmfs/lsmfs/blockcache"
	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/sstable"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// optionVariants are the writer configurations the round-trip tests cover:
// tiny blocks (one entry each), small and large blocks, every restart
// interval extreme, with and without compression and filter.
var optionVariants = []sstable.WriterOptions{
	{BlockSize: 1, RestartInterval: 1, BloomBitsPerKey: 10},
	{BlockSize: 64, RestartInterval: 2, DisableCompression: true},
	{BlockSize: 512, RestartInterval: 16, BloomBitsPerKey: 10},
	{BlockSize: 4096, RestartInterval: 128, BloomBitsPerKey: 5, DisableCompression: true},
	{BlockSize: 8192, RestartInterval: 16, BloomBitsPerKey: 10},
	{BlockSize: 1 << 20, RestartInterval: 3},
}

// opsPerTable is the length of the random op sequences; -race runs fewer.
func opsPerTable() int {
	if raceEnabled || testing.Short() {
		return 800
	}
	return 3000
}

func TestRoundTripRandom(t *testing.T) {
	seed := testSeed(t)
	for vi, opts := range optionVariants {
		for _, shape := range []struct {
			name                     string
			keys, versions, maxValue int
		}{
			{"few", 5, 2, 20},
			{"many", 600, 3, 100},
			{"versions", 40, 60, 30},
			{"big-values", 60, 2, 9000},
		} {
			t.Run(fmt.Sprintf("%d/%s/%s", vi, shape.name, opts), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(vi*100+len(shape.name))))
				kvs := randomKVs(rng, shape.keys, shape.versions, shape.maxValue)
				data, meta := writeTable(t, opts, kvs, nil)
				r := openBytes(t, data, sstable.ReaderOptions{FileNum: 7})
				defer r.Close()
				checkMeta(t, meta, r, kvs, nil)
				it := r.NewIter()
				got, err := scanAll(it)
				if err != nil {
					t.Fatal(err)
				}
				if want := kvStrings(kvs); !slices.Equal(got, want) {
					t.Fatalf("scan: got %d entries, want %d", len(got), len(want))
				}
				if err := it.Close(); err != nil {
					t.Fatal(err)
				}
				it = r.NewIter()
				runOps(t, rng, it, kvs, opsPerTable())
				if err := it.Close(); err != nil {
					t.Fatal(err)
				}
				for _, e := range kvs {
					if !r.MayContain(e.key.UserKey) {
						t.Fatalf("MayContain(%q) = false for a present key", e.key.UserKey)
					}
				}
			})
		}
	}
}

// checkMeta compares the writer's Meta and the reader's Properties with the
// model.
func checkMeta(t *testing.T, m *sstable.Meta, r *sstable.Reader, kvs []kv, tombs []base.RangeTombstone) {
	t.Helper()
	var dels, raw, rawV uint64
	seqs := []uint64{}
	for _, e := range kvs {
		if e.key.Kind() == base.KindDelete {
			dels++
		}
		raw += uint64(e.key.Size())
		rawV += uint64(len(e.value))
		seqs = append(seqs, e.key.Seq())
	}
	for _, tb := range tombs {
		seqs = append(seqs, tb.Seq)
	}
	if m.NumEntries != uint64(len(kvs)) || m.NumDeletions != dels || m.RawKeyBytes != raw || m.RawValueBytes != rawV ||
		m.NumRangeTombstones != uint64(len(tombs)) {
		t.Errorf("meta counts: %+v", m)
	}
	if m.HasPoints != (len(kvs) > 0) || m.HasRangeTombstones != (len(tombs) > 0) {
		t.Errorf("meta has points %v, tombstones %v", m.HasPoints, m.HasRangeTombstones)
	}
	if len(kvs) > 0 {
		if base.CompareInternal(m.Smallest, kvs[0].key) != 0 || base.CompareInternal(m.Largest, kvs[len(kvs)-1].key) != 0 {
			t.Errorf("meta bounds [%s, %s], want [%s, %s]", m.Smallest, m.Largest, kvs[0].key, kvs[len(kvs)-1].key)
		}
	}
	if len(seqs) > 0 && (m.SmallestSeq != slices.Min(seqs) || m.LargestSeq != slices.Max(seqs)) {
		t.Errorf("meta seqs [%d, %d], want [%d, %d]", m.SmallestSeq, m.LargestSeq, slices.Min(seqs), slices.Max(seqs))
	}
	p := r.Properties()
	if p.NumEntries != m.NumEntries || p.NumDeletions != m.NumDeletions || p.RawKeyBytes != m.RawKeyBytes ||
		p.RawValueBytes != m.RawValueBytes || p.SmallestSeq != m.SmallestSeq || p.LargestSeq != m.LargestSeq ||
		p.NumRangeTombstones != m.NumRangeTombstones || base.CompareInternal(p.SmallestPoint, m.Smallest) != 0 ||
		base.CompareInternal(p.LargestPoint, m.Largest) != 0 || p.CreationTime != fixedClock().UnixNano() {
		t.Errorf("properties %+v disagree with meta %+v", p, m)
	}
	if r.Size() != m.Size {
		t.Errorf("reader size %d, meta %d", r.Size(), m.Size)
	}
}

// TestManyVersionsSpanBlocks stores 2000 versions of one key between two
// neighbours, in blocks of a few entries each.
func TestManyVersionsSpanBlocks(t *testing.T) {
	var kvs []kv
	kvs = append(kvs, kv{base.MakeInternalKey([]byte("j"), 5, base.KindSet), []byte("before")})
	for s := uint64(2000); s >= 1; s-- {
		kind := base.KindSet
		if s%7 == 0 {
			kind = base.KindDelete
		}
		kvs = append(kvs, kv{base.MakeInternalKey([]byte("k"), s, kind), fmt.Appendf(nil, "v%d", s)})
	}
	kvs = append(kvs, kv{base.MakeInternalKey([]byte("l"), 9, base.KindSet), []byte("after")})
	for _, compress := range []bool{false, true} {
		data, _ := writeTable(t, sstable.WriterOptions{BlockSize: 128, BloomBitsPerKey: 10, DisableCompression: !compress}, kvs, nil)
		r := openBytes(t, data, sstable.ReaderOptions{})
		if n := r.Properties().NumDataBlocks; n < 100 {
			t.Fatalf("only %d data blocks", n)
		}
		it := r.NewIter()
		if !it.SeekGE([]byte("k")) || it.Key().Seq() != 2000 || string(it.Key().UserKey) != "k" {
			t.Fatalf("SeekGE(k) = %s", it.Key())
		}
		if !it.SeekLT([]byte("k")) || string(it.Key().UserKey) != "j" {
			t.Fatalf("SeekLT(k) = %s", it.Key())
		}
		if !it.SeekLT([]byte("l")) || it.Key().Seq() != 1 || string(it.Key().UserKey) != "k" {
			t.Fatalf("SeekLT(l) = %s", it.Key())
		}
		if !it.SeekGE([]byte("k\x00")) || string(it.Key().UserKey) != "l" {
			t.Fatalf("SeekGE(k\\x00) = %s", it.Key())
		}
		got, err := scanAll(it)
		if err != nil || !slices.Equal(got, kvStrings(kvs)) {
			t.Fatalf("scan: %d entries, %v", len(got), err)
		}
		it.Close()
		it = r.NewIter()
		runOps(t, rand.New(rand.NewPCG(1, 2)), it, kvs, 2000)
		it.Close()
		r.Close()
	}
}

func TestEmptyTable(t *testing.T) {
	data, meta := writeTable(t, sstable.DefaultWriterOptions(), nil, nil)
	if meta.HasPoints || meta.HasRangeTombstones || meta.NumEntries != 0 || meta.SmallestSeq != 0 || meta.LargestSeq != 0 {
		t.Fatalf("meta %+v", meta)
	}
	r := openBytes(t, data, sstable.ReaderOptions{})
	defer r.Close()
	if r.MayContain([]byte("a")) {
		t.Error("empty table may contain a key")
	}
	if len(r.RangeTombstones()) != 0 {
		t.Error("tombstones in empty table")
	}
	it := r.NewIter()
	defer it.Close()
	for name, op := range map[string]func() bool{
		"first": it.First, "last": it.Last, "next": it.Next, "prev": it.Prev,
		"seek-ge": func() bool { return it.SeekGE([]byte("a")) },
		"seek-lt": func() bool { return it.SeekLT([]byte("a")) },
	} {
		if op() || it.Error() != nil {
			t.Errorf("%s on empty table: true or error %v", name, it.Error())
		}
	}
	if it.Key().UserKey != nil || it.Value() != nil {
		t.Error("key or value when not positioned")
	}
}

func TestOnlyTombstones(t *testing.T) {
	tombs := []base.RangeTombstone{
		{Start: []byte("m"), End: []byte("p"), Seq: 3},
		{Start: []byte("a"), End: []byte("c"), Seq: 9},
		{Start: []byte("a"), End: []byte("c"), Seq: 12},
		{Start: []byte("c"), End: []byte("d"), Seq: 4},
	}
	data, meta := writeTable(t, sstable.DefaultWriterOptions(), nil, tombs)
	r := openBytes(t, data, sstable.ReaderOptions{})
	defer r.Close()
	checkMeta(t, meta, r, nil, tombs)
	want := []base.RangeTombstone{tombs[2], tombs[1], tombs[3], tombs[0]}
	got := r.RangeTombstones()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("tombstones %v, want %v", got, want)
	}
	if string(meta.SmallestTombstone.UserKey) != "a" || meta.SmallestTombstone.Seq() != 12 ||
		meta.SmallestTombstone.Kind() != base.KindRangeDelete || string(meta.TombstoneEnd) != "p" {
		t.Fatalf("tombstone bounds %s, %q", meta.SmallestTombstone, meta.TombstoneEnd)
	}
	it := r.NewIter()
	if it.First() || it.Error() != nil {
		t.Fatal("points in a tombstone-only table")
	}
	it.Close()
	if r.MayContain([]byte("a")) {
		t.Error("MayContain true without point keys")
	}
}

func TestPointsAndTombstones(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 3))
	kvs := randomKVs(rng, 300, 3, 50)
	var tombs []base.RangeTombstone
	keys := randomUserKeys(rng, 40)
	for i := 0; i+1 < len(keys); i += 2 {
		for v := range 1 + rng.IntN(3) {
			tombs = append(tombs, base.RangeTombstone{Start: keys[i], End: keys[i+1], Seq: uint64(100 + v)})
		}
	}
	data, meta := writeTable(t, sstable.WriterOptions{BlockSize: 256, BloomBitsPerKey: 10}, kvs, tombs)
	r := openBytes(t, data, sstable.ReaderOptions{})
	defer r.Close()
	checkMeta(t, meta, r, kvs, tombs)
	got := r.RangeTombstones()
	if len(got) != len(tombs) {
		t.Fatalf("%d tombstones, want %d", len(got), len(tombs))
	}
	for i := 1; i < len(got); i++ {
		a, b := got[i-1], got[i]
		if c := bytes.Compare(a.Start, b.Start); c > 0 || (c == 0 && a.Seq <= b.Seq) {
			t.Fatalf("tombstones out of order: %v then %v", a, b)
		}
	}
	it := r.NewIter()
	runOps(t, rng, it, kvs, 2000)
	it.Close()
}

func TestWriterErrors(t *testing.T) {
	fs := vfs.NewMem()
	newW := func(opts sstable.WriterOptions) *sstable.Writer {
		f, err := fs.Create("w.sst")
		if err != nil {
			t.Fatal(err)
		}
		return sstable.NewWriter(f, opts)
	}
	w := newW(sstable.DefaultWriterOptions())
	k := func(s string, seq uint64, kind base.Kind) base.InternalKey {
		return base.MakeInternalKey([]byte(s), seq, kind)
	}
	if err := w.Add(k("b", 5, base.KindSet), nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  base.InternalKey
		want error
	}{
		{k("b", 5, base.KindSet), sstable.ErrOutOfOrder},
		{k("b", 6, base.KindSet), sstable.ErrOutOfOrder},
		{k("a", 9, base.KindSet), sstable.ErrOutOfOrder},
		{k("c", 1, base.KindRangeDelete), sstable.ErrBadKind},
		{k("c", 1, base.Kind(9)), sstable.ErrBadKind},
	} {
		if err := w.Add(tc.key, nil); !errors.Is(err, tc.want) {
			t.Errorf("Add(%s) = %v, want %v", tc.key, err, tc.want)
		}
	}
	// Refused entries leave the writer usable.
	if err := w.Add(k("b", 4, base.KindDelete), nil); err != nil {
		t.Fatal(err)
	}
	for _, tb := range []base.RangeTombstone{
		{Start: []byte("b"), End: []byte("b"), Seq: 1},
		{Start: []byte("c"), End: []byte("b"), Seq: 1},
		{Start: []byte("a"), End: []byte("b"), Seq: base.MaxSeqNum + 1},
	} {
		if err := w.AddRangeTombstone(tb); !errors.Is(err, sstable.ErrBadTombstone) {
			t.Errorf("AddRangeTombstone(%v) = %v", tb, err)
		}
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Add(k("z", 1, base.KindSet), nil); !errors.Is(err, sstable.ErrWriterClosed) {
		t.Errorf("Add after Close = %v", err)
	}
	if _, err := w.Close(); !errors.Is(err, sstable.ErrWriterClosed) {
		t.Errorf("second Close = %v", err)
	}
	w.Abort()

	// Overlapping tombstones that are not fragmented fail at Close.
	for _, tombs := range [][]base.RangeTombstone{
		{{Start: []byte("a"), End: []byte("c"), Seq: 1}, {Start: []byte("b"), End: []byte("d"), Seq: 2}},
		{{Start: []byte("a"), End: []byte("c"), Seq: 1}, {Start: []byte("a"), End: []byte("d"), Seq: 2}},
		{{Start: []byte("a"), End: []byte("c"), Seq: 1}, {Start: []byte("a"), End: []byte("c"), Seq: 1}},
	} {
		w := newW(sstable.DefaultWriterOptions())
		for _, tb := range tombs {
			if err := w.AddRangeTombstone(tb); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.Close(); !errors.Is(err, sstable.ErrBadTombstone) {
			t.Errorf("Close with %v = %v", tombs, err)
		}
	}

	// Bad options make every call fail.
	w = newW(sstable.WriterOptions{RestartInterval: 1000})
	if err := w.Add(k("a", 1, base.KindSet), nil); !errors.Is(err, sstable.ErrBadOptions) {
		t.Errorf("Add with bad options = %v", err)
	}
	if _, err := w.Close(); !errors.Is(err, sstable.ErrBadOptions) {
		t.Errorf("Close with bad options = %v", err)
	}

	// Abort closes the file without a table.
	w = newW(sstable.DefaultWriterOptions())
	w.Add(k("a", 1, base.KindSet), []byte("v"))
	w.Abort()
	if _, err := w.Close(); !errors.Is(err, sstable.ErrWriterClosed) {
		t.Errorf("Close after Abort = %v", err)
	}
}

func TestEstimatedSize(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	kvs := randomKVs(rng, 2000, 1, 100)
	fs := vfs.NewMem()
	f, _ := fs.Create("e.sst")
	w := sstable.NewWriter(f, sstable.DefaultWriterOptions())
	for _, e := range kvs {
		if err := w.Add(e.key, e.value); err != nil {
			t.Fatal(err)
		}
	}
	prev := w.EstimatedSize()
	m, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if ratio := float64(prev) / float64(m.Size); ratio < 0.8 || ratio > 1.25 {
		t.Errorf("estimate %d vs size %d", prev, m.Size)
	}
}

// TestBloomFalsePositiveRate measures the filter's false-positive rate at
// the default 10 bits per key (theory: 0.82% with k=7).
func TestBloomFalsePositiveRate(t *testing.T) {
	const n, probes = 20000, 200000
	var kvs []kv
	for i := range n {
		kvs = append(kvs, kv{base.MakeInternalKey(fmt.Appendf(nil, "key-%08d", i), 1, base.KindSet), nil})
	}
	data, _ := writeTable(t, sstable.DefaultWriterOptions(), kvs, nil)
	stats := new(sstable.ReaderStats)
	r := openBytes(t, data, sstable.ReaderOptions{Stats: stats})
	defer r.Close()
	if !r.HasFilter() {
		t.Fatal("no filter")
	}
	for _, e := range kvs {
		if !r.MayContain(e.key.UserKey) {
			t.Fatalf("false negative for %q", e.key.UserKey)
		}
	}
	fp := 0
	for i := range probes {
		if r.MayContain(fmt.Appendf(nil, "absent-%08d", i)) {
			fp++
			r.RecordBloomUseless()
		}
	}
	rate := float64(fp) / probes
	t.Logf("bloom: %d bits/key, false-positive rate %.3f%% (%d of %d); filter %d bytes",
		sstable.DefaultBloomBitsPerKey, 100*rate, fp, probes, r.Properties().FilterSize)
	if rate > 0.015 || rate < 0.003 {
		t.Errorf("false-positive rate %.4f outside [0.3%%, 1.5%%]", rate)
	}
	if got := stats.BloomProbes.Load(); got != n+probes {
		t.Errorf("probes %d", got)
	}
	if stats.BloomUseful.Load() != uint64(probes-fp) || stats.BloomUseless.Load() != uint64(fp) {
		t.Errorf("useful %d useless %d", stats.BloomUseful.Load(), stats.BloomUseless.Load())
	}
	// MayContainHash agrees with MayContain.
	for i := range 1000 {
		k := fmt.Appendf(nil, "x%d", i)
		if r.MayContain(k) != r.MayContainHash(sstable.BloomHash(k)) {
			t.Fatal("MayContainHash disagrees")
		}
	}
}

func TestNoFilter(t *testing.T) {
	kvs := []kv{{base.MakeInternalKey([]byte("a"), 1, base.KindSet), nil}}
	data, _ := writeTable(t, sstable.WriterOptions{}, kvs, nil)
	stats := new(sstable.ReaderStats)
	r := openBytes(t, data, sstable.ReaderOptions{Stats: stats})
	defer r.Close()
	if r.HasFilter() || !r.MayContain([]byte("zzz")) {
		t.Fatal("table without filter must answer maybe")
	}
	r.RecordBloomUseless()
	if stats.BloomProbes.Load()+stats.BloomUseless.Load() != 0 {
		t.Fatal("probes counted without a filter")
	}
}

// TestCacheEquivalence runs the same ops on readers with and without a
// cache (and on a second reader sharing the cache), which must agree, and
// checks the cache is used.
func TestCacheEquivalence(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 4))
	kvs := randomKVs(rng, 2000, 3, 200)
	data, _ := writeTable(t, sstable.WriterOptions{BlockSize: 1024, BloomBitsPerKey: 10}, kvs, nil)
	cache, err := blockcache.New(64 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	stats := new(sstable.ReaderStats)
	plain := openBytes(t, data, sstable.ReaderOptions{FileNum: 1})
	cached := openBytes(t, data, sstable.ReaderOptions{FileNum: 1, Cache: cache, Stats: stats})
	cached2 := openBytes(t, data, sstable.ReaderOptions{FileNum: 1, Cache: cache, Stats: stats})
	its := []*sstable.Iterator{plain.NewIter(), cached.NewIter(), cached2.NewIter()}
	for pass := range 2 {
		opRng := rand.New(rand.NewPCG(seed, uint64(pass)))
		for range 3000 {
			var k []byte
			op := opRng.IntN(6)
			if op < 2 {
				k = randomSeekKey(opRng, kvs)
			}
			var out [3]string
			for j, it := range its {
				var ok bool
				switch op {
				case 0:
					ok = it.SeekGE(k)
				case 1:
					ok = it.SeekLT(k)
				case 2, 3:
					ok = it.Next()
				case 4:
					ok = it.Prev()
				case 5:
					ok = it.First()
				}
				out[j] = iterCurrent(it, ok)
			}
			if out[0] != out[1] || out[0] != out[2] {
				t.Fatalf("op %d on %q: plain %s, cached %s, cached2 %s", op, k, out[0], out[1], out[2])
			}
		}
		cache.Wait()
	}
	for _, it := range its {
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
	h, m := stats.CacheHits.Load(), stats.CacheMisses.Load()
	t.Logf("cache: %d hits, %d misses, %d blocks read; %v", h, m, stats.BlocksRead.Load(), cache.Metrics())
	if h == 0 || m == 0 || stats.BlocksRead.Load() != m {
		t.Errorf("cache not used as expected: hits %d misses %d reads %d", h, m, stats.BlocksRead.Load())
	}
}

// TestConcurrentIterators runs iterators on one reader from many goroutines
// (meaningful under -race), with and without a cache.
func TestConcurrentIterators(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 5))
	kvs := randomKVs(rng, 1000, 3, 300)
	data, _ := writeTable(t, sstable.WriterOptions{BlockSize: 512, BloomBitsPerKey: 10}, kvs, nil)
	cache, _ := blockcache.New(1 << 20)
	defer cache.Close()
	for _, c := range []*blockcache.Cache{nil, cache} {
		r := openBytes(t, data, sstable.ReaderOptions{FileNum: 9, Cache: c})
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				it := r.NewIter()
				defer it.Close()
				runOps(t, rand.New(rand.NewPCG(seed, uint64(g))), it, kvs, 1500)
				r.MayContain([]byte("x"))
			}()
		}
		wg.Wait()
		r.Close()
	}
}

// TestValueStableUntilMove checks that a value stays intact until the
// iterator moves, also across block boundaries without a cache.
func TestValueStableUntilMove(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	kvs := randomKVs(rng, 300, 1, 500)
	data, _ := writeTable(t, sstable.WriterOptions{BlockSize: 256}, kvs, nil)
	r := openBytes(t, data, sstable.ReaderOptions{})
	defer r.Close()
	it1, it2 := r.NewIter(), r.NewIter()
	defer it1.Close()
	defer it2.Close()
	i := 0
	for ok := it1.First(); ok; ok = it1.Next() {
		v := it1.Value()
		k := it1.Key()
		// Another iterator reading other blocks must not disturb it1.
		it2.SeekGE(randomSeekKey(rng, kvs))
		if !bytes.Equal(v, kvs[i].value) || base.CompareInternal(k, kvs[i].key) != 0 {
			t.Fatalf("entry %d changed under another iterator", i)
		}
		i++
	}
}

func TestDumpRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	kvs := randomKVs(rng, 200, 2, 300)
	data, _ := writeTable(t, sstable.WriterOptions{BlockSize: 512, BloomBitsPerKey: 10}, kvs, []base.RangeTombstone{{Start: []byte("a"), End: []byte("b"), Seq: 3}})
	r := openBytes(t, data, sstable.ReaderOptions{})
	defer r.Close()
	var buf bytes.Buffer
	if err := sstable.Dump(&buf, r); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(buf.Bytes(), []byte("\n")); n < len(kvs) {
		t.Fatalf("dump has %d lines for %d entries", n, len(kvs))
	}
	if err := sstable.Dump(io.Discard, r); err != nil {
		t.Fatal(err)
	}
}

func TestOptions(t *testing.T) {
	var o sstable.WriterOptions
	o.EnsureDefaults()
	if o.BlockSize != sstable.DefaultBlockSize || o.RestartInterval != sstable.DefaultRestartInterval || o.BloomBitsPerKey != 0 {
		t.Fatalf("defaults %v", o)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	d := sstable.DefaultWriterOptions()
	if d.BloomBitsPerKey != 10 || d.String() != "block-size=8192 restart-interval=16 bloom-bits-per-key=10 compression=lz4" {
		t.Fatalf("DefaultWriterOptions: %v", d)
	}
	for _, bad := range []sstable.WriterOptions{
		{BlockSize: -1, RestartInterval: 1}, {BlockSize: 1, RestartInterval: 129}, {BlockSize: 1, RestartInterval: 1, BloomBitsPerKey: -1},
	} {
		if err := bad.Validate(); !errors.Is(err, sstable.ErrBadOptions) {
			t.Errorf("Validate(%v) = %v", bad, err)
		}
	}
}
