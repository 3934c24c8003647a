package rangedel

import (
	"bytes"
	"slices"
	"sort"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

// Fragment returns the fragmented form of ts (which it may reorder). Spans in
// the result alias the keys of ts.
func Fragment(ts []base.RangeTombstone) []base.RangeTombstone {
	if len(ts) == 0 {
		return nil
	}
	bounds := make([][]byte, 0, 2*len(ts))
	for _, t := range ts {
		if bytes.Compare(t.Start, t.End) < 0 {
			bounds = append(bounds, t.Start, t.End)
		}
	}
	if len(bounds) == 0 {
		return nil
	}
	slices.SortFunc(bounds, bytes.Compare)
	bounds = slices.CompactFunc(bounds, bytes.Equal)
	sorted := make([]base.RangeTombstone, 0, len(ts))
	for _, t := range ts {
		if bytes.Compare(t.Start, t.End) < 0 {
			sorted = append(sorted, t)
		}
	}
	slices.SortFunc(sorted, func(a, b base.RangeTombstone) int { return bytes.Compare(a.Start, b.Start) })

	var out []base.RangeTombstone
	var active []base.RangeTombstone
	next := 0
	for i := 0; i+1 < len(bounds); i++ {
		lo, hi := bounds[i], bounds[i+1]
		// Drop tombstones that ended at or before lo.
		active = slices.DeleteFunc(active, func(t base.RangeTombstone) bool { return bytes.Compare(t.End, lo) <= 0 })
		for next < len(sorted) && bytes.Compare(sorted[next].Start, lo) <= 0 {
			if bytes.Compare(sorted[next].End, lo) > 0 {
				active = append(active, sorted[next])
			}
			next++
		}
		if len(active) == 0 {
			continue
		}
		first := len(out)
		for _, t := range active {
			out = append(out, base.RangeTombstone{Start: lo, End: hi, Seq: t.Seq})
		}
		frag := out[first:]
		sort.Slice(frag, func(a, b int) bool { return frag[a].Seq > frag[b].Seq })
		// Identical seqs in one span add nothing.
		out = append(out[:first], slices.CompactFunc(frag, func(a, b base.RangeTombstone) bool { return a.Seq == b.Seq })...)
	}
	return out
}

// MaxCovering returns the largest sequence number <= snap of a tombstone in
// the fragmented set frags that covers key, or 0.
func MaxCovering(frags []base.RangeTombstone, key []byte, snap base.SeqNum) base.SeqNum {
	// First fragment whose End > key; fragments are disjoint-or-identical
	// and sorted by Start, so their Ends are sorted too.
	i := sort.Search(len(frags), func(i int) bool { return bytes.Compare(frags[i].End, key) > 0 })
	for ; i < len(frags); i++ {
		f := frags[i]
		if bytes.Compare(f.Start, key) > 0 {
			return 0
		}
		if f.Seq <= snap {
			return f.Seq
		}
	}
	return 0
}

// Overlapping returns the fragments of frags that overlap [lower, upper);
// nil bounds are open.
func Overlapping(frags []base.RangeTombstone, lower, upper []byte) []base.RangeTombstone {
	i := 0
	if lower != nil {
		i = sort.Search(len(frags), func(i int) bool { return bytes.Compare(frags[i].End, lower) > 0 })
	}
	j := len(frags)
	if upper != nil {
		j = sort.Search(len(frags), func(i int) bool { return bytes.Compare(frags[i].Start, upper) >= 0 })
	}
	if i >= j {
		return nil
	}
	return frags[i:j]
}
