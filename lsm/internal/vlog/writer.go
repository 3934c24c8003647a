package vlog

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// Writer appends records to the active segment and rolls to a new one when
// it passes the segment size. Appended records are buffered until Flush,
// which writes them to the file (readers then see them); Sync also forces
// them to stable storage. A large value is not copied: the buffer refers to
// it, and the caller keeps it unchanged until its Flush (or Discard)
// returns. All methods are safe for concurrent use (the journal's committer
// calls Sync while the commit path appends).
type Writer struct {
	fs      vfs.FS
	dir     string
	maxSize int64
	// newSegment allocates a segment number and is told when one is sealed.
	newSegment func() uint64
	onSeal     func(seg uint64, size int64, keys KeyRange)

	// BytesWritten counts bytes written to segment files.
	BytesWritten atomic.Uint64

	mu struct {
		sync.Mutex
		seg uint64
		f   vfs.File
		// The buffered records: buf holds their bytes but the values of
		// refs, each of which goes after buf[:at] (in order of at);
		// pending counts them all.
		buf     []byte
		refs    []valueRef
		pending int64
		iov     [][]byte // flushLocked's, reused
		written int64    // bytes in the file
		keys    KeyRange // of the records appended to the active segment
		synced  int64
		hinted  int64 // writeback started up to here (see writebackEvery)
		err     error // sticky
	}
}

// KeyRange bounds the keys of a segment's records: Lo and Hi are the
// smallest and the largest, unless Empty (no record, or not known). A range
// may be wider than the records (records of a failed batch are counted),
// never narrower.
type KeyRange struct {
	Lo, Hi []byte
	any    bool // a key was added (Lo and Hi may be nil: the empty key)
}

// Empty reports a range of no keys.
func (r KeyRange) Empty() bool { return !r.any }

// Add widens the range to key.
func (r *KeyRange) Add(key []byte) {
	if !r.any || bytes.Compare(key, r.Lo) < 0 {
		r.Lo = append(r.Lo[:0], key...)
	}
	if !r.any || bytes.Compare(key, r.Hi) > 0 {
		r.Hi = append(r.Hi[:0], key...)
	}
	r.any = true
}

// NewWriter starts a new segment in dir. onSeal is told each segment it
// seals, with its size and the range of its records' keys.
func NewWriter(fs vfs.FS, dir string, maxSize int64, newSegment func() uint64, onSeal func(uint64, int64, KeyRange)) (*Writer, error) {
	w := &Writer{fs: fs, dir: dir, maxSize: maxSize, newSegment: newSegment, onSeal: onSeal}
	w.mu.Lock()
	defer w.mu.Unlock()
	seg, f, err := w.start()
	if isNoSpace(err) {
		// A full disk: the first Append creates the segment (and fails
		// with ENOSPC until there is room), so that an engine can open to
		// delete what frees it.
		return w, nil
	}
	if err != nil {
		return nil, err
	}
	w.installLocked(seg, f)
	return w, nil
}

// isNoSpace reports an out-of-space error: a write that failed with it
// wrote nothing the writer will use, so it is not sticky.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// start creates a new segment with its header, durable (file and entry).
// On failure nothing is left behind.
func (w *Writer) start() (uint64, vfs.File, error) {
	seg := w.newSegment()
	name := FileName(seg)
	path := vfs.Join(w.dir, name)
	f, err := w.fs.Create(path)
	if err != nil {
		return 0, nil, fmt.Errorf("vlog: create %s: %w", name, err)
	}
	fail := func(err error) (uint64, vfs.File, error) {
		f.Close()
		w.fs.Remove(path)
		return 0, nil, err
	}
	if _, err := f.WriteAt(segmentHeader(seg), 0); err != nil {
		return fail(fmt.Errorf("vlog: write %s: %w", name, err))
	}
	// The new file's directory entry must be durable before any pointer to
	// it is.
	if err := f.Sync(); err != nil {
		return fail(fmt.Errorf("vlog: sync %s: %w", name, err))
	}
	if err := w.fs.SyncDir(w.dir); err != nil {
		return fail(fmt.Errorf("vlog: sync %s: %w", w.dir, err))
	}
	return seg, f, nil
}

func (w *Writer) installLocked(seg uint64, f vfs.File) {
	w.mu.seg, w.mu.f = seg, f
	w.mu.written, w.mu.synced = int64(segHeaderLen), int64(segHeaderLen)
	w.mu.hinted = 0
	w.mu.keys = KeyRange{}
}

// valueRef is a buffered value that the writer refers to instead of
// copying: it goes after buf[:at].
type valueRef struct {
	at int
	v  []byte
}

// copyValueMax is the largest value Append copies into its buffer; a larger
// one is referred to and written from where it is (one copy fewer per byte
// of file data, which costs more than an iovec).
const copyValueMax = 512

// writebackEvery is how many written bytes the writer lets pile up in the
// page cache before it asks the kernel to start writing them back. A
// segment's Sync at its roll (or before a journal force) then has little
// left to write: without it, a 64 MiB segment's roll blocked the writer for
// tens of milliseconds.
const writebackEvery = 8 << 20

// Append buffers a record and returns its pointer. The value is readable
// after the next Flush (or Sync). A value of more than copyValueMax bytes
// is not copied: it must not change until that Flush (or a Discard)
// returns.
func (w *Writer) Append(key, value []byte) (Pointer, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.err != nil {
		return Pointer{}, w.mu.err
	}
	if len(value) > maxValueLen || len(key) > maxKeyLen {
		return Pointer{}, fmt.Errorf("vlog: record of %d+%d bytes too large", len(key), len(value))
	}
	if w.mu.f == nil {
		// No active segment yet (NewWriter on a full disk).
		seg, f, err := w.start()
		if err != nil {
			if !isNoSpace(err) {
				w.mu.err = err
			}
			return Pointer{}, err
		}
		w.installLocked(seg, f)
	}
	if end := w.mu.written + w.mu.pending; end > int64(segHeaderLen) && end+int64(len(key)+len(value)+20) > w.maxSize {
		if err := w.rollLocked(); err != nil {
			return Pointer{}, err
		}
	}
	recStart := w.mu.written + w.mu.pending // absolute offset of the record
	n := len(w.mu.buf)
	var crc uint32
	w.mu.buf, crc = appendRecordHeader(w.mu.buf, key, value)
	voff := len(w.mu.buf) - n
	if len(value) <= copyValueMax {
		w.mu.buf = append(w.mu.buf, value...)
	} else {
		w.mu.refs = append(w.mu.refs, valueRef{at: len(w.mu.buf), v: value})
	}
	w.mu.pending += int64(voff + len(value))
	w.mu.keys.Add(key)
	return Pointer{Segment: w.mu.seg, Offset: uint64(recStart + int64(voff)), Len: uint32(len(value)), CRC: crc}, nil
}

// rollLocked seals the active segment (written and synced) and starts a new
// one. When the new segment cannot be created for lack of space, the
// active one stays active (a little past the segment size) and the error is
// not sticky.
func (w *Writer) rollLocked() error {
	if err := w.syncLocked(); err != nil {
		return err
	}
	nseg, nf, err := w.start()
	if err != nil {
		if !isNoSpace(err) {
			w.mu.err = err
		}
		return err
	}
	seg, size, keys := w.mu.seg, w.mu.written, w.mu.keys
	if err := w.mu.f.Close(); err != nil {
		nf.Close()
		w.mu.err = fmt.Errorf("vlog: close %s: %w", FileName(seg), err)
		return w.mu.err
	}
	w.installLocked(nseg, nf)
	if w.onSeal != nil {
		w.onSeal(seg, size, keys)
	}
	return nil
}

func (w *Writer) flushLocked() error {
	if w.mu.err != nil {
		return w.mu.err
	}
	if w.mu.pending == 0 {
		return nil
	}
	var err error
	if len(w.mu.refs) == 0 {
		_, err = w.mu.f.WriteAt(w.mu.buf, w.mu.written)
	} else {
		iov, prev := w.mu.iov[:0], 0
		for _, r := range w.mu.refs {
			iov = append(iov, w.mu.buf[prev:r.at], r.v)
			prev = r.at
		}
		iov = append(iov, w.mu.buf[prev:])
		_, err = vfs.WriteAtv(w.mu.f, iov, w.mu.written)
		clear(iov) // the values are the callers' again
		w.mu.iov = iov[:0]
	}
	if err != nil {
		err = fmt.Errorf("vlog: write %s at %d: %w", FileName(w.mu.seg), w.mu.written, err)
		if isNoSpace(err) {
			// Not sticky: the buffered records are dropped (their
			// pointers were never used: see Discard) and the segment's
			// end stays where it was; what a short write left beyond it
			// is cut off, to give the space back.
			w.dropBufferLocked()
			w.mu.f.Truncate(w.mu.written)
			return err
		}
		w.mu.err = err
		w.dropBufferLocked() // never written now: let the values go
		return w.mu.err
	}
	w.mu.written += w.mu.pending
	w.BytesWritten.Add(uint64(w.mu.pending))
	w.dropBufferLocked()
	if n := w.mu.written - w.mu.hinted; n >= writebackEvery {
		if wb, ok := w.mu.f.(vfs.WriteBacker); ok {
			wb.StartWriteback(w.mu.hinted, n) // a hint: its failure changes nothing
		}
		w.mu.hinted = w.mu.written
	}
	return nil
}

// dropBufferLocked empties the buffer, letting go of the values it
// refers to.
func (w *Writer) dropBufferLocked() {
	w.mu.buf = w.mu.buf[:0]
	clear(w.mu.refs)
	w.mu.refs = w.mu.refs[:0]
	w.mu.pending = 0
}

func (w *Writer) syncLocked() error {
	if err := w.flushLocked(); err != nil {
		return err
	}
	return w.syncWrittenLocked()
}

func (w *Writer) syncWrittenLocked() error {
	if w.mu.synced == w.mu.written {
		return nil
	}
	if err := w.mu.f.Sync(); err != nil {
		w.mu.err = fmt.Errorf("vlog: sync %s: %w", FileName(w.mu.seg), err)
		return w.mu.err
	}
	w.mu.synced = w.mu.written
	return nil
}

// Flush writes buffered records to the file.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked()
}

// Sync writes and forces every appended record. After a failure the error
// is sticky.
func (w *Writer) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.syncLocked()
}

// SyncWritten forces the records written so far, leaving buffered ones to
// the Flush of the batch that appended them. The journal (before a force)
// and the flush of a memtable (before its tables join the tree) call it
// without the commit lock: the batches they cover flushed their records
// before they were enqueued, and flushing another batch's buffer from
// here could, on ENOSPC, drop records that batch already holds pointers
// to. After a failure the error is sticky.
func (w *Writer) SyncWritten() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.err != nil {
		return w.mu.err
	}
	return w.syncWrittenLocked()
}

// Discard drops the records appended since the last Flush: their batch
// failed, and no pointer to them may be used.
func (w *Writer) Discard() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dropBufferLocked()
}

// Failed reports whether the writer has a sticky error.
func (w *Writer) Failed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.err != nil
}

// Active returns the active segment's number and size.
func (w *Writer) Active() (uint64, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.seg, w.mu.written + w.mu.pending
}

// Close syncs and closes the active segment, which is then sealed.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.syncLocked()
	if w.mu.f != nil {
		if cerr := w.mu.f.Close(); err == nil {
			err = cerr
		}
		if err == nil && w.onSeal != nil {
			w.onSeal(w.mu.seg, w.mu.written, w.mu.keys)
		}
		w.mu.f = nil
	}
	return err
}
