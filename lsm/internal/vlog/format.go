package vlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Part of the on-disk format; never change.
const (
	segMagic      = "LSMFSVL"
	segVersion    = 1
	segHeaderLen  = len(segMagic) + 1 + 8
	ptrVersion    = 1
	recordCRCsLen = 8
	// maxKeyLen and maxValueLen bound what a record may claim, so a corrupt
	// length never causes a huge allocation.
	maxKeyLen   = 1 << 16
	maxValueLen = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is matched by errors about value log bytes that fail a checksum
// or do not decode.
var ErrCorrupt = errors.New("vlog: corruption")

var errBadHeader = fmt.Errorf("%w: bad segment header", ErrCorrupt)

// Pointer locates a value in the log.
type Pointer struct {
	Segment uint64
	Offset  uint64 // of the value bytes in the segment file
	Len     uint32
	CRC     uint32 // CRC32C of the value
}

func (p Pointer) String() string {
	return fmt.Sprintf("vlog %06d@%d+%d", p.Segment, p.Offset, p.Len)
}

// Append appends the encoded pointer to dst.
func (p Pointer) Append(dst []byte) []byte {
	dst = append(dst, ptrVersion)
	dst = binary.AppendUvarint(dst, p.Segment)
	dst = binary.AppendUvarint(dst, p.Offset)
	dst = binary.AppendUvarint(dst, uint64(p.Len))
	return binary.LittleEndian.AppendUint32(dst, p.CRC)
}

// DecodePointer decodes an encoded pointer; bad bytes give an error matching
// ErrCorrupt.
func DecodePointer(b []byte) (Pointer, error) {
	var p Pointer
	if len(b) < 1 || b[0] != ptrVersion {
		return p, fmt.Errorf("%w: pointer version", ErrCorrupt)
	}
	b = b[1:]
	var n int
	if p.Segment, n = binary.Uvarint(b); n <= 0 {
		return p, fmt.Errorf("%w: pointer segment", ErrCorrupt)
	}
	b = b[n:]
	if p.Offset, n = binary.Uvarint(b); n <= 0 || p.Offset > math.MaxInt64-maxValueLen {
		return p, fmt.Errorf("%w: pointer offset", ErrCorrupt)
	}
	b = b[n:]
	l, n := binary.Uvarint(b)
	if n <= 0 || l > maxValueLen {
		return p, fmt.Errorf("%w: pointer length", ErrCorrupt)
	}
	p.Len = uint32(l)
	b = b[n:]
	if len(b) != 4 {
		return p, fmt.Errorf("%w: pointer checksum", ErrCorrupt)
	}
	p.CRC = binary.LittleEndian.Uint32(b)
	return p, nil
}

// FileName is the name of segment n.
func FileName(n uint64) string { return fmt.Sprintf("%06d.vlog", n) }

func segmentHeader(n uint64) []byte {
	h := append([]byte(segMagic), segVersion)
	return binary.LittleEndian.AppendUint64(h, n)
}

// appendRecord appends a record and returns the offset of its value within
// the appended bytes.
func appendRecord(dst, key, value []byte) ([]byte, int, uint32) {
	start := len(dst)
	dst, vcrc := appendRecordHeader(dst, key, value)
	voff := len(dst) - start
	dst = append(dst, value...)
	return dst, voff, vcrc
}

// appendRecordHeader appends the header and key of value's record (the
// bytes before the value) and returns the value's CRC.
func appendRecordHeader(dst, key, value []byte) ([]byte, uint32) {
	start := len(dst)
	vcrc := crc32.Checksum(value, castagnoli)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint32(dst, vcrc)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = binary.AppendUvarint(dst, uint64(len(value)))
	dst = append(dst, key...)
	hcrc := crc32.Checksum(dst[start+4:], castagnoli)
	binary.LittleEndian.PutUint32(dst[start:], hcrc)
	return dst, vcrc
}

// recordHeader is a decoded record header.
type recordHeader struct {
	valueCRC       uint32
	keyLen, valLen int
	hdrLen         int // bytes before the key
}

// decodeRecordHeader decodes the fixed part of a record from b (which holds
// at least the CRCs and the lengths); it does not verify the header CRC,
// which covers the key too.
func decodeRecordHeader(b []byte) (recordHeader, error) {
	var h recordHeader
	if len(b) < recordCRCsLen+2 {
		return h, fmt.Errorf("%w: short record header", ErrCorrupt)
	}
	h.valueCRC = binary.LittleEndian.Uint32(b[4:])
	p := recordCRCsLen
	kl, n := binary.Uvarint(b[p:])
	if n <= 0 || kl > maxKeyLen {
		return h, fmt.Errorf("%w: record key length", ErrCorrupt)
	}
	p += n
	vl, n := binary.Uvarint(b[p:])
	if n <= 0 || vl > maxValueLen {
		return h, fmt.Errorf("%w: record value length", ErrCorrupt)
	}
	p += n
	h.keyLen, h.valLen, h.hdrLen = int(kl), int(vl), p
	return h, nil
}
