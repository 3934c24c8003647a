package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Superblock wire format (see doc.go for the picture). All integers are
// little-endian.
const (
	// BlockSize is the unit of every journal I/O: superblock copies and frames
	// start on BlockSize boundaries and are a whole number of blocks long.
	// Part of the on-disk format; never change.
	BlockSize = 4096

	// superblockCopies copies of the superblock, BlockSize bytes each, sit at
	// the start of the device; the ring follows them. Part of the on-disk
	// format; never change.
	superblockCopies = 2

	// ringStartDefault is where Format puts the ring: right after the two
	// superblock copies. Part of the on-disk format; never change.
	ringStartDefault = superblockCopies * BlockSize

	// superblockMagic opens every superblock copy. Part of the on-disk
	// format; never change.
	superblockMagic = "LSMFSJNL"

	// FormatVersion is the version byte of the superblock and of every frame
	// header written by this code. Part of the on-disk format; never change
	// the meaning of an existing value.
	FormatVersion = 1

	// Field offsets inside a superblock copy. Part of the on-disk format;
	// never change.
	sbOffMagic      = 0  // [8]byte "LSMFSJNL"
	sbOffVersion    = 8  // uint8 FormatVersion
	sbOffCopy       = 9  // uint8 copy index (0 or 1): guards against a copy read from the wrong slot
	sbOffFlags      = 10 // uint8 flags (sbFlagClean)
	sbOffReserved   = 11 // uint8 zero
	sbOffBlockSize  = 12 // uint32 BlockSize
	sbOffUUID       = 16 // [16]byte owning filesystem
	sbOffNonce      = 32 // uint64 random per Format; mixed into every frame checksum
	sbOffGeneration = 40 // uint64 incremented at every superblock write; the highest valid copy wins
	sbOffRingStart  = 48 // uint64 byte offset of the ring on the device
	sbOffRingSize   = 56 // uint64 ring length in bytes (a multiple of BlockSize)
	sbOffCkptLSN    = 64 // uint64 records with lsn <= this are no longer needed
	sbOffCkptOff    = 72 // uint64 device offset where replay starts (the frame holding ckptLSN+1, or where it will go)
	sbOffCkptSeq    = 80 // uint64 sequence number of the frame expected at ckptOff
	sbOffCRC        = 88 // uint32 CRC32C (Castagnoli) of bytes [0, 88)
	sbLen           = 92 // bytes covered by the format; the rest of the block is zero
)

// sbFlagClean marks a journal closed with every record checkpointed: no
// frame follows the checkpoint, so Open need not scan the free ring for one.
// A writable Open clears it (with a forced superblock write) before any frame
// can be written. Part of the on-disk format; never change.
const sbFlagClean = 1

// castagnoli is the CRC32C table used for every checksum of the journal.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// superblock is the decoded content of one superblock copy.
type superblock struct {
	uuid       [16]byte
	nonce      uint64
	generation uint64
	ringStart  int64
	ringSize   int64
	ckpt       checkpointPos
	// clean: closed with everything checkpointed (sbFlagClean).
	clean bool
}

// checkpointPos is where replay starts: records with lsn <= lsn are no longer
// needed, and the frame with sequence number seq (the one holding lsn+1, or
// the next frame to be written) is expected at device offset off, or at the
// ring start if it did not fit before the ring end.
type checkpointPos struct {
	lsn uint64
	off int64
	seq uint64
}

// copyIndex is the slot a superblock with this generation is written to:
// writes alternate so that a torn write only ever damages the older copy.
func (sb *superblock) copyIndex() int { return int(sb.generation % superblockCopies) }

// encode writes the copy into b (BlockSize bytes).
func (sb *superblock) encode(b []byte) {
	clear(b[:BlockSize])
	copy(b[sbOffMagic:], superblockMagic)
	b[sbOffVersion] = FormatVersion
	b[sbOffCopy] = byte(sb.copyIndex())
	if sb.clean {
		b[sbOffFlags] = sbFlagClean
	}
	binary.LittleEndian.PutUint32(b[sbOffBlockSize:], BlockSize)
	copy(b[sbOffUUID:], sb.uuid[:])
	binary.LittleEndian.PutUint64(b[sbOffNonce:], sb.nonce)
	binary.LittleEndian.PutUint64(b[sbOffGeneration:], sb.generation)
	binary.LittleEndian.PutUint64(b[sbOffRingStart:], uint64(sb.ringStart))
	binary.LittleEndian.PutUint64(b[sbOffRingSize:], uint64(sb.ringSize))
	binary.LittleEndian.PutUint64(b[sbOffCkptLSN:], sb.ckpt.lsn)
	binary.LittleEndian.PutUint64(b[sbOffCkptOff:], uint64(sb.ckpt.off))
	binary.LittleEndian.PutUint64(b[sbOffCkptSeq:], sb.ckpt.seq)
	binary.LittleEndian.PutUint32(b[sbOffCRC:], crc32.Checksum(b[:sbOffCRC], castagnoli))
}

// hasSuperblockMagic reports whether b starts like a superblock copy.
func hasSuperblockMagic(b []byte) bool {
	return len(b) >= len(superblockMagic) && bytes.Equal(b[:len(superblockMagic)], []byte(superblockMagic))
}

// decodeSuperblock validates and decodes the copy read from slot copyIdx.
// Every failure wraps ErrInvalidSuperblock (or ErrUnsupportedVersion).
func decodeSuperblock(b []byte, copyIdx int) (superblock, error) {
	var sb superblock
	if len(b) < sbLen {
		return sb, fmt.Errorf("%w: short (%d bytes)", ErrInvalidSuperblock, len(b))
	}
	if !hasSuperblockMagic(b) {
		return sb, fmt.Errorf("%w: bad magic %q", ErrInvalidSuperblock, b[:len(superblockMagic)])
	}
	if got, want := binary.LittleEndian.Uint32(b[sbOffCRC:]), crc32.Checksum(b[:sbOffCRC], castagnoli); got != want {
		return sb, fmt.Errorf("%w: checksum %08x, want %08x", ErrInvalidSuperblock, got, want)
	}
	if v := b[sbOffVersion]; v != FormatVersion {
		return sb, fmt.Errorf("%w: version %d (this build reads %d)", ErrUnsupportedVersion, v, FormatVersion)
	}
	if bs := binary.LittleEndian.Uint32(b[sbOffBlockSize:]); bs != BlockSize {
		return sb, fmt.Errorf("%w: block size %d, want %d", ErrInvalidSuperblock, bs, BlockSize)
	}
	if r := b[sbOffReserved]; r != 0 {
		return sb, fmt.Errorf("%w: reserved field %#x", ErrInvalidSuperblock, r)
	}
	if f := b[sbOffFlags]; f&^sbFlagClean != 0 {
		return sb, fmt.Errorf("%w: unknown flags %#x", ErrInvalidSuperblock, f)
	}
	sb.clean = b[sbOffFlags]&sbFlagClean != 0
	copy(sb.uuid[:], b[sbOffUUID:])
	sb.nonce = binary.LittleEndian.Uint64(b[sbOffNonce:])
	sb.generation = binary.LittleEndian.Uint64(b[sbOffGeneration:])
	if c := int(b[sbOffCopy]); c != copyIdx || sb.copyIndex() != copyIdx {
		return sb, fmt.Errorf("%w: copy index %d with generation %d read from slot %d",
			ErrInvalidSuperblock, c, sb.generation, copyIdx)
	}
	rs := binary.LittleEndian.Uint64(b[sbOffRingStart:])
	rl := binary.LittleEndian.Uint64(b[sbOffRingSize:])
	sb.ckpt.lsn = binary.LittleEndian.Uint64(b[sbOffCkptLSN:])
	co := binary.LittleEndian.Uint64(b[sbOffCkptOff:])
	sb.ckpt.seq = binary.LittleEndian.Uint64(b[sbOffCkptSeq:])
	const maxRing = 1 << 50
	switch {
	case rs < ringStartDefault || rs%BlockSize != 0 || rs > maxRing:
		return sb, fmt.Errorf("%w: ring start %d", ErrInvalidSuperblock, rs)
	case rl < minRingSize || rl%BlockSize != 0 || rl > maxRing:
		return sb, fmt.Errorf("%w: ring size %d", ErrInvalidSuperblock, rl)
	case co < rs || co >= rs+rl || co%BlockSize != 0:
		return sb, fmt.Errorf("%w: checkpoint offset %d outside ring [%d, %d)", ErrInvalidSuperblock, co, rs, rs+rl)
	case sb.ckpt.seq == 0:
		return sb, fmt.Errorf("%w: checkpoint frame seq 0", ErrInvalidSuperblock)
	}
	sb.ringStart, sb.ringSize, sb.ckpt.off = int64(rs), int64(rl), int64(co)
	return sb, nil
}

// minRingSize is the smallest ring Format accepts: 16 blocks.
const minRingSize = 16 * BlockSize

// ProbeUUID reports whether b, the first bytes of a device or file, holds a
// valid journal superblock copy, and the UUID of the filesystem it belongs
// to (from the copy with the highest generation). mkfs uses it to refuse
// formatting over another filesystem's journal.
func ProbeUUID(b []byte) (uuid [16]byte, ok bool) {
	var gen uint64
	for i := 0; i < superblockCopies && (i+1)*BlockSize <= len(b); i++ {
		sb, err := decodeSuperblock(b[i*BlockSize:(i+1)*BlockSize], i)
		if err == nil && (!ok || sb.generation > gen) {
			uuid, gen, ok = sb.uuid, sb.generation, true
		}
	}
	return uuid, ok
}
