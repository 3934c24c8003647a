package sstable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/pierrec/lz4/v4"

	"github.com/lsmfs/lsmfs/blockcache"
	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

// ReadableFile is what a Reader reads: ReadAt must be safe for concurrent
// use.
type ReadableFile interface {
	io.ReaderAt
	io.Closer
}

// ReaderStats are counters shared by the readers of one engine. All fields
// are updated atomically; a nil *ReaderStats in ReaderOptions gives the
// reader private counters.
type ReaderStats struct {
	// BloomProbes counts filter probes (MayContain on a table with a
	// filter). BloomUseful counts probes that answered "absent" and so
	// saved a block read; BloomUseless counts probes that answered "maybe"
	// for a key the table turned out not to hold (the caller reports them
	// with RecordBloomUseless).
	BloomProbes, BloomUseful, BloomUseless atomic.Uint64
	// BlocksRead and BytesRead count data blocks read from the file
	// (cache misses or no cache), with their trailers.
	BlocksRead, BytesRead atomic.Uint64
	// CacheHits and CacheMisses count data-block lookups in the block
	// cache.
	CacheHits, CacheMisses atomic.Uint64
}

// ReaderOptions configure Open.
type ReaderOptions struct {
	// Cache holds decompressed, verified data blocks shared by all readers;
	// nil reads every block from the file.
	Cache *blockcache.Cache
	// FileNum is the table's file number, unique in the engine; it keys the
	// cache.
	FileNum uint64
	// FileName names the table in errors. Default "NNNNNN.sst" from
	// FileNum.
	FileName string
	// Stats receives the reader's counters; nil for private ones.
	Stats *ReaderStats
}

// Reader reads one table. It loads the index, filter, range tombstones and
// properties at Open and reads data blocks on demand. It is safe for
// concurrent use; each Iterator is not.
type Reader struct {
	f       ReadableFile
	size    uint64
	name    string
	fileNum uint64
	cache   *blockcache.Cache
	stats   *ReaderStats
	// noVerify skips checksums (tests only).
	noVerify bool

	footer     footer
	metaIndex  []metaEntry
	props      Properties
	index      indexBlock
	hasFilter  bool
	filter     bloomFilter
	tombstones []base.RangeTombstone
}

// metaEntry is one metaindex entry.
type metaEntry struct {
	name   string
	handle blockHandle
}

// indexBlock is the decoded index: one separator and handle per data block.
type indexBlock struct {
	keys    []byte   // encoded separator keys, concatenated
	ends    []uint32 // ends[i] is where separator i ends in keys
	handles []blockHandle
}

func (x *indexBlock) len() int { return len(x.handles) }

func (x *indexBlock) key(i int) []byte {
	start := uint32(0)
	if i > 0 {
		start = x.ends[i-1]
	}
	return x.keys[start:x.ends[i]:x.ends[i]]
}

func (x *indexBlock) userKey(i int) []byte {
	k := x.key(i)
	return k[:len(k)-base.TrailerLen]
}

// search returns the first block whose separator's user key is >= key, or
// len() if none: the first block that can hold an entry with user key >=
// key.
func (x *indexBlock) search(key []byte) int {
	lo, hi := 0, x.len()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(x.userKey(m), key) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// decodeIndex decodes a checked index block. Data blocks must be contiguous
// from offset 0 and end by dataLimit.
func decodeIndex(b []byte, dataLimit uint64) (x indexBlock, badOff int, reason string) {
	var it blockIter
	x.keys = make([]byte, 0, len(b))
	var next uint64
	_, badOff, reason = checkBlock(&it, b, 1, func(k, v []byte) string {
		if _, ok := base.DecodeInternalKey(k); !ok {
			return "bad index key"
		}
		if n := len(x.handles); n > 0 && base.CompareEncoded(x.key(n-1), k) >= 0 {
			return "index keys out of order"
		}
		h, ok := decodeBlockHandle(v)
		if !ok {
			return "bad block handle"
		}
		if h.offset != next || !handleWithin(h, dataLimit) {
			return "data block handle out of place"
		}
		next = h.end()
		x.keys = append(x.keys, k...)
		x.ends = append(x.ends, uint32(len(x.keys)))
		x.handles = append(x.handles, h)
		return ""
	})
	return x, badOff, reason
}

func (r *Reader) corruptf(off uint64, format string, args ...any) error {
	return base.Corruptf(r.name, int64(off), format, args...)
}

// Open reads the footer, metaindex, index, filter, range tombstones and
// properties of the table in f, which is size bytes long. On success the
// Reader owns f and closes it in Close; on error f stays open and the caller
// closes it.
func Open(f ReadableFile, size int64, opts ReaderOptions) (*Reader, error) {
	return open(f, size, opts, true)
}

// open is Open; verify=false skips checksum verification so that fuzz tests
// can reach the decoders behind the checksums.
func open(f ReadableFile, size int64, opts ReaderOptions, verify bool) (*Reader, error) {
	r := &Reader{
		noVerify: !verify,
		f:        f,
		size:     uint64(size),
		name:     opts.FileName,
		fileNum:  opts.FileNum,
		cache:    opts.Cache,
		stats:    opts.Stats,
	}
	if r.name == "" {
		r.name = fmt.Sprintf("%06d.sst", opts.FileNum)
	}
	if r.stats == nil {
		r.stats = new(ReaderStats)
	}
	if size < footerLen {
		return nil, r.corruptf(0, "file of %d bytes is too small for a table", size)
	}
	fb := make([]byte, footerLen)
	if err := r.readAt(fb, r.size-footerLen, "footer", ""); err != nil {
		return nil, err
	}
	ft, bad, reason := decodeFooter(fb, r.size, verify)
	if reason != "" {
		return nil, r.corruptf(r.size-footerLen+uint64(bad), "%s", reason)
	}
	r.footer = ft
	if err := r.loadMetaIndex(); err != nil {
		return nil, err
	}
	// Meta blocks and the index lie after the data blocks.
	dataLimit := ft.metaindex.offset
	var propsHandle, filterHandle, rangeDelHandle *blockHandle
	for i := range r.metaIndex {
		e := &r.metaIndex[i]
		dataLimit = min(dataLimit, e.handle.offset)
		switch e.name {
		case metaPropertiesName:
			propsHandle = &e.handle
		case metaFilterName:
			filterHandle = &e.handle
		case metaRangeDelName:
			rangeDelHandle = &e.handle
		}
	}
	dataLimit = min(dataLimit, ft.index.offset)
	if propsHandle == nil {
		return nil, r.corruptf(ft.metaindex.offset, "metaindex names no properties block")
	}

	b, err := r.readBlock(*propsHandle, "properties")
	if err != nil {
		return nil, err
	}
	var p Properties
	if p, bad, reason = decodeProperties(b); reason != "" {
		return nil, r.corruptf(propsHandle.offset+uint64(bad), "properties block: %s", reason)
	}
	r.props = p

	if b, err = r.readBlock(ft.index, "index"); err != nil {
		return nil, err
	}
	if r.index, bad, reason = decodeIndex(b, dataLimit); reason != "" {
		return nil, r.corruptf(ft.index.offset+uint64(bad), "index block: %s", reason)
	}
	n := r.index.len()
	var dataEnd uint64
	if n > 0 {
		dataEnd = r.index.handles[n-1].end()
	}
	if uint64(n) != p.NumDataBlocks || dataEnd != p.DataSize || (n == 0) != (p.NumEntries == 0) {
		return nil, r.corruptf(ft.index.offset, "index (%d blocks, %d bytes) disagrees with properties (%d blocks, %d bytes, %d entries)",
			n, dataEnd, p.NumDataBlocks, p.DataSize, p.NumEntries)
	}
	if n > 0 {
		// The separator of the last block bounds the largest key.
		if base.CompareEncoded(p.LargestPoint.Encode(), r.index.key(n-1)) > 0 {
			return nil, r.corruptf(ft.index.offset, "largest key %s beyond the index", p.LargestPoint)
		}
	}

	if filterHandle != nil {
		if b, err = r.readBlock(*filterHandle, "filter"); err != nil {
			return nil, err
		}
		if r.filter, reason = decodeBloom(b); reason != "" {
			return nil, r.corruptf(filterHandle.offset, "filter block: %s", reason)
		}
		r.hasFilter = true
	}
	if rangeDelHandle != nil {
		if b, err = r.readBlock(*rangeDelHandle, "range tombstone"); err != nil {
			return nil, err
		}
		if r.tombstones, bad, reason = decodeTombstones(b); reason != "" {
			return nil, r.corruptf(rangeDelHandle.offset+uint64(bad), "range tombstone block: %s", reason)
		}
	}
	if uint64(len(r.tombstones)) != p.NumRangeTombstones {
		return nil, r.corruptf(ft.metaindex.offset, "%d range tombstones, properties say %d", len(r.tombstones), p.NumRangeTombstones)
	}
	return r, nil
}

func (r *Reader) loadMetaIndex() error {
	h := r.footer.metaindex
	b, err := r.readBlock(h, "metaindex")
	if err != nil {
		return err
	}
	var it blockIter
	var prev string
	_, bad, reason := checkBlock(&it, b, 1, func(k, v []byte) string {
		if len(r.metaIndex) > 0 && string(k) <= prev {
			return "metaindex names out of order"
		}
		prev = string(k)
		mh, ok := decodeBlockHandle(v)
		if !ok || !handleWithin(mh, h.offset) {
			return fmt.Sprintf("bad handle for %q", k)
		}
		r.metaIndex = append(r.metaIndex, metaEntry{name: prev, handle: mh})
		return ""
	})
	if reason != "" {
		return r.corruptf(h.offset+uint64(bad), "metaindex block: %s", reason)
	}
	return nil
}

// readAt fills b from off; a short read means the file is shorter than its
// size says, which is corruption. what and suffix name the structure (kept
// apart so that the success path builds no string).
func (r *Reader) readAt(b []byte, off uint64, what, suffix string) error {
	n, err := r.f.ReadAt(b, int64(off))
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return r.corruptf(off, "%s%s truncated: read %d of %d bytes", what, suffix, n, len(b))
	}
	return fmt.Errorf("sstable: read %s%s of %s at offset %d: %w", what, suffix, r.name, off, err)
}

// readRaw reads block h with its trailer into buf (grown if needed),
// verifies the checksum, and returns the stored contents (aliasing buf), the
// compression type and the buffer.
func (r *Reader) readRaw(h blockHandle, buf []byte, what string) (stored []byte, typ byte, _ []byte, err error) {
	n := int(h.length) + blockTrailerLen
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if err := r.readAt(buf, h.offset, what, " block"); err != nil {
		return nil, 0, buf, err
	}
	stored = buf[:h.length]
	typ = buf[h.length]
	if got, want := blockCRC(buf[:h.length+1]), binary.LittleEndian.Uint32(buf[h.length+1:]); got != want && !r.noVerify {
		return nil, 0, buf, r.corruptf(h.offset, "%s block checksum mismatch (stored %08x, computed %08x)", what, want, got)
	}
	return stored, typ, buf, nil
}

// decodeStored returns the decoded block: stored itself when uncompressed,
// or decompressed into dst (grown if needed) and the buffer.
func (r *Reader) decodeStored(h blockHandle, stored []byte, typ byte, dst []byte, what string) (block, _ []byte, err error) {
	switch typ {
	case compressionNone:
		return stored, dst, nil
	case compressionLZ4:
		n, k := binary.Uvarint(stored)
		// The writer never compresses an empty block (and the LZ4 decoder
		// faults on a nil destination).
		if k <= 0 || n == 0 || n > maxBlockLen || n > uint64(len(stored)-k)*maxLZ4Ratio+64 {
			return nil, dst, r.corruptf(h.offset, "%s block: bad decoded length", what)
		}
		if uint64(cap(dst)) < n {
			dst = make([]byte, n)
		}
		dst = dst[:n]
		m, err := lz4.UncompressBlock(stored[k:], dst)
		if err != nil || uint64(m) != n {
			return nil, dst, r.corruptf(h.offset, "%s block: bad LZ4 data", what)
		}
		return dst, dst, nil
	}
	return nil, dst, r.corruptf(h.offset+h.length, "%s block: unknown compression type %d", what, typ)
}

// readBlock reads, verifies and decodes a block into fresh memory.
func (r *Reader) readBlock(h blockHandle, what string) ([]byte, error) {
	stored, typ, _, err := r.readRaw(h, nil, what)
	if err != nil {
		return nil, err
	}
	b, _, err := r.decodeStored(h, stored, typ, nil, what)
	return b, err
}

// blockChecker holds scratch space for checking data blocks.
type blockChecker struct {
	it blockIter
}

// checkDataBlock checks data block i: its structure, that its keys are
// valid point keys in strictly increasing order, and that they lie between
// the separators of blocks i-1 (exclusive) and i (inclusive).
func (r *Reader) checkDataBlock(i int, b []byte, c *blockChecker) error {
	var lower []byte
	if i > 0 {
		lower = r.index.key(i - 1)
	}
	off := r.index.handles[i].offset
	if bad, reason := checkDataEntries(c, b, lower, r.index.key(i)); reason != "" {
		return r.corruptf(off, "data block %d: %s at block offset %d", i, reason, bad)
	}
	return nil
}

// checkDataEntries checks a decoded data block whose keys must lie in
// (lower, upper] (encoded internal keys; nil for no bound): its structure
// (as checkBlock, with up to maxRestartInterval entries per restart point),
// that every key is a point key, and that keys strictly increase. It is
// checkBlock specialised for the hot path: each key is compared with its
// predecessor through the shared prefix, without copying either.
func checkDataEntries(c *blockChecker, b []byte, lower, upper []byte) (badOff int, reason string) {
	it := &c.it
	if badOff, reason := it.initChecked(b); reason != "" {
		return badOff, reason
	}
	if it.numRestarts == 0 {
		return 0, "empty data block"
	}
	ri, group := 0, 0
	it.key = nil
	for off := 0; off < it.restarts; off = it.nextOff {
		if off > 0 {
			shared, k, _, _, ok := it.decodeHeader(off)
			if !ok {
				return off, "bad entry"
			}
			if cmp, ok := compareNext(it.key, shared, k); !ok {
				return off, "bad key"
			} else if cmp >= 0 {
				return off, "keys out of order"
			}
		}
		if !it.decodeAt(off) {
			return off, "bad entry"
		}
		group++
		if ri < it.numRestarts {
			switch r := it.restartOffset(ri); {
			case off == r:
				if it.shared != 0 {
					return off, "restart entry shares a prefix"
				}
				ri++
				group = 1
			case off > r:
				return r, "restart offset inside an entry"
			}
		}
		if group > maxRestartInterval {
			return off, "too many entries between restart points"
		}
		n := len(it.key) - base.TrailerLen
		if n < 0 {
			return off, "bad key"
		}
		switch base.Kind(it.key[n]) {
		case base.KindSet, base.KindDelete, base.KindValuePointer:
		default:
			return off, "bad kind " + base.Kind(it.key[n]).String()
		}
		if off == 0 && lower != nil && base.CompareEncoded(it.key, lower) <= 0 {
			return off, "first key not above the previous block's separator"
		}
	}
	if ri != it.numRestarts {
		return it.restarts, "restart offset past the entries"
	}
	if upper != nil && base.CompareEncoded(it.key, upper) > 0 {
		return 0, "last key beyond the block's separator"
	}
	return 0, ""
}

// MayContain reports whether the table may hold an entry (of any kind) for
// userKey. It answers false for a table without point keys, and true when
// the table has no filter. A "no" from the filter counts as a useful probe;
// when a "maybe" turns out wrong, report it with RecordBloomUseless.
func (r *Reader) MayContain(userKey []byte) bool {
	if r.props.NumEntries == 0 {
		return false
	}
	if !r.hasFilter {
		return true
	}
	return r.MayContainHash(BloomHash(userKey))
}

// MayContainHash is MayContain with h = BloomHash(userKey).
func (r *Reader) MayContainHash(h uint64) bool {
	if r.props.NumEntries == 0 {
		return false
	}
	if !r.hasFilter {
		return true
	}
	r.stats.BloomProbes.Add(1)
	if !r.filter.mayContain(h) {
		r.stats.BloomUseful.Add(1)
		return false
	}
	return true
}

// RecordBloomUseless counts a filter false positive: MayContain said
// "maybe" and the table held no entry for the key.
func (r *Reader) RecordBloomUseless() {
	if r.hasFilter {
		r.stats.BloomUseless.Add(1)
	}
}

// HasFilter reports whether the table has a bloom filter.
func (r *Reader) HasFilter() bool { return r.hasFilter }

// RangeTombstones returns the table's range tombstones sorted by start
// ascending, then seq descending. The slice and its keys are shared: do not
// modify them.
func (r *Reader) RangeTombstones() []base.RangeTombstone { return r.tombstones }

// Properties returns the table's properties.
func (r *Reader) Properties() Properties { return r.props }

// FileNum returns the file number the reader was opened with.
func (r *Reader) FileNum() uint64 { return r.fileNum }

// Size returns the table's length.
func (r *Reader) Size() uint64 { return r.size }

// Close closes the file. Iterators must be closed first.
func (r *Reader) Close() error {
	if err := r.f.Close(); err != nil {
		return fmt.Errorf("sstable: close %s: %w", r.name, err)
	}
	return nil
}
