package sstable_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/sstable"
)

// parseKey parses "user.KIND.seq", e.g. "apple.SET.5".
func parseKey(t testing.TB, s string) base.InternalKey {
	t.Helper()
	i := strings.LastIndexByte(s, '.')
	j := strings.LastIndexByte(s[:max(i, 0)], '.')
	if i < 0 || j < 0 {
		t.Fatalf("bad key %q (want user.KIND.seq)", s)
	}
	seq, err := strconv.ParseUint(s[i+1:], 10, 64)
	if err != nil {
		t.Fatalf("bad seq in %q: %v", s, err)
	}
	kinds := map[string]base.Kind{"SET": base.KindSet, "DEL": base.KindDelete, "VPTR": base.KindValuePointer, "RANGEDEL": base.KindRangeDelete}
	kind, ok := kinds[s[j+1:i]]
	if !ok {
		t.Fatalf("bad kind in %q", s)
	}
	return base.MakeInternalKey([]byte(s[:j]), seq, kind)
}

// TestDataDriven runs testdata/table. Commands:
//
//	build [block-size=N] [restart-interval=N] [bloom=N] [compression=none]
//	user.KIND.seq[:value]       a point entry (entries in order)
//	rangedel start end seq      a range tombstone
//
//	iter                        ops, one per line: first, last, next, prev,
//	                            seek-ge KEY, seek-lt KEY ("" for empty)
//	may-contain                 user keys, one per line
//	tombstones | props | dump
func TestDataDriven(t *testing.T) {
	var r *sstable.Reader
	defer func() {
		if r != nil {
			r.Close()
		}
	}()
	datadriven.RunTest(t, "testdata/table", func(t *testing.T, td *datadriven.TestData) string {
		switch td.Cmd {
		case "build":
			opts := sstable.WriterOptions{}
			for _, a := range td.CmdArgs {
				switch a.Key {
				case "block-size":
					opts.BlockSize, _ = strconv.Atoi(a.Vals[0])
				case "restart-interval":
					opts.RestartInterval, _ = strconv.Atoi(a.Vals[0])
				case "bloom":
					opts.BloomBitsPerKey, _ = strconv.Atoi(a.Vals[0])
				case "compression":
					opts.DisableCompression = a.Vals[0] == "none"
				default:
					t.Fatalf("unknown arg %s", a.Key)
				}
			}
			var kvs []kv
			var tombs []base.RangeTombstone
			for _, line := range strings.Split(td.Input, "\n") {
				line = strings.TrimSpace(line)
				if line == "" {
					continue
				}
				if f := strings.Fields(line); f[0] == "rangedel" {
					seq, _ := strconv.ParseUint(f[3], 10, 64)
					tombs = append(tombs, base.RangeTombstone{Start: []byte(f[1]), End: []byte(f[2]), Seq: seq})
					continue
				}
				k, v, _ := strings.Cut(line, ":")
				kvs = append(kvs, kv{parseKey(t, k), []byte(v)})
			}
			data, m := writeTable(t, opts, kvs, tombs)
			if r != nil {
				r.Close()
			}
			r = openBytes(t, data, sstable.ReaderOptions{FileNum: 1})
			var b strings.Builder
			fmt.Fprintf(&b, "size %d, %d entries, %d data blocks, %d range tombstones\n",
				m.Size, m.NumEntries, m.Properties.NumDataBlocks, m.NumRangeTombstones)
			if m.HasPoints {
				fmt.Fprintf(&b, "points [%s, %s]\n", m.Smallest, m.Largest)
			}
			if m.HasRangeTombstones {
				fmt.Fprintf(&b, "tombstones [%s, %q)\n", m.SmallestTombstone, m.TombstoneEnd)
			}
			fmt.Fprintf(&b, "seq [%d, %d]\n", m.SmallestSeq, m.LargestSeq)
			return b.String()

		case "iter":
			it := r.NewIter()
			defer it.Close()
			var b strings.Builder
			for _, line := range strings.Split(td.Input, "\n") {
				f := strings.Fields(line)
				if len(f) == 0 {
					continue
				}
				var ok bool
				arg := func() []byte {
					if len(f) < 2 {
						t.Fatalf("%s needs a key", f[0])
					}
					s, err := strconv.Unquote(f[1])
					if err != nil {
						s = f[1]
					}
					return []byte(s)
				}
				switch f[0] {
				case "first":
					ok = it.First()
				case "last":
					ok = it.Last()
				case "next":
					ok = it.Next()
				case "prev":
					ok = it.Prev()
				case "seek-ge":
					ok = it.SeekGE(arg())
				case "seek-lt":
					ok = it.SeekLT(arg())
				default:
					t.Fatalf("unknown op %s", f[0])
				}
				fmt.Fprintf(&b, "%s: %s\n", line, iterCurrent(it, ok))
			}
			return b.String()

		case "may-contain":
			var b strings.Builder
			for _, k := range strings.Fields(td.Input) {
				fmt.Fprintf(&b, "%s: %v\n", k, r.MayContain([]byte(k)))
			}
			return b.String()

		case "tombstones":
			var b strings.Builder
			for _, tb := range r.RangeTombstones() {
				fmt.Fprintf(&b, "[%s, %s)#%d\n", tb.Start, tb.End, tb.Seq)
			}
			return b.String()

		case "props":
			return r.Properties().String()

		case "dump":
			var b strings.Builder
			if err := sstable.Dump(&b, r); err != nil {
				fmt.Fprintf(&b, "error: %v\n", err)
			}
			return b.String()
		}
		t.Fatalf("unknown command %s", td.Cmd)
		return ""
	})
}
