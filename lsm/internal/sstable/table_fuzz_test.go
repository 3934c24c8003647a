package sstable_test

import (
	"io"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/internal/sstable"
)

// FuzzTable opens arbitrary bytes as a table, with checksums verified and,
// to reach the decoders behind them, without. Every failure must be a
// corruption error; nothing may panic or loop; when everything succeeds the
// forward and backward scans agree. Seeds: testdata/fuzz/FuzzTable.
func FuzzTable(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, verify := range []bool{true, false} {
			open := sstable.Open
			if !verify {
				open = sstable.OpenUnverified
			}
			r, err := open(newBytesFile(data), int64(len(data)), sstable.ReaderOptions{FileNum: 42})
			if err != nil {
				if !isCorrupt(err) {
					t.Fatalf("Open: %v is not a corruption error", err)
				}
				continue
			}
			it := r.NewIter()
			if _, err := scanAll(it); err != nil && !isCorrupt(err) {
				t.Fatalf("scan: %v", err)
			}
			it.Close()
			it = r.NewIter()
			for _, k := range [][]byte{nil, []byte("a"), []byte("b"), []byte("m"), []byte("\xff")} {
				it.SeekGE(k)
				it.Next()
				it.SeekLT(k)
				it.Prev()
				r.MayContain(k)
			}
			if err := it.Close(); err != nil && !isCorrupt(err) {
				t.Fatalf("seek: %v", err)
			}
			if err := sstable.Dump(io.Discard, r); err != nil && !isCorrupt(err) {
				t.Fatalf("Dump: %v", err)
			}
			r.Close()
		}
	})
}
