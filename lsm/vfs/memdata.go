package vfs

import "bytes"

// memPageSize is the unit MemFS file contents are stored and shared in.
const memPageSize = 16 << 10

// memPage is one page of a MemFS file. A frozen page is shared (by a file's
// synced contents, a CrashClone or a recorded window) and never written
// again: a writer copies it first. frozen goes from false to true once, under
// the lock of the node that owns the page, before the page is shared.
type memPage struct {
	b      [memPageSize]byte
	frozen bool
}

// memData is the contents of a MemFS file: size bytes in pages, where a nil
// page reads as zeros. Bytes of a page past size are always zero, so growing
// the file needs no clearing. Copies (snapshot) share pages, which is what
// keeps File.Sync and CrashClone of a large, mostly unchanged file (the
// engine's preallocated journal) cheap. A memData is guarded by its node's
// lock.
type memData struct {
	pages []*memPage
	size  int64
}

func (d *memData) len() int64 { return d.size }

// readAt copies the bytes at off into p and returns how many it copied
// (fewer than len(p) only at the end of the file).
func (d *memData) readAt(p []byte, off int64) int {
	if off >= d.size {
		return 0
	}
	p = p[:min(int64(len(p)), d.size-off)]
	n := 0
	for n < len(p) {
		i, o := (off+int64(n))/memPageSize, (off+int64(n))%memPageSize
		chunk := p[n:min(len(p), n+int(memPageSize-o))]
		if pg := d.pages[i]; pg != nil {
			copy(chunk, pg.b[o:])
		} else {
			clear(chunk)
		}
		n += len(chunk)
	}
	return n
}

// writable returns page i ready to be written: allocated and not shared.
func (d *memData) writable(i int64) *memPage {
	pg := d.pages[i]
	switch {
	case pg == nil:
		pg = &memPage{}
	case pg.frozen:
		c := &memPage{b: pg.b}
		pg = c
	default:
		return pg
	}
	d.pages[i] = pg
	return pg
}

// writeAt writes p at off, growing the file as needed.
func (d *memData) writeAt(p []byte, off int64) {
	d.resize(max(d.size, off+int64(len(p))))
	for n := 0; n < len(p); {
		i, o := (off+int64(n))/memPageSize, (off+int64(n))%memPageSize
		chunk := p[n:min(len(p), n+int(memPageSize-o))]
		n += len(chunk)
		if d.pages[i] == nil && allZero(chunk) {
			continue // a hole stays a hole
		}
		copy(d.writable(i).b[o:], chunk)
	}
}

// resize sets the size, dropping the pages past it and zeroing the tail of
// a page it cuts (bytes past size stay zero).
func (d *memData) resize(size int64) {
	npages := (size + memPageSize - 1) / memPageSize
	if size < d.size {
		if o := size % memPageSize; o != 0 && d.pages[size/memPageSize] != nil {
			clear(d.writable(size / memPageSize).b[o:])
		}
		clear(d.pages[npages:])
		d.pages = d.pages[:npages]
	}
	for int64(len(d.pages)) < npages {
		d.pages = append(d.pages, nil)
	}
	d.size = size
}

// snapshot returns a copy of d sharing its pages, which it freezes.
func (d *memData) snapshot() memData {
	for _, pg := range d.pages {
		if pg != nil && !pg.frozen { // a frozen page may be read by other nodes
			pg.frozen = true
		}
	}
	return memData{pages: append([]*memPage(nil), d.pages...), size: d.size}
}

// bytes returns the contents as one slice (for tests and messages).
func (d *memData) bytes() []byte {
	b := make([]byte, d.size)
	d.readAt(b, 0)
	return b
}

var zeroPage [memPageSize]byte

func allZero(b []byte) bool { return bytes.Equal(b, zeroPage[:len(b)]) }
