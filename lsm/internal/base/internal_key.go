package base

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Kind is the type of an internal key. Part of the on-disk format; never change
// the values.
type Kind uint8

const (
	// KindDelete is a point tombstone.
	KindDelete Kind = 0
	// KindSet is a value stored inline.
	KindSet Kind = 1
	// KindRangeDelete is a range tombstone; its value is the exclusive end key.
	// Range tombstones live in their own block, never among point keys.
	KindRangeDelete Kind = 2
	// KindValuePointer is a value stored in the value log; the inline value is
	// a pointer (segment, offset, length, checksum).
	KindValuePointer Kind = 3
	// KindMax is the largest valid kind. Seeking with KindMax and a sequence
	// number s positions before every version of a key at or below s.
	KindMax Kind = 3
)

func (k Kind) String() string {
	switch k {
	case KindDelete:
		return "DEL"
	case KindSet:
		return "SET"
	case KindRangeDelete:
		return "RANGEDEL"
	case KindValuePointer:
		return "VPTR"
	}
	return fmt.Sprintf("KIND(%d)", uint8(k))
}

// SeqNum is a sequence number. The engine assigns one per batch entry; it
// fits in 56 bits.
type SeqNum = uint64

// MaxSeqNum is the largest sequence number.
const MaxSeqNum SeqNum = 1<<56 - 1

// TrailerLen is the length of an encoded trailer.
const TrailerLen = 8

// MakeTrailer packs a sequence number and a kind.
func MakeTrailer(seq SeqNum, kind Kind) uint64 { return seq<<8 | uint64(kind) }

// InternalKey is a decoded internal key. UserKey aliases the buffer it was
// decoded from.
type InternalKey struct {
	UserKey []byte
	Trailer uint64
}

// MakeInternalKey returns an InternalKey.
func MakeInternalKey(ukey []byte, seq SeqNum, kind Kind) InternalKey {
	return InternalKey{UserKey: ukey, Trailer: MakeTrailer(seq, kind)}
}

// Seq returns the sequence number.
func (k InternalKey) Seq() SeqNum { return k.Trailer >> 8 }

// Kind returns the kind.
func (k InternalKey) Kind() Kind { return Kind(k.Trailer & 0xff) }

// Size is the encoded length.
func (k InternalKey) Size() int { return len(k.UserKey) + TrailerLen }

// Append appends the encoded key to dst.
func (k InternalKey) Append(dst []byte) []byte {
	dst = append(dst, k.UserKey...)
	return binary.LittleEndian.AppendUint64(dst, k.Trailer)
}

// Encode returns the encoded key in a new slice.
func (k InternalKey) Encode() []byte { return k.Append(make([]byte, 0, k.Size())) }

// Clone returns a copy that does not alias the original buffer.
func (k InternalKey) Clone() InternalKey {
	return InternalKey{UserKey: append([]byte(nil), k.UserKey...), Trailer: k.Trailer}
}

func (k InternalKey) String() string {
	return fmt.Sprintf("%q#%d,%s", k.UserKey, k.Seq(), k.Kind())
}

// DecodeInternalKey decodes an encoded internal key. ok is false when b is
// shorter than a trailer or carries an unknown kind.
func DecodeInternalKey(b []byte) (k InternalKey, ok bool) {
	n := len(b) - TrailerLen
	if n < 0 {
		return InternalKey{}, false
	}
	k = InternalKey{UserKey: b[:n:n], Trailer: binary.LittleEndian.Uint64(b[n:])}
	if k.Kind() > KindMax {
		return InternalKey{}, false
	}
	return k, true
}

// CompareInternal orders internal keys: user key ascending, trailer descending.
func CompareInternal(a, b InternalKey) int {
	if c := bytes.Compare(a.UserKey, b.UserKey); c != 0 {
		return c
	}
	switch {
	case a.Trailer > b.Trailer:
		return -1
	case a.Trailer < b.Trailer:
		return 1
	}
	return 0
}

// CompareEncoded orders two encoded internal keys. Keys too short to hold a
// trailer sort as if their trailer were zero.
func CompareEncoded(a, b []byte) int {
	ka, _ := decodeLoose(a)
	kb, _ := decodeLoose(b)
	return CompareInternal(ka, kb)
}

func decodeLoose(b []byte) (InternalKey, bool) {
	n := len(b) - TrailerLen
	if n < 0 {
		return InternalKey{UserKey: b}, false
	}
	return InternalKey{UserKey: b[:n:n], Trailer: binary.LittleEndian.Uint64(b[n:])}, true
}

// Successor returns a short key k with a <= k, used for index separators; it
// may return a itself.
func Successor(dst, a []byte) []byte {
	for i, c := range a {
		if c != 0xff {
			dst = append(dst, a[:i+1]...)
			dst[len(dst)-1]++
			return dst
		}
	}
	return append(dst, a...)
}

// Separator returns a short key k with a <= k < b (as user keys), used for
// index separators between blocks; it may return a itself.
func Separator(dst, a, b []byte) []byte {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	if n >= len(a) || n >= len(b) {
		return append(dst, a...)
	}
	if c := a[n]; c < 0xff && c+1 < b[n] {
		dst = append(dst, a[:n+1]...)
		dst[len(dst)-1]++
		return dst
	}
	return append(dst, a...)
}
