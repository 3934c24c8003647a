package vlog

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lsmfs/lsmfs/blockcache"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

func newTestWriter(t testing.TB, fs vfs.FS, maxSize int64) (*Writer, map[uint64]int64) {
	next := uint64(10)
	sealed := map[uint64]int64{}
	if err := fs.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(fs, "/d", maxSize, func() uint64 { next++; return next }, func(s uint64, n int64) { sealed[s] = n })
	if err != nil {
		t.Fatal(err)
	}
	return w, sealed
}

func TestWriteReadScan(t *testing.T) {
	fs := vfs.NewMem()
	w, sealed := newTestWriter(t, fs, 64<<10)
	cache, _ := blockcache.New(1 << 20)
	defer cache.Close()
	r := NewReader(fs, "/d", cache, 0)
	defer r.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	type kv struct {
		k, v []byte
		p    Pointer
	}
	var all []kv
	for i := 0; i < 500; i++ {
		k := []byte(fmt.Sprintf("key-%d", i))
		v := make([]byte, rng.IntN(5000))
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		p, err := w.Append(k, v)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, kv{k, v, p})
		if i%7 == 0 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		enc := e.p.Append(nil)
		p, err := DecodePointer(enc)
		if err != nil || p != e.p {
			t.Fatalf("pointer round trip: %v %v", p, err)
		}
		got, err := r.Read(p)
		if err != nil || !bytes.Equal(got, e.v) {
			t.Fatalf("read %s: %v", p, err)
		}
	}
	if len(sealed) == 0 {
		t.Fatalf("no segment rolled")
	}
	// Scanning every sealed segment yields its records in order.
	n := 0
	for seg, size := range sealed {
		if err := Scan(fs, "/d", seg, size, func(rec Record) error {
			n++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	seg, size := w.Active()
	Scan(fs, "/d", seg, size, func(Record) error { n++; return nil })
	if n != len(all) {
		t.Fatalf("scanned %d of %d records", n, len(all))
	}
}

func TestCorruptValue(t *testing.T) {
	fs := vfs.NewMem()
	w, _ := newTestWriter(t, fs, 1<<20)
	p, err := w.Append([]byte("k"), bytes.Repeat([]byte("v"), 100))
	if err != nil {
		t.Fatal(err)
	}
	w.Sync()
	f, _ := fs.OpenReadWrite("/d/" + FileName(p.Segment))
	f.WriteAt([]byte("X"), int64(p.Offset)+3)
	f.Close()
	r := NewReader(fs, "/d", nil, 0)
	if _, err := r.Read(p); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of a damaged value: %v", err)
	}
	if err := Scan(fs, "/d", p.Segment, 0, func(Record) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("scan of a damaged segment: %v", err)
	}
	if _, err := r.Read(Pointer{Segment: 999, Len: 3}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read from a missing segment: %v", err)
	}
}

func FuzzPointer(f *testing.F) {
	f.Add(Pointer{Segment: 7, Offset: 1 << 20, Len: 65536, CRC: 0xdeadbeef}.Append(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodePointer(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if q, err := DecodePointer(p.Append(nil)); err != nil || q != p {
			t.Fatalf("re-decode %v: %v %v", p, q, err)
		}
	})
}

func FuzzSegment(f *testing.F) {
	data := segmentHeader(3)
	data, _, _ = appendRecord(data, []byte("key"), []byte("value"))
	data, _, _ = appendRecord(data, []byte("k2"), bytes.Repeat([]byte("x"), 300))
	f.Add(data)
	f.Fuzz(func(t *testing.T, b []byte) {
		err := scanData("seg", 3, b, func(Record) error { return nil })
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("untyped error %v", err)
		}
	})
}
