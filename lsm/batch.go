package lsm

import (
	"encoding/binary"
	"fmt"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

// Batch is an ordered list of writes applied atomically by DB.Apply. It is
// also the journal record: its encoding is part of the on-disk format.
//
//	+-----------+-------------+-------------+---------- entries ----------+
//	| version 1B| seq (8B LE) | count (4B LE)| kind 1B, uvarint len, key,  |
//	|           |             |              | [uvarint len, value]  ...  |
//	+-----------+-------------+-------------+------------------------------+
//
// Entry i gets sequence number seq+i. Delete has no value; DeleteRange's
// value is the exclusive end key. A Batch is not safe for concurrent use.
type Batch struct {
	repr  []byte
	count uint32
	// memSize is an upper bound on the memtable bytes the batch needs.
	memSize uint64
	// maxValue is the largest Set value, to tell whether value separation
	// has work to do.
	maxValue int
	// frees: the batch deletes something (it is applied even when the
	// engine is out of space; see space.go).
	frees bool
}

// batchVersion is part of the on-disk format; never change it.
const batchVersion = 1

const batchHeaderLen = 13

// NewBatch returns an empty batch. The same as new(Batch) followed by use.
func NewBatch() *Batch { return &Batch{} }

func (b *Batch) init() {
	if len(b.repr) == 0 {
		b.repr = append(b.repr[:0], make([]byte, batchHeaderLen)...)
		b.repr[0] = batchVersion
	}
}

func (b *Batch) add(kind base.Kind, key, value []byte, hasValue bool) {
	b.init()
	b.repr = append(b.repr, byte(kind))
	b.repr = binary.AppendUvarint(b.repr, uint64(len(key)))
	b.repr = append(b.repr, key...)
	if hasValue {
		b.repr = binary.AppendUvarint(b.repr, uint64(len(value)))
		b.repr = append(b.repr, value...)
	}
	b.count++
	b.memSize += uint64(len(key) + len(value) + memEntryOverhead)
	if kind == base.KindSet && len(value) > b.maxValue {
		b.maxValue = len(value)
	}
	if kind == base.KindDelete || kind == base.KindRangeDelete {
		b.frees = true
	}
}

// Set writes key=value. The batch copies both.
func (b *Batch) Set(key, value []byte) { b.add(base.KindSet, key, value, true) }

// Delete removes key.
func (b *Batch) Delete(key []byte) { b.add(base.KindDelete, key, nil, false) }

// DeleteRange removes every key k with start <= k < end, in one entry.
func (b *Batch) DeleteRange(start, end []byte) { b.add(base.KindRangeDelete, start, end, true) }

// setPointer writes key as a value-log pointer (engine-internal: the value
// log cleaner and value separation).
func (b *Batch) setPointer(key, ptr []byte) { b.add(base.KindValuePointer, key, ptr, true) }

// Count is the number of entries.
func (b *Batch) Count() int { return int(b.count) }

// Empty reports whether the batch has no entries.
func (b *Batch) Empty() bool { return b.count == 0 }

// Len is the encoded size in bytes.
func (b *Batch) Len() int { return len(b.repr) }

// Reset empties the batch, keeping its buffer.
func (b *Batch) Reset() {
	b.repr = b.repr[:0]
	b.count = 0
	b.memSize = 0
	b.maxValue = 0
	b.frees = false
}

// setSeq stamps the first sequence number and the count into the header.
func (b *Batch) setSeq(seq base.SeqNum) {
	b.init()
	binary.LittleEndian.PutUint64(b.repr[1:], seq)
	binary.LittleEndian.PutUint32(b.repr[9:], b.count)
}

// batchReader decodes an encoded batch.
type batchReader struct {
	data  []byte
	seq   base.SeqNum
	count uint32
	i     uint32
}

// batchEntry is one decoded entry; slices alias the batch.
type batchEntry struct {
	kind       base.Kind
	key, value []byte
	seq        base.SeqNum
}

func newBatchReader(repr []byte) (*batchReader, error) {
	if len(repr) < batchHeaderLen {
		return nil, fmt.Errorf("batch of %d bytes shorter than its header: %w", len(repr), ErrCorrupt)
	}
	if repr[0] != batchVersion {
		return nil, fmt.Errorf("batch version %d unknown: %w", repr[0], ErrCorrupt)
	}
	return &batchReader{
		data:  repr[batchHeaderLen:],
		seq:   binary.LittleEndian.Uint64(repr[1:]),
		count: binary.LittleEndian.Uint32(repr[9:]),
	}, nil
}

// next returns the next entry; ok is false at the end. A malformed batch
// returns an error matching ErrCorrupt.
func (r *batchReader) next() (e batchEntry, ok bool, err error) {
	if r.i == r.count {
		if len(r.data) != 0 {
			return e, false, fmt.Errorf("batch: %d trailing bytes: %w", len(r.data), ErrCorrupt)
		}
		return e, false, nil
	}
	if len(r.data) < 1 {
		return e, false, fmt.Errorf("batch: entry %d of %d missing: %w", r.i, r.count, ErrCorrupt)
	}
	e.kind = base.Kind(r.data[0])
	r.data = r.data[1:]
	var hasValue bool
	switch e.kind {
	case base.KindSet, base.KindRangeDelete, base.KindValuePointer:
		hasValue = true
	case base.KindDelete:
	default:
		return e, false, fmt.Errorf("batch: entry %d has kind %d: %w", r.i, e.kind, ErrCorrupt)
	}
	if e.key, err = r.bytes(); err != nil {
		return e, false, err
	}
	if hasValue {
		if e.value, err = r.bytes(); err != nil {
			return e, false, err
		}
	}
	e.seq = r.seq + base.SeqNum(r.i)
	r.i++
	return e, true, nil
}

func (r *batchReader) bytes() ([]byte, error) {
	n, w := binary.Uvarint(r.data)
	if w <= 0 || n > uint64(len(r.data)-w) {
		return nil, fmt.Errorf("batch: entry %d: bad length: %w", r.i, ErrCorrupt)
	}
	b := r.data[w : w+int(n) : w+int(n)]
	r.data = r.data[w+int(n):]
	return b, nil
}
