package memtable

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
)

// keyFilter is a blocked Bloom filter of the user keys a segment holds, so a
// point lookup skips segments that cannot hold its key instead of searching
// each of them (the engine keeps up to eight segments, and a key written a
// while ago is in one of the oldest). Each key sets filterProbes bits within
// one 512-bit block (a cache line). Bits are set with atomic ORs before the
// entry is linked, so a reader that can see an entry also sees its bits: the
// filter never hides an entry. It lives in memory only.
type keyFilter struct {
	words  []atomic.Uint64 // blocks of blockWords words
	blocks uint64          // a power of two
}

const (
	blockWords   = 8 // 512 bits
	filterProbes = 6
	// bitsPerKey gives about 1% false positives at the expected count.
	bitsPerKey = 10
)

// keySeed is the process's seed of key hashes; filters are never stored.
var keySeed = maphash.MakeSeed()

func hashKey(ukey []byte) uint64 { return maphash.Bytes(keySeed, ukey) }

// newKeyFilter returns a filter sized for about keys keys.
func newKeyFilter(keys int) *keyFilter {
	blocks := uint64(max(keys, 1)*bitsPerKey+blockWords*64-1) / (blockWords * 64)
	blocks = 1 << bits.Len64(blocks-1) // round up to a power of two
	return &keyFilter{words: make([]atomic.Uint64, blocks*blockWords), blocks: blocks}
}

// probes returns the key's block and the bit numbers (in the block) of its
// probes, packed 9 bits each.
func (f *keyFilter) probes(h uint64) (block []atomic.Uint64, bits uint64) {
	b := h & (f.blocks - 1)
	// The probes come from the high bits, mixed again, so they do not
	// repeat the bits that chose the block.
	return f.words[b*blockWords : (b+1)*blockWords], (h >> 32) * 0x9e3779b97f4a7c15
}

func (f *keyFilter) add(h uint64) {
	block, p := f.probes(h)
	var masks [blockWords]uint64
	for range filterProbes {
		bit := p & 511
		masks[bit/64] |= 1 << (bit % 64)
		p >>= 9
	}
	// One atomic OR per word that lacks a bit (none for a key already
	// there: most of a file's rewrites).
	for i, m := range masks {
		if m != 0 && block[i].Load()&m != m {
			block[i].Or(m)
		}
	}
}

func (f *keyFilter) mayContain(h uint64) bool {
	block, p := f.probes(h)
	for range filterProbes {
		bit := p & 511
		if block[bit/64].Load()&(1<<(bit%64)) == 0 {
			return false
		}
		p >>= 9
	}
	return true
}

// size is the filter's memory in bytes.
func (f *keyFilter) size() uint64 { return uint64(len(f.words)) * 8 }
