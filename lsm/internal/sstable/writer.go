package sstable

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/pierrec/lz4/v4"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// writeBufferSize is the buffer between the writer and the file.
const writeBufferSize = 256 << 10

// Writer builds one table. Point entries arrive in strictly increasing
// CompareInternal order; range tombstones in any order. A Writer is not
// safe for concurrent use.
//
// Errors are sticky: after a failed write every method returns the first
// error. Ordering and kind errors from Add are not sticky: the entry is
// refused and the table stays valid.
type Writer struct {
	f    vfs.File
	bw   *bufio.Writer
	opts WriterOptions
	err  error

	offset uint64 // bytes handed to bw so far

	data  blockBuilder
	index blockBuilder
	// pending is set after a data block is written: its index entry waits
	// for the next key, so that the separator can be shortened.
	pending       bool
	pendingHandle blockHandle

	hasPoints bool
	lastKey   []byte // encoded last point key
	keyBuf    []byte
	sepBuf    []byte
	sepEnc    []byte
	handleBuf []byte

	hashes     []uint64 // bloom hashes of distinct user keys
	tombstones []base.RangeTombstone
	props      Properties
	smallest   base.InternalKey

	compressor *lz4.Compressor
	cbuf       []byte
	trailer    [blockTrailerLen]byte
}

// NewWriter returns a writer that writes a table to f, which must be empty.
// Close (or Abort) closes f.
func NewWriter(f vfs.File, opts WriterOptions) *Writer {
	opts.EnsureDefaults()
	w := &Writer{
		f:     f,
		bw:    bufio.NewWriterSize(f, writeBufferSize),
		opts:  opts,
		data:  blockBuilder{restartInterval: opts.RestartInterval},
		index: blockBuilder{restartInterval: 1},
	}
	w.err = opts.Validate()
	if !opts.DisableCompression {
		w.compressor = new(lz4.Compressor)
	}
	w.props.SmallestSeq = base.MaxSeqNum
	w.props.CreationTime = opts.Clock().UnixNano()
	return w
}

func (w *Writer) lastPointKey() base.InternalKey {
	k, _ := base.DecodeInternalKey(w.lastKey)
	return k
}

// Add appends a point entry. key must be strictly greater than the previous
// key (CompareInternal) and of kind SET, DEL or VPTR. The writer copies key
// and value.
func (w *Writer) Add(key base.InternalKey, value []byte) error {
	if w.err != nil {
		return w.err
	}
	switch key.Kind() {
	case base.KindSet, base.KindDelete, base.KindValuePointer:
	default:
		return fmt.Errorf("sstable: add %s: %w", key, ErrBadKind)
	}
	if w.hasPoints {
		if prev := w.lastPointKey(); base.CompareInternal(prev, key) >= 0 {
			return fmt.Errorf("sstable: add %s after %s: %w", key, prev, ErrOutOfOrder)
		}
	}
	if sz := entrySize(key.UserKey, value) + base.TrailerLen; sz > maxBlockLen/2 {
		return fmt.Errorf("sstable: add %s with a %d-byte value: %w", key, len(value), ErrTooLarge)
	}
	w.keyBuf = key.Append(w.keyBuf[:0])
	if !w.data.empty() && w.data.estimatedSize()+entrySize(w.keyBuf, value) > w.opts.BlockSize {
		if err := w.flushData(); err != nil {
			return err
		}
	}
	if w.pending {
		w.addIndexEntry(w.lastPointKey(), &key)
	}
	w.data.add(w.keyBuf, value)

	if w.opts.BloomBitsPerKey > 0 && (!w.hasPoints || !bytes.Equal(w.lastPointKey().UserKey, key.UserKey)) {
		w.hashes = append(w.hashes, BloomHash(key.UserKey))
	}
	if !w.hasPoints {
		w.smallest = key.Clone()
		w.hasPoints = true
	}
	w.lastKey = append(w.lastKey[:0], w.keyBuf...)
	p := &w.props
	p.NumEntries++
	switch key.Kind() {
	case base.KindDelete:
		p.NumDeletions++
	case base.KindValuePointer:
		p.NumValuePointers++
	}
	p.RawKeyBytes += uint64(key.Size())
	p.RawValueBytes += uint64(len(value))
	p.SmallestSeq = min(p.SmallestSeq, key.Seq())
	p.LargestSeq = max(p.LargestSeq, key.Seq())
	return nil
}

// AddRangeTombstone records a range tombstone fragment, which the writer
// copies. Fragments may arrive in any order but must be fragmented already:
// two that overlap have the same bounds (Close checks).
func (w *Writer) AddRangeTombstone(t base.RangeTombstone) error {
	if w.err != nil {
		return w.err
	}
	if bytes.Compare(t.Start, t.End) >= 0 {
		return fmt.Errorf("sstable: range tombstone [%q, %q)#%d: %w", t.Start, t.End, t.Seq, ErrBadTombstone)
	}
	if t.Seq > base.MaxSeqNum {
		return fmt.Errorf("sstable: range tombstone [%q, %q)#%d: seq too large: %w", t.Start, t.End, t.Seq, ErrBadTombstone)
	}
	w.tombstones = append(w.tombstones, base.RangeTombstone{
		Start: bytes.Clone(t.Start), End: bytes.Clone(t.End), Seq: t.Seq,
	})
	w.props.SmallestSeq = min(w.props.SmallestSeq, t.Seq)
	w.props.LargestSeq = max(w.props.LargestSeq, t.Seq)
	return nil
}

// EstimatedSize is the size the table would have if closed now, roughly.
func (w *Writer) EstimatedSize() uint64 {
	n := w.offset + uint64(w.data.estimatedSize()) + uint64(w.index.estimatedSize()) + footerLen
	n += uint64(len(w.hashes)*w.opts.BloomBitsPerKey) / 8
	for _, t := range w.tombstones {
		n += uint64(len(t.Start) + len(t.End) + 16)
	}
	return n
}

// addIndexEntry adds the index entry of the pending block, whose last key
// is last; next is the first key of the following block, or nil.
func (w *Writer) addIndexEntry(last base.InternalKey, next *base.InternalKey) {
	var s []byte
	if next != nil {
		s = base.Separator(w.sepBuf[:0], last.UserKey, next.UserKey)
	} else {
		s = base.Successor(w.sepBuf[:0], last.UserKey)
	}
	w.sepBuf = s
	sep := last
	if bytes.Compare(s, last.UserKey) > 0 && (next == nil || bytes.Compare(s, next.UserKey) < 0) {
		// A user key strictly between the blocks: the smallest internal key
		// with it is still > last and < next.
		sep = base.MakeInternalKey(s, base.MaxSeqNum, base.KindMax)
	}
	w.sepEnc = sep.Append(w.sepEnc[:0])
	w.handleBuf = appendBlockHandle(w.handleBuf[:0], w.pendingHandle)
	w.index.add(w.sepEnc, w.handleBuf)
	w.pending = false
}

func (w *Writer) flushData() error {
	h, err := w.writeBlock(w.data.finish(), true)
	if err != nil {
		return err
	}
	w.data.reset()
	w.pending, w.pendingHandle = true, h
	w.props.NumDataBlocks++
	return nil
}

// writeBlock writes a block and its trailer, compressing it when allowed and
// worth it.
func (w *Writer) writeBlock(contents []byte, compress bool) (blockHandle, error) {
	if w.err != nil {
		return blockHandle{}, w.err
	}
	if len(contents) > maxBlockLen {
		w.err = fmt.Errorf("sstable: block of %d bytes at offset %d: %w", len(contents), w.offset, ErrTooLarge)
		return blockHandle{}, w.err
	}
	stored, typ := contents, byte(compressionNone)
	if compress && w.compressor != nil && len(contents) >= 64 {
		need := binary.MaxVarintLen64 + lz4.CompressBlockBound(len(contents))
		if cap(w.cbuf) < need {
			w.cbuf = make([]byte, need)
		}
		w.cbuf = w.cbuf[:need]
		hdr := binary.PutUvarint(w.cbuf, uint64(len(contents)))
		n, err := w.compressor.CompressBlock(contents, w.cbuf[hdr:])
		if err == nil && n > 0 && hdr+n <= len(contents)-len(contents)/8 {
			stored, typ = w.cbuf[:hdr+n], compressionLZ4
		}
	}
	h := blockHandle{offset: w.offset, length: uint64(len(stored))}
	w.trailer[0] = typ
	crc := crc32.Update(crc32.Checksum(stored, crcTable), crcTable, w.trailer[:1])
	binary.LittleEndian.PutUint32(w.trailer[1:], crc)
	if _, err := w.bw.Write(stored); err != nil {
		w.err = fmt.Errorf("sstable: write block at offset %d: %w", w.offset, err)
		return blockHandle{}, w.err
	}
	if _, err := w.bw.Write(w.trailer[:]); err != nil {
		w.err = fmt.Errorf("sstable: write block trailer at offset %d: %w", w.offset+h.length, err)
		return blockHandle{}, w.err
	}
	w.offset += h.length + blockTrailerLen
	return h, nil
}

// Meta describes a finished table, for the engine's manifest.
type Meta struct {
	// Size is the file's length in bytes.
	Size uint64
	// HasPoints tells whether the table has point entries; Smallest and
	// Largest are the first and last (cloned; zero without points).
	HasPoints         bool
	Smallest, Largest base.InternalKey
	// HasRangeTombstones tells whether the table has range tombstones.
	// SmallestTombstone is the first one's key (start, seq, RANGEDEL);
	// TombstoneEnd the largest exclusive end of any of them.
	HasRangeTombstones bool
	SmallestTombstone  base.InternalKey
	TombstoneEnd       []byte
	// SmallestSeq and LargestSeq bound the sequence numbers of points and
	// tombstones.
	SmallestSeq, LargestSeq                      base.SeqNum
	NumEntries, NumDeletions, NumRangeTombstones uint64
	RawKeyBytes, RawValueBytes                   uint64
	// Properties is everything recorded in the properties block.
	Properties Properties
}

// Close finishes the table: the last data block, filter, range tombstones,
// index, properties, metaindex and footer. It syncs and closes the file. On
// error the file is closed as well and the caller should remove it.
func (w *Writer) Close() (*Meta, error) {
	if w.err != nil {
		err := w.err
		w.Abort()
		return nil, err
	}
	meta, err := w.finish()
	if err != nil {
		w.err = err
		w.f.Close()
		w.err = ErrWriterClosed
		return nil, err
	}
	w.err = ErrWriterClosed
	if err := w.f.Close(); err != nil {
		return nil, fmt.Errorf("sstable: close: %w", err)
	}
	return meta, nil
}

func (w *Writer) finish() (*Meta, error) {
	if !w.data.empty() {
		if err := w.flushData(); err != nil {
			return nil, err
		}
	}
	if w.pending {
		w.addIndexEntry(w.lastPointKey(), nil)
	}
	p := &w.props
	p.DataSize = w.offset
	meta := blockBuilder{restartInterval: 1}

	if w.opts.BloomBitsPerKey > 0 && len(w.hashes) > 0 {
		h, err := w.writeBlock(buildBloom(w.hashes, w.opts.BloomBitsPerKey), false)
		if err != nil {
			return nil, err
		}
		p.FilterSize = h.length
		meta.add([]byte(metaFilterName), appendBlockHandle(nil, h))
	}
	var propsHandle blockHandle
	var rangeDel *blockHandle
	if len(w.tombstones) > 0 {
		sortTombstones(w.tombstones)
		if i := checkFragmented(w.tombstones); i >= 0 {
			t := w.tombstones[i]
			return nil, fmt.Errorf("sstable: range tombstone [%q, %q)#%d overlaps another without sharing its bounds: %w",
				t.Start, t.End, t.Seq, ErrBadTombstone)
		}
		b := blockBuilder{restartInterval: 1}
		for _, t := range w.tombstones {
			b.add(tombstoneKey(t).Encode(), t.End)
		}
		h, err := w.writeBlock(b.finish(), true)
		if err != nil {
			return nil, err
		}
		rangeDel = &h
		p.NumRangeTombstones = uint64(len(w.tombstones))
	}
	indexHandle, err := w.writeBlock(w.index.finish(), true)
	if err != nil {
		return nil, err
	}
	p.IndexSize = indexHandle.length
	if p.NumEntries == 0 && len(w.tombstones) == 0 {
		p.SmallestSeq = 0
	}
	if w.hasPoints {
		p.SmallestPoint, p.LargestPoint = w.smallest, w.lastPointKey().Clone()
	}
	p.Compression = "lz4"
	if w.opts.DisableCompression {
		p.Compression = "none"
	}
	p.BlockSize = uint64(w.opts.BlockSize)
	p.RestartInterval = uint64(w.opts.RestartInterval)
	p.BloomBitsPerKey = uint64(w.opts.BloomBitsPerKey)
	p.Creator = creator
	if propsHandle, err = w.writeBlock(p.encode(), true); err != nil {
		return nil, err
	}
	meta.add([]byte(metaPropertiesName), appendBlockHandle(nil, propsHandle))
	if rangeDel != nil {
		meta.add([]byte(metaRangeDelName), appendBlockHandle(nil, *rangeDel))
	}
	metaHandle, err := w.writeBlock(meta.finish(), false)
	if err != nil {
		return nil, err
	}
	ft := footer{metaindex: metaHandle, index: indexHandle, version: formatVersion}
	if _, err := w.bw.Write(ft.encode()); err != nil {
		return nil, fmt.Errorf("sstable: write footer at offset %d: %w", w.offset, err)
	}
	w.offset += footerLen
	if err := w.bw.Flush(); err != nil {
		return nil, fmt.Errorf("sstable: flush: %w", err)
	}
	if err := w.f.Sync(); err != nil {
		return nil, fmt.Errorf("sstable: sync: %w", err)
	}

	m := &Meta{
		Size:               w.offset,
		HasPoints:          w.hasPoints,
		Smallest:           p.SmallestPoint,
		Largest:            p.LargestPoint,
		HasRangeTombstones: len(w.tombstones) > 0,
		SmallestSeq:        p.SmallestSeq,
		LargestSeq:         p.LargestSeq,
		NumEntries:         p.NumEntries,
		NumDeletions:       p.NumDeletions,
		NumRangeTombstones: p.NumRangeTombstones,
		RawKeyBytes:        p.RawKeyBytes,
		RawValueBytes:      p.RawValueBytes,
		Properties:         *p,
	}
	if m.HasRangeTombstones {
		m.SmallestTombstone = tombstoneKey(w.tombstones[0])
		for _, t := range w.tombstones {
			if bytes.Compare(t.End, m.TombstoneEnd) > 0 {
				m.TombstoneEnd = t.End
			}
		}
	}
	return m, nil
}

// Abort closes the file without finishing the table; the caller removes
// it. Abort after Close does nothing.
func (w *Writer) Abort() {
	if w.err == ErrWriterClosed {
		return
	}
	w.err = ErrWriterClosed
	w.f.Close()
}
