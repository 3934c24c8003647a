package journal

import (
	"encoding/binary"
	"hash/crc32"
)

// Internals exposed to the black-box tests (package journal_test).

// FrameInfo describes a frame of the recovered log.
type FrameInfo struct {
	Seq               uint64
	Off, Len          int64
	FirstLSN, LastLSN uint64
	// Covered is the number of bytes from Off that the checksum covers
	// (header and stored payload); the rest up to Len is padding.
	Covered int64
}

// ListFrames recovers the log on dev (without opening a journal) and lists
// its frames.
func ListFrames(dev Device) ([]FrameInfo, Recovery, error) {
	j, err := inspect(dev)
	if err != nil {
		return nil, Recovery{}, err
	}
	var out []FrameInfo
	var buf []byte
	for _, m := range j.mu.frames {
		h, _, err := j.readFrame(m.off, m.seq, 0, &buf)
		if err != nil {
			return nil, Recovery{}, err
		}
		out = append(out, FrameInfo{Seq: m.seq, Off: m.off, Len: m.len, FirstLSN: m.firstLSN, LastLSN: m.lastLSN,
			Covered: int64(frameHeaderSize) + int64(h.storedLen)})
	}
	return out, j.recovery, nil
}

// FrameHeaderSize is the length of a frame header.
const FrameHeaderSize = frameHeaderSize

// FuzzMaxFrameLen bounds frames in DecodeFrame: the quarter of a 4 MiB ring.
const FuzzMaxFrameLen = 1 << 20

// EncodeFrame builds a frame as the committer would.
func EncodeFrame(uuid [16]byte, nonce, seq, firstLSN uint64, recs [][]byte, compress bool) []byte {
	var payload []byte
	for _, r := range recs {
		payload = binary.AppendUvarint(payload, uint64(len(r)))
		payload = append(payload, r...)
	}
	buf := alignedBuf(int(frameLen(len(payload))))
	e := frameEncoder{seed: frameSeed(uuid, nonce), compress: compress}
	_, n := e.encode(buf, seq, firstLSN, len(recs), payload)
	return buf[:n]
}

// DecodeFrame decodes the frame at the start of b as recovery and replay
// would (any seq accepted) and returns copies of its records.
func DecodeFrame(b []byte, uuid [16]byte, nonce uint64) (seq, firstLSN uint64, recs [][]byte, err error) {
	h, err := decodeFrameHeader(b, FuzzMaxFrameLen)
	if err != nil {
		return 0, 0, nil, err
	}
	if err := verifyFrame(b, &h, frameSeed(uuid, nonce)); err != nil {
		return 0, 0, nil, err
	}
	var scratch []byte
	raw, err := framePayload(b, &h, &scratch)
	if err != nil {
		return 0, 0, nil, err
	}
	err = forEachRecord(raw, h.count, func(_ int, rec []byte) error {
		recs = append(recs, append([]byte{}, rec...))
		return nil
	})
	if err != nil {
		return 0, 0, nil, err
	}
	return h.seq, h.firstLSN, recs, nil
}

// FixFrameChecksum rewrites the checksum of the (possibly mutated) frame at
// the start of b, when its header gives a stored length that fits in b, so
// that a fuzzer reaches the payload decoder. It reports whether it did.
func FixFrameChecksum(b []byte, uuid [16]byte, nonce uint64) bool {
	if len(b) < frameHeaderSize {
		return false
	}
	stored := int(binary.LittleEndian.Uint32(b[fhOffStoredLen:]))
	if stored < 0 || stored > len(b)-frameHeaderSize {
		return false
	}
	c := frameChecksum(frameSeed(uuid, nonce), b, b[frameHeaderSize:frameHeaderSize+stored])
	binary.LittleEndian.PutUint32(b[fhOffCRC:], c)
	return true
}

// Superblock is the decoded content of a superblock copy.
type Superblock struct {
	UUID                [16]byte
	Nonce, Generation   uint64
	RingStart, RingSize int64
	CkptLSN             uint64
	CkptOff             int64
	CkptSeq             uint64
	Clean               bool
}

// DecodeSuperblock decodes the superblock copy b read from slot copyIdx.
func DecodeSuperblock(b []byte, copyIdx int) (Superblock, error) {
	sb, err := decodeSuperblock(b, copyIdx)
	return Superblock{sb.uuid, sb.nonce, sb.generation, sb.ringStart, sb.ringSize, sb.ckpt.lsn, sb.ckpt.off, sb.ckpt.seq, sb.clean}, err
}

// EncodeSuperblock encodes s into a BlockSize block (its slot is
// s.Generation mod 2).
func EncodeSuperblock(s Superblock) []byte {
	sb := superblock{s.UUID, s.Nonce, s.Generation, s.RingStart, s.RingSize, checkpointPos{s.CkptLSN, s.CkptOff, s.CkptSeq}, s.Clean}
	b := make([]byte, BlockSize)
	sb.encode(b)
	return b
}

// FixSuperblockChecksum rewrites the checksum of a (possibly mutated)
// superblock copy.
func FixSuperblockChecksum(b []byte) {
	if len(b) >= sbLen {
		binary.LittleEndian.PutUint32(b[sbOffCRC:], crc32.Checksum(b[:sbOffCRC], castagnoli))
	}
}

// SuperblockLen is the number of bytes of a superblock copy the format
// defines.
const SuperblockLen = sbLen
