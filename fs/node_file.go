package fs

// Regular files: open/create/tmpfile, read, write, flush, fsync, release,
// fallocate, lseek (SEEK_DATA/SEEK_HOLE), copy_file_range, and the block
// arithmetic of truncation and hole punching.

import (
	"fmt"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/lsm"
)

// fallocate(2) modes.
const (
	fallocKeepSize  = 0x01
	fallocPunchHole = 0x02
	fallocZeroRange = 0x10
)

// lseek(2) whence values the kernel forwards.
const (
	seekData = 3
	seekHole = 4
)

// copyChunk bounds the bytes copy_file_range moves per lock hold.
const copyChunk = 1 << 20

// directWriteMinor is the oldest FUSE protocol minor (the kernel's, at
// INIT) whose kernels lsmfs lets write-only handles bypass the page cache:
// 7.45, Linux 6.18, where it was checked. The kernel must drop other
// handles' cached pages of a direct write's range before the write (Linux
// 6.6, 7.39) and again after it, for pages a concurrent read cached in
// between (a later change, backported unevenly); without both a reader
// keeps stale pages.
const directWriteMinor = 45

// addFileHandle registers a new handle of ino opened with flags and
// returns its number and FOPEN_ flags. The kernel keeps its cached pages
// across opens (FOPEN_KEEP_CACHE: lsmfs is the only writer). A write-only
// handle bypasses the page cache (FOPEN_DIRECT_IO) unless the writeback cache
// was asked for: nothing can read through it or map it, so caching its
// writes costs a copy into new pages per write, and cuts a write(2) at a page
// the kernel does not hold whole. The kernel writes back and drops other
// handles' cached pages of the range such a write covers
// (TestCoherenceWriteOnlyFd). Older kernels than directWriteMinor keep
// caching such handles. A read-only handle has nothing of its own to flush
// (its file's buffer holds other handles' writes, which their own close
// flushes), so its close sends no FLUSH (FOPEN_NOFLUSH: one round trip
// fewer per open and read). The kernel honours that only without its
// writeback cache, which sends FLUSH to write back its dirty pages.
func (f *FS) addFileHandle(ino uint64, oi *openInode, flags uint32) (fh uint64, fopen uint32) {
	h := &handle{ino: ino, oi: oi, flags: flags}
	acc := flags & syscall.O_ACCMODE
	h.direct = f.kernelMinor.Load() >= directWriteMinor && !f.opts.WritebackCache && acc == syscall.O_WRONLY
	fopen = fuse.FOPEN_KEEP_CACHE
	if h.direct {
		fopen |= fuse.FOPEN_DIRECT_IO
	}
	if acc == syscall.O_RDONLY {
		fopen |= fuse.FOPEN_NOFLUSH
	}
	return f.handles.add(h), fopen
}

// Open opens a file. O_TRUNC (sent with CAP_ATOMIC_O_TRUNC) truncates in
// the same call.
func (f *FS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	ino := in.NodeId
	oi, err := f.openInode(ino, in.Flags, in.Mode&fuse.OPEN_KILL_SUIDGID != 0)
	if err != nil {
		return f.errno("open", ino, err)
	}
	out.Fh, out.OpenFlags = f.addFileHandle(ino, oi, in.Flags)
	return fuse.OK
}

func (f *FS) openInode(ino uint64, flags uint32, kill bool) (*openInode, error) {
	h := f.locks.lock(ino)
	defer h.unlock()
	n, err := f.getInode(ino)
	if err != nil {
		return nil, err
	}
	if n.isDir() && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		return nil, syscall.EISDIR
	}
	if flags&syscall.O_TRUNC != 0 && n.isReg() { // O_RDONLY too: the VFS checked MAY_WRITE, as Linux truncates
		if err := f.writable(); err != nil {
			return nil, err
		}
		oi := f.open.get(ino)
		if oi != nil {
			kill = kill || oi.wb.kill
		}
		b := lsm.NewBatch()
		if err := f.truncate(b, ino, &n, 0); err != nil {
			return nil, err
		}
		now := f.now()
		n.Mtime, n.Ctime = now, now
		mode := n.Mode
		if err := f.killPrivs(b, ino, &n, kill); err != nil {
			return nil, err
		}
		putInode(b, ino, &n)
		if err := f.db.Apply(b, false); err != nil {
			return nil, err // other handles' buffered writes stay
		}
		if oi != nil {
			f.discard(&oi.wb) // the data it held is cut off
		}
		if n.Mode != mode {
			// The kernel sent OPEN_KILL_SUIDGID and keeps the old mode
			// cached: nothing in the OPEN reply refreshes it.
			f.invalidateAttr(ino)
		}
	}
	return f.open.acquire(ino, flags), nil
}

// Create creates a regular file and opens it.
func (f *FS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	ino, n, oi, err := f.makeNodeOpen(in.NodeId, name, syscall.S_IFREG|in.Mode&0o7777, in.Umask, 0, in.Caller, "", true, in.Flags)
	if err != nil {
		return f.errno("create", in.NodeId, err)
	}
	f.fillEntry(ino, &n, &out.EntryOut)
	out.Fh, out.OpenFlags = f.addFileHandle(ino, oi, in.Flags)
	return fuse.OK
}

// Tmpfile creates an unnamed regular file (O_TMPFILE) in directory
// in.NodeId: an orphan from birth, reclaimed at its last release unless
// linkat gives it a name first.
func (f *FS) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	ino, n, oi, err := f.tmpfile(in.NodeId, syscall.S_IFREG|in.Mode&0o7777, in.Umask, in.Flags, in.Caller)
	if err != nil {
		return f.errno("tmpfile", in.NodeId, err)
	}
	f.fillEntry(ino, &n, &out.EntryOut)
	out.Fh, out.OpenFlags = f.addFileHandle(ino, oi, in.Flags)
	return fuse.OK
}

func (f *FS) tmpfile(parent uint64, mode, umask, flags uint32, caller fuse.Caller) (uint64, inode, *openInode, error) {
	if err := f.writable(); err != nil {
		return 0, inode{}, nil, err
	}
	p, err := f.getDir(parent)
	if err != nil {
		return 0, inode{}, nil, err
	}
	mode, access, dflt, err := f.newInodeACL(parent, &p, mode, umask)
	if err != nil {
		return 0, inode{}, nil, err
	}
	ino, err := f.allocIno()
	if err != nil {
		return 0, inode{}, nil, err
	}
	now := f.now()
	n := inode{Mode: mode, Uid: caller.Uid, Gid: caller.Gid,
		Atime: now, Mtime: now, Ctime: now, Btime: now}
	if p.Mode&syscall.S_ISGID != 0 {
		n.Gid = p.Gid
	}
	h := f.locks.lock(ino)
	defer h.unlock()
	b := lsm.NewBatch()
	putNewInodeACL(b, ino, &n, access, dflt)
	putInode(b, ino, &n)
	b.Set(orphanKey(ino), nil)
	if err := f.db.Apply(b, false); err != nil {
		return 0, inode{}, nil, err
	}
	f.inodes.delta.Add(1)
	return ino, n, f.open.acquire(ino, flags), nil
}

func (f *FS) fileHandle(fh uint64) (*handle, error) {
	h := f.handles.get(fh)
	if h == nil || h.dir != nil {
		return nil, syscall.EBADF
	}
	return h, nil
}

// Read reads from a file, buffered writes included.
func (f *FS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	h, err := f.fileHandle(in.Fh)
	if err != nil {
		return nil, f.errno("read", in.NodeId, err)
	}
	buf = buf[:min(len(buf), int(in.Size))]
	var rec inode // the record the read used, if it read one
	lk := f.locks.rlock(h.ino)
	n, err := f.readAt(h.ino, h.oi, in.Offset, buf, &rec)
	lk.unlock()
	if err != nil {
		return nil, f.errno("read", h.ino, err)
	}
	if !noAtime(h.flags) {
		if rec.Mode != 0 {
			f.noteAtime(h.ino, &rec)
		} else if f.opts.Atime == AtimeStrict {
			// Writes are buffered (the size came from them): under
			// relatime their flush moves mtime past atime and the next
			// read counts; strictatime counts this one.
			f.noteAtime(h.ino, nil)
		}
	}
	return fuse.ReadResultData(buf[:n]), fuse.OK
}

// Write buffers data at in.Offset. The buffer is flushed when it passes
// Options.WriteBufferSize, and durably before returning on an O_SYNC or
// O_DSYNC handle.
func (f *FS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	return f.Writev(cancel, in, [][]byte{data})
}

// Writev is Write with the data in pieces (no copy to join them).
func (f *FS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	h, err := f.fileHandle(in.Fh)
	if err != nil {
		return 0, f.errno("write", in.NodeId, err)
	}
	n, err := f.write(h, in, data)
	if err != nil {
		return 0, f.errno("write", h.ino, err)
	}
	return n, fuse.OK
}

func (f *FS) write(h *handle, in *fuse.WriteIn, data [][]byte) (uint32, error) {
	if err := f.writable(); err != nil {
		return 0, err
	}
	var total uint64
	for _, d := range data {
		total += uint64(len(d))
	}
	if in.Offset >= maxFileSize {
		return 0, syscall.EFBIG
	}
	if total > maxFileSize-in.Offset {
		// What fits, a short write, as Linux's generic_write_check_limits
		// (the kernel does not know this limit: FUSE's is 2^63-1).
		total = maxFileSize - in.Offset
		data = clipSlices(data, total)
	}
	// An unprivileged writer clears setuid/setgid. Writes from the kernel's
	// writeback cache (WRITE_CACHE) carry no writer; the kernel clears the
	// bits itself at write(2) time unless it asks with WRITE_KILL_SUIDGID.
	kill := in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0 ||
		in.WriteFlags&fuse.WRITE_CACHE == 0 && in.Caller.Uid != 0
	lk := f.locks.lock(h.ino)
	defer lk.unlock()
	stale := kill && h.direct && f.privsToKill(h.oi)
	if err := f.writeLocked(h.oi, in.Offset, data, kill, h.syncWrites()); err != nil {
		return 0, err
	}
	if stale {
		f.invalidateAttr(h.ino)
	}
	return uint32(total), nil
}

// privsToKill reports whether an unprivileged write clears setuid or
// setgid bits that the kernel may still hold in its attribute cache: on a
// direct-I/O handle (addFileHandle) the kernel skips its own remove-privileges
// step, a SETATTR whose reply refreshed the mode, and leaves the clearing to
// the WRITE (WRITE_KILL_SUIDGID). A buffer that already clears them was
// reported at its first such write. oi's lock is held exclusively.
func (f *FS) privsToKill(oi *openInode) bool {
	if oi.wb.kill {
		return false
	}
	n, err := f.openInodeRecord(oi.ino)
	return err == nil && killPriv(n.Mode) != n.Mode
}

// invalidateAttr tells the kernel to drop its cached attributes of ino, so
// that the next stat(2) asks (FUSE_NOTIFY_INVAL_INODE; its negative offset
// leaves the page cache alone, and takes no inode lock in the kernel, so a
// request handler may send it). Without a mounted server it does nothing.
func (f *FS) invalidateAttr(ino uint64) {
	s := f.server.Load()
	if s == nil {
		return
	}
	if st := s.InodeNotify(ino, -1, 0); st != fuse.OK && st != fuse.ENOENT {
		f.log.Warn("fs: attribute invalidation refused", "ino", ino, "status", st)
	}
}

// clipSlices returns the first n bytes of data, contiguous slices.
func clipSlices(data [][]byte, n uint64) [][]byte {
	var out [][]byte
	for _, d := range data {
		if n == 0 {
			break
		}
		k := min(uint64(len(d)), n)
		out = append(out, d[:k])
		n -= k
	}
	return out
}

// Flush (at every close(2)) writes the inode's buffer to the engine, so
// errors reach close; it does not force the journal.
func (f *FS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	h, err := f.fileHandle(in.Fh)
	if err != nil {
		return f.errno("flush", in.NodeId, err)
	}
	lk := f.locks.lock(h.ino)
	err = f.flushLocked(h.oi, false)
	lk.unlock()
	return f.errno("flush", h.ino, err)
}

// Fsync makes the file durable: its buffer is written in a synced batch, or
// the journal is forced if nothing is buffered (which also covers earlier
// metadata changes: the journal keeps batches in order).
func (f *FS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	h := f.handles.get(in.Fh)
	if h == nil || h.oi == nil {
		return f.errno("fsync", in.NodeId, f.db.SyncJournal())
	}
	lk := f.locks.lock(h.ino)
	err := f.flushLocked(h.oi, true)
	lk.unlock()
	if err == nil {
		err = f.lost.take(h.ino)
	}
	return f.errno("fsync", h.ino, err)
}

// Release closes a handle. The last handle of an inode writes its buffer,
// or, if the inode has no name left, deletes it with all it owns.
func (f *FS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	h := f.handles.remove(in.Fh)
	if h == nil {
		return
	}
	if err := f.releaseInode(h.oi, h.flags); err != nil {
		f.errno("release", h.ino, err)
	}
}

func (f *FS) releaseInode(oi *openInode, flags uint32) error {
	lk := f.locks.lock(oi.ino)
	defer lk.unlock()
	if oi.opens > 1 {
		f.open.release(oi, flags)
		return nil // other handles share the buffer
	}
	// The last handle: the buffer is written while the inode is still in
	// the open table, so a stat that finds it gone (and reads the record
	// without the lock) finds the record written.
	n, err := f.getInode(oi.ino)
	if err == nil && n.Nlink > 0 {
		err = f.flushLocked(oi, false)
	}
	f.releases.Add(1)
	f.open.release(oi, flags)
	if err != nil && oi.wb.dirty() {
		// No handle is left to retry the flush: the data is lost. The
		// next fsync of the inode says so (once), as Linux reports a
		// writeback error to the next fsync; close alone said it before.
		f.lost.add(oi.ino, err)
	}
	f.discard(&oi.wb)
	if err != nil || n.Nlink > 0 {
		return err
	}
	if f.opts.ReadOnly {
		return nil // reclaimed at the next writable New
	}
	b := lsm.NewBatch()
	if err := f.dropInode(b, oi.ino, &n, true); err != nil {
		return err
	}
	f.addGhost(oi.ino, n) // before the record goes (see remove)
	if err := f.db.Apply(b, false); err != nil {
		return err
	}
	f.inodes.delta.Add(-1)
	return nil
}

// Fallocate extends a file (mode 0), reserves nothing beyond its size
// (KEEP_SIZE: lsmfs allocates space when data is written, so both only
// change the size), punches holes (PUNCH_HOLE) or zeroes ranges
// (ZERO_RANGE). Zeroed and punched ranges store nothing. Like a write, it
// removes privileges (file_modified(), as on ext4): the kernel leaves that
// to lsmfs under KILLPRIV_V2 and sends no flag for it, so an unprivileged
// caller clears setuid/setgid, and any caller the file's capabilities.
func (f *FS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	// Through an O_SYNC or O_DSYNC descriptor the change is durable on
	// return, as XFS does (XFS_PREALLOC_SYNC).
	sync := false
	if h := f.handles.get(in.Fh); h != nil {
		sync = h.syncWrites()
	}
	return f.errno("fallocate", in.NodeId, f.fallocate(in.NodeId, in.Offset, in.Length, in.Mode, in.Caller.Uid != 0, sync))
}

func (f *FS) fallocate(ino, off, length uint64, mode uint32, kill, sync bool) error {
	if err := f.writable(); err != nil {
		return err
	}
	switch {
	case mode&^(fallocKeepSize|fallocPunchHole|fallocZeroRange) != 0:
		return syscall.EOPNOTSUPP
	case mode&fallocPunchHole != 0 && mode != fallocPunchHole|fallocKeepSize:
		return syscall.EINVAL
	case length == 0:
		return syscall.EINVAL
	case off > maxFileSize || length > maxFileSize-off:
		return syscall.EFBIG
	}
	h := f.locks.lock(ino)
	defer h.unlock()
	oi := f.open.get(ino)
	if oi == nil {
		return f.fallocateLocked(ino, nil, off, length, mode, kill, sync, 0)
	}
	var cut cutBlocks
	var bufferedSize uint64 // the size buffered writes gave the file
	if mode&(fallocPunchHole|fallocZeroRange) != 0 && oi.wb.dirty() {
		bufferedSize = oi.wb.size
		cut = f.cut(&oi.wb, off, off+length)
	}
	err := f.fallocateLocked(ino, oi, off, length, mode, kill || cut.kill, sync, bufferedSize)
	f.settleCut(&oi.wb, cut, err)
	return err
}

// fallocateLocked is fallocate with ino's lock held; oi is its open inode,
// if any, whose buffer gave the file bufferedSize before a hole punch or
// zeroed range cut blocks out of it.
func (f *FS) fallocateLocked(ino uint64, oi *openInode, off, length uint64, mode uint32, kill, sync bool, bufferedSize uint64) error {
	if oi != nil {
		if err := f.flushLocked(oi, false); err != nil {
			return err
		}
	}
	n, err := f.getInode(ino)
	if err != nil {
		return err
	}
	// A cut block may have been the one that extended the file.
	n.Size = max(n.Size, bufferedSize)
	if n.isDir() {
		return syscall.EISDIR
	}
	if !n.isReg() {
		return syscall.ENODEV
	}
	now := f.now()
	end := off + length
	b := lsm.NewBatch()
	if mode&(fallocPunchHole|fallocZeroRange) != 0 {
		if err := f.zeroRange(b, ino, &n, off, end); err != nil {
			return err
		}
	}
	if mode&fallocKeepSize == 0 && end > n.Size {
		n.Size = end
	}
	if !f.opts.WritebackCache {
		n.Mtime, n.Ctime = now, now // every mode, as ext4's and XFS's file_modified
	}
	// With the writeback cache the kernel keeps a regular file's times
	// itself and never takes them from lsmfs: it shows the times of its
	// last write after a hole punch, and sends them (SETATTR) when it
	// extends the file. Times set here would appear only after a remount.
	if err := f.killPrivs(b, ino, &n, kill); err != nil {
		return err
	}
	putInode(b, ino, &n)
	return f.db.Apply(b, sync)
}

// truncate sets n's size, deleting or trimming the blocks past it (in b).
func (f *FS) truncate(b *lsm.Batch, ino uint64, n *inode, size uint64) error {
	if size < n.Size {
		if err := f.zeroRange(b, ino, n, size, n.Size); err != nil {
			return err
		}
	}
	n.Size = size
	return nil
}

// zeroRange makes [off, end) of the file read as zeros and store nothing
// there: blocks inside the range are deleted, blocks it cuts are trimmed
// or have their part zeroed. It adds the writes to b and keeps n.Stored
// exact, which needs the lengths of the blocks it deletes; only a range
// covering the whole file is deleted without reading them.
func (f *FS) zeroRange(b *lsm.Batch, ino uint64, n *inode, off, end uint64) error {
	end = min(end, n.Size)
	if off >= end || n.Stored == 0 {
		return nil
	}
	bs := uint64(f.bs)
	if off == 0 && end == n.Size {
		if nb := blocksOf(n.Size, f.bs); nb <= pointDeleteMax {
			for i := uint64(0); i < nb; i++ {
				b.Delete(blockKey(ino, i))
			}
		} else {
			lo, hi := blockRange(ino, 0, 0)
			b.DeleteRange(lo, hi)
		}
		n.Stored = 0
		return nil
	}
	// Blocks [inLo, inHi) lie wholly inside the range.
	inLo, inHi := (off+bs-1)/bs, end/bs
	var inside [][]byte
	insideCount := 0
	lo, hi := blockRange(ino, off/bs, (end-1)/bs+1)
	it := f.db.NewIter(&lsm.IterOptions{LowerBound: lo, UpperBound: hi})
	for ok := it.First(); ok; ok = it.Next() {
		_, idx, err := decodeBlockKey(it.Key())
		if err != nil {
			it.Close()
			return err
		}
		// Lengths only: a block the range deletes whole or misses is not
		// read (shrinking a 10 GiB file to 1 byte read 10 GiB before).
		vlen := uint64(it.ValueLen())
		if idx >= inLo && idx < inHi {
			n.Stored -= vlen
			insideCount++
			if insideCount <= pointDeleteMax {
				inside = append(inside, append([]byte(nil), it.Key()...))
			}
			continue
		}
		start := idx * bs
		zs, ze := max(off, start)-start, min(end, start+vlen)-start // within v
		switch {
		case zs >= vlen || ze <= zs:
			// The range misses the stored bytes.
		case zs == 0 && ze >= vlen:
			b.Delete(it.Key())
			n.Stored -= vlen
		case ze >= vlen:
			v, err := cutBlockValue(it, vlen)
			if err != nil {
				it.Close()
				return fmt.Errorf("block %d of inode %d: %w", idx, ino, err)
			}
			b.Set(it.Key(), v[:zs])
			n.Stored -= vlen - zs
		default:
			v, err := cutBlockValue(it, vlen)
			if err != nil {
				it.Close()
				return fmt.Errorf("block %d of inode %d: %w", idx, ino, err)
			}
			nv := append([]byte(nil), v...)
			clear(nv[zs:ze])
			b.Set(it.Key(), nv)
		}
	}
	if err := closeIter(it); err != nil {
		return err
	}
	if insideCount > pointDeleteMax {
		lo, hi := blockRange(ino, inLo, inHi)
		b.DeleteRange(lo, hi)
	} else {
		for _, k := range inside {
			b.Delete(k)
		}
	}
	return nil
}

// cutBlockValue reads the value of the block it is on, which zeroRange
// trims or zeroes in part, and checks it has the length the pointer gave.
func cutBlockValue(it *lsm.Iterator, vlen uint64) ([]byte, error) {
	v := it.Value()
	if err := it.Error(); err != nil {
		return nil, err
	}
	if uint64(len(v)) != vlen {
		return nil, fmt.Errorf("%d bytes stored, %d recorded: %w", len(v), vlen, ErrCorrupt)
	}
	return v, nil
}

// Lseek answers SEEK_DATA and SEEK_HOLE at block granularity: a stored
// block is data, a missing one a hole, and the end of the file is a hole.
// Offsets at or past the end give ENXIO.
//
// The kernel sends LSEEK without writing its dirty pages back first, so
// lsmfs only answers from what it stores where no such pages can exist.
// With the writeback cache any write may be one: LSEEK is refused (ENOSYS),
// and the kernel then treats every file as data up to its own size. Without
// it, only a shared writable mapping dirties pages, and a mapping keeps its
// handle open: while a handle open for writing exists, the whole file is
// data. A hole reported as data is allowed; data reported as a hole made cp
// and tar --sparse copy zeros.
func (f *FS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	if f.opts.WritebackCache {
		return fuse.ENOSYS
	}
	off, err := f.lseek(in.NodeId, in.Offset, in.Whence)
	if err != nil {
		return f.errno("lseek", in.NodeId, err)
	}
	out.Offset = off
	return fuse.OK
}

func (f *FS) lseek(ino, off uint64, whence uint32) (uint64, error) {
	if whence != seekData && whence != seekHole {
		return 0, syscall.EINVAL
	}
	h := f.locks.lock(ino)
	defer h.unlock()
	oi := f.open.get(ino)
	if oi != nil {
		if err := f.flushLocked(oi, false); err != nil {
			return 0, err
		}
	}
	n, err := f.getInode(ino)
	if err != nil {
		return 0, err
	}
	if off >= n.Size {
		return 0, syscall.ENXIO
	}
	if oi != nil && oi.writers > 0 {
		// Pages of a shared writable mapping may be dirty in the kernel.
		if whence == seekData {
			return off, nil
		}
		return n.Size, nil
	}
	bs := uint64(f.bs)
	lo, hi := blockRange(ino, off/bs, 0)
	it := f.db.NewIter(&lsm.IterOptions{LowerBound: lo, UpperBound: hi})
	defer it.Close()
	next := off / bs // the first block index not yet known to be data
	for ok := it.First(); ok; ok = it.Next() {
		_, idx, err := decodeBlockKey(it.Key())
		if err != nil {
			return 0, err
		}
		if whence == seekData {
			return max(off, idx*bs), nil
		}
		if idx != next {
			break // a hole at next
		}
		next++
	}
	if err := it.Error(); err != nil {
		return 0, err
	}
	if whence == seekData {
		return 0, syscall.ENXIO
	}
	return min(max(off, next*bs), n.Size), nil
}

// CopyFileRange copies bytes between files through the write buffer, in
// chunks of copyChunk, without the data crossing into the kernel.
func (f *FS) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	n, err := f.copyFileRange(in)
	if err != nil && n == 0 {
		return 0, f.errno("copy_file_range", in.NodeId, err)
	}
	return n, fuse.OK
}

func (f *FS) copyFileRange(in *fuse.CopyFileRangeIn) (uint32, error) {
	if err := f.writable(); err != nil {
		return 0, err
	}
	if in.Flags != 0 {
		return 0, syscall.EINVAL
	}
	src, err := f.fileHandle(in.FhIn)
	if err != nil {
		return 0, err
	}
	dst, err := f.fileHandle(in.FhOut)
	if err != nil {
		return 0, err
	}
	length := min(in.Len, 1<<30) // the reply counts bytes in 32 bits
	if in.OffOut >= maxFileSize {
		return 0, syscall.EFBIG
	}
	length = min(length, maxFileSize-in.OffOut) // what fits: a short copy, as write
	if length == 0 {
		return 0, nil
	}
	if src.ino == dst.ino && in.OffIn < in.OffOut+length && in.OffOut < in.OffIn+length {
		return 0, syscall.EINVAL // overlapping ranges of one file
	}
	buf := make([]byte, min(length, copyChunk))
	var done uint64
	for done < length {
		chunk := buf[:min(uint64(len(buf)), length-done)]
		h := f.locks.lock(src.ino, dst.ino)
		n, err := f.readAt(src.ino, src.oi, in.OffIn+done, chunk, nil)
		if err == nil && n > 0 {
			err = f.writeLocked(dst.oi, in.OffOut+done, [][]byte{chunk[:n]}, in.Caller.Uid != 0, false)
		}
		h.unlock()
		if err != nil {
			return uint32(done), err
		}
		if n == 0 {
			break
		}
		done += uint64(n)
	}
	if done > 0 && !noAtime(src.flags) && f.noteAtime(src.ino, nil) {
		// The source was read, as by read(2), but the kernel forgets
		// only the destination's attributes after COPY_FILE_RANGE.
		f.invalidateAttr(src.ino)
	}
	if dst.syncWrites() {
		h := f.locks.lock(dst.ino)
		err := f.flushLocked(dst.oi, true)
		h.unlock()
		if err != nil {
			// Durable on return, or an error: a count would tell the
			// caller the bytes were forced (the kernel does not fsync
			// after a FUSE copy_file_range). They stay buffered.
			return 0, err
		}
	}
	return uint32(done), nil
}
