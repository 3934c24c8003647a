package journal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/pierrec/lz4/v4"
)

// Frame wire format (see doc.go for the picture). All integers are
// little-endian.
const (
	// frameMagic opens every frame header. Part of the on-disk format; never
	// change.
	frameMagic = "LJFR"

	// frameHeaderSize is the length of a frame header; the payload follows it
	// directly. Part of the on-disk format; never change.
	frameHeaderSize = 40

	// Field offsets inside a frame header. Part of the on-disk format; never
	// change.
	fhOffMagic     = 0  // [4]byte "LJFR"
	fhOffVersion   = 4  // uint8 FormatVersion
	fhOffFlags     = 5  // uint8 flagLZ4 or 0
	fhOffReserved  = 6  // uint16 zero
	fhOffSeq       = 8  // uint64 frame sequence number: consecutive along the log
	fhOffFirstLSN  = 16 // uint64 lsn of the first record
	fhOffCount     = 24 // uint32 number of records (>= 1)
	fhOffRawLen    = 28 // uint32 payload length before compression
	fhOffStoredLen = 32 // uint32 payload length as stored after the header
	fhOffCRC       = 36 // uint32 CRC32C, seeded with frameSeed(uuid, nonce), of the header (this field zero) and the stored payload

	// flagLZ4 marks a payload stored as one LZ4 block. Part of the on-disk
	// format; never change.
	flagLZ4 = 1 << 0

	// maxPayloadLen bounds rawLen and storedLen in any frame (the ring bounds
	// them further). Part of the on-disk format; never change.
	maxPayloadLen = 1 << 30
)

// frameSeed is the initial CRC of every frame checksum of one formatted
// journal: frames of an earlier Format of the same device (another UUID or
// nonce) never validate.
func frameSeed(uuid [16]byte, nonce uint64) uint32 {
	var b [24]byte
	copy(b[:], uuid[:])
	binary.LittleEndian.PutUint64(b[16:], nonce)
	return crc32.Checksum(b[:], castagnoli)
}

// frameHeader is a decoded frame header.
type frameHeader struct {
	flags     uint8
	seq       uint64
	firstLSN  uint64
	count     uint32
	rawLen    uint32
	storedLen uint32
	crc       uint32
}

// lastLSN is the lsn of the frame's last record.
func (h *frameHeader) lastLSN() uint64 { return h.firstLSN + uint64(h.count) - 1 }

// len is the frame's length on the device: header and payload rounded up to
// whole blocks.
func (h *frameHeader) len() int64 { return frameLen(int(h.storedLen)) }

// frameLen is the device length of a frame with a payload of n bytes.
// readFrameLen is the longest frame a reader accepts in a ring of ringSize
// bytes: a quarter of it, rounded up to whole blocks.
func readFrameLen(ringSize int64) int64 {
	return (ringSize/4 + BlockSize - 1) / BlockSize * BlockSize
}

func frameLen(n int) int64 {
	return (int64(frameHeaderSize+n) + BlockSize - 1) / BlockSize * BlockSize
}

// encode writes the header into b with the given checksum.
func (h *frameHeader) encode(b []byte) {
	copy(b[fhOffMagic:], frameMagic)
	b[fhOffVersion] = FormatVersion
	b[fhOffFlags] = h.flags
	binary.LittleEndian.PutUint16(b[fhOffReserved:], 0)
	binary.LittleEndian.PutUint64(b[fhOffSeq:], h.seq)
	binary.LittleEndian.PutUint64(b[fhOffFirstLSN:], h.firstLSN)
	binary.LittleEndian.PutUint32(b[fhOffCount:], h.count)
	binary.LittleEndian.PutUint32(b[fhOffRawLen:], h.rawLen)
	binary.LittleEndian.PutUint32(b[fhOffStoredLen:], h.storedLen)
	binary.LittleEndian.PutUint32(b[fhOffCRC:], h.crc)
}

// frameChecksum is the CRC of a frame whose header (with the CRC field
// zero) is hdr and whose stored payload is payload.
func frameChecksum(seed uint32, hdr, payload []byte) uint32 {
	var h [frameHeaderSize]byte
	copy(h[:], hdr[:frameHeaderSize])
	binary.LittleEndian.PutUint32(h[fhOffCRC:], 0)
	c := crc32.Update(seed, castagnoli, h[:])
	return crc32.Update(c, castagnoli, payload)
}

// hasFrameMagic reports whether b starts like a frame header.
func hasFrameMagic(b []byte) bool {
	return len(b) >= frameHeaderSize && string(b[:len(frameMagic)]) == frameMagic
}

// decodeFrameHeader decodes and checks the fixed fields of a frame header.
// It does not verify the checksum (see verifyFrame). maxLen bounds the
// frame's device length (the ring size). Failures wrap ErrInvalidFrame.
func decodeFrameHeader(b []byte, maxLen int64) (frameHeader, error) {
	var h frameHeader
	if len(b) < frameHeaderSize {
		return h, fmt.Errorf("%w: short header (%d bytes)", ErrInvalidFrame, len(b))
	}
	if !hasFrameMagic(b) {
		return h, fmt.Errorf("%w: bad magic %q", ErrInvalidFrame, b[:len(frameMagic)])
	}
	if v := b[fhOffVersion]; v != FormatVersion {
		return h, fmt.Errorf("%w: version %d", ErrInvalidFrame, v)
	}
	h.flags = b[fhOffFlags]
	h.seq = binary.LittleEndian.Uint64(b[fhOffSeq:])
	h.firstLSN = binary.LittleEndian.Uint64(b[fhOffFirstLSN:])
	h.count = binary.LittleEndian.Uint32(b[fhOffCount:])
	h.rawLen = binary.LittleEndian.Uint32(b[fhOffRawLen:])
	h.storedLen = binary.LittleEndian.Uint32(b[fhOffStoredLen:])
	h.crc = binary.LittleEndian.Uint32(b[fhOffCRC:])
	switch {
	case h.flags&^flagLZ4 != 0:
		return h, fmt.Errorf("%w: unknown flags %#x", ErrInvalidFrame, h.flags)
	case binary.LittleEndian.Uint16(b[fhOffReserved:]) != 0:
		return h, fmt.Errorf("%w: reserved field set", ErrInvalidFrame)
	case h.seq == 0:
		return h, fmt.Errorf("%w: seq 0", ErrInvalidFrame)
	case h.firstLSN == 0 || h.count == 0 || h.firstLSN+uint64(h.count) < h.firstLSN:
		return h, fmt.Errorf("%w: lsn range first=%d count=%d", ErrInvalidFrame, h.firstLSN, h.count)
	case h.rawLen > maxPayloadLen || h.storedLen > maxPayloadLen || uint64(h.rawLen) < uint64(h.count):
		return h, fmt.Errorf("%w: lengths raw=%d stored=%d count=%d", ErrInvalidFrame, h.rawLen, h.storedLen, h.count)
	case h.flags&flagLZ4 == 0 && h.storedLen != h.rawLen:
		return h, fmt.Errorf("%w: uncompressed frame with raw=%d stored=%d", ErrInvalidFrame, h.rawLen, h.storedLen)
	case h.flags&flagLZ4 != 0 && (h.storedLen == 0 || h.storedLen >= h.rawLen ||
		uint64(h.rawLen) > maxLZ4Ratio*uint64(h.storedLen)+64):
		// LZ4 expands a block at most about 255-fold: a larger raw length
		// is damage, and must not size the decompression buffer.
		return h, fmt.Errorf("%w: compressed frame with raw=%d stored=%d", ErrInvalidFrame, h.rawLen, h.storedLen)
	case h.len() > maxLen || frameLen(int(h.rawLen)) > maxLen:
		// The writer never builds a frame whose raw form would exceed a
		// quarter of the ring; checking rawLen too bounds the memory a
		// decompression may ask for.
		return h, fmt.Errorf("%w: frame length %d (raw %d) exceeds %d", ErrInvalidFrame, h.len(), frameLen(int(h.rawLen)), maxLen)
	}
	return h, nil
}

// maxLZ4Ratio bounds how many times larger than its LZ4 block a payload can
// be (LZ4's limit is about 255).
const maxLZ4Ratio = 256

// verifyFrame checks the checksum of the frame in b (at least h.len() bytes,
// or at least header plus stored payload).
func verifyFrame(b []byte, h *frameHeader, seed uint32) error {
	end := frameHeaderSize + int(h.storedLen)
	if len(b) < end {
		return fmt.Errorf("%w: short frame (%d of %d bytes)", ErrInvalidFrame, len(b), end)
	}
	if got := frameChecksum(seed, b, b[frameHeaderSize:end]); got != h.crc {
		return fmt.Errorf("%w: checksum %08x, want %08x", ErrInvalidFrame, h.crc, got)
	}
	return nil
}

// framePayload returns the raw payload of a verified frame b, decompressing
// into scratch (grown as needed) when the frame is compressed.
func framePayload(b []byte, h *frameHeader, scratch *[]byte) ([]byte, error) {
	stored := b[frameHeaderSize : frameHeaderSize+int(h.storedLen)]
	if h.flags&flagLZ4 == 0 {
		return stored, nil
	}
	if cap(*scratch) < int(h.rawLen) {
		*scratch = make([]byte, h.rawLen)
	}
	raw := (*scratch)[:h.rawLen]
	n, err := lz4.UncompressBlock(stored, raw)
	if err != nil {
		return nil, fmt.Errorf("%w: lz4: %v", ErrInvalidFrame, err)
	}
	if n != int(h.rawLen) {
		return nil, fmt.Errorf("%w: lz4 produced %d bytes, want %d", ErrInvalidFrame, n, h.rawLen)
	}
	return raw, nil
}

// forEachRecord walks the count records of a raw payload, each a uvarint
// length followed by the record's bytes. The records must account for every
// byte of the payload. fn sees no record of a malformed payload (the
// payload is checked first).
func forEachRecord(raw []byte, count uint32, fn func(i int, rec []byte) error) error {
	p := 0
	for i := uint32(0); i < count; i++ {
		n, k := binary.Uvarint(raw[p:])
		if k <= 0 {
			return fmt.Errorf("%w: bad length of record %d", ErrInvalidFrame, i)
		}
		if n > uint64(len(raw)-p-k) {
			return fmt.Errorf("%w: record %d overruns the payload", ErrInvalidFrame, i)
		}
		p += k + int(n)
	}
	if p != len(raw) {
		return fmt.Errorf("%w: payload has %d bytes, records account for %d", ErrInvalidFrame, len(raw), p)
	}
	if fn == nil {
		return nil
	}
	p = 0
	for i := 0; i < int(count); i++ {
		n, k := binary.Uvarint(raw[p:])
		p += k
		if err := fn(i, raw[p:p+int(n):p+int(n)]); err != nil {
			return err
		}
		p += int(n)
	}
	return nil
}

// encodedLen is the payload bytes a record of n bytes adds to a frame.
func encodedLen(n int) int { return uvarintLen(uint64(n)) + n }

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// frameEncoder builds frames. It is used by one goroutine at a time (the
// committer, or a test).
type frameEncoder struct {
	seed       uint32
	compress   bool
	compressor lz4.Compressor
}

// encode lays out a frame holding count records into dst, which must have
// room for frameLen(len(payload)) bytes (an uncompressed frame), and returns
// the frame's header and device length. payload holds the records, each as
// uvarint length and bytes. Bytes after the stored payload up to the block
// boundary are zeroed.
func (e *frameEncoder) encode(dst []byte, seq, firstLSN uint64, count int, payload []byte) (frameHeader, int64) {
	rawLen := len(payload)
	h := frameHeader{seq: seq, firstLSN: firstLSN, count: uint32(count), rawLen: uint32(rawLen), storedLen: uint32(rawLen)}
	if e.compress && rawLen > 64 {
		// A destination one byte shorter than the input: LZ4 reports 0 (or an
		// error) when the block would not come out smaller, and then the
		// payload is stored raw.
		n, err := e.compressor.CompressBlock(payload, dst[frameHeaderSize:frameHeaderSize+rawLen-1])
		if err == nil && n > 0 && n < rawLen {
			h.flags |= flagLZ4
			h.storedLen = uint32(n)
		}
	}
	if h.flags&flagLZ4 == 0 {
		copy(dst[frameHeaderSize:], payload)
	}
	stored := int(h.storedLen)
	flen := h.len()
	clear(dst[frameHeaderSize+stored : flen])
	h.encode(dst)
	h.crc = frameChecksum(e.seed, dst, dst[frameHeaderSize:frameHeaderSize+stored])
	binary.LittleEndian.PutUint32(dst[fhOffCRC:], h.crc)
	return h, flen
}
