package sstable

import (
	"bytes"
	"sync"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

// iterPos is where an Iterator stands.
type iterPos uint8

const (
	posUnset       iterPos = iota // fresh: Next and Prev return false
	posValid                      // on an entry
	posBeforeFirst                // Next moves to the first entry
	posAfterLast                  // Prev moves to the last entry
)

// Iterator iterates over the point entries of a table. It implements
// base.InternalIterator: SeekGE and SeekLT take user keys. When a
// positioning call returns false, the iterator is before the first entry
// (after SeekLT or Prev) or after the last (after SeekGE, First on an empty
// table, or Next), and a following Next or Prev steps back in; Error tells
// exhaustion from failure. Errors are sticky.
//
// Key and Value are valid until the next positioning call or Close. Value
// may alias a block shared through the block cache: never modify it.
//
// An Iterator is not safe for concurrent use; many may run on one Reader.
type Iterator struct {
	r     *Reader
	bi    blockIter
	block int // index of the data block bi holds, -1 for none
	pos   iterPos
	err   error

	// Scratch reused across blocks when there is no cache (with a cache,
	// blocks go to the cache and need memory of their own).
	readBuf []byte
	decBuf  []byte
	check   blockChecker
}

var _ base.InternalIterator = (*Iterator)(nil)

var iterPool = sync.Pool{New: func() any { return new(Iterator) }}

// NewIter returns an iterator over the table's point entries; it is
// unpositioned. Close it after use.
func (r *Reader) NewIter() *Iterator {
	it := iterPool.Get().(*Iterator)
	it.r = r
	it.block = -1
	it.pos = posUnset
	it.err = nil
	return it
}

// loadBlock makes data block i current; it returns false on error.
func (it *Iterator) loadBlock(i int) bool {
	if i == it.block {
		return true
	}
	it.block = -1
	b, err := it.readDataBlock(i)
	if err != nil {
		it.err = err
		return false
	}
	if !it.bi.init(b) {
		it.err = it.r.corruptf(it.r.index.handles[i].offset, "data block %d: bad restart array", i)
		return false
	}
	it.block = i
	return true
}

func (it *Iterator) readDataBlock(i int) ([]byte, error) {
	r := it.r
	h := r.index.handles[i]
	if r.cache != nil {
		if b, ok := r.cache.Get(r.fileNum, h.offset); ok {
			r.stats.CacheHits.Add(1)
			return b, nil
		}
		r.stats.CacheMisses.Add(1)
	}
	stored, typ, buf, err := r.readRaw(h, it.readBuf, "data")
	it.readBuf = buf
	if err != nil {
		return nil, err
	}
	r.stats.BlocksRead.Add(1)
	r.stats.BytesRead.Add(h.length + blockTrailerLen)
	var b []byte
	if r.cache == nil {
		b, it.decBuf, err = r.decodeStored(h, stored, typ, it.decBuf, "data")
	} else if typ == compressionNone {
		b = bytes.Clone(stored)
	} else {
		b, _, err = r.decodeStored(h, stored, typ, nil, "data")
	}
	if err != nil {
		return nil, err
	}
	if err := r.checkDataBlock(i, b, &it.check); err != nil {
		return nil, err
	}
	if r.cache != nil {
		r.cache.Set(r.fileNum, h.offset, b)
	}
	return b, nil
}

// blockFailed records a decoding failure inside block bi (checked blocks
// never fail; this is a last line of defence).
func (it *Iterator) blockFailed() bool {
	if it.bi.bad && it.err == nil {
		it.err = it.r.corruptf(it.r.index.handles[it.block].offset, "data block %d: bad entry at block offset %d", it.block, it.bi.off)
	}
	return it.err != nil
}

func (it *Iterator) set(ok bool, otherwise iterPos) bool {
	if ok {
		it.pos = posValid
		return true
	}
	it.pos = otherwise
	return false
}

// firstFrom moves to the first entry of block i or a later one.
func (it *Iterator) firstFrom(i int) bool {
	if i >= it.r.index.len() {
		return it.set(false, posAfterLast)
	}
	if !it.loadBlock(i) || !it.bi.first() {
		it.blockFailed()
		return it.fail()
	}
	return it.set(true, 0)
}

// lastFrom moves to the last entry of block i or an earlier one.
func (it *Iterator) lastFrom(i int) bool {
	if i < 0 {
		return it.set(false, posBeforeFirst)
	}
	if !it.loadBlock(i) || !it.bi.last() {
		it.blockFailed()
		return it.fail()
	}
	return it.set(true, 0)
}

func (it *Iterator) fail() bool {
	if it.err == nil {
		it.err = it.r.corruptf(it.r.index.handles[max(it.block, 0)].offset, "data block %d: no entries", it.block)
	}
	it.pos = posUnset
	return false
}

// First moves to the first entry.
func (it *Iterator) First() bool {
	if it.err != nil {
		return false
	}
	return it.firstFrom(0)
}

// Last moves to the last entry.
func (it *Iterator) Last() bool {
	if it.err != nil {
		return false
	}
	return it.lastFrom(it.r.index.len() - 1)
}

// SeekGE moves to the first entry whose user key is >= key.
func (it *Iterator) SeekGE(key []byte) bool {
	if it.err != nil {
		return false
	}
	i := it.r.index.search(key)
	if i == it.r.index.len() {
		return it.set(false, posAfterLast)
	}
	if !it.loadBlock(i) {
		return it.fail()
	}
	if it.bi.seekGE(key) {
		return it.set(true, 0)
	}
	if it.blockFailed() {
		return it.fail()
	}
	// Every key of block i is below key (it lies between the block's last
	// key and its separator): the answer starts block i+1.
	return it.firstFrom(i + 1)
}

// SeekLT moves to the last entry whose user key is < key.
func (it *Iterator) SeekLT(key []byte) bool {
	if it.err != nil {
		return false
	}
	i := it.r.index.search(key)
	if i == it.r.index.len() {
		return it.lastFrom(i - 1)
	}
	if !it.loadBlock(i) {
		return it.fail()
	}
	if it.bi.seekLT(key) {
		return it.set(true, 0)
	}
	if it.blockFailed() {
		return it.fail()
	}
	return it.lastFrom(i - 1)
}

// Next moves to the next entry.
func (it *Iterator) Next() bool {
	if it.err != nil {
		return false
	}
	switch it.pos {
	case posValid:
		if it.bi.next() {
			return true
		}
		if it.blockFailed() {
			return it.fail()
		}
		return it.firstFrom(it.block + 1)
	case posBeforeFirst:
		return it.firstFrom(0)
	}
	return false
}

// Prev moves to the previous entry.
func (it *Iterator) Prev() bool {
	if it.err != nil {
		return false
	}
	switch it.pos {
	case posValid:
		if it.bi.prev() {
			return true
		}
		if it.blockFailed() {
			return it.fail()
		}
		return it.lastFrom(it.block - 1)
	case posAfterLast:
		return it.lastFrom(it.r.index.len() - 1)
	}
	return false
}

// Valid reports whether the iterator is on an entry.
func (it *Iterator) Valid() bool { return it.pos == posValid && it.err == nil }

// Key returns the current key (zero when not on an entry). Its UserKey is
// valid until the next positioning call and may alias a shared block: never
// modify it.
func (it *Iterator) Key() base.InternalKey {
	if !it.Valid() {
		return base.InternalKey{}
	}
	return it.bi.ikey
}

// Value returns the current value (nil when not on an entry), valid until
// the next positioning call. It may be shared: never modify it.
func (it *Iterator) Value() []byte {
	if !it.Valid() {
		return nil
	}
	return it.bi.val
}

// Error returns the error that stopped the iterator, if any.
func (it *Iterator) Error() error { return it.err }

// Close releases the iterator and returns its error. The iterator must not
// be used afterwards.
func (it *Iterator) Close() error {
	err := it.err
	// Keep modest scratch buffers for reuse, but drop references to blocks
	// and the reader.
	*it = Iterator{
		readBuf: keepSmall(it.readBuf),
		decBuf:  keepSmall(it.decBuf),
		check:   blockChecker{it: blockIter{keyBuf: keepSmall(it.check.it.keyBuf)}},
		bi:      blockIter{keyBuf: keepSmall(it.bi.keyBuf)},
	}
	iterPool.Put(it)
	return err
}

// keepSmall returns b emptied, or nil when it is too big to keep pooled.
func keepSmall(b []byte) []byte {
	if cap(b) > 1<<20 {
		return nil
	}
	return b[:0]
}

// CheckBlocks reads every data block (checksum, decompression, entry
// order) and calls fn for each block that fails, so that a checker can
// report all damage instead of stopping at the first bad block.
func (r *Reader) CheckBlocks(fn func(block int, err error)) {
	it := r.NewIter()
	defer it.Close()
	for i := 0; i < r.index.len(); i++ {
		if _, err := it.readDataBlock(i); err != nil {
			fn(i, err)
		}
	}
}
