package sstable_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/sstable"
)

// observe opens a table image and reads everything a caller can: the
// tombstones, properties, both scan directions, seeks around every key and
// bloom answers. It returns a transcript, or the first error.
func observe(data []byte, size int64, probe [][]byte) (string, error) {
	r, err := sstable.Open(newBytesFile(data), size, sstable.ReaderOptions{FileNum: 42})
	if err != nil {
		return "", err
	}
	defer r.Close()
	var b strings.Builder
	fmt.Fprintln(&b, r.RangeTombstones())
	fmt.Fprintln(&b, r.Properties().String())
	it := r.NewIter()
	defer it.Close()
	entries, err := scanAll(it)
	if err != nil {
		return "", err
	}
	fmt.Fprintln(&b, entries)
	for _, k := range probe {
		fmt.Fprintln(&b, iterCurrent(it, it.SeekGE(k)), iterCurrent(it, it.Next()))
		fmt.Fprintln(&b, iterCurrent(it, it.SeekLT(k)), iterCurrent(it, it.Prev()))
		if err := it.Error(); err != nil {
			return "", err
		}
		fmt.Fprintln(&b, r.MayContain(k))
	}
	if err := sstable.Dump(io.Discard, r); err != nil {
		return "", err
	}
	return b.String(), nil
}

// checkCorrupt fails unless err reports corruption in 000042.sst at an
// offset inside the table.
func checkCorrupt(t *testing.T, err error, size int, what string) {
	t.Helper()
	var ce *base.CorruptionError
	if !errors.Is(err, base.ErrCorrupt) || !errors.As(err, &ce) {
		t.Fatalf("%s: error %v is not a corruption error", what, err)
	}
	if ce.File != "000042.sst" || ce.Offset < 0 || ce.Offset > int64(size) {
		t.Fatalf("%s: error %v names %s at %d", what, err, ce.File, ce.Offset)
	}
}

func corruptionFixture(t *testing.T, opts sstable.WriterOptions) (data []byte, probe [][]byte) {
	rng := rand.New(rand.NewPCG(11, uint64(opts.BlockSize)))
	kvs := randomKVs(rng, 120, 3, 60)
	tombs := []base.RangeTombstone{
		{Start: []byte("a"), End: []byte("ab"), Seq: 1000},
		{Start: []byte("b"), End: []byte("bb"), Seq: 7},
	}
	data, _ = writeTable(t, opts, kvs, tombs)
	for i := 0; i < len(kvs); i += 3 {
		probe = append(probe, kvs[i].key.UserKey, append(bytes.Clone(kvs[i].key.UserKey), 0))
	}
	return data, append(probe, []byte(""), []byte("\xff\xff\xff"))
}

// TestCorruptionFlips flips every byte of populated tables (each bit
// pattern in turn): every read must either report corruption or, if the
// flip went unnoticed, return exactly the original answers. Every byte of
// the format is under a checksum, so we also expect every flip to be seen.
func TestCorruptionFlips(t *testing.T) {
	for _, opts := range []sstable.WriterOptions{
		{BlockSize: 256, RestartInterval: 4, BloomBitsPerKey: 10},
		{BlockSize: 512, BloomBitsPerKey: 10, DisableCompression: true},
	} {
		t.Run(opts.String(), func(t *testing.T) {
			data, probe := corruptionFixture(t, opts)
			want, err := observe(data, int64(len(data)), probe)
			if err != nil {
				t.Fatal(err)
			}
			step := 1
			if testing.Short() || raceEnabled {
				step = 13 // every 13th byte: still every block and field
			}
			detected, unnoticed := 0, 0
			mut := make([]byte, len(data))
			for pos := 0; pos < len(data); pos += step {
				for _, mask := range []byte{0xff, 1 << (pos % 8)} {
					copy(mut, data)
					mut[pos] ^= mask
					got, err := observe(mut, int64(len(mut)), probe)
					what := fmt.Sprintf("flip %#x at %d of %d", mask, pos, len(data))
					if err != nil {
						checkCorrupt(t, err, len(data), what)
						detected++
						continue
					}
					if got != want {
						t.Fatalf("%s: unnoticed, and the answers changed", what)
					}
					unnoticed++
				}
			}
			t.Logf("%d bytes: %d flips detected, %d unnoticed", len(data), detected, unnoticed)
			if unnoticed > 0 {
				t.Errorf("%d flips went unnoticed in a fully checksummed format", unnoticed)
			}
		})
	}
}

// TestCorruptionTruncation opens every prefix of a table, both as a short
// file and as a file shorter than the size the caller claims.
func TestCorruptionTruncation(t *testing.T) {
	data, probe := corruptionFixture(t, sstable.WriterOptions{BlockSize: 256, BloomBitsPerKey: 10})
	for n := 0; n < len(data); n++ {
		_, err := observe(data[:n], int64(n), probe)
		checkCorrupt(t, err, len(data), fmt.Sprintf("truncated to %d", n))
		_, err = observe(data[:n], int64(len(data)), probe)
		checkCorrupt(t, err, len(data), fmt.Sprintf("truncated to %d, size claimed %d", n, len(data)))
	}
	// Trailing garbage moves the footer.
	_, err := observe(append(bytes.Clone(data), 0, 0, 0), int64(len(data)+3), probe)
	checkCorrupt(t, err, len(data)+3, "extended")
}

// TestSwappedBlocks swaps two data blocks of equal length: each keeps a
// valid checksum, so only the check of keys against the index separators
// can notice.
func TestSwappedBlocks(t *testing.T) {
	var kvs []kv
	for i := range 10 {
		kvs = append(kvs, kv{base.MakeInternalKey(fmt.Appendf(nil, "k%02d", i), 1, base.KindSet), []byte("value")})
	}
	data, _ := writeTable(t, sstable.WriterOptions{BlockSize: 1, DisableCompression: true}, kvs, nil)
	r := openBytes(t, data, sstable.ReaderOptions{})
	n := r.Properties().DataSize / 10
	r.Close()
	mut := bytes.Clone(data)
	copy(mut[2*n:3*n], data[5*n:6*n])
	copy(mut[5*n:6*n], data[2*n:3*n])
	for _, probe := range [][]byte{[]byte("k02"), []byte("k05")} {
		_, err := observe(mut, int64(len(mut)), [][]byte{probe})
		checkCorrupt(t, err, len(mut), "swapped blocks")
	}
	r = openBytes(t, mut, sstable.ReaderOptions{FileNum: 42})
	defer r.Close()
	it := r.NewIter()
	defer it.Close()
	// Seeking to a key in an untouched block still works...
	if !it.SeekGE([]byte("k07")) || string(it.Key().UserKey) != "k07" {
		t.Fatalf("SeekGE(k07) = %s, %v", it.Key(), it.Error())
	}
	// ...and one that reads a swapped block fails, and stays failed.
	if it.SeekGE([]byte("k02")) {
		t.Fatalf("SeekGE(k02) read a swapped block: %s", it.Key())
	}
	checkCorrupt(t, it.Error(), len(mut), "SeekGE into a swapped block")
	if it.First() || it.Error() == nil {
		t.Fatal("error not sticky")
	}
}
