package sstable

import (
	"bytes"
	"slices"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

// The range-tombstone block holds one entry per fragment: key = the
// internal key (start, seq, RANGEDEL), value = the exclusive end user key.
// Entries are sorted by CompareInternal, which is start ascending, then seq
// descending. Fragments are already fragmented: two of them either have
// the same [start, end) or do not overlap.

func tombstoneKey(t base.RangeTombstone) base.InternalKey {
	return base.MakeInternalKey(t.Start, t.Seq, base.KindRangeDelete)
}

func compareTombstones(a, b base.RangeTombstone) int {
	return base.CompareInternal(tombstoneKey(a), tombstoneKey(b))
}

// checkFragmented reports the index of the first tombstone of a sorted
// slice that repeats a (start, seq) or overlaps its predecessor without
// sharing its bounds, or -1.
func checkFragmented(ts []base.RangeTombstone) int {
	for i := 1; i < len(ts); i++ {
		p, t := ts[i-1], ts[i]
		if bytes.Equal(p.Start, t.Start) {
			if p.Seq == t.Seq || !bytes.Equal(p.End, t.End) {
				return i
			}
		} else if bytes.Compare(t.Start, p.End) < 0 {
			return i
		}
	}
	return -1
}

// sortTombstones sorts fragments into block order.
func sortTombstones(ts []base.RangeTombstone) { slices.SortFunc(ts, compareTombstones) }

// decodeTombstones decodes a checked range-tombstone block into fragments
// whose keys share one allocation (not aliasing b).
func decodeTombstones(b []byte) (ts []base.RangeTombstone, badOff int, reason string) {
	var it blockIter
	buf := make([]byte, 0, len(b))
	type span struct{ s, e, seq uint64 }
	var spans []span
	_, badOff, reason = checkBlock(&it, b, 1, func(k, v []byte) string {
		ik, ok := base.DecodeInternalKey(k)
		if !ok || ik.Kind() != base.KindRangeDelete {
			return "bad range tombstone key"
		}
		if bytes.Compare(ik.UserKey, v) >= 0 {
			return "empty range tombstone"
		}
		s := uint64(len(buf))
		buf = append(buf, ik.UserKey...)
		e := uint64(len(buf))
		buf = append(buf, v...)
		spans = append(spans, span{s, e, ik.Seq()})
		return ""
	})
	if reason != "" {
		return nil, badOff, reason
	}
	ts = make([]base.RangeTombstone, len(spans))
	for i, sp := range spans {
		end := uint64(len(buf))
		if i+1 < len(spans) {
			end = spans[i+1].s
		}
		ts[i] = base.RangeTombstone{
			Start: buf[sp.s:sp.e:sp.e],
			End:   buf[sp.e:end:end],
			Seq:   sp.seq,
		}
	}
	for i := 1; i < len(ts); i++ {
		if compareTombstones(ts[i-1], ts[i]) >= 0 {
			return nil, 0, "range tombstones out of order"
		}
	}
	if i := checkFragmented(ts); i >= 0 {
		return nil, 0, "range tombstones not fragmented"
	}
	return ts, 0, ""
}
