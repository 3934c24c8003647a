package lsm

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/manifest"
	"github.com/lsmfs/lsmfs/lsm/internal/vlog"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// CheckReport is what Check found in the engine's files.
type CheckReport struct {
	// Problems lists damage, one sentence each (at most maxCheckProblems;
	// Omitted counts the rest).
	Problems []string
	Omitted  int
	// Notes are findings that are not damage: garbage files left by a
	// crash (a writable open removes them), a torn journal tail.
	Notes []string
	// Garbage names the files the manifest does not reference, which a
	// writable Open removes.
	Garbage []string

	Tables        int
	TableBytes    uint64
	TableEntries  uint64
	Pointers      uint64 // live value-log pointers, each read and checksummed
	PointerBytes  uint64
	VlogSegments  int
	JournalFrames int // frames after the checkpoint, each checksummed at Open
	JournalRecord uint64
}

const maxCheckProblems = 10000

// OK reports whether Check found no damage.
func (r *CheckReport) OK() bool { return len(r.Problems) == 0 && r.Omitted == 0 }

func (r *CheckReport) addf(format string, args ...any) {
	if len(r.Problems) >= maxCheckProblems {
		r.Omitted++
		return
	}
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// String is a summary line followed by a line per problem and note.
func (r *CheckReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "engine: tables=%d (%d bytes, %d entries) vlog_segments=%d pointers=%d (%d bytes) journal_frames=%d (%d records) garbage_files=%d\n",
		r.Tables, r.TableBytes, r.TableEntries, r.VlogSegments, r.Pointers, r.PointerBytes, r.JournalFrames, r.JournalRecord, len(r.Garbage))
	for _, p := range r.Problems {
		b.WriteString("problem: " + p + "\n")
	}
	if r.Omitted > 0 {
		fmt.Fprintf(&b, "... and %d more problems\n", r.Omitted)
	}
	for _, n := range r.Notes {
		b.WriteString("note: " + n + "\n")
	}
	return b.String()
}

// Check verifies the engine's files and returns every problem it finds
// (it is the library behind `lsmfs fsck`, with fs.Check for the keyspace):
//
//   - every table of the current version: each block's checksum (the whole
//     table is read), entries in order, and every key within the bounds the
//     manifest records; in levels >= 1, tables sorted and disjoint;
//   - every live value-log pointer: the value is read and its checksum
//     compared (a pointer to a missing segment or past its end is damage);
//   - the manifest and the journal frames after the checkpoint were
//     checksummed by Open (a torn journal tail is a note, as is a torn
//     manifest record: both are what a crash leaves);
//   - files the manifest does not name are listed as garbage (a crash
//     leaves them; a writable open removes them).
//
// Open already refuses an engine whose manifest, table footers and
// indexes, or live journal are damaged; Check finds damage in the bytes
// Open does not read. It returns an error only when it cannot run at all.
func (d *DB) Check() (CheckReport, error) {
	var r CheckReport
	if err := d.checkOpen(); err != nil {
		return r, err
	}
	rs := d.loadReadState()
	defer rs.unref()
	v := rs.version
	if v == nil {
		return r, ErrClosed
	}
	var bad []keyRange
	for l, files := range v.levels {
		for i, f := range files {
			if !d.checkTable(&r, l, f) {
				bad = append(bad, keyRange{f.Smallest, f.Largest, tableFileName(f.FileNum)})
			}
			if l > 0 && i > 0 {
				prev := files[i-1]
				if c := bytes.Compare(prev.Largest, f.Smallest); c > 0 || c == 0 && !prev.LargestExclusive {
					r.addf("level %d: tables %s and %s overlap", l, tableFileName(prev.FileNum), tableFileName(f.FileNum))
				}
			}
		}
	}
	d.checkPointers(&r, bad)

	d.mu.Lock()
	r.VlogSegments = len(d.mu.versions.vlog)
	d.mu.Unlock()
	if d.wal != nil {
		rec := d.wal.Recovery()
		r.JournalFrames, r.JournalRecord = rec.Frames, rec.Records
		if rec.TailErr != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("journal: the last frame was torn by a crash and ignored: %v", rec.TailErr))
		}
	}
	d.listGarbage(&r)
	return r, nil
}

// keyRange is an inclusive range of user keys (of a damaged table).
type keyRange struct {
	lo, hi []byte
	name   string
}

// checkTable reads every block and entry of one table; it reports whether
// the table is sound.
func (d *DB) checkTable(r *CheckReport, level int, f *tableMeta) bool {
	name := tableFileName(f.FileNum)
	r.Tables++
	r.TableBytes += f.Size
	rd, release, err := d.tableCache.get(f.FileNum)
	if err != nil {
		r.addf("table %s (L%d): %v", name, level, err)
		return false
	}
	defer release()
	ok := true
	rd.CheckBlocks(func(i int, err error) {
		ok = false
		r.addf("table %s (L%d) data block %d: %v", name, level, i, err)
	})
	if !ok {
		return false
	}
	if p := rd.Properties(); p.NumEntries+p.NumRangeTombstones > 0 && (p.SmallestSeq != f.SmallestSeq || p.LargestSeq != f.LargestSeq) {
		r.addf("table %s: sequence numbers %d-%d, but the manifest records %d-%d", name, p.SmallestSeq, p.LargestSeq, f.SmallestSeq, f.LargestSeq)
		ok = false
	}
	for _, t := range rd.RangeTombstones() {
		if bytes.Compare(t.Start, f.Smallest) < 0 || bytes.Compare(t.End, f.Largest) > 0 {
			r.addf("table %s: range tombstone [%q, %q) outside the bounds the manifest records [%q, %q]", name, t.Start, t.End, f.Smallest, f.Largest)
			ok = false
		}
		if t.Seq < f.SmallestSeq || t.Seq > f.LargestSeq {
			r.addf("table %s: range tombstone [%q, %q) #%d outside the table's sequence numbers %d-%d", name, t.Start, t.End, t.Seq, f.SmallestSeq, f.LargestSeq)
			ok = false
		}
	}
	it := rd.NewIter()
	defer it.Close()
	var prev base.InternalKey
	var prevBuf []byte
	first := true
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		r.TableEntries++
		if !first && base.CompareInternal(prev, k) >= 0 {
			r.addf("table %s: entries out of order at %q", name, k.UserKey)
			return false
		}
		if bytes.Compare(k.UserKey, f.Smallest) < 0 || bytes.Compare(k.UserKey, f.Largest) > 0 ||
			f.LargestExclusive && bytes.Equal(k.UserKey, f.Largest) {
			r.addf("table %s: key %q outside the bounds the manifest records [%q, %q]", name, k.UserKey, f.Smallest, f.Largest)
			return false
		}
		if k.Seq() < f.SmallestSeq || k.Seq() > f.LargestSeq {
			r.addf("table %s: key %q #%d outside the sequence numbers the manifest records, %d-%d", name, k.UserKey, k.Seq(), f.SmallestSeq, f.LargestSeq)
			return false
		}
		prevBuf = append(prevBuf[:0], k.UserKey...)
		prev = base.MakeInternalKey(prevBuf, k.Seq(), k.Kind())
		first = false
	}
	if err := it.Error(); err != nil {
		r.addf("table %s (L%d): %v", name, level, err)
		return false
	}
	return ok
}

// checkPointers reads the value of every live pointer, in the parts of the
// key space that no damaged table covers (a read through one would stop
// the scan).
func (d *DB) checkPointers(r *CheckReport, bad []keyRange) {
	slices.SortFunc(bad, func(a, b keyRange) int { return bytes.Compare(a.lo, b.lo) })
	var lo []byte
	for _, b := range bad {
		if lo == nil || bytes.Compare(lo, b.lo) < 0 {
			d.checkPointersIn(r, lo, b.lo, bad)
		}
		if next := append(append([]byte(nil), b.hi...), 0); lo == nil || bytes.Compare(next, lo) > 0 {
			lo = next
		}
	}
	d.checkPointersIn(r, lo, nil, bad)
	if len(bad) > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("value pointers in the key ranges of the %d damaged tables were not checked", len(bad)))
	}
}

func (d *DB) checkPointersIn(r *CheckReport, lo, hi []byte, bad []keyRange) {
	it := d.NewIter(&IterOptions{LowerBound: lo, UpperBound: hi})
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if it.rawKind != base.KindValuePointer {
			continue
		}
		r.Pointers++
		p, err := vlog.DecodePointer(it.raw)
		if err != nil {
			r.addf("key %q: bad value pointer: %v", it.Key(), err)
			continue
		}
		r.PointerBytes += uint64(p.Len)
		if _, err := d.readPointer(it.raw); err != nil {
			r.addf("key %q: value pointer %s: %v", it.Key(), p, err)
		}
	}
	if err := it.Error(); err != nil {
		for _, b := range bad {
			if strings.Contains(err.Error(), b.name) {
				return // a damaged table at the edge of the range: reported
			}
		}
		r.addf("scan of the keyspace stopped: %v", err)
	}
}

// listGarbage lists the files of the directory the manifest does not name.
func (d *DB) listGarbage(r *CheckReport) {
	names, err := d.opts.FS.List(d.dirname)
	if err != nil {
		r.addf("list %s: %v", d.dirname, err)
		return
	}
	tails := map[uint64]int64{}
	var tables []uint64
	d.mu.Lock()
	vs := d.mu.versions
	for f := range vs.files {
		tables = append(tables, f)
	}
	for _, name := range names {
		switch {
		case strings.HasSuffix(name, ".sst"):
			if n, ok := fileNum(name, ".sst"); ok && vs.files[n] == nil {
				r.Garbage = append(r.Garbage, name)
			}
		case strings.HasPrefix(name, "MANIFEST-"):
			if name != manifest.FileName(vs.manifestNum) {
				r.Garbage = append(r.Garbage, name)
			}
		case name == "CURRENT.tmp":
			r.Garbage = append(r.Garbage, name)
		case strings.HasSuffix(name, ".vlog"):
			n, ok := fileNum(name, ".vlog")
			if !ok || vs.vlog[n] != nil || n == d.vlogActive.Load() {
				continue
			}
			// Not sealed in the manifest: the active segment at the
			// last crash (sealed at the next writable open), or one
			// whose header never reached the disk.
			size, err := vlog.ValidSize(d.opts.FS, d.dirname, n)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				// Removed since the listing: a segment the cleaner
				// retired (it leaves the version first, the directory
				// after).
			case err != nil:
				r.addf("value-log segment %s: %v", name, err)
			case size == 0:
				r.Garbage = append(r.Garbage, name)
			default:
				r.Notes = append(r.Notes, fmt.Sprintf("value-log segment %s was active at a crash (%d valid bytes); a writable open seals it", name, size))
				if fi, err := d.opts.FS.Stat(vfs.Join(d.dirname, name)); err == nil && fi.Size() > size {
					tails[n] = size
				}
			}
		}
	}
	d.mu.Unlock()
	if err := d.checkVlogTails(tails, tables); err != nil {
		r.addf("value log: %v", err)
	}
	if len(r.Garbage) > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("files the manifest does not name (left by a crash; removed at the next writable open): %s", strings.Join(r.Garbage, " ")))
	}
}
