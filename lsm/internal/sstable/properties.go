package sstable

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

// Properties describe a table. They are stored in the properties block, one
// entry per field named below (part of the on-disk format; never change a
// name or its encoding): numbers as uvarints, the creation time as a signed
// varint, keys as encoded internal keys, strings as bytes. Readers ignore
// names they do not know.
type Properties struct {
	// NumEntries counts point entries (SET, DEL and VPTR); NumDeletions
	// the DELs among them, NumValuePointers the VPTRs.
	NumEntries, NumDeletions, NumValuePointers uint64
	// NumRangeTombstones counts the range tombstone fragments.
	NumRangeTombstones uint64
	// RawKeyBytes and RawValueBytes sum the encoded internal keys (user key
	// plus 8-byte trailer) and the values of the point entries, before
	// prefix and block compression.
	RawKeyBytes, RawValueBytes uint64
	// SmallestSeq and LargestSeq bound the sequence numbers of every point
	// entry and range tombstone (both 0 in an empty table).
	SmallestSeq, LargestSeq base.SeqNum
	// SmallestPoint and LargestPoint are the first and last point keys
	// (zero when NumEntries is 0).
	SmallestPoint, LargestPoint base.InternalKey
	// NumDataBlocks counts data blocks; DataSize is their stored length
	// with trailers (the offset where the meta blocks start); IndexSize
	// and FilterSize the stored lengths of those blocks.
	NumDataBlocks, DataSize, IndexSize, FilterSize uint64
	// The options the table was written with.
	Compression                                 string
	BlockSize, RestartInterval, BloomBitsPerKey uint64
	// CreationTime is when the writer was created, in Unix nanoseconds.
	CreationTime int64
	// Creator names the software that wrote the table.
	Creator string
}

// Property names (part of the on-disk format; never change).
const (
	propBlockSize       = "lsmfs.block.size"
	propRestartInterval = "lsmfs.block.restart-interval"
	propBloomBits       = "lsmfs.bloom.bits-per-key"
	propCompression     = "lsmfs.compression"
	propCreationTime    = "lsmfs.creation.time"
	propCreator         = "lsmfs.creator"
	propDataBlocks      = "lsmfs.data.blocks"
	propDataSize        = "lsmfs.data.size"
	propFilterSize      = "lsmfs.filter.size"
	propIndexSize       = "lsmfs.index.size"
	propNumDeletions    = "lsmfs.num.deletions"
	propNumEntries      = "lsmfs.num.entries"
	propNumRangeDels    = "lsmfs.num.range-deletions"
	propNumValuePtrs    = "lsmfs.num.value-pointers"
	propLargestPoint    = "lsmfs.point.largest"
	propSmallestPoint   = "lsmfs.point.smallest"
	propRawKeySize      = "lsmfs.raw.key.size"
	propRawValueSize    = "lsmfs.raw.value.size"
	propLargestSeq      = "lsmfs.seq.largest"
	propSmallestSeq     = "lsmfs.seq.smallest"
)

// creator is written in every table.
const creator = "lsmfs sstable writer v1"

// numberProps maps each numeric property to its field.
func (p *Properties) numberProps() []struct {
	name string
	v    *uint64
} {
	return []struct {
		name string
		v    *uint64
	}{
		{propBlockSize, &p.BlockSize},
		{propRestartInterval, &p.RestartInterval},
		{propBloomBits, &p.BloomBitsPerKey},
		{propDataBlocks, &p.NumDataBlocks},
		{propDataSize, &p.DataSize},
		{propFilterSize, &p.FilterSize},
		{propIndexSize, &p.IndexSize},
		{propNumDeletions, &p.NumDeletions},
		{propNumEntries, &p.NumEntries},
		{propNumRangeDels, &p.NumRangeTombstones},
		{propNumValuePtrs, &p.NumValuePointers},
		{propRawKeySize, &p.RawKeyBytes},
		{propRawValueSize, &p.RawValueBytes},
		{propLargestSeq, &p.LargestSeq},
		{propSmallestSeq, &p.SmallestSeq},
	}
}

// encode builds the properties block (no prefix compression).
func (p *Properties) encode() []byte {
	type kv struct {
		k string
		v []byte
	}
	var kvs []kv
	for _, n := range p.numberProps() {
		kvs = append(kvs, kv{n.name, binary.AppendUvarint(nil, *n.v)})
	}
	kvs = append(kvs,
		kv{propCompression, []byte(p.Compression)},
		kv{propCreationTime, binary.AppendVarint(nil, p.CreationTime)},
		kv{propCreator, []byte(p.Creator)},
	)
	if p.NumEntries > 0 {
		kvs = append(kvs,
			kv{propSmallestPoint, p.SmallestPoint.Encode()},
			kv{propLargestPoint, p.LargestPoint.Encode()})
	}
	// Entries of a block are sorted.
	for i := 1; i < len(kvs); i++ {
		for j := i; j > 0 && kvs[j].k < kvs[j-1].k; j-- {
			kvs[j], kvs[j-1] = kvs[j-1], kvs[j]
		}
	}
	b := blockBuilder{restartInterval: 1}
	for _, e := range kvs {
		b.add([]byte(e.k), e.v)
	}
	return b.finish()
}

// decodeProperties decodes a checked properties block. The keys it returns
// do not alias b.
func decodeProperties(b []byte) (p Properties, badOff int, reason string) {
	nums := map[string]*uint64{}
	for _, n := range p.numberProps() {
		nums[n.name] = n.v
	}
	var it blockIter
	var prev []byte
	var haveSmallest, haveLargest bool
	_, badOff, reason = checkBlock(&it, b, 1, func(k, v []byte) string {
		if prev != nil && bytes.Compare(prev, k) >= 0 {
			return "property names out of order"
		}
		prev = append(prev[:0], k...)
		if dst, ok := nums[string(k)]; ok {
			x, n := binary.Uvarint(v)
			if n <= 0 || n != len(v) {
				return fmt.Sprintf("bad number in property %q", k)
			}
			*dst = x
			return ""
		}
		switch string(k) {
		case propCompression:
			p.Compression = string(v)
		case propCreator:
			p.Creator = string(v)
		case propCreationTime:
			x, n := binary.Varint(v)
			if n <= 0 || n != len(v) {
				return "bad creation time"
			}
			p.CreationTime = x
		case propSmallestPoint, propLargestPoint:
			ik, ok := base.DecodeInternalKey(v)
			if !ok {
				return fmt.Sprintf("bad key in property %q", k)
			}
			ik = ik.Clone()
			if string(k) == propSmallestPoint {
				p.SmallestPoint, haveSmallest = ik, true
			} else {
				p.LargestPoint, haveLargest = ik, true
			}
		}
		return ""
	})
	if reason != "" {
		return p, badOff, reason
	}
	if p.NumEntries > 0 && (!haveSmallest || !haveLargest) {
		return p, 0, "point key bounds missing"
	}
	if p.NumDeletions+p.NumValuePointers > p.NumEntries || p.SmallestSeq > p.LargestSeq ||
		(p.NumEntries > 0 && base.CompareInternal(p.SmallestPoint, p.LargestPoint) > 0) {
		return p, 0, "inconsistent properties"
	}
	return p, 0, ""
}

// writeTo prints the properties, one per line.
func (p Properties) writeTo(w io.Writer, indent string) {
	fmt.Fprintf(w, "%sentries: %d (deletions %d, value pointers %d)\n", indent, p.NumEntries, p.NumDeletions, p.NumValuePointers)
	fmt.Fprintf(w, "%srange tombstones: %d\n", indent, p.NumRangeTombstones)
	fmt.Fprintf(w, "%sraw key bytes: %d, raw value bytes: %d\n", indent, p.RawKeyBytes, p.RawValueBytes)
	fmt.Fprintf(w, "%sseq: [%d, %d]\n", indent, p.SmallestSeq, p.LargestSeq)
	if p.NumEntries > 0 {
		fmt.Fprintf(w, "%spoint keys: [%s, %s]\n", indent, p.SmallestPoint, p.LargestPoint)
	}
	fmt.Fprintf(w, "%sdata: %d blocks, %d bytes; index %d bytes; filter %d bytes\n",
		indent, p.NumDataBlocks, p.DataSize, p.IndexSize, p.FilterSize)
	fmt.Fprintf(w, "%soptions: block-size=%d restart-interval=%d bloom-bits-per-key=%d compression=%s\n",
		indent, p.BlockSize, p.RestartInterval, p.BloomBitsPerKey, p.Compression)
	fmt.Fprintf(w, "%screated: %s by %q\n", indent, time.Unix(0, p.CreationTime).UTC().Format(time.RFC3339Nano), p.Creator)
}

func (p Properties) String() string {
	var b bytes.Buffer
	p.writeTo(&b, "")
	return b.String()
}
