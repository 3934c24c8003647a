package journal

import (
	"errors"
	"testing"
)

// TestLZ4RatioBound: a compressed frame's raw length is bounded by LZ4's
// expansion limit before it sizes the decompression buffer: a 4 KiB frame
// with a valid checksum could make replay allocate a quarter of the ring
// (format review). The most compressible payload stays under the bound.
func TestLZ4RatioBound(t *testing.T) {
	const maxLen = 256 << 20
	ok := frameHeader{flags: flagLZ4, seq: 1, firstLSN: 1, count: 1, rawLen: 1 << 20, storedLen: 4200}
	b := make([]byte, frameHeaderSize)
	ok.encode(b)
	if _, err := decodeFrameHeader(b, maxLen); err != nil {
		t.Errorf("1 MiB from 4200 bytes (zeros compress about 255-fold): %v", err)
	}
	bad := ok
	bad.rawLen, bad.storedLen = 16<<20, 4000
	bad.encode(b)
	if _, err := decodeFrameHeader(b, maxLen); !errors.Is(err, ErrInvalidFrame) {
		t.Errorf("16 MiB from 4000 bytes: %v, want ErrInvalidFrame", err)
	}

	// The real thing: a megabyte of zeros through the encoder and back.
	e := frameEncoder{compress: true}
	payload := append([]byte{0x80, 0x80, 0x40}, make([]byte, 1<<20)...) // one record: uvarint length 1 MiB, then zeros
	dst := make([]byte, frameLen(len(payload)))
	h, _ := e.encode(dst, 1, 1, 1, payload)
	if h.flags&flagLZ4 == 0 {
		t.Fatalf("a megabyte of zeros was not compressed")
	}
	if _, err := decodeFrameHeader(dst, maxLen); err != nil {
		t.Errorf("compressed zeros (raw %d, stored %d): %v", h.rawLen, h.storedLen, err)
	}
}
