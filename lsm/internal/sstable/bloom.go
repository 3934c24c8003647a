package sstable

import (
	"math"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// The filter is a classic Bloom filter over the user keys of a table (one
// filter per table, not per block), probed by double hashing of one 64-bit
// xxhash:
//
//	h     = xxhash64(user key)
//	delta = h rotated right by 33 bits
//	probe i (0 <= i < k): bit index = high 64 bits of (h + i*delta) * nbits
//
// Mapping with a multiply-high instead of a modulo (Lemire's "fast range")
// keeps the probes cheap. The block is the bit array followed by one byte k:
//
//	+-------------------------------+-------+
//	| bits (nbits/8 bytes, bit j is | k (1) |
//	| byte j/8, mask 1<<(j%8))      |       |
//	+-------------------------------+-------+
//
// The hash, the probe sequence and the layout are part of the on-disk format;
// never change them.

// BloomHash is the hash the filter is built from. An engine probing many
// tables for one key computes it once and calls MayContainHash.
func BloomHash(userKey []byte) uint64 { return xxhash.Sum64(userKey) }

// bloomProbes is the number of probes for bitsPerKey, ln 2 * bits/key
// rounded, which minimises the false-positive rate.
func bloomProbes(bitsPerKey int) int {
	k := int(math.Round(float64(bitsPerKey) * math.Ln2))
	return min(max(k, 1), bloomMaxProbes)
}

// buildBloom returns the filter block for the given key hashes.
func buildBloom(hashes []uint64, bitsPerKey int) []byte {
	nbits := uint64(len(hashes)) * uint64(bitsPerKey)
	nbits = max(nbits, 64)
	nbytes := (nbits + 7) / 8
	nbits = nbytes * 8
	k := bloomProbes(bitsPerKey)
	b := make([]byte, nbytes+1)
	for _, h := range hashes {
		delta := bits.RotateLeft64(h, -33)
		for range k {
			j, _ := bits.Mul64(h, nbits)
			b[j/8] |= 1 << (j % 8)
			h += delta
		}
	}
	b[nbytes] = byte(k)
	return b
}

// bloomFilter is a decoded filter block.
type bloomFilter struct {
	bits  []byte
	nbits uint64
	k     int
}

// decodeBloom checks a filter block; reason is non-empty when it is bad.
func decodeBloom(b []byte) (f bloomFilter, reason string) {
	if len(b) < 2 {
		return f, "filter block too short"
	}
	k := int(b[len(b)-1])
	if k < 1 || k > bloomMaxProbes {
		return f, "bad filter probe count"
	}
	f.bits = b[:len(b)-1]
	f.nbits = uint64(len(f.bits)) * 8
	f.k = k
	return f, ""
}

func (f *bloomFilter) mayContain(h uint64) bool {
	delta := bits.RotateLeft64(h, -33)
	for range f.k {
		j, _ := bits.Mul64(h, f.nbits)
		if f.bits[j/8]&(1<<(j%8)) == 0 {
			return false
		}
		h += delta
	}
	return true
}
