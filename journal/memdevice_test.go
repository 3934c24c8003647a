package journal_test

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"
)

// memDevice is an in-memory journal.Device of fixed size with strict
// durability: CrashClone keeps only synced bytes, CrashCloneTorn keeps a
// random subset of the 512-byte sectors of each unsynced write. Fault, when
// set, can fail any operation (pebble errorfs style).
type memDevice struct {
	mu       sync.Mutex
	data     []byte // what reads see
	synced   []byte // what survives a crash
	unsynced []pendingWrite
	closed   bool
	// fault, if set, is consulted before every WriteAt ("write") and Sync
	// ("sync"); a non-nil result fails the operation (a write is then not
	// applied).
	fault func(op string, off int64, n int) error
	// syncDelay makes every Sync sleep first (outside the lock), widening
	// the window in which a written frame is not yet durable.
	syncDelay time.Duration
	writes    int
	syncs     int
}

type pendingWrite struct {
	off  int64
	data []byte
}

var errDeviceClosed = errors.New("memdevice: closed")

func newMemDevice(size int64) *memDevice {
	return &memDevice{data: make([]byte, size), synced: make([]byte, size)}
}

func (d *memDevice) ReadAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return 0, errDeviceClosed
	}
	if off < 0 {
		return 0, fmt.Errorf("memdevice: negative offset")
	}
	if d.fault != nil {
		if err := d.fault("read", off, len(p)); err != nil {
			return 0, err
		}
	}
	if off >= int64(len(d.data)) {
		return 0, io.EOF
	}
	n := copy(p, d.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (d *memDevice) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return 0, errDeviceClosed
	}
	d.writes++
	if d.fault != nil {
		if err := d.fault("write", off, len(p)); err != nil {
			return 0, err
		}
	}
	if off < 0 || off+int64(len(p)) > int64(len(d.data)) {
		return 0, fmt.Errorf("memdevice: write [%d,%d) beyond device size %d", off, off+int64(len(p)), len(d.data))
	}
	copy(d.data[off:], p)
	d.unsynced = append(d.unsynced, pendingWrite{off: off, data: append([]byte(nil), p...)})
	return len(p), nil
}

func (d *memDevice) Sync() error {
	if d.syncDelay > 0 {
		time.Sleep(d.syncDelay)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errDeviceClosed
	}
	d.syncs++
	if d.fault != nil {
		if err := d.fault("sync", 0, 0); err != nil {
			return err
		}
	}
	for _, w := range d.unsynced {
		copy(d.synced[w.off:], w.data)
	}
	d.unsynced = d.unsynced[:0]
	return nil
}

func (d *memDevice) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errDeviceClosed
	}
	d.closed = true
	return nil
}

// reopen makes a closed device usable again, as opening the same file or
// block device again would.
func (d *memDevice) reopen() *memDevice {
	d.mu.Lock()
	d.closed = false
	d.mu.Unlock()
	return d
}

func (d *memDevice) Size() (int64, error) { return int64(len(d.data)), nil }

func (d *memDevice) setFault(f func(op string, off int64, n int) error) {
	d.mu.Lock()
	d.fault = f
	d.mu.Unlock()
}

// CrashClone returns a device holding what survives power loss now: the
// synced bytes only.
func (d *memDevice) CrashClone() *memDevice {
	d.mu.Lock()
	defer d.mu.Unlock()
	return &memDevice{data: append([]byte(nil), d.synced...), synced: append([]byte(nil), d.synced...)}
}

// CrashCloneTorn is CrashClone, except that each 512-byte sector of each
// unsynced write survives with probability 1/2 (in write order): torn
// writes.
func (d *memDevice) CrashCloneTorn(rng *rand.Rand) *memDevice {
	d.mu.Lock()
	defer d.mu.Unlock()
	img := append([]byte(nil), d.synced...)
	for _, w := range d.unsynced {
		for s := 0; s < len(w.data); s += 512 {
			if rng.IntN(2) == 0 {
				copy(img[w.off+int64(s):], w.data[s:min(s+512, len(w.data))])
			}
		}
	}
	return &memDevice{data: img, synced: append([]byte(nil), img...)}
}

// Clone returns an independent copy of the current (not only synced) bytes,
// all of them synced: a clean image to damage.
func (d *memDevice) Clone() *memDevice {
	d.mu.Lock()
	defer d.mu.Unlock()
	return &memDevice{data: append([]byte(nil), d.data...), synced: append([]byte(nil), d.data...)}
}

// restore makes d an open, fully synced copy of base (reusing d's memory).
func (d *memDevice) restore(base *memDevice) *memDevice {
	base.mu.Lock()
	defer base.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.data) != len(base.data) {
		d.data, d.synced = make([]byte, len(base.data)), make([]byte, len(base.data))
	}
	copy(d.data, base.data)
	copy(d.synced, base.data)
	d.unsynced, d.closed, d.fault = d.unsynced[:0], false, nil
	return d
}

// damage applies fn to the current and to the synced bytes: damage that
// survives a crash (bit rot, a torn sector).
func (d *memDevice) damage(fn func(b []byte)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fn(d.data)
	fn(d.synced)
}

// Bytes is the current content (shared: tests damage images through it).
func (d *memDevice) Bytes() []byte { return d.data }
