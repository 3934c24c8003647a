package sstable

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

// Format constants. Each is part of the on-disk format; never change one:
// a new layout takes a new formatVersion.
const (
	// formatVersion is written in the footer; Open refuses other versions.
	formatVersion = 1
	// magic ends the footer's fixed fields.
	magic = "\x89LSMsst\n"

	// blockTrailerLen is the trailer after every block: one compression
	// type byte and the CRC32C (little-endian) of the stored contents and
	// the type byte.
	blockTrailerLen = 5

	// Compression types (the trailer's first byte).
	compressionNone = 0
	// compressionLZ4: the stored contents are uvarint(decoded length)
	// followed by one LZ4 block (github.com/pierrec/lz4/v4 CompressBlock).
	compressionLZ4 = 1

	// footerLen is the size of the footer:
	// metaindex handle (2 x uint64 LE), index handle (2 x uint64 LE),
	// version (1), magic (8), CRC32C of the preceding 41 bytes (4, LE).
	footerLen = 16 + 16 + 1 + 8 + 4

	// Metaindex entry names.
	metaFilterName     = "lsmfs.filter.bloom"
	metaPropertiesName = "lsmfs.properties"
	metaRangeDelName   = "lsmfs.rangedel"

	// bloomMaxProbes bounds the probe count stored in a filter block.
	bloomMaxProbes = 30
)

// Limits the reader enforces on lengths it decodes, so that bad bytes can
// never make it allocate much more than the file's own size. Not format
// constants: the writer refuses to produce anything beyond them.
const (
	// maxBlockLen bounds a block's decoded length (restart offsets are
	// uint32; blocks are ~8 KiB in practice; one huge inline value makes a
	// big block).
	maxBlockLen = 256 << 20
	// maxRestartInterval bounds the entries per restart point in a data
	// block (and WriterOptions.RestartInterval); see checkBlock.
	maxRestartInterval = 128
	// maxLZ4Ratio bounds decoded/stored for an LZ4 block; LZ4 cannot
	// expand a block more than about 255 times.
	maxLZ4Ratio = 256
)

// The magic is 8 bytes.
var _ = [1]struct{}{}[len(magic)-8]

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// blockCRC is the checksum of a block's stored contents followed by its
// compression type byte, which is how they lie on disk.
func blockCRC(contentsAndType []byte) uint32 { return crc32.Checksum(contentsAndType, crcTable) }

// blockHandle locates a block: offset of its first byte and length of its
// stored contents, without the trailer.
type blockHandle struct {
	offset, length uint64
}

// end is the offset just past the block's trailer.
func (h blockHandle) end() uint64 { return h.offset + h.length + blockTrailerLen }

// appendBlockHandle encodes h as two uvarints.
func appendBlockHandle(dst []byte, h blockHandle) []byte {
	dst = binary.AppendUvarint(dst, h.offset)
	return binary.AppendUvarint(dst, h.length)
}

// decodeBlockHandle decodes a handle that must fill b exactly.
func decodeBlockHandle(b []byte) (blockHandle, bool) {
	off, n := binary.Uvarint(b)
	if n <= 0 {
		return blockHandle{}, false
	}
	l, m := binary.Uvarint(b[n:])
	if m <= 0 || n+m != len(b) {
		return blockHandle{}, false
	}
	return blockHandle{offset: off, length: l}, true
}

// footer is the decoded fixed-size tail of a table.
type footer struct {
	metaindex, index blockHandle
	version          uint8
}

func (f footer) encode() []byte {
	b := make([]byte, 0, footerLen)
	b = binary.LittleEndian.AppendUint64(b, f.metaindex.offset)
	b = binary.LittleEndian.AppendUint64(b, f.metaindex.length)
	b = binary.LittleEndian.AppendUint64(b, f.index.offset)
	b = binary.LittleEndian.AppendUint64(b, f.index.length)
	b = append(b, f.version)
	b = append(b, magic...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// decodeFooter decodes the last footerLen bytes of a table of fileSize
// bytes. On failure it returns a reason and the offset within b of the bad
// field.
func decodeFooter(b []byte, fileSize uint64, verify bool) (f footer, badOff int, reason string) {
	if len(b) != footerLen || fileSize < footerLen {
		return f, 0, "footer has wrong length"
	}
	const crcOff = footerLen - 4
	if got, want := crc32.Checksum(b[:crcOff], crcTable), binary.LittleEndian.Uint32(b[crcOff:]); got != want && verify {
		if string(b[crcOff-len(magic):crcOff]) != magic {
			return f, crcOff - len(magic), "bad magic (not an sstable, or truncated)"
		}
		return f, crcOff, "footer checksum mismatch"
	}
	if string(b[crcOff-len(magic):crcOff]) != magic {
		return f, crcOff - len(magic), "bad magic"
	}
	f.metaindex = blockHandle{binary.LittleEndian.Uint64(b[0:]), binary.LittleEndian.Uint64(b[8:])}
	f.index = blockHandle{binary.LittleEndian.Uint64(b[16:]), binary.LittleEndian.Uint64(b[24:])}
	f.version = b[32]
	if f.version != formatVersion {
		return f, 32, "unsupported format version"
	}
	limit := fileSize - uint64(footerLen)
	if !handleWithin(f.metaindex, limit) {
		return f, 0, "metaindex handle out of range"
	}
	if !handleWithin(f.index, limit) {
		return f, 16, "index handle out of range"
	}
	return f, 0, ""
}

// handleWithin reports whether the block and its trailer lie in [0, limit),
// without overflowing.
func handleWithin(h blockHandle, limit uint64) bool {
	return h.offset <= limit && h.length <= limit-h.offset &&
		blockTrailerLen <= limit-h.offset-h.length && h.length <= maxBlockLen
}

// decodeKeyString formats an encoded internal key.
func decodeKeyString(k []byte) string {
	n := len(k) - 8
	ik := base.InternalKey{UserKey: k[:n], Trailer: binary.LittleEndian.Uint64(k[n:])}
	if ik.Trailer == base.MakeTrailer(base.MaxSeqNum, base.KindMax) {
		// A shortened separator: the smallest internal key of its user key.
		return fmt.Sprintf("%q#max", ik.UserKey)
	}
	return ik.String()
}
