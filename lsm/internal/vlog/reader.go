package vlog

import (
	"bytes"
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"sync"
	"sync/atomic"

	"github.com/lsmfs/lsmfs/blockcache"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// Reader reads values by pointer, through the block cache, keeping segment
// files open. Safe for concurrent use.
type Reader struct {
	fs    vfs.FS
	dir   string
	cache *blockcache.Cache
	// ns is ORed into the segment number of cache keys, so engines that
	// share a cache never see each other's entries.
	ns uint64

	// DiskReads and DiskBytes count values read from segment files (cache
	// misses).
	DiskReads, DiskBytes atomic.Uint64

	// ReadAheads counts runs served from a stream's prefetch.
	ReadAheads atomic.Uint64

	// streams follows the long runs read around the page cache and reads
	// ahead of them (readahead.go).
	streams streams

	mu struct {
		sync.Mutex
		// files holds the open segment files, at most maxOpen of them
		// unless more are in use at once; lru orders them, least recently
		// used at the back.
		files   map[uint64]*openSegment
		lru     list.List
		maxOpen int
		// forgotten holds the segments Forget closed: they are being
		// removed, and a late reader must not open them again (its handle
		// would keep the removed file's space until Close).
		forgotten map[uint64]bool
	}
}

// openSegment is an open segment file and the reads using it.
type openSegment struct {
	f    vfs.File
	refs int
	// gone: evicted or forgotten while in use; the last release closes f.
	gone bool
	elem *list.Element
}

// DefaultMaxOpen is how many segment files a Reader keeps open (64 GiB of
// 64 MiB segments); the table cache bounds tables' descriptors alike.
const DefaultMaxOpen = 1024

// NewReader returns a reader of the segments in dir. ns is ORed into the
// cache keys' file numbers (0 for a cache of its own).
func NewReader(fs vfs.FS, dir string, cache *blockcache.Cache, ns uint64) *Reader {
	r := &Reader{fs: fs, dir: dir, cache: cache, ns: ns}
	r.mu.files = map[uint64]*openSegment{}
	r.mu.forgotten = map[uint64]bool{}
	r.mu.maxOpen = DefaultMaxOpen
	return r
}

// SetMaxOpen changes how many segment files r keeps open (n >= 1).
func (r *Reader) SetMaxOpen(n int) {
	r.mu.Lock()
	r.mu.maxOpen = max(n, 1)
	r.evictLocked()
	r.mu.Unlock()
}

// file returns seg's open file and the release the caller must call when
// its read is done.
func (r *Reader) file(seg uint64) (vfs.File, func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.mu.files[seg]
	if o == nil {
		if r.mu.forgotten[seg] {
			return nil, nil, fmt.Errorf("vlog: segment %s was removed: %w", FileName(seg), fs.ErrNotExist)
		}
		f, err := r.fs.Open(vfs.Join(r.dir, FileName(seg)))
		if err != nil {
			return nil, nil, err
		}
		o = &openSegment{f: f}
		o.elem = r.mu.lru.PushFront(seg)
		r.mu.files[seg] = o
		r.evictLocked()
	} else {
		r.mu.lru.MoveToFront(o.elem)
	}
	o.refs++
	return o.f, func() { r.release(o) }, nil
}

func (r *Reader) release(o *openSegment) {
	r.mu.Lock()
	o.refs--
	closeNow := o.refs == 0 && o.gone
	r.mu.Unlock()
	if closeNow {
		o.f.Close()
	}
}

// evictLocked closes the least recently used files past maxOpen; a file
// in use is dropped from the set and closed by its last release.
func (r *Reader) evictLocked() {
	for r.mu.lru.Len() > r.mu.maxOpen {
		e := r.mu.lru.Back()
		seg := e.Value.(uint64)
		r.dropLocked(seg)
	}
}

// dropLocked removes seg's file from the set, closing it unless a read
// uses it (the last release closes it then).
func (r *Reader) dropLocked(seg uint64) {
	o := r.mu.files[seg]
	if o == nil {
		return
	}
	delete(r.mu.files, seg)
	r.mu.lru.Remove(o.elem)
	if o.refs > 0 {
		o.gone = true
		return
	}
	o.f.Close()
}

// fileOf returns the open file of p's segment and its release; a missing
// segment is corruption (a pointer into it is durable).
func (r *Reader) fileOf(p Pointer) (vfs.File, func(), error) {
	f, release, err := r.file(p.Segment)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("%w: %s: segment %s is missing", ErrCorrupt, p, FileName(p.Segment))
		}
		return nil, nil, fmt.Errorf("vlog: read %s: %w", p, err)
	}
	return f, release, nil
}

// Read returns the value p points to. The result may be shared with the
// cache: do not modify it. A value that fails its checksum, or a pointer
// past the end of its segment or into a missing segment, is an error
// matching ErrCorrupt.
func (r *Reader) Read(p Pointer) ([]byte, error) {
	return r.read(p, true)
}

// ReadOwned is Read for a value read once: a value read from the file is
// not put in the cache, and the result is the caller's (a cached value is
// copied). File data the kernel's page cache keeps is read this way.
func (r *Reader) ReadOwned(p Pointer) ([]byte, error) {
	return r.read(p, false)
}

func (r *Reader) read(p Pointer, fill bool) ([]byte, error) {
	if b, ok := r.cache.Get(p.Segment|r.ns, p.Offset); ok && len(b) == int(p.Len) {
		if !fill {
			return append([]byte(nil), b...), nil
		}
		return b, nil
	}
	f, release, err := r.fileOf(p)
	if err != nil {
		return nil, err
	}
	b := make([]byte, p.Len)
	n, err := f.ReadAt(b, int64(p.Offset))
	release()
	if n < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s: past the end of the segment", ErrCorrupt, p)
		}
		return nil, fmt.Errorf("vlog: read %s: %w", p, err)
	}
	r.DiskReads.Add(1)
	r.DiskBytes.Add(uint64(len(b)))
	if crc32.Checksum(b, castagnoli) != p.CRC {
		return nil, fmt.Errorf("%w: %s: value checksum mismatch", ErrCorrupt, p)
	}
	if fill {
		r.cache.Set(p.Segment|r.ns, p.Offset, b)
	}
	return b, nil
}

// MaxRun bounds the bytes ReadRun reads at once: 1 MiB of values and the
// headers and keys of their records, so that a FUSE READ of 1 MiB (the
// largest the kernel sends) of a file written in sequence is one run, not
// a run of 1 MiB and a short one for the blocks the headers pushed out.
const MaxRun = 1<<20 + 64<<10

// Adjacent reports whether q may join a run ReadRun reads that ends with p:
// q follows p in the same segment, separated by at most the next record's
// header and key, and the run starting at first stays within MaxRun.
func Adjacent(first, p, q Pointer) bool {
	end := p.Offset + uint64(p.Len)
	return q.Segment == p.Segment && q.Offset >= end && q.Offset-end <= maxRecordGap &&
		q.Offset+uint64(q.Len)-first.Offset <= MaxRun
}

// DropRunMin is the smallest run that ReadRun reads around the page cache
// (or, if the cache already holds it, drops from the cache after reading
// it). A run that long is a stream of file data, and its reader keeps what
// it wants of it (the kernel's page cache of a FUSE file holds what a cached
// handle reads; O_DIRECT readers asked for no cache). A second copy in the
// page cache of the segment file only doubles the memory a stream takes, and
// pushes out pages that serve other reads; on a virtual machine that hands
// free memory back to its host, the stream also faults in fresh pages for
// it. Shorter runs (small files, random reads) keep the page cache: the
// pages around them hold their neighbours.
const DropRunMin = 128 << 10

// maxRecordGap is the most bytes ReadRun reads between two values of a run
// (a record's header and key; keys of block records are short).
const maxRecordGap = 256

// runBufs holds ReadRun's buffers, each aligned to vfs.DirectAlign.
var runBufs = sync.Pool{New: func() any { return new([]byte) }}

// alignedSpan returns [off, off+n) widened to vfs.DirectAlign.
func alignedSpan(off int64, n int) (lo, hi int64) {
	const a = vfs.DirectAlign
	return off &^ (a - 1), (off + int64(n) + a - 1) &^ (a - 1)
}

// readRun reads the n bytes at off of f into *bp, a buffer aligned to
// vfs.DirectAlign (replaced by a larger one if short of room), and returns
// them, with the count read and ReadAt's error. A run of DropRunMin or more
// that the page cache does not already hold is read around it
// (vfs.DirectReader) where f allows: a stream's reader keeps what it wants
// itself, and a cached copy would only be dropped again. A run read through
// the page cache is dropped from it after. before is called before a read
// around the page cache.
func readRun(f vfs.File, bp *[]byte, off int64, n int, before func()) (b []byte, k int, err error) {
	grow := func(size int) []byte {
		if cap(*bp) < size {
			*bp = vfs.AlignedBuffer(size) // the pool keeps the aligned start
		}
		return (*bp)[:size]
	}
	if dr, ok := f.(vfs.DirectReader); ok && n >= DropRunMin && !dr.Cached(off, int64(n)) {
		lo, hi := alignedSpan(off, n)
		buf := grow(int(hi - lo))
		before()
		k, err := dr.ReadAtDirect(buf, lo)
		if !errors.Is(err, vfs.ErrNoDirect) {
			skip := int(off - lo)
			return buf[skip : skip+n], min(max(k-skip, 0), n), err
		}
	}
	b = grow(n)
	k, err = f.ReadAt(b, off)
	if k == n && n >= DropRunMin {
		if d, ok := f.(vfs.CacheDropper); ok {
			d.DropCache(off, int64(n)) // advice: its failure changes nothing
		}
	}
	return b, k, err
}

// ReadRun reads the values of ps, pointers that Adjacent chained, with one
// read of the segment file, and calls fn with each in order; v is valid
// only during the call. It stops at fn's first error and returns it. It
// bypasses the cache (a run is a scan: it neither fills nor consults the
// cache). Other errors are those of Read; bad is the index in ps of the
// pointer an error concerns.
func (r *Reader) ReadRun(ps []Pointer, fn func(i int, v []byte) error) (bad int, err error) {
	if len(ps) == 0 {
		return 0, nil
	}
	first, last := ps[0], ps[len(ps)-1]
	for i := 1; i < len(ps); i++ {
		if !Adjacent(first, ps[i-1], ps[i]) {
			return i, fmt.Errorf("vlog: read run: %s does not follow %s", ps[i], ps[i-1])
		}
	}
	off, n := int64(first.Offset), int(last.Offset+uint64(last.Len)-first.Offset)
	note := func() { r.noteRun(first.Segment, off, n) }
	seen := 0 // values fn has had from a prefetch
	if n >= DropRunMin {
		if pf := r.takePrefetch(first.Segment, off, n); pf != nil {
			if b, ok := usePrefetch(pf, off, n); ok {
				note() // the stream's next prefetches start now
				note = func() {}
				// Each value is checked just before fn copies it, while
				// it is in the CPU's cache.
				i, err := r.callRun(ps, b, fn, true)
				r.releasePrefetch(pf)
				if !errors.Is(err, errPrefetchCRC) { // nil, or fn's
					r.ReadAheads.Add(1)
					r.DiskReads.Add(uint64(len(ps)))
					r.DiskBytes.Add(uint64(n))
					return i, err
				}
				// The prefetch does not hold what ps point at (a value
				// of the file that it read damaged, or a race with the
				// writer): read the run from the file, and give fn the
				// values from the first that failed.
				seen = i
			} else {
				r.releasePrefetch(pf)
			}
		}
	}
	f, release, err := r.fileOf(first)
	if err != nil {
		return seen, err
	}
	bp := runBufs.Get().(*[]byte)
	defer runBufs.Put(bp)
	b, k, err := readRun(f, bp, off, n, note)
	release()
	if k < n {
		// The first pointer whose value the short read did not reach (and
		// that fn has not had from a prefetch).
		i := seen
		for i < len(ps)-1 && ps[i].Offset+uint64(ps[i].Len)-first.Offset <= uint64(k) {
			i++
		}
		if err == nil || errors.Is(err, io.EOF) {
			return i, fmt.Errorf("%w: %s: past the end of the segment", ErrCorrupt, ps[i])
		}
		return i, fmt.Errorf("vlog: read %s: %w", first, err)
	}
	r.DiskReads.Add(uint64(len(ps)))
	r.DiskBytes.Add(uint64(n))
	if seen > 0 {
		first := ps[0].Offset
		ps, b = ps[seen:], b[ps[seen].Offset-first:]
		i, err := r.callRun(ps, b, func(i int, v []byte) error { return fn(seen+i, v) }, false)
		if err != nil {
			i += seen
		}
		return i, err
	}
	return r.callRun(ps, b, fn, false)
}

// errPrefetchCRC is callRun's error for a value of a prefetch that fails
// its CRC.
var errPrefetchCRC = errors.New("vlog: prefetched value checksum mismatch")

// callRun calls fn with each value of ps in b, the bytes of the run, after
// checking its CRC: a mismatch is ErrCorrupt for bytes read from the file
// (prefetched false), errPrefetchCRC for a prefetch's.
func (r *Reader) callRun(ps []Pointer, b []byte, fn func(i int, v []byte) error, prefetched bool) (bad int, err error) {
	for i, p := range ps {
		lo := p.Offset - ps[0].Offset
		hi := lo + uint64(p.Len)
		v := b[lo:hi:hi] // an append by fn must not reach the next value
		if crc32.Checksum(v, castagnoli) != p.CRC {
			if prefetched {
				return i, errPrefetchCRC
			}
			return i, fmt.Errorf("%w: %s: value checksum mismatch", ErrCorrupt, p)
		}
		if err := fn(i, v); err != nil {
			return i, err
		}
	}
	return 0, nil
}

// Forget closes a segment's file (before it is deleted); reads of the
// segment fail from then on as if it were missing.
func (r *Reader) Forget(seg uint64) {
	r.forgetStreams(seg)
	r.mu.Lock()
	r.dropLocked(seg)
	r.mu.forgotten[seg] = true
	r.mu.Unlock()
}

// Close stops reading ahead, waiting for the prefetches under way, and
// closes every open segment file (a file a read still uses, at its
// release).
func (r *Reader) Close() {
	r.closeStreams()
	r.mu.Lock()
	for seg := range r.mu.files {
		r.dropLocked(seg)
	}
	r.mu.Unlock()
}

// Record is one record met by Scan.
type Record struct {
	Key   []byte
	Value []byte
	Ptr   Pointer
}

// Scan reads segment seg's records in order and calls fn for each; key and
// value are valid only during the call. It reads the first size bytes (the
// whole file if size is 0) in chunks of scanChunk (one record larger than
// that is read whole), so a scan holds about a chunk of memory whatever the
// segment size. Damage is reported as ErrCorrupt with the offset.
func Scan(fsys vfs.FS, dir string, seg uint64, size int64, fn func(Record) error) error {
	name := FileName(seg)
	f, err := fsys.Open(vfs.Join(dir, name))
	if err != nil {
		return fmt.Errorf("vlog: scan %s: %w", name, err)
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return fmt.Errorf("vlog: scan %s: %w", name, err)
	}
	if size == 0 {
		size = n
	} else if n < size {
		return fmt.Errorf("%w: %s: shorter (%d bytes) than sealed (%d)", ErrCorrupt, name, n, size)
	}
	return scanFrom(name, seg, f, size, scanChunk, fn)
}

// scanChunk is how much of a segment Scan reads at a time.
const scanChunk = 1 << 20

// maxRecordHeader bounds a record header: the checksums and two varints.
const maxRecordHeader = recordCRCsLen + 2*binary.MaxVarintLen64

// scanData is Scan of a segment held in memory.
func scanData(name string, seg uint64, data []byte, fn func(Record) error) error {
	return scanFrom(name, seg, bytes.NewReader(data), int64(len(data)), scanChunk, fn)
}

// scanFrom scans the first size bytes of r, the segment seg, reading chunk
// bytes at a time.
func scanFrom(name string, seg uint64, r io.ReaderAt, size int64, chunk int, fn func(Record) error) error {
	w := scanWindow{r: r, size: size, chunk: chunk, name: name}
	hdr, err := w.at(0, segHeaderLen)
	if err != nil {
		return err
	}
	if len(hdr) < segHeaderLen || string(hdr[:len(segMagic)]) != segMagic || hdr[len(segMagic)] != segVersion {
		return fmt.Errorf("%s: %w", name, errBadHeader)
	}
	if binary.LittleEndian.Uint64(hdr[len(segMagic)+1:]) != seg {
		return fmt.Errorf("%s: %w: names another segment", name, errBadHeader)
	}
	for off := int64(segHeaderLen); off < size; {
		b, err := w.at(off, maxRecordHeader)
		if err != nil {
			return err
		}
		h, err := decodeRecordHeader(b)
		if err != nil {
			return fmt.Errorf("%s at %d: %w", name, off, err)
		}
		total := h.hdrLen + h.keyLen + h.valLen
		if int64(total) > size-off {
			return fmt.Errorf("%w: %s at %d: truncated record", ErrCorrupt, name, off)
		}
		rec, err := w.at(off, total)
		if err != nil {
			return err
		}
		if crc32.Checksum(rec[4:h.hdrLen+h.keyLen], castagnoli) != binary.LittleEndian.Uint32(rec) {
			return fmt.Errorf("%w: %s at %d: record header checksum mismatch", ErrCorrupt, name, off)
		}
		value := rec[h.hdrLen+h.keyLen:]
		if crc32.Checksum(value, castagnoli) != h.valueCRC {
			return fmt.Errorf("%w: %s at %d: value checksum mismatch", ErrCorrupt, name, off)
		}
		ptr := Pointer{Segment: seg, Offset: uint64(off) + uint64(h.hdrLen+h.keyLen), Len: uint32(h.valLen), CRC: h.valueCRC}
		if err := fn(Record{Key: rec[h.hdrLen : h.hdrLen+h.keyLen], Value: value, Ptr: ptr}); err != nil {
			return err
		}
		off += int64(total)
	}
	return nil
}

// scanWindow is a reusable buffer over [base, base+len(buf)) of a segment's
// first size bytes.
type scanWindow struct {
	r     io.ReaderAt
	size  int64
	chunk int
	name  string
	buf   []byte
	base  int64
}

// at returns the bytes [off, off+n), cut at size; they stay valid until the
// next call.
func (w *scanWindow) at(off int64, n int) ([]byte, error) {
	n = int(min(int64(n), w.size-off))
	if off >= w.base && off+int64(n) <= w.base+int64(len(w.buf)) {
		return w.buf[off-w.base : off-w.base+int64(n)], nil
	}
	want := int(min(int64(max(n, w.chunk)), w.size-off))
	if cap(w.buf) < want {
		w.buf = make([]byte, want)
	}
	w.buf = w.buf[:want]
	m, err := w.r.ReadAt(w.buf, off)
	if m < want {
		w.buf = w.buf[:0]
		if err == nil || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s: shorter (%d bytes) than sealed (%d)", ErrCorrupt, w.name, off+int64(m), w.size)
		}
		return nil, fmt.Errorf("vlog: scan %s: %w", w.name, err)
	}
	w.base = off
	return w.buf[:n], nil
}

// ValidSize returns the length of segment seg's valid prefix: the header
// and every record up to the first one that is cut short or fails a
// checksum (the torn tail of a segment that was active at a crash; pointers
// into it were never durable). It returns 0 for a segment whose header never
// reached the disk (shorter than a header, or a header of zeros: a crash
// right after the segment was created), which no pointer can name because
// the writer forces the header before its first append. Any other bad
// header is ErrCorrupt, and so is a header of zeros followed by anything but
// zeros: records were appended, so the header had reached the disk and was
// lost since (a zeroed sector).
func ValidSize(fsys vfs.FS, dir string, seg uint64) (int64, error) {
	if f, err := fsys.Open(vfs.Join(dir, FileName(seg))); err == nil {
		hdr := make([]byte, segHeaderLen)
		n, _ := f.ReadAt(hdr, 0)
		if n < segHeaderLen {
			f.Close()
			return 0, nil
		}
		if allZero(hdr) {
			off, err := firstNonZero(f, int64(segHeaderLen))
			f.Close()
			switch {
			case err != nil:
				return 0, fmt.Errorf("vlog: read %s: %w", FileName(seg), err)
			case off >= 0:
				return 0, fmt.Errorf("%w: segment %s: header is zeros, but data follows at offset %d", ErrCorrupt, FileName(seg), off)
			}
			return 0, nil
		}
		f.Close()
	}
	var end int64 = -1
	err := Scan(fsys, dir, seg, 0, func(rec Record) error {
		end = int64(rec.Ptr.Offset) + int64(rec.Ptr.Len)
		return nil
	})
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return 0, err
	}
	if end < 0 {
		if errors.Is(err, errBadHeader) {
			return 0, err
		}
		return int64(segHeaderLen), nil
	}
	return end, nil
}

// firstNonZero returns the offset of the first non-zero byte of f at or
// after off, or -1.
func firstNonZero(f vfs.File, off int64) (int64, error) {
	buf := make([]byte, 256<<10)
	for {
		n, err := f.ReadAt(buf, off)
		for i, c := range buf[:n] {
			if c != 0 {
				return off + int64(i), nil
			}
		}
		off += int64(n)
		if err == io.EOF || (err == nil && n == 0) {
			return -1, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
