package manifest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// Part of the on-disk format; never change.
const (
	magic         = "LSMFSMF"
	fileVersion   = 1
	headerLen     = len(magic) + 1
	recordHdrLen  = 12
	maxRecordSize = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Writer appends edits to a manifest file. It is not safe for concurrent use.
type Writer struct {
	f    vfs.File
	size int64
	buf  []byte
	err  error // sticky
}

// NewWriter starts a manifest in f (an empty, newly created file).
func NewWriter(f vfs.File) (*Writer, error) {
	hdr := append([]byte(magic), fileVersion)
	if _, err := f.WriteAt(hdr, 0); err != nil {
		return nil, fmt.Errorf("manifest: write header: %w", err)
	}
	return &Writer{f: f, size: int64(len(hdr))}, nil
}

// ResumeWriter appends to the manifest in f, whose valid records end at
// size (ReadAllLen): what follows, a torn tail, is cut off first, so that
// no record follows damage.
func ResumeWriter(f vfs.File, size int64) (*Writer, error) {
	if err := f.Truncate(size); err != nil {
		return nil, fmt.Errorf("manifest: cut the tail at %d: %w", size, err)
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("manifest: sync: %w", err)
	}
	return &Writer{f: f, size: size}, nil
}

// Append writes the edit and syncs the file. After a failure every later call
// fails with the same error.
func (w *Writer) Append(e *Edit) error {
	if w.err != nil {
		return w.err
	}
	w.buf = append(w.buf[:0], make([]byte, recordHdrLen)...)
	w.buf = e.Encode(w.buf)
	payload := w.buf[recordHdrLen:]
	binary.LittleEndian.PutUint32(w.buf[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(w.buf[4:], crc32.Checksum(payload, castagnoli))
	binary.LittleEndian.PutUint32(w.buf[8:], crc32.Checksum(w.buf[:8], castagnoli))
	if _, err := w.f.WriteAt(w.buf, w.size); err != nil {
		w.err = fmt.Errorf("manifest: append: %w", err)
		return w.err
	}
	if err := w.f.Sync(); err != nil {
		w.err = fmt.Errorf("manifest: sync: %w", err)
		return w.err
	}
	w.size += int64(len(w.buf))
	return nil
}

// Size is the file's length.
func (w *Writer) Size() int64 { return w.size }

// Close closes the file.
func (w *Writer) Close() error { return w.f.Close() }

// ReadAll reads the edits of a manifest file's contents. A torn final record
// ends the log; any other damage returns a *base.CorruptionError naming the
// offset.
func ReadAll(name string, data []byte) ([]*Edit, error) {
	edits, _, err := ReadAllLen(name, data)
	return edits, err
}

// ReadAllLen is ReadAll that also returns where the valid records end.
func ReadAllLen(name string, data []byte) ([]*Edit, int64, error) {
	edits, n, err := readAll(name, data)
	return edits, int64(n), err
}

func readAll(name string, data []byte) ([]*Edit, int, error) {
	if len(data) < headerLen || string(data[:len(magic)]) != magic {
		return nil, 0, base.Corruptf(name, 0, "bad manifest header")
	}
	if data[len(magic)] != fileVersion {
		return nil, 0, base.Corruptf(name, int64(len(magic)), "manifest version %d unknown", data[len(magic)])
	}
	var edits []*Edit
	off := headerLen
	for off < len(data) {
		rest := data[off:]
		if len(rest) < recordHdrLen {
			break // torn header at the tail
		}
		if allZero(rest) {
			break // the tail of a torn append reads as zeros
		}
		if crc32.Checksum(rest[:8], castagnoli) != binary.LittleEndian.Uint32(rest[8:]) {
			if !validRecordAfter(data, off+1) {
				break // a torn header of the last append
			}
			return nil, 0, base.Corruptf(name, int64(off), "record header checksum mismatch")
		}
		n := int(binary.LittleEndian.Uint32(rest))
		crc := binary.LittleEndian.Uint32(rest[4:])
		if n > maxRecordSize {
			return nil, 0, base.Corruptf(name, int64(off), "record length %d", n)
		}
		if recordHdrLen+n > len(rest) {
			break // torn payload at the tail
		}
		payload := rest[recordHdrLen : recordHdrLen+n]
		if crc32.Checksum(payload, castagnoli) != crc {
			if off+recordHdrLen+n == len(data) {
				break // torn final record
			}
			return nil, 0, base.Corruptf(name, int64(off), "record checksum mismatch")
		}
		e, err := DecodeEdit(payload)
		if err != nil {
			return nil, 0, base.Corruptf(name, int64(off), "%v", err)
		}
		edits = append(edits, e)
		off += recordHdrLen + n
	}
	return edits, off, nil
}

// validRecordAfter reports whether a whole, checksummed record starts at some
// offset >= from: then a bad header before it sat in the middle of the log.
// Random bytes pass a header checksum once in 2^32 offsets; after
// maxCandidates that do without a valid payload (crafted input, whose
// payload checksums would otherwise cost time quadratic in the log's
// length), the log counts as damaged in the middle.
func validRecordAfter(data []byte, from int) bool {
	const maxCandidates = 64
	candidates := 0
	for off := from; off+recordHdrLen <= len(data); off++ {
		rest := data[off:]
		if crc32.Checksum(rest[:8], castagnoli) != binary.LittleEndian.Uint32(rest[8:]) {
			continue
		}
		if candidates++; candidates > maxCandidates {
			return true
		}
		n := int(binary.LittleEndian.Uint32(rest))
		if n > maxRecordSize || recordHdrLen+n > len(rest) {
			continue
		}
		if crc32.Checksum(rest[recordHdrLen:recordHdrLen+n], castagnoli) == binary.LittleEndian.Uint32(rest[4:]) {
			return true
		}
	}
	return false
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// ReadFile reads a whole manifest file through fs.
func ReadFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return data, nil
}

// FileName returns the name of manifest number n.
func FileName(n uint64) string { return fmt.Sprintf("MANIFEST-%06d", n) }

// EncodeCurrent returns CURRENT's contents for manifest number n.
func EncodeCurrent(n uint64) []byte {
	name := FileName(n)
	return []byte(fmt.Sprintf("%s %08x\n", name, crc32.Checksum([]byte(name), castagnoli)))
}

// DecodeCurrent parses CURRENT's contents into a manifest number.
func DecodeCurrent(data []byte) (uint64, error) {
	s := string(data)
	name, sum, ok := strings.Cut(strings.TrimSuffix(s, "\n"), " ")
	if !ok || !strings.HasSuffix(s, "\n") || !strings.HasPrefix(name, "MANIFEST-") {
		return 0, base.Corruptf("CURRENT", 0, "malformed contents %q", s)
	}
	want, err := strconv.ParseUint(sum, 16, 32)
	if err != nil || uint32(want) != crc32.Checksum([]byte(name), castagnoli) {
		return 0, base.Corruptf("CURRENT", int64(len(name)), "checksum mismatch in %q", s)
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(name, "MANIFEST-"), 10, 64)
	if err != nil {
		return 0, base.Corruptf("CURRENT", 9, "bad manifest number in %q", s)
	}
	return n, nil
}
