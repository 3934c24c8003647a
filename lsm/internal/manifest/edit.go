package manifest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

// Edit field tags: part of the on-disk format; never change.
const (
	tagUUID        = 1
	tagJournalPath = 2
	tagNextFileNum = 3
	tagLastSeq     = 4
	tagJournalLSN  = 5
	tagDeleted     = 6
	tagAdded       = 7
	tagFormatVer   = 8
	tagVlogSealed  = 9
	tagVlogDiscard = 10
	tagVlogDeleted = 11
)

// FormatVersion is the engine's on-disk format version, recorded in the
// first edit of every manifest.
const FormatVersion = 1

// NumLevels is the number of levels in the tree.
const NumLevels = 7

// FileMetadata describes one table.
type FileMetadata struct {
	FileNum uint64
	Size    uint64
	// Smallest and Largest bound the table's user keys, tombstones included.
	// When LargestExclusive is set, Largest is a range tombstone's end and is
	// itself not in the table.
	Smallest, Largest []byte
	LargestExclusive  bool
	SmallestSeq       base.SeqNum
	LargestSeq        base.SeqNum
}

func (f *FileMetadata) String() string {
	end := "]"
	if f.LargestExclusive {
		end = ")"
	}
	return fmt.Sprintf("%06d:[%q-%q%s#%d-%d %dB", f.FileNum, f.Smallest, f.Largest, end, f.SmallestSeq, f.LargestSeq, f.Size)
}

// Overlaps reports whether the table may hold keys in [lo, hi] (inclusive; nil
// is open).
func (f *FileMetadata) Overlaps(lo, hi []byte) bool {
	if hi != nil && string(f.Smallest) > string(hi) {
		return false
	}
	if lo != nil {
		if f.LargestExclusive {
			if string(f.Largest) <= string(lo) {
				return false
			}
		} else if string(f.Largest) < string(lo) {
			return false
		}
	}
	return true
}

// DeletedFile names a table removed from a level.
type DeletedFile struct {
	Level   int
	FileNum uint64
}

// NewFile is a table added to a level.
type NewFile struct {
	Level int
	Meta  *FileMetadata
}

// Edit is one change to the version and the engine's counters. Zero fields
// are unset.
type Edit struct {
	FormatVersion uint64
	UUID          *[16]byte
	JournalPath   *string
	NextFileNum   uint64
	// LastSeq: every entry with a larger sequence number is only in the
	// journal.
	LastSeq base.SeqNum
	// JournalLSN: journal records up to this LSN are in tables.
	JournalLSN uint64
	Deleted    []DeletedFile
	Added      []NewFile

	// Value log: segments sealed (with their final size), bytes of segments
	// that no longer hold a live value (deltas), and segments removed by the
	// cleaner.
	VlogSealed  []VlogSegment
	VlogDiscard []VlogSegment
	VlogDeleted []uint64
}

// VlogSegment pairs a value-log segment with a byte count (its size, or a
// discard delta).
type VlogSegment struct {
	Num   uint64
	Bytes uint64
}

// ErrBadEdit is matched by errors decoding an edit.
var ErrBadEdit = errors.New("manifest: bad edit")

// Encode appends the edit's encoding to dst.
func (e *Edit) Encode(dst []byte) []byte {
	u := func(v uint64) { dst = binary.AppendUvarint(dst, v) }
	bs := func(b []byte) { u(uint64(len(b))); dst = append(dst, b...) }
	if e.FormatVersion != 0 {
		u(tagFormatVer)
		u(e.FormatVersion)
	}
	if e.UUID != nil {
		u(tagUUID)
		bs(e.UUID[:])
	}
	if e.JournalPath != nil {
		u(tagJournalPath)
		bs([]byte(*e.JournalPath))
	}
	if e.NextFileNum != 0 {
		u(tagNextFileNum)
		u(e.NextFileNum)
	}
	if e.LastSeq != 0 {
		u(tagLastSeq)
		u(e.LastSeq)
	}
	if e.JournalLSN != 0 {
		u(tagJournalLSN)
		u(e.JournalLSN)
	}
	for _, d := range e.Deleted {
		u(tagDeleted)
		u(uint64(d.Level))
		u(d.FileNum)
	}
	for _, v := range e.VlogSealed {
		u(tagVlogSealed)
		u(v.Num)
		u(v.Bytes)
	}
	for _, v := range e.VlogDiscard {
		u(tagVlogDiscard)
		u(v.Num)
		u(v.Bytes)
	}
	for _, n := range e.VlogDeleted {
		u(tagVlogDeleted)
		u(n)
	}
	for _, a := range e.Added {
		m := a.Meta
		u(tagAdded)
		u(uint64(a.Level))
		u(m.FileNum)
		u(m.Size)
		bs(m.Smallest)
		bs(m.Largest)
		if m.LargestExclusive {
			u(1)
		} else {
			u(0)
		}
		u(m.SmallestSeq)
		u(m.LargestSeq)
	}
	return dst
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) u() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("%w: bad varint", ErrBadEdit)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(max uint64) []byte {
	n := d.u()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) || n > max {
		d.err = fmt.Errorf("%w: length %d out of range", ErrBadEdit, n)
		return nil
	}
	out := append([]byte(nil), d.b[:n]...)
	d.b = d.b[n:]
	return out
}

func (d *decoder) level() int {
	l := d.u()
	if d.err == nil && l >= NumLevels {
		d.err = fmt.Errorf("%w: level %d", ErrBadEdit, l)
	}
	return int(l)
}

// DecodeEdit decodes an edit. Bad bytes give an error matching ErrBadEdit.
func DecodeEdit(b []byte) (*Edit, error) {
	d := &decoder{b: b}
	e := &Edit{}
	for len(d.b) > 0 && d.err == nil {
		switch tag := d.u(); tag {
		case tagFormatVer:
			e.FormatVersion = d.u()
		case tagUUID:
			id := d.bytes(16)
			if d.err == nil && len(id) != 16 {
				d.err = fmt.Errorf("%w: uuid of %d bytes", ErrBadEdit, len(id))
			}
			if d.err == nil {
				var u [16]byte
				copy(u[:], id)
				e.UUID = &u
			}
		case tagJournalPath:
			p := string(d.bytes(4096))
			e.JournalPath = &p
		case tagNextFileNum:
			e.NextFileNum = d.u()
		case tagLastSeq:
			e.LastSeq = d.u()
		case tagJournalLSN:
			e.JournalLSN = d.u()
		case tagDeleted:
			l := d.level()
			e.Deleted = append(e.Deleted, DeletedFile{Level: l, FileNum: d.u()})
		case tagVlogSealed:
			n := d.u()
			e.VlogSealed = append(e.VlogSealed, VlogSegment{Num: n, Bytes: d.u()})
		case tagVlogDiscard:
			n := d.u()
			e.VlogDiscard = append(e.VlogDiscard, VlogSegment{Num: n, Bytes: d.u()})
		case tagVlogDeleted:
			e.VlogDeleted = append(e.VlogDeleted, d.u())
		case tagAdded:
			l := d.level()
			m := &FileMetadata{}
			m.FileNum = d.u()
			m.Size = d.u()
			m.Smallest = d.bytes(1 << 20)
			m.Largest = d.bytes(1 << 20)
			m.LargestExclusive = d.u() != 0
			m.SmallestSeq = d.u()
			m.LargestSeq = d.u()
			if d.err == nil {
				e.Added = append(e.Added, NewFile{Level: l, Meta: m})
			}
		default:
			if d.err == nil {
				d.err = fmt.Errorf("%w: unknown tag %d", ErrBadEdit, tag)
			}
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	return e, nil
}

// String prints the edit, one field per line.
func (e *Edit) String() string {
	var b strings.Builder
	if e.FormatVersion != 0 {
		fmt.Fprintf(&b, "format-version: %d\n", e.FormatVersion)
	}
	if e.UUID != nil {
		fmt.Fprintf(&b, "uuid: %x\n", e.UUID[:])
	}
	if e.JournalPath != nil {
		fmt.Fprintf(&b, "journal: %s\n", *e.JournalPath)
	}
	if e.NextFileNum != 0 {
		fmt.Fprintf(&b, "next-file: %d\n", e.NextFileNum)
	}
	if e.LastSeq != 0 {
		fmt.Fprintf(&b, "last-seq: %d\n", e.LastSeq)
	}
	if e.JournalLSN != 0 {
		fmt.Fprintf(&b, "journal-lsn: %d\n", e.JournalLSN)
	}
	for _, d := range e.Deleted {
		fmt.Fprintf(&b, "deleted: L%d %06d\n", d.Level, d.FileNum)
	}
	for _, a := range e.Added {
		fmt.Fprintf(&b, "added: L%d %s\n", a.Level, a.Meta)
	}
	for _, v := range e.VlogSealed {
		fmt.Fprintf(&b, "vlog-sealed: %06d %dB\n", v.Num, v.Bytes)
	}
	for _, v := range e.VlogDiscard {
		fmt.Fprintf(&b, "vlog-discard: %06d +%dB\n", v.Num, v.Bytes)
	}
	for _, n := range e.VlogDeleted {
		fmt.Fprintf(&b, "vlog-deleted: %06d\n", n)
	}
	return b.String()
}
