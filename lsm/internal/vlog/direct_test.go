package vlog

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// directFS is a MemFS whose files take direct writes the way O_DIRECT
// does: buffer address, length and offset aligned, else an error. It
// records which bytes each kind of write covered.
type directFS struct {
	vfs.FS
	refuse bool // WriteAtDirect fails with ErrNoDirect
	t      *testing.T
	calls  int
	direct int64
	writes map[string][]writeRange
}

type writeRange struct {
	off, n int64
	direct bool
}

type directFile struct {
	vfs.File
	fs   *directFS
	name string
}

func (d *directFS) Create(name string) (vfs.File, error) {
	f, err := d.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &directFile{File: f, fs: d, name: name}, nil
}

func (f *directFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.writes[f.name] = append(f.fs.writes[f.name], writeRange{off, int64(len(p)), false})
	return f.File.WriteAt(p, off)
}

func (f *directFile) WriteAtDirect(p []byte, off int64) (int, error) {
	f.fs.calls++
	if f.fs.refuse {
		return 0, vfs.ErrNoDirect
	}
	const a = vfs.DirectAlign
	if uintptr(unsafe.Pointer(unsafe.SliceData(p)))%a != 0 || len(p)%a != 0 || off%a != 0 {
		f.fs.t.Errorf("misaligned direct write: address %p, %d bytes at %d", unsafe.SliceData(p), len(p), off)
		return 0, errors.New("EINVAL")
	}
	f.fs.writes[f.name] = append(f.fs.writes[f.name], writeRange{off, int64(len(p)), true})
	f.fs.direct += int64(len(p))
	return f.File.WriteAt(p, off)
}

// TestDirectFlush: flushes of every length, some long enough to go direct,
// read back and scan as written; every byte of a segment is written once,
// by one kind of write, and a page is never written by both kinds. A file
// that refuses O_DIRECT is written through the page cache, and asked once.
func TestDirectFlush(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("refuse=%v", refuse), func(t *testing.T) {
			fs := &directFS{FS: vfs.NewMem(), refuse: refuse, t: t, writes: map[string][]writeRange{}}
			w, sealed := newTestWriter(t, fs, 8<<20)
			r := NewReader(fs, "/d", nil, 0)
			defer r.Close()
			rng := rand.New(rand.NewPCG(3, 4))
			type kv struct {
				k, v []byte
				p    Pointer
			}
			var all []kv
			for i := range 3000 {
				k := []byte(fmt.Sprintf("key-%d", i))
				v := make([]byte, []int{10, 4096, 4096, 5000, 70000}[rng.IntN(5)])
				for j := range v {
					v[j] = byte(rng.Uint32())
				}
				p, err := w.Append(k, v)
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, kv{k, v, p})
				if rng.IntN(40) == 0 {
					if err := w.Flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			for _, e := range all {
				got, err := r.Read(e.p)
				if err != nil || !bytes.Equal(got, e.v) {
					t.Fatalf("read %s: %v", e.p, err)
				}
			}
			seg, size := w.Active()
			sealed[seg] = size
			n := 0
			for _, seg := range slices.Sorted(maps.Keys(sealed)) {
				size := sealed[seg]
				if err := Scan(fs, "/d", seg, size, func(rec Record) error {
					if e := all[n]; !bytes.Equal(rec.Key, e.k) || !bytes.Equal(rec.Value, e.v) || rec.Ptr != e.p {
						t.Fatalf("record %d: got key %q at %s, want %q at %s", n, rec.Key, rec.Ptr, e.k, e.p)
					}
					n++
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				checkWrites(t, fs.writes["/d/"+FileName(seg)], size)
			}
			if n != len(all) {
				t.Fatalf("scanned %d of %d records", n, len(all))
			}
			switch {
			case refuse && fs.calls != 1:
				t.Fatalf("a file that refused O_DIRECT was asked %d times", fs.calls)
			case !refuse && fs.direct < int64(len(all))*4096/2:
				t.Fatalf("only %d bytes went direct", fs.direct)
			}
		})
	}
}

// checkWrites: ws cover [0, size) once each, and no page holds bytes of
// both a direct and a buffered write.
func checkWrites(t *testing.T, ws []writeRange, size int64) {
	t.Helper()
	cover := make([]int8, size)
	kind := map[int64]bool{} // page -> written direct
	for _, w := range ws {
		if w.off+w.n > size {
			t.Fatalf("write [%d, %d) past the segment's end %d", w.off, w.off+w.n, size)
		}
		for b := w.off; b < w.off+w.n; b++ {
			if cover[b]++; cover[b] > 1 {
				t.Fatalf("byte %d written twice", b)
			}
		}
		for pg := w.off / vfs.DirectAlign; pg <= (w.off+w.n-1)/vfs.DirectAlign; pg++ {
			if d, ok := kind[pg]; ok && d != w.direct {
				t.Fatalf("page %d written both direct and buffered", pg)
			}
			kind[pg] = w.direct
		}
	}
	for b, c := range cover {
		if c == 0 {
			t.Fatalf("byte %d never written", b)
		}
	}
}
