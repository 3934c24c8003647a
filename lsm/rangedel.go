package lsm

import (
	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/rangedel"
)

func maxCovering(frags []base.RangeTombstone, key []byte, snap base.SeqNum) base.SeqNum {
	if len(frags) == 0 {
		return 0
	}
	return rangedel.MaxCovering(frags, key, snap)
}

func overlapping(frags []base.RangeTombstone, lower, upper []byte) []base.RangeTombstone {
	if len(frags) == 0 {
		return nil
	}
	return rangedel.Overlapping(frags, lower, upper)
}

func fragment(ts []base.RangeTombstone) []base.RangeTombstone {
	if len(ts) == 0 {
		return nil
	}
	return rangedel.Fragment(ts)
}
