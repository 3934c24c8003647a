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
	// shared holds the values of SetShared entries, which repr refers to
	// by index (kindSetShared); refBytes is their total length.
	shared   [][]byte
	refBytes int
}

// kindSetShared marks, in a batch not yet applied, a Set whose value the
// batch holds by reference (SetShared); the entry's value field is the
// value's index in Batch.shared. Apply turns it into a KindSet or a
// value-log pointer before the batch is stamped: it never reaches the
// journal, a memtable or a table, and a reader of stored batches refuses it.
const kindSetShared base.Kind = 0x7f

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
	b.account(kind, len(key), len(value))
}

// account counts an entry added to repr: its kind and the lengths of its
// key and value (the value itself, for a SetShared entry).
func (b *Batch) account(kind base.Kind, keyLen, valueLen int) {
	b.count++
	b.memSize += uint64(keyLen + valueLen + memEntryOverhead)
	if (kind == base.KindSet || kind == kindSetShared) && valueLen > b.maxValue {
		b.maxValue = valueLen
	}
	if kind == base.KindDelete || kind == base.KindRangeDelete {
		b.frees = true
	}
}

// Set writes key=value. The batch copies both.
func (b *Batch) Set(key, value []byte) { b.add(base.KindSet, key, value, true) }

// SetShared writes key=value like Set, but without copying value: the batch
// refers to it until Apply returns (or the batch is reset), and the caller
// must not modify it until then. For large values, which the engine then
// copies once, into the value log, instead of twice.
func (b *Batch) SetShared(key, value []byte) {
	b.init()
	b.repr = append(b.repr, byte(kindSetShared))
	b.repr = binary.AppendUvarint(b.repr, uint64(len(key)))
	b.repr = append(b.repr, key...)
	var ib [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(ib[:], uint64(len(b.shared)))
	b.repr = append(b.repr, byte(n)) // the value field: the index's uvarint
	b.repr = append(b.repr, ib[:n]...)
	b.shared = append(b.shared, value)
	b.refBytes += len(value)
	b.account(kindSetShared, len(key), len(value))
}

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

// Len is the encoded size in bytes (SetShared values included).
func (b *Batch) Len() int { return len(b.repr) + b.refBytes }

// Reset empties the batch, keeping its buffer.
func (b *Batch) Reset() {
	clear(b.shared)
	b.shared = b.shared[:0]
	b.refBytes = 0
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

// materialize returns b with its SetShared values copied in (b itself when
// it has none).
func (b *Batch) materialize() (*Batch, error) {
	if len(b.shared) == 0 {
		return b, nil
	}
	r, err := b.reader()
	if err != nil {
		return nil, err
	}
	out := &Batch{repr: make([]byte, 0, b.Len())}
	for {
		e, ok, err := r.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return out, nil
		}
		out.add(e.kind, e.key, e.value, e.kind != base.KindDelete)
	}
}

// reader returns a reader of a batch not yet applied: SetShared entries
// read as KindSet entries with their values.
func (b *Batch) reader() (*batchReader, error) {
	b.setSeq(0) // stamps the count the reader needs
	r, err := newBatchReader(b.repr)
	if err != nil {
		return nil, err
	}
	r.shared = b.shared
	return r, nil
}

// batchReader decodes an encoded batch.
type batchReader struct {
	data  []byte
	seq   base.SeqNum
	count uint32
	i     uint32
	// shared resolves kindSetShared entries (a batch not yet applied);
	// nil for stored batches, where the kind is corruption.
	shared [][]byte
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
	r := &batchReader{
		data:  repr[batchHeaderLen:],
		seq:   binary.LittleEndian.Uint64(repr[1:]),
		count: binary.LittleEndian.Uint32(repr[9:]),
	}
	// Every entry takes at least two bytes (its kind and its key's
	// length): a larger count is damage, and must not size a memtable
	// (replay allocates for count entries before decoding them).
	if uint64(r.count)*2 > uint64(len(r.data)) {
		return nil, fmt.Errorf("batch of %d bytes cannot hold %d entries: %w", len(repr), r.count, ErrCorrupt)
	}
	return r, nil
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
	case kindSetShared:
		if r.shared == nil {
			return e, false, fmt.Errorf("batch: entry %d has kind %d: %w", r.i, e.kind, ErrCorrupt)
		}
		hasValue = true
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
	if e.kind == kindSetShared {
		i, w := binary.Uvarint(e.value)
		if w <= 0 || w != len(e.value) || i >= uint64(len(r.shared)) {
			return e, false, fmt.Errorf("batch: entry %d: bad shared value index: %w", r.i, ErrCorrupt)
		}
		e.kind, e.value = base.KindSet, r.shared[i]
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
