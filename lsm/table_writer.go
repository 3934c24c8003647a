package lsm

import (
	"bytes"
	"fmt"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/manifest"
	"github.com/lsmfs/lsmfs/lsm/internal/sstable"
	"github.com/lsmfs/lsmfs/lsm/internal/vlog"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// outputWriter writes the output of a flush or compaction as tables cut at
// targetSize, only between user keys, and gives each table the fragments of
// the range tombstones that fall in its key span, so that tables of a level
// stay disjoint.
type outputWriter struct {
	d          *DB
	targetSize uint64
	tombs      []base.RangeTombstone // fragmented, sorted

	w        *sstable.Writer
	fileNum  uint64
	lower    []byte // tombstones below this went to the previous table
	lastUser []byte
	cutReady bool

	outputs []*manifest.FileMetadata
	bytes   uint64
}

func (o *outputWriter) writerOptions() sstable.WriterOptions {
	opts := o.d.opts
	bits := opts.BloomBitsPerKey
	if bits < 0 {
		bits = 0
	}
	return sstable.WriterOptions{BlockSize: opts.BlockSize, BloomBitsPerKey: bits, DisableCompression: opts.DisableCompression}
}

func (o *outputWriter) open() error {
	o.d.mu.Lock()
	o.fileNum = o.d.mu.versions.newFileNum()
	o.d.mu.Unlock()
	f, err := o.d.opts.FS.Create(vfs.Join(o.d.dirname, tableFileName(o.fileNum)))
	if err != nil {
		return fmt.Errorf("create sstable %s: %w", tableFileName(o.fileNum), err)
	}
	o.w = sstable.NewWriter(f, o.writerOptions())
	o.cutReady = false
	return nil
}

func (o *outputWriter) add(k base.InternalKey, v []byte) error {
	if o.w != nil && o.cutReady && !bytes.Equal(k.UserKey, o.lastUser) {
		if err := o.finish(k.UserKey); err != nil {
			return err
		}
		o.lower = append([]byte(nil), k.UserKey...)
	}
	if o.w == nil {
		if err := o.open(); err != nil {
			return err
		}
	}
	if err := o.w.Add(k, v); err != nil {
		return fmt.Errorf("write sstable %s: %w", tableFileName(o.fileNum), err)
	}
	o.lastUser = append(o.lastUser[:0], k.UserKey...)
	if o.w.EstimatedSize() >= o.targetSize {
		o.cutReady = true
	}
	return nil
}

// finish completes the current table, giving it the tombstone fragments in
// [o.lower, upper) (upper nil: all the rest).
func (o *outputWriter) finish(upper []byte) error {
	var tsStart, tsEnd []byte
	for _, t := range o.tombs {
		if upper != nil && bytes.Compare(t.Start, upper) >= 0 {
			break
		}
		if o.lower != nil && bytes.Compare(t.End, o.lower) <= 0 {
			continue
		}
		if o.lower != nil && bytes.Compare(t.Start, o.lower) < 0 {
			t.Start = o.lower
		}
		if upper != nil && bytes.Compare(t.End, upper) > 0 {
			t.End = upper
		}
		if err := o.w.AddRangeTombstone(t); err != nil {
			return fmt.Errorf("write sstable %s: %w", tableFileName(o.fileNum), err)
		}
		if tsStart == nil {
			tsStart = t.Start
		}
		if tsEnd == nil || bytes.Compare(t.End, tsEnd) > 0 {
			tsEnd = t.End
		}
	}
	meta, err := o.w.Close()
	o.w = nil
	if err != nil {
		o.d.opts.FS.Remove(vfs.Join(o.d.dirname, tableFileName(o.fileNum)))
		return fmt.Errorf("finish sstable %s: %w", tableFileName(o.fileNum), err)
	}
	fm := &manifest.FileMetadata{FileNum: o.fileNum, Size: meta.Size, SmallestSeq: meta.SmallestSeq, LargestSeq: meta.LargestSeq}
	if meta.HasPoints {
		fm.Smallest = append([]byte(nil), meta.Smallest.UserKey...)
		fm.Largest = append([]byte(nil), meta.Largest.UserKey...)
	}
	if tsStart != nil {
		if fm.Smallest == nil || bytes.Compare(tsStart, fm.Smallest) < 0 {
			fm.Smallest = append([]byte(nil), tsStart...)
		}
		if !meta.HasPoints || bytes.Compare(tsEnd, fm.Largest) > 0 {
			fm.Largest = append([]byte(nil), tsEnd...)
			fm.LargestExclusive = true
		}
	}
	o.outputs = append(o.outputs, fm)
	o.bytes += meta.Size
	return nil
}

// close finishes the last table; with no points written but tombstones
// left, it writes a tombstone-only table.
func (o *outputWriter) close() error {
	if o.w == nil {
		rest := o.tombs
		if o.lower != nil {
			rest = overlapping(o.tombs, o.lower, nil)
		}
		if len(rest) == 0 {
			return nil
		}
		if err := o.open(); err != nil {
			return err
		}
	}
	return o.finish(nil)
}

// abort removes every table written.
func (o *outputWriter) abort() {
	if o.w != nil {
		o.w.Abort()
		o.w = nil
		o.d.opts.FS.Remove(vfs.Join(o.d.dirname, tableFileName(o.fileNum)))
	}
	for _, m := range o.outputs {
		o.d.opts.FS.Remove(vfs.Join(o.d.dirname, tableFileName(m.FileNum)))
	}
	o.outputs = nil
}

// writeTables drains c into tables; with separate (a flush), large inline
// values go to the value log on the way (valueSeparator). On error, nothing
// is left behind but value-log records no pointer names (garbage, as after
// a crash). The bytes it returns include the values moved.
func (d *DB) writeTables(c *compactionIter, targetSize uint64, separate bool) ([]*manifest.FileMetadata, uint64, error) {
	o := &outputWriter{d: d, targetSize: targetSize, tombs: c.outputTombstones()}
	add := o.add
	var sep *valueSeparator
	if separate && d.vlogW != nil {
		sep = &valueSeparator{d: d, out: o.add}
		add = sep.add
	}
	fail := func(err error) ([]*manifest.FileMetadata, uint64, error) {
		o.abort()
		sep.abort()
		return nil, 0, err
	}
	for c.next() {
		if err := add(c.key, c.value); err != nil {
			return fail(err)
		}
	}
	if c.err != nil {
		return fail(c.err)
	}
	if err := sep.close(); err != nil {
		return fail(err)
	}
	if err := o.close(); err != nil {
		return fail(err)
	}
	if len(o.outputs) > 0 {
		// The manifest edit that names the tables must not outlive their
		// directory entries.
		if err := d.opts.FS.SyncDir(d.dirname); err != nil {
			return fail(fmt.Errorf("sync %s: %w", d.dirname, err))
		}
	}
	if sep != nil {
		o.bytes += sep.moved
		d.metrics.flushValuesMoved.Add(sep.moved)
	}
	return o.outputs, o.bytes, nil
}

// valueSeparator moves the large values a flush finds inline to the value
// log and writes pointers to them instead, so that tables never hold them
// and compactions never copy them. Synchronous batches of up to
// syncInlineMax bytes keep their values inline in the journal and the
// memtable (one device flush per commit, see separates); this is where
// they join the value log, in large sequential appends off the commit path.
//
// It appends to segments of its own (a writer per flush), not to the active
// one: that writer's buffer belongs to Apply, under the commit lock, which
// a flush must not take (a writer stalled for memtable room holds it while
// it waits for the flush). close syncs and seals them before the flush's
// manifest edit, which then records them. Until the tables are in the tree,
// their records have no pointer the cleaner can see: the flush sets
// flushVlogFloor, and the cleaner leaves the segments from there on alone.
// A flush that fails removes its segments (abort). A nil separator does
// nothing.
type valueSeparator struct {
	d       *DB
	out     func(base.InternalKey, []byte) error
	w       *vlog.Writer // nil until a value moves
	segs    []uint64     // the segments w created
	pending int          // bytes appended since the writer's last Flush
	moved   uint64       // value bytes moved
	pbuf    []byte
}

// sepFlushBytes bounds what the writer buffers before it writes (close
// syncs once, at the end: a sync is a device flush, which the journal's
// forces would queue behind).
const sepFlushBytes = 1 << 20

func (s *valueSeparator) add(k base.InternalKey, v []byte) error {
	d := s.d
	if k.Kind() != base.KindSet || len(v) < d.opts.ValueThreshold {
		return s.out(k, v)
	}
	if s.w == nil {
		newSegment := func() uint64 {
			n := d.newFlushSegment()
			s.segs = append(s.segs, n)
			return n
		}
		w, err := vlog.NewWriter(d.opts.FS, d.dirname, d.opts.VlogSegmentSize, newSegment, d.sealVlogSegment)
		if err != nil {
			return err
		}
		s.w = w
	}
	p, err := s.w.Append(k.UserKey, v)
	if err != nil {
		return err
	}
	s.moved += uint64(len(v))
	if s.pending += len(v); s.pending >= sepFlushBytes {
		if err := s.w.Flush(); err != nil {
			return err
		}
		s.pending = 0
	}
	s.pbuf = p.Append(s.pbuf[:0])
	return s.out(base.MakeInternalKey(k.UserKey, k.Seq(), base.KindValuePointer), s.pbuf)
}

// close syncs and seals the flush's segments.
func (s *valueSeparator) close() error {
	if s == nil || s.w == nil {
		return nil
	}
	if h := s.d.testHookFlushMoved; h != nil {
		h()
	}
	err := s.w.Close()
	s.w = nil
	return err
}

// abort removes the segments of a flush that failed: no table that points
// into them joins the tree.
func (s *valueSeparator) abort() {
	if s == nil {
		return
	}
	if s.w != nil {
		s.w.Close() // sealed or not, the segments go
		s.w = nil
	}
	s.d.dropFlushSegments(s.segs)
	s.segs = nil
}
