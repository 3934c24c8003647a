package lsm

import (
	"bytes"
	"fmt"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/manifest"
	"github.com/lsmfs/lsmfs/lsm/internal/sstable"
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

// writeTables drains c into tables. On error, nothing is left behind.
func (d *DB) writeTables(c *compactionIter, targetSize uint64) ([]*manifest.FileMetadata, uint64, error) {
	o := &outputWriter{d: d, targetSize: targetSize, tombs: c.outputTombstones()}
	for c.next() {
		if err := o.add(c.key, c.value); err != nil {
			o.abort()
			return nil, 0, err
		}
	}
	if c.err != nil {
		o.abort()
		return nil, 0, c.err
	}
	if err := o.close(); err != nil {
		o.abort()
		return nil, 0, err
	}
	if len(o.outputs) > 0 {
		// The manifest edit that names the tables must not outlive their
		// directory entries.
		if err := d.opts.FS.SyncDir(d.dirname); err != nil {
			o.abort()
			return nil, 0, fmt.Errorf("sync %s: %w", d.dirname, err)
		}
	}
	return o.outputs, o.bytes, nil
}
