package fs

import (
	"errors"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/lsmfs/lsmfs/lsm"
)

// writeBuffer holds the dirty blocks of one inode, shared by all its open
// handles, so a read through any handle sees what any handle wrote. Writes
// are coalesced per block; a flush writes every dirty block plus the inode's
// new size, mtime, ctime and stored-byte count in one batch.
//
// A dirty block holds the block's complete contents, except a block that may
// already exist (it starts below the committed size) and was only partly
// written: it holds the written ranges (spans) and its stored bytes are read
// when the buffer is flushed, for all such blocks at once and in parallel
// (resolveBases), instead of one disk read per write(2): a random 4 KiB write
// into a 16 KiB block no longer waits for the block's read. Reads merge the
// stored block and the spans on the fly. The buffer is guarded
// by the inode's shard lock. Invariant: while the buffer is dirty no other
// operation changes the inode's size or blocks — truncate, fallocate, hole
// punching, copy_file_range into it and SEEK_DATA/SEEK_HOLE flush it first.
// A write that is flushed as soon as it is buffered lends its whole blocks
// (borrowed: the request's bytes, not a copy); they never outlive the write.
type writeBuffer struct {
	blocks   map[uint64]*dirtyBlock
	bytes    int    // memory held by blocks (whole block buffers)
	baseSize uint64 // committed size when the buffer became dirty
	size     uint64 // size including buffered writes
	mtime    int64  // time of the last buffered write
	kill     bool   // an unprivileged write asked for setuid/setgid removal
	// dirtyAt is when the buffer became dirty (monotonic; the background
	// flusher writes buffers older than FlushAge).
	dirtyAt time.Time
}

type dirtyBlock struct {
	data   []byte // the block's full contents; cap is the block size (not for borrowed)
	oldLen int    // length of the stored block, -1 if there was none
	// unknownOld: the block may exist (it starts below the committed
	// size) and oldLen is not known yet (resolveBases finds it).
	unknownOld bool
	// needBase (implies unknownOld): data holds only the written spans
	// (zeros elsewhere, length the end of the last span); the stored block
	// is still to be merged under them.
	needBase bool
	spans    []span // written ranges of data when needBase, sorted, disjoint
	// borrowed: data is the writer's (a WRITE request's bytes), not a
	// pooled block buffer; the write flushes or discards the block before
	// it returns (writeLocked).
	borrowed bool
}

// span is a byte range [lo, hi) within a block.
type span struct{ lo, hi int }

// maxSpans bounds the spans a block keeps before its stored bytes are read
// at once (many small writes into one block).
const maxSpans = 16

// addSpan records that [lo, hi) of db was written.
func (db *dirtyBlock) addSpan(lo, hi int) {
	i := 0
	for i < len(db.spans) && db.spans[i].hi < lo {
		i++
	}
	j := i
	for j < len(db.spans) && db.spans[j].lo <= hi {
		lo, hi = min(lo, db.spans[j].lo), max(hi, db.spans[j].hi)
		j++
	}
	db.spans = slices.Replace(db.spans, i, j, span{lo, hi})
}

// merge lays db's spans over base, the stored block (nil: none), into buf
// (a block buffer) and returns it.
func (db *dirtyBlock) merge(buf, base []byte) []byte {
	buf = append(buf[:0], base...)
	if n := len(db.data); len(buf) < n {
		buf = append(buf, make([]byte, n-len(buf))...)
	}
	for _, sp := range db.spans {
		copy(buf[sp.lo:sp.hi], db.data[sp.lo:sp.hi])
	}
	return buf
}

func (wb *writeBuffer) dirty() bool { return len(wb.blocks) > 0 }

// overlay applies the buffered changes to n, the committed record, giving
// what getattr reports.
func (wb *writeBuffer) overlay(n *inode) {
	if !wb.dirty() {
		return
	}
	n.Size = max(n.Size, wb.size)
	if wb.mtime != 0 {
		n.Mtime = wb.mtime
		n.Ctime = max(n.Ctime, wb.mtime)
	}
	// Each buffered block will be stored at least as long as its data:
	// their sum bounds Stored from below where the stored lengths they
	// replace are not known. Without it a file sized by ftruncate and then
	// filled through a descriptor kept open showed st_blocks 0, which tar
	// --sparse takes for a file of holes and archives as zeros.
	var buffered uint64
	for _, b := range wb.blocks {
		buffered += uint64(len(b.data))
		if b.unknownOld {
			n.estimated = true // the stored block's length is not known before the flush
			continue
		}
		n.Stored += uint64(len(b.data) - max(b.oldLen, 0))
	}
	n.Stored = max(n.Stored, buffered)
	if wb.kill {
		n.Mode = killPriv(n.Mode)
	}
}

func (f *FS) getBlockBuf() []byte {
	if p, ok := f.blockPool.Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, f.bs)
}

func (f *FS) putBlockBuf(b []byte) {
	if cap(b) == f.bs {
		f.blockPool.Put(&b)
	}
}

// dropBlock lets go of a buffered block's memory: a pooled buffer goes back
// to the pool, a borrowed one to its writer.
func (f *FS) dropBlock(db *dirtyBlock) {
	if !db.borrowed {
		f.putBlockBuf(db.data)
	}
	db.data = nil
}

// writeThroughMin is the size from which a write to a clean buffer that ends
// at a block boundary is flushed at once instead of waiting for more: its
// blocks then go to the engine from the request's bytes, without a copy
// into the buffer (what a large write gains from buffering, fewer and
// larger batches, it already has). One that ends inside a block is
// buffered as before, so that the next write of a stream completes that
// block in memory instead of storing it twice.
const writeThroughMin = 1 << 20

// openInodeRecord reads the record of an open inode. An open inode always
// has one (an unlinked one is an orphan until its last release): its
// absence is a bug or damage, logged as such.
func (f *FS) openInodeRecord(ino uint64) (inode, error) {
	n, err := f.getInode(ino)
	if errors.Is(err, syscall.ENOENT) {
		_, again := f.getInode(ino)
		f.log.Error("fs: the record of an open inode is missing", "ino", ino, "found_on_retry", again == nil)
	}
	return n, err
}

// writeLocked applies one write(2) (or copy_file_range chunk): data,
// contiguous slices, at offset off of oi's file. It is all or nothing: on
// error none of it is buffered or stored, so a write that fails has no
// effect (a retried O_APPEND record is not written twice). An earlier
// buffer that this write would push past WriteBufferSize (or all buffers
// past WriteBufferTotal), or any earlier buffer before a synchronous
// write, is flushed first; a flush after
// buffering (sync, or a write larger than the buffer) then holds only this
// write's bytes, and its failure discards them. A write that is flushed at
// once to a buffer it found clean (synchronous, of writeThroughMin bytes
// or more up to a block boundary, or filling the buffer alone) lends its
// whole blocks to the buffer instead of copying them. oi's lock is held
// exclusively.
func (f *FS) writeLocked(oi *openInode, off uint64, data [][]byte, kill, sync bool) error {
	var total uint64
	for _, d := range data {
		total += uint64(len(d))
	}
	if total == 0 {
		return nil
	}
	wb := &oi.wb
	if wb.dirty() && (sync || f.overBuffers(wb, f.newBlockBytes(wb, off, total))) {
		if err := f.flushLocked(oi, false); err != nil {
			return err
		}
	}
	through := total >= writeThroughMin && (off+total)%uint64(f.bs) == 0
	lend := !wb.dirty() && (sync || through || f.overBuffers(wb, f.newBlockBytes(wb, off, total)))
	if err := f.bufferWrite(oi, off, data, kill, lend); err != nil {
		return err
	}
	if lend || sync || f.overBuffers(wb, 0) {
		if err := f.flushLocked(oi, sync); err != nil {
			f.discard(wb)
			return err
		}
	}
	return nil
}

// overBuffers reports whether wb, grown by added bytes, passes its own
// bound or makes all buffers together pass theirs.
func (f *FS) overBuffers(wb *writeBuffer, added int) bool {
	return wb.bytes+added > f.opts.WriteBufferSize || f.buffered.Load()+int64(added) > int64(f.opts.WriteBufferTotal)
}

// newBlockBytes is the buffer memory a write of n bytes at off adds: the
// blocks it touches that wb does not hold yet.
func (f *FS) newBlockBytes(wb *writeBuffer, off, n uint64) int {
	bs := uint64(f.bs)
	added := 0
	for idx := off / bs; idx <= (off+n-1)/bs; idx++ {
		if wb.blocks[idx] == nil {
			added += f.bs
		}
	}
	return added
}

// bufferWrite copies data, contiguous slices, to offset off of oi's file
// into its write buffer. Everything that can fail (reading the inode, or
// the stored bytes of a block whose spans are at maxSpans) happens before
// the first byte is copied: on error the buffer holds the same bytes as
// before. With lend (the caller flushes or discards the buffer before data
// changes) the blocks data holds whole are not copied but borrowed. oi's
// lock is held exclusively.
func (f *FS) bufferWrite(oi *openInode, off uint64, data [][]byte, kill, lend bool) error {
	wb := &oi.wb
	if !wb.dirty() {
		n, err := f.openInodeRecord(oi.ino)
		if err != nil {
			return err
		}
		wb.baseSize, wb.size = n.Size, n.Size
		wb.dirtyAt = time.Now()
		if wb.blocks == nil {
			wb.blocks = map[uint64]*dirtyBlock{}
		}
	}
	bs := uint64(f.bs)
	end := off
	for _, d := range data {
		end += uint64(len(d))
	}
	if end == off {
		return nil
	}
	// A write adds at most one span to a block: a block at maxSpans gets
	// its stored bytes now, so that none is left with more.
	var full []*dirtyBlock
	var fullIdx []uint64
	for _, idx := range []uint64{off / bs, (end - 1) / bs} { // only the ends can be partial
		if db := wb.blocks[idx]; db != nil && db.needBase && len(db.spans) >= maxSpans && !slices.Contains(fullIdx, idx) {
			full, fullIdx = append(full, db), append(fullIdx, idx)
		}
	}
	if err := f.resolveBases(oi.ino, full, fullIdx); err != nil {
		return err
	}
	lendEnd := uint64(0) // copyIn's: no lending
	if lend {
		lendEnd = end
	}
	pos := off
	for _, d := range data {
		f.copyIn(wb, pos, d, lendEnd)
		pos += uint64(len(d))
	}
	wb.size = max(wb.size, end)
	if !f.opts.WritebackCache {
		// With the writeback cache the kernel keeps a regular file's
		// times and sends them (SETATTR) when it writes the inode back;
		// its WRITEs come at writeback, later than the write(2)s, and
		// must not stamp their own time over those.
		wb.mtime = f.now()
	}
	wb.kill = wb.kill || kill
	return nil
}

// copyIn copies data to offset off into wb's blocks; it cannot fail. With
// lendEnd, the end of a write that lends its blocks (bufferWrite), a block
// not buffered yet that data holds whole takes data's bytes as they are,
// and so does a new block (past the committed size) that the write ends in.
func (f *FS) copyIn(wb *writeBuffer, off uint64, data []byte, lendEnd uint64) {
	bs := uint64(f.bs)
	end := off + uint64(len(data))
	for pos := off; pos < end; {
		idx, in := pos/bs, pos%bs
		n := min(bs-in, end-pos)
		db := wb.blocks[idx]
		if db == nil && lendEnd != 0 && in == 0 && (n == bs || pos+n == lendEnd && idx*bs >= wb.baseSize) {
			v := data[pos-off : pos-off+n : pos-off+n]
			wb.blocks[idx] = &dirtyBlock{data: v, oldLen: -1, unknownOld: idx*bs < wb.baseSize, borrowed: true}
			wb.bytes += f.bs
			f.buffered.Add(int64(f.bs))
			pos += n
			continue
		}
		if db == nil {
			db = &dirtyBlock{data: f.getBlockBuf(), oldLen: -1}
			// A block that may exist: read it at the flush, unless this
			// write covers it whole.
			db.unknownOld = idx*bs < wb.baseSize
			db.needBase = db.unknownOld && (in != 0 || n != bs)
			wb.blocks[idx] = db
			wb.bytes += f.bs
			f.buffered.Add(int64(f.bs))
		}
		if need := int(in + n); len(db.data) < need {
			old := len(db.data)
			db.data = db.data[:need]
			clear(db.data[old:])
		}
		copy(db.data[in:], data[pos-off:pos-off+n])
		if db.needBase {
			db.addSpan(int(in), int(in+n))
			if sp := db.spans[0]; sp.lo == 0 && sp.hi == f.bs {
				db.needBase, db.spans = false, nil // all of it written
			}
		}
		pos += n
	}
}

// flushLocked writes oi's dirty blocks and the inode's new attributes in one
// batch (several if the engine refuses one that large: each leaves a
// consistent inode). With sync the batch is durable on return; a clean
// buffer with sync forces the journal. oi's lock is held exclusively.
func (f *FS) flushLocked(oi *openInode, sync bool) error {
	wb := &oi.wb
	if !wb.dirty() {
		if sync {
			return f.db.SyncJournal()
		}
		return nil
	}
	n, err := f.openInodeRecord(oi.ino)
	if err != nil {
		return err
	}
	// A file whose blocks hold all of its bytes (no holes, no short block
	// but the last: Stored == Size, as no block stores bytes past the
	// size) needs no reads to know the length of a block a write replaces
	// whole.
	dense := n.Stored == n.Size && n.Size == wb.baseSize
	idxs := make([]uint64, 0, len(wb.blocks))
	var pend []*dirtyBlock
	var pendIdx []uint64
	for idx, db := range wb.blocks {
		idxs = append(idxs, idx)
		if !db.unknownOld {
			continue
		}
		if dense && !db.needBase {
			db.oldLen, db.unknownOld = int(min(uint64(f.bs), n.Size-idx*uint64(f.bs))), false
			continue
		}
		pend, pendIdx = append(pend, db), append(pendIdx, idx)
	}
	if err := f.resolveBases(oi.ino, pend, pendIdx); err != nil {
		return err
	}
	slices.Sort(idxs)
	chunk := len(idxs)
	b := lsm.NewBatch()
	for start, reread := 0, false; start < len(idxs); reread = true {
		end := min(start+chunk, len(idxs))
		final := end == len(idxs)
		if reread {
			// The record as the previous batch left it (the one read
			// above was changed for a batch that was refused or written).
			if n, err = f.openInodeRecord(oi.ino); err != nil {
				return err
			}
		}
		b.Reset()
		for _, idx := range idxs[start:end] {
			db := wb.blocks[idx]
			b.SetShared(blockKey(oi.ino, idx), db.data) // held until Apply returns
			n.Stored += uint64(len(db.data) - max(db.oldLen, 0))
		}
		if final {
			n.Size = max(n.Size, wb.size)
		} else {
			last := idxs[end-1]
			n.Size = max(n.Size, last*uint64(f.bs)+uint64(len(wb.blocks[last].data)))
		}
		if wb.mtime != 0 {
			n.Mtime = wb.mtime
			n.Ctime = max(n.Ctime, wb.mtime)
		}
		if err := f.killPrivs(b, oi.ino, &n, wb.kill); err != nil {
			return err
		}
		putInode(b, oi.ino, &n)
		err = f.db.Apply(b, sync && final)
		if errors.Is(err, lsm.ErrBatchTooLarge) && chunk > 1 {
			chunk = (chunk + 1) / 2
			continue
		}
		if err != nil {
			return err
		}
		for _, idx := range idxs[start:end] {
			f.dropBlock(wb.blocks[idx])
			delete(wb.blocks, idx)
			wb.bytes -= f.bs
			f.buffered.Add(-int64(f.bs))
		}
		// Blocks below the new size may now exist: a later write to one
		// must read it first.
		wb.baseSize = max(wb.baseSize, n.Size)
		start = end
	}
	wb.kill = false
	return nil
}

// resolveBases finds the stored blocks under dbs (blocks idxs of ino; each
// unknownOld), in parallel: their lengths, and for a needBase block its
// bytes, under which its spans are merged. On error no block is changed.
func (f *FS) resolveBases(ino uint64, dbs []*dirtyBlock, idxs []uint64) error {
	if len(dbs) == 0 {
		return nil
	}
	f.baseReads.Add(uint64(len(dbs)))
	bases := make([][]byte, len(dbs))
	lens := make([]int, len(dbs))
	errs := make([]error, len(dbs))
	get := func(i int) {
		k := blockKey(ino, idxs[i])
		var err error
		if dbs[i].needBase {
			bases[i], err = f.db.Get(k)
			lens[i] = len(bases[i])
		} else {
			lens[i], err = f.db.ValueLen(k)
		}
		if errors.Is(err, lsm.ErrNotFound) {
			bases[i], lens[i], err = nil, -1, nil
		}
		errs[i] = err
	}
	if len(dbs) == 1 {
		get(0)
	} else {
		// Bounded parallelism: the reads go to the device together.
		const readers = 16
		var wg sync.WaitGroup
		next := make(chan int)
		for range min(readers, len(dbs)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					get(i)
				}
			}()
		}
		for i := range dbs {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, db := range dbs {
		if db.needBase {
			merged := db.merge(f.getBlockBuf(), bases[i])
			f.putBlockBuf(db.data)
			db.data = merged
		}
		db.oldLen = lens[i]
		db.unknownOld, db.needBase, db.spans = false, false, nil
	}
	return nil
}

// cut takes the buffered blocks that lie wholly in [lo, hi) out of wb, for
// a truncation to lo (hi: maxFileSize) or a hole punched over the range
// that is about to be written: it needs none of their bytes, and writing
// them first could fail (ENOSPC) where the operation, which frees space,
// would not: truncate -s 0 of a runaway log on a full disk must work.
// Blocks the range cuts are kept (the operation trims or zeroes them once
// stored). The caller settles the cut blocks when the operation ends
// (settleCut): a failed truncate or hole punch gives them back, so that it
// has no effect on what the file reads.
func (f *FS) cut(wb *writeBuffer, lo, hi uint64) cutBlocks {
	bs := uint64(f.bs)
	var c cutBlocks
	for idx, db := range wb.blocks {
		if start := idx * bs; start >= lo && (start+bs <= hi || hi >= maxFileSize) {
			if c.blocks == nil {
				c.blocks = make(map[uint64]*dirtyBlock)
			}
			c.blocks[idx] = db
			delete(wb.blocks, idx)
			wb.bytes -= f.bs
			f.buffered.Add(-int64(f.bs))
		}
	}
	// wb.size stays: if blocks remain, their flush records that size and
	// a truncation then trims what lies past the new one (the straddling
	// block's bytes too).
	if !wb.dirty() {
		c.kill, wb.kill = wb.kill, false
	}
	return c
}

// cutBlocks are the blocks cut took out of a buffer, and whether the cut
// left a write's setuid/setgid removal to the caller (kill: the buffer
// became clean, so no flush will do it).
type cutBlocks struct {
	blocks map[uint64]*dirtyBlock
	kill   bool
}

// settleCut ends a cut of wb: once the operation succeeded (err nil) the
// cut blocks go; after a failure they return to wb with their removal of
// privileges, whatever part of wb the operation's flush wrote meanwhile
// (the flush wrote other blocks, and wb.size is still the size they all
// give the file). After a fail-stop (lsm.ErrFailed) they go as well: a
// synchronous batch whose force failed is already what reads see, and
// nothing buffered can be stored any more. The caller holds the inode's
// lock throughout.
func (f *FS) settleCut(wb *writeBuffer, c cutBlocks, err error) {
	if err == nil || errors.Is(err, lsm.ErrFailed) {
		for _, db := range c.blocks {
			f.dropBlock(db)
		}
		return
	}
	for idx, db := range c.blocks {
		wb.blocks[idx] = db
		wb.bytes += f.bs
		f.buffered.Add(int64(f.bs))
	}
	wb.kill = wb.kill || c.kill
}

// discard drops the buffer without writing it: at the last close (after
// its flush), at O_TRUNC, and when the flush of a write that found the
// buffer clean failed (writeLocked).
func (f *FS) discard(wb *writeBuffer) {
	for idx, db := range wb.blocks {
		f.dropBlock(db)
		delete(wb.blocks, idx)
	}
	f.buffered.Add(-int64(wb.bytes))
	wb.bytes = 0
	wb.kill = false
}

// readAt fills dst with the file's bytes at off and returns how many there
// are before the end of the file. oi (nil if the inode has no open handle)
// is read-locked by the caller. rec, if not nil, receives the inode record
// the size came from; it stays zero when the write buffer gave the size.
func (f *FS) readAt(ino uint64, oi *openInode, off uint64, dst []byte, rec *inode) (int, error) {
	var size uint64
	var wb *writeBuffer
	if oi != nil && oi.wb.dirty() {
		wb = &oi.wb
		size = wb.size
	} else {
		n, err := f.getInode(ino)
		if err != nil {
			return 0, err
		}
		size = n.Size
		if rec != nil {
			*rec = n
		}
	}
	if off >= size || len(dst) == 0 {
		return 0, nil
	}
	end := min(off+uint64(len(dst)), size)
	dst = dst[:end-off]
	bs := uint64(f.bs)
	first, last := off/bs, (end-1)/bs
	// putAt copies v, the bytes at file offset lo, into dst where they
	// overlap, and returns where in dst they landed (ok false: nowhere).
	putAt := func(lo uint64, v []byte) (s, e uint64, ok bool) {
		hi := lo + uint64(len(v))
		if hi <= off || lo >= end {
			return 0, 0, false
		}
		s, e = max(lo, off)-off, min(hi, end)-off
		copy(dst[s:e], v[s+off-lo:])
		return s, e, true
	}
	put := func(idx uint64, v []byte) { putAt(idx*bs, v) }
	// putDirty lays a buffered block over what dst holds (for a needBase
	// block: the stored block).
	putDirty := func(idx uint64, db *dirtyBlock) {
		if !db.needBase {
			put(idx, db.data)
			return
		}
		for _, sp := range db.spans {
			putAt(idx*bs+uint64(sp.lo), db.data[sp.lo:sp.hi])
		}
	}
	if first == last {
		clear(dst)
		var db *dirtyBlock
		if wb != nil {
			if db = wb.blocks[first]; db != nil && !db.needBase {
				put(first, db.data)
				return len(dst), nil
			}
		}
		// Not cached: the kernel's page cache keeps what a read returns
		// (FOPEN_KEEP_CACHE), and the block cache keeps what has no other.
		v, err := f.db.GetNoCache(blockKey(ino, first))
		switch {
		case err == nil:
			put(first, v)
		case !errors.Is(err, lsm.ErrNotFound):
			return 0, err
		}
		if db != nil {
			putDirty(first, db) // the spans of a needBase block
		}
		return len(dst), nil
	}
	lo, hi := blockRange(ino, first, last+1)
	it := f.db.NewIter(&lsm.IterOptions{LowerBound: lo, UpperBound: hi})
	// Stored blocks that a buffered block replaces whole are not read.
	var overlaid func(k []byte) bool
	if wb != nil {
		overlaid = func(k []byte) bool {
			_, idx, err := decodeBlockKey(k)
			db := wb.blocks[idx]
			return err == nil && db != nil && !db.needBase
		}
	}
	// Stored blocks come in order: dst is zeroed only where none lands
	// (holes, short blocks, blocks a buffered one replaces), up to pos.
	pos := uint64(0)
	err := it.Each(overlaid, func(k, v []byte) error {
		_, idx, err := decodeBlockKey(k)
		if err != nil {
			return err
		}
		s, e, ok := putAt(idx*bs, v)
		if !ok {
			return nil
		}
		if s < pos {
			return &CorruptError{What: "block key", Key: append([]byte(nil), k...), Reason: "out of order"} // keys are sorted
		}
		clear(dst[pos:s])
		pos = e
		return nil
	})
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	clear(dst[pos:])
	if wb != nil {
		for idx, db := range wb.blocks {
			if idx >= first && idx <= last {
				putDirty(idx, db)
			}
		}
	}
	return len(dst), nil
}

// flushOld runs until stop is closed: every FlushAge/2 it writes the
// buffers that have been dirty for FlushAge or longer and, if it wrote any,
// forces the journal; then the pending access times (atime.go). Writes to
// a file kept open (a log, a database's own log) reach the disk within
// about 1.5 FlushAge and a force: the engine's commit interval bounds only
// what reaches the engine, and a buffer reached it only at flush, fsync,
// close or when full.
func (f *FS) flushOld(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(max(f.opts.FlushAge/2, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		case <-f.atimes.kick:
			f.writeAtimes() // the table is full
			continue
		}
		wrote := false
		for _, oi := range f.open.all() {
			h := f.locks.lock(oi.ino)
			if oi.wb.dirty() && time.Since(oi.wb.dirtyAt) >= f.opts.FlushAge {
				if err := f.flushLocked(oi, false); err != nil {
					// Kept: retried next time, and reported by the next
					// fsync or close.
					f.errno("background flush", oi.ino, err)
				} else {
					wrote = true
				}
			}
			h.unlock()
		}
		if wrote {
			if err := f.db.SyncJournal(); err != nil {
				f.errno("background flush", 0, err)
			}
		}
		f.writeAtimes() // not forced: the commit interval takes them
	}
}
