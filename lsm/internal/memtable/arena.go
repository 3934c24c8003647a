package memtable

import (
	"errors"
	"sync/atomic"
	"unsafe"
)

// ErrFull is returned by Add when the arena cannot hold the entry.
var ErrFull = errors.New("memtable: full")

const align4 = 3

type arena struct {
	buf []byte
	n   atomic.Uint32 // bytes allocated
}

func newArena(capacity uint32) *arena {
	a := &arena{buf: make([]byte, capacity)}
	a.n.Store(8) // offset 0 is nil
	return a
}

// alloc returns the offset of size bytes aligned to 4. Only the single writer
// calls it.
func (a *arena) alloc(size uint32) (uint32, error) {
	off := (a.n.Load() + align4) &^ align4
	end := uint64(off) + uint64(size)
	if end > uint64(len(a.buf)) {
		return 0, ErrFull
	}
	a.n.Store(uint32(end))
	return off, nil
}

func (a *arena) size() uint32 { return a.n.Load() }

func (a *arena) u32(off uint32) *uint32 {
	return (*uint32)(unsafe.Pointer(&a.buf[off]))
}

func (a *arena) load(off uint32) uint32 { return atomic.LoadUint32(a.u32(off)) }

func (a *arena) store(off uint32, v uint32) { atomic.StoreUint32(a.u32(off), v) }

func (a *arena) bytes(off, n uint32) []byte { return a.buf[off : off+n : off+n] }
