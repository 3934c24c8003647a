package sstable

import (
	"encoding/binary"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

func benchBlock() []byte {
	b := blockBuilder{restartInterval: 16}
	v := make([]byte, 100)
	for i := 0; b.estimatedSize() < 8<<10; i++ {
		k := []byte{'B'}
		k = binary.BigEndian.AppendUint64(k, 7)
		k = binary.BigEndian.AppendUint64(k, uint64(i))
		b.add(base.MakeInternalKey(k, uint64(1000-i), base.KindSet).Encode(), v)
	}
	return b.finish()
}

func BenchmarkCheckDataBlock(b *testing.B) {
	blk := benchBlock()
	var c blockChecker
	b.SetBytes(int64(len(blk)))
	for b.Loop() {
		if _, reason := checkDataEntries(&c, blk, nil, nil); reason != "" {
			b.Fatal(reason)
		}
	}
}

func BenchmarkWalkBlock(b *testing.B) {
	blk := benchBlock()
	var it blockIter
	b.SetBytes(int64(len(blk)))
	for b.Loop() {
		it.init(blk)
		for ok := it.first(); ok; ok = it.next() {
		}
	}
}
