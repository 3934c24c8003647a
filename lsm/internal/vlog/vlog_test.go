package vlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lsmfs/lsmfs/blockcache"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

func newTestWriter(t testing.TB, fs vfs.FS, maxSize int64) (*Writer, map[uint64]int64) {
	return newTestWriterIn(t, fs, "/d", maxSize)
}

func newTestWriterIn(t testing.TB, fs vfs.FS, dir string, maxSize int64) (*Writer, map[uint64]int64) {
	next := uint64(10)
	sealed := map[uint64]int64{}
	if err := fs.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(fs, dir, maxSize, func() uint64 { next++; return next }, func(s uint64, n int64, _ KeyRange) { sealed[s] = n })
	if err != nil {
		t.Fatal(err)
	}
	return w, sealed
}

// TestWriteReadScan: records appended with values of every size (copied
// into the writer's buffer or written from where they are) read back and
// scan in order, in the in-memory filesystem (one joined write per flush)
// and the OS's (vectored writes; a flush of more buffers than one
// pwritev takes).
func TestWriteReadScan(t *testing.T) {
	t.Run("mem", func(t *testing.T) { testWriteReadScan(t, vfs.NewMem(), "/d") })
	t.Run("os", func(t *testing.T) { testWriteReadScan(t, vfs.Default, t.TempDir()) })
}

func testWriteReadScan(t *testing.T, fs vfs.FS, dir string) {
	w, sealed := newTestWriterIn(t, fs, dir, 1<<20)
	cache, _ := blockcache.New(1 << 20)
	defer cache.Close()
	r := NewReader(fs, dir, cache, 0)
	defer r.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	type kv struct {
		k, v []byte
		p    Pointer
	}
	var all []kv
	for i := 0; i < 3000; i++ {
		k := []byte(fmt.Sprintf("key-%d", i))
		size := rng.IntN(5000)
		if i >= 1000 && i < 2200 {
			size = copyValueMax + 1 + rng.IntN(64) // one flush of 2,400 buffers
		}
		v := make([]byte, size)
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		p, err := w.Append(k, v)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, kv{k, v, p})
		if i%7 == 0 && (i < 1000 || i >= 2200) {
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
		if err := Scan(fs, dir, seg, size, func(rec Record) error {
			n++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	seg, size := w.Active()
	Scan(fs, dir, seg, size, func(Record) error { n++; return nil })
	if n != len(all) {
		t.Fatalf("scanned %d of %d records", n, len(all))
	}
}

// TestKeyRange: a sealed segment's key range covers every record's key,
// the empty key included; a segment of no record has an empty range.
func TestKeyRange(t *testing.T) {
	fs := vfs.NewMem()
	var ranges []KeyRange
	if err := fs.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	next := uint64(0)
	w, err := NewWriter(fs, "/d", 64<<10, func() uint64 { next++; return next }, func(_ uint64, _ int64, r KeyRange) { ranges = append(ranges, r) })
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"", "m", "z", "b"} {
		if _, err := w.Append([]byte(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Append([]byte("q"), make([]byte, 70<<10)); err != nil { // rolls
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(ranges) != 2 {
		t.Fatalf("%d segments sealed, want 2", len(ranges))
	}
	if r := ranges[0]; r.Empty() || string(r.Lo) != "" || string(r.Hi) != "z" {
		t.Fatalf("first segment: range %+v, want [\"\", \"z\"]", r)
	}
	if r := ranges[1]; r.Empty() || string(r.Lo) != "q" || string(r.Hi) != "q" {
		t.Fatalf("second segment: range %+v, want [q, q]", r)
	}
	if !(KeyRange{}).Empty() {
		t.Fatal("the zero range is not empty")
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
		whole, err := scanTrace(b, max(len(b), 1))
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("untyped error %v", err)
		}
		// Reading in small chunks sees the same records and error.
		chunk := 1
		if len(b) > 0 {
			chunk += int(b[len(b)-1]) % 40
		}
		if got, cerr := scanTrace(b, chunk); got != whole || fmt.Sprint(cerr) != fmt.Sprint(err) {
			t.Fatalf("chunk %d: %q, %v; whole: %q, %v", chunk, got, cerr, whole, err)
		}
	})
}

// scanTrace scans b (segment 3) chunk bytes at a time and describes what
// it met.
func scanTrace(b []byte, chunk int) (string, error) {
	var sb strings.Builder
	err := scanFrom("seg", 3, bytes.NewReader(b), int64(len(b)), chunk, func(r Record) error {
		fmt.Fprintf(&sb, "%q=%x@%v;", r.Key, r.Value, r.Ptr)
		return nil
	})
	return sb.String(), err
}

// readSizes is an io.ReaderAt that records the largest read.
type readSizes struct {
	r       io.ReaderAt
	largest int
}

func (rs *readSizes) ReadAt(p []byte, off int64) (int, error) {
	rs.largest = max(rs.largest, len(p))
	return rs.r.ReadAt(p, off)
}

// TestScanChunks scans a segment of records small and large (larger than a
// chunk) in chunks of several sizes: each finds every record, and no read
// is larger than a chunk or the record that needs it.
func TestScanChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	data := segmentHeader(3)
	type kv struct{ k, v []byte }
	var want []kv
	biggest := 0
	for i := range 200 {
		v := make([]byte, rng.IntN(300))
		if i%50 == 7 {
			v = make([]byte, 5000+rng.IntN(5000))
		}
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		k := []byte(fmt.Sprintf("key%03d", i))
		before := len(data)
		data, _, _ = appendRecord(data, k, v)
		biggest = max(biggest, len(data)-before)
		want = append(want, kv{k, v})
	}
	for _, chunk := range []int{1, 13, 1000, 4096, len(data)} {
		rs := &readSizes{r: bytes.NewReader(data)}
		i := 0
		err := scanFrom("seg", 3, rs, int64(len(data)), chunk, func(r Record) error {
			if i >= len(want) || !bytes.Equal(r.Key, want[i].k) || !bytes.Equal(r.Value, want[i].v) {
				return fmt.Errorf("record %d: %q", i, r.Key)
			}
			if got := data[r.Ptr.Offset : r.Ptr.Offset+uint64(r.Ptr.Len)]; !bytes.Equal(got, r.Value) {
				return fmt.Errorf("record %d: pointer %v does not locate its value", i, r.Ptr)
			}
			i++
			return nil
		})
		if err != nil || i != len(want) {
			t.Fatalf("chunk %d: %v after %d records", chunk, err, i)
		}
		if rs.largest > max(chunk, biggest) {
			t.Fatalf("chunk %d: a read of %d bytes (largest record %d)", chunk, rs.largest, biggest)
		}
	}
	// A file shorter than its sealed size is damage, found before any
	// record is passed on.
	fs := vfs.NewMem()
	fs.MkdirAll("/d")
	f, _ := fs.Create("/d/" + FileName(3))
	f.Write(data[:len(data)-10])
	f.Close()
	calls := 0
	err := Scan(fs, "/d", 3, int64(len(data)), func(Record) error { calls++; return nil })
	if !errors.Is(err, ErrCorrupt) || calls != 0 {
		t.Fatalf("scan of a short segment: %v after %d records", err, calls)
	}
	if err := Scan(fs, "/d", 3, 0, func(Record) error { calls++; return nil }); !errors.Is(err, ErrCorrupt) || calls != len(want)-1 {
		t.Fatalf("scan of a torn segment: %v after %d records", err, calls)
	}
}

// TestSyncWrittenLeavesBuffer: SyncWritten (the journal's force, a
// memtable flush) forces what is written and leaves another batch's
// buffered records alone, so a full device cannot drop records that batch
// already holds pointers to; its own Flush then writes them where its
// pointers say.
func TestSyncWrittenLeavesBuffer(t *testing.T) {
	mem := vfs.NewMem()
	full := false
	efs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
		if full && op.Kind == vfs.OpWrite {
			return vfs.ENOSPC
		}
		return nil
	}))
	w, _ := newTestWriter(t, efs, 1<<20)
	r := NewReader(mem, "/d", nil, 0)
	defer r.Close()
	p1, err := w.Append([]byte("a"), bytes.Repeat([]byte{1}, 300))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil { // batch 1 is written
		t.Fatal(err)
	}
	p2, err := w.Append([]byte("b"), bytes.Repeat([]byte{2}, 300)) // batch 2, in progress
	if err != nil {
		t.Fatal(err)
	}
	full = true
	if err := w.SyncWritten(); err != nil {
		t.Fatalf("SyncWritten with batch 2 buffered on a full device: %v", err)
	}
	full = false
	if err := w.Flush(); err != nil { // batch 2 flushes its own records
		t.Fatal(err)
	}
	for i, p := range []Pointer{p1, p2} {
		v, err := r.Read(p)
		if err != nil || !bytes.Equal(v, bytes.Repeat([]byte{byte(i + 1)}, 300)) {
			t.Fatalf("record %d: %v", i+1, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestForgottenSegmentStaysClosed: a read of a segment after Forget (the
// cleaner removes it next) fails as if it were missing. It reopened the
// file and kept the handle, so the removed segment's space stayed in use
// until Close (read-path review).
func TestForgottenSegmentStaysClosed(t *testing.T) {
	fs := vfs.NewMem()
	w, _ := newTestWriter(t, fs, 64<<10)
	p, err := w.Append([]byte("k"), []byte("value"))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	r := NewReader(fs, "/d", nil, 0)
	defer r.Close()
	if _, err := r.Read(p); err != nil {
		t.Fatal(err)
	}
	r.Forget(p.Segment)
	if v, err := r.Read(p); err == nil {
		t.Fatalf("read of a forgotten segment succeeded (%q): it was reopened", v)
	}
}

// TestReaderFilesEvicted: with room for 3 open segment files, concurrent
// reads over 20 segments all succeed (a file evicted while a read uses it
// is closed by that read's release), at most 3 files plus those in use stay
// open, and Close closes them all.
func TestReaderFilesEvicted(t *testing.T) {
	cfs := &openCounter{FS: vfs.NewMem()}
	w, sealed := newTestWriter(t, cfs, 8<<10)
	var ps []Pointer
	var vs [][]byte
	for i := 0; len(sealed) < 20; i++ {
		v := bytes.Repeat([]byte{byte(i)}, 1000+i%7)
		p, err := w.Append([]byte(fmt.Sprint(i)), v)
		if err != nil {
			t.Fatal(err)
		}
		ps, vs = append(ps, p), append(vs, v)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r := NewReader(cfs, "/d", nil, 0)
	r.SetMaxOpen(3)
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := 0; i < 2000; i++ {
				j := rng.IntN(len(ps))
				if i%5 == 0 && j+1 < len(ps) && Adjacent(ps[j], ps[j], ps[j+1]) {
					if _, err := r.ReadRun(ps[j:j+2], func(k int, v []byte) error {
						if !bytes.Equal(v, vs[j+k]) {
							return fmt.Errorf("run value %d differs", j+k)
						}
						return nil
					}); err != nil {
						errs <- err
						return
					}
					continue
				}
				v, err := r.Read(ps[j])
				if err == nil && !bytes.Equal(v, vs[j]) {
					err = fmt.Errorf("value %d differs", j)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for g := 0; g < 4; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := cfs.open.Load(); n > 3 {
		t.Errorf("%d segment files open with a bound of 3", n)
	}
	r.Close()
	if n := cfs.open.Load(); n != 0 {
		t.Errorf("%d segment files open after Close", n)
	}
}

// openCounter counts the files opened with Open and not yet closed.
type openCounter struct {
	vfs.FS
	open atomic.Int64
}

type countedFile struct {
	vfs.File
	c    *openCounter
	once sync.Once
}

func (c *openCounter) Open(name string) (vfs.File, error) {
	f, err := c.FS.Open(name)
	if err != nil {
		return nil, err
	}
	c.open.Add(1)
	return &countedFile{File: f, c: c}, nil
}

func (f *countedFile) Close() error {
	f.once.Do(func() { f.c.open.Add(-1) })
	return f.File.Close()
}

// TestReadRunDropsCache: a run of at least DropRunMin bytes read whole asks
// the file to drop its cached pages of exactly that run; a shorter run, a
// single-value Read and a run cut short by the segment's end do not.
func TestReadRunDropsCache(t *testing.T) {
	dfs := &dropRecorder{FS: vfs.NewMem()}
	w, _ := newTestWriter(t, dfs, 64<<20)
	var ps []Pointer
	for i := 0; i < 40; i++ {
		p, err := w.Append([]byte(fmt.Sprint(i)), bytes.Repeat([]byte{byte(i)}, 8<<10))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	r := NewReader(dfs, "/d", nil, 0)
	defer r.Close()
	read := func(ps []Pointer) error {
		_, err := r.ReadRun(ps, func(int, []byte) error { return nil })
		return err
	}
	span := func(ps []Pointer) int64 {
		return int64(ps[len(ps)-1].Offset + uint64(ps[len(ps)-1].Len) - ps[0].Offset)
	}
	short := ps[:4] // 32 KiB
	long := ps[3:]  // 296 KiB
	if span(short) >= DropRunMin || span(long) < DropRunMin {
		t.Fatalf("runs of %d and %d bytes do not straddle DropRunMin", span(short), span(long))
	}
	if err := read(short); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(ps[5]); err != nil {
		t.Fatal(err)
	}
	if got := dfs.calls(); len(got) != 0 {
		t.Fatalf("short reads dropped %v", got)
	}
	if err := read(long); err != nil {
		t.Fatal(err)
	}
	want := [2]int64{int64(long[0].Offset), span(long)}
	if got := dfs.calls(); len(got) != 1 || got[0] != want {
		t.Fatalf("drops after a long run: %v, want [%v]", got, want)
	}
	// A run past the segment's end fails and drops nothing more.
	beyond := append([]Pointer(nil), long...)
	beyond[len(beyond)-1].Len += 100 << 10
	if err := read(beyond); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("run past the end: %v, want ErrCorrupt", err)
	}
	if got := dfs.calls(); len(got) != 1 {
		t.Fatalf("a failed run dropped: %v", got)
	}
}

// dropRecorder is an FS whose opened files record their DropCache calls.
type dropRecorder struct {
	vfs.FS
	mu    sync.Mutex
	drops [][2]int64
}

type dropFile struct {
	vfs.File
	d *dropRecorder
}

func (d *dropRecorder) Open(name string) (vfs.File, error) {
	f, err := d.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return dropFile{f, d}, nil
}

func (f dropFile) DropCache(off, n int64) error {
	f.d.mu.Lock()
	defer f.d.mu.Unlock()
	f.d.drops = append(f.d.drops, [2]int64{off, n})
	return nil
}

func (d *dropRecorder) calls() [][2]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([][2]int64(nil), d.drops...)
}

// TestReadRunDirect: long runs of an OS segment that the page cache does not
// hold are read around it, from any offset (the read is widened to aligned
// blocks and the run cut out of it), up to a segment that ends with the
// run's last value; a run the cache holds is read through it. A run past
// the segment's end and a damaged value are ErrCorrupt, and a damaged value
// written through the page cache is seen (the kernel writes dirty pages back
// before a direct read).
func TestReadRunDirect(t *testing.T) {
	dir := t.TempDir()
	dfs := &directRecorder{FS: vfs.Default}
	w, _ := newTestWriterIn(t, dfs, dir, 64<<20)
	rng := rand.New(rand.NewPCG(5, 6))
	var ps []Pointer
	var vals [][]byte
	for i := range 400 {
		v := make([]byte, 3000+rng.IntN(6000))
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		p, err := w.Append([]byte(fmt.Sprint(i)), v)
		if err != nil {
			t.Fatal(err)
		}
		ps, vals = append(ps, p), append(vals, v)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	// The segment ends where its last value does.
	seg, size := w.Active()
	path := vfs.Join(dir, FileName(seg))
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	r := NewReader(dfs, dir, nil, 0)
	defer r.Close()
	noReadAhead(r) // counts below are of ReadRun's own reads
	read := func(from, to int) error {
		return first(r.ReadRun(ps[from:to], func(i int, v []byte) error {
			if !bytes.Equal(v, vals[from+i]) {
				return fmt.Errorf("value %d of run [%d, %d) differs", i, from, to)
			}
			return nil
		}))
	}
	span := func(from, to int) uint64 { return ps[to-1].Offset + uint64(ps[to-1].Len) - ps[from].Offset }
	runs := [][2]int{{0, 40}, {len(ps) - 30, len(ps)}}
	for len(runs) < 60 {
		from := rng.IntN(len(ps) - 20)
		to := from + 20 + rng.IntN(min(len(ps)-from-20, 100)+1)
		if to <= len(ps) && span(from, to) >= DropRunMin && span(from, to) <= MaxRun {
			runs = append(runs, [2]int{from, to})
		}
	}
	for _, run := range runs {
		if err := read(run[0], run[1]); err != nil {
			t.Fatal(err)
		}
	}
	if got := dfs.direct.Load(); got != int64(len(runs)) {
		t.Fatalf("%d direct reads for %d runs", got, len(runs))
	}
	// A run the page cache holds is read through it.
	dfs.cached.Store(true)
	if err := read(10, 60); err != nil {
		t.Fatal(err)
	}
	if got := dfs.direct.Load(); got != int64(len(runs)) {
		t.Fatalf("a cached run was read around the cache")
	}
	dfs.cached.Store(false)
	// A file that refuses direct reads is read through the cache, and the
	// run dropped from it after.
	dfs.refuse.Store(true)
	if err := read(100, 150); err != nil {
		t.Fatal(err)
	}
	if got := dfs.drops.Load(); got != 2 {
		t.Fatalf("%d runs dropped from the cache, want 2 (the cached run, the refused one)", got)
	}
	dfs.refuse.Store(false)
	// A run whose last value would end 5 bytes past the segment's end, from
	// a start that the aligned read reaches from more than 5 bytes before.
	from := len(ps) - 30
	for ps[from].Offset%vfs.DirectAlign < 16 {
		from--
	}
	beyond := append([]Pointer(nil), ps[from:]...)
	beyond[len(beyond)-1].Len += 5
	bad, err := r.ReadRun(beyond, func(int, []byte) error { return nil })
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "past the end") || bad != len(beyond)-1 {
		t.Fatalf("run past the end: bad %d, %v; want %d, ErrCorrupt past the end", bad, err, len(beyond)-1)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{^vals[25][7]}, int64(ps[25].Offset)+7); err != nil {
		t.Fatal(err)
	}
	bad, err = r.ReadRun(ps[0:40], func(int, []byte) error { return nil })
	if !errors.Is(err, ErrCorrupt) || bad != 25 {
		t.Fatalf("damaged value: bad %d, %v; want 25, ErrCorrupt", bad, err)
	}
}

func first(_ int, err error) error { return err }

// TestReadRunKeepsAlignment: a run longer than any before it (a single
// value of 2 MiB at an unaligned offset) leaves ReadRun's pooled buffer
// aligned for the direct reads that follow.
func TestReadRunKeepsAlignment(t *testing.T) {
	dir := t.TempDir()
	dfs := &directRecorder{FS: vfs.Default}
	w, _ := newTestWriterIn(t, dfs, dir, 64<<20)
	big := bytes.Repeat([]byte{7}, 2<<20+100)
	pb, err := w.Append([]byte("big"), big)
	if err != nil {
		t.Fatal(err)
	}
	var ps []Pointer
	for i := range 60 {
		p, err := w.Append([]byte(fmt.Sprint(i)), bytes.Repeat([]byte{byte(i)}, 5000))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if pb.Offset%vfs.DirectAlign == 0 {
		t.Fatalf("the big value is aligned (at %d): the test needs it not to be", pb.Offset)
	}
	r := NewReader(dfs, dir, nil, 0)
	defer r.Close()
	noReadAhead(r)
	for range 3 {
		for _, run := range [][]Pointer{{pb}, ps} {
			if _, err := r.ReadRun(run, func(int, []byte) error { return nil }); err != nil {
				t.Fatalf("run of %d values: %v", len(run), err)
			}
		}
	}
	if got := dfs.direct.Load(); got != 6 {
		t.Fatalf("%d direct reads, want 6", got)
	}
}

// directRecorder is an FS whose opened files count their direct reads and
// drops, report the page cache as holding a range when cached is set, and
// refuse direct reads when refuse is set.
type directRecorder struct {
	vfs.FS
	direct, drops, calls atomic.Int64
	cached, refuse       atomic.Bool
}

type directFile struct {
	vfs.File
	d *directRecorder
}

func (d *directRecorder) Open(name string) (vfs.File, error) {
	f, err := d.FS.Open(name)
	if err != nil {
		return nil, err
	}
	if _, ok := f.(vfs.DirectReader); !ok {
		return nil, fmt.Errorf("%s: not a vfs.DirectReader", name)
	}
	return directFile{f, d}, nil
}

func (f directFile) Cached(off, n int64) bool { return f.d.cached.Load() }

func (f directFile) ReadAtDirect(p []byte, off int64) (int, error) {
	f.d.calls.Add(1)
	if f.d.refuse.Load() {
		return 0, vfs.ErrNoDirect
	}
	f.d.direct.Add(1)
	return f.File.(vfs.DirectReader).ReadAtDirect(p, off)
}

func (f directFile) DropCache(off, n int64) error {
	f.d.drops.Add(1)
	return f.File.(vfs.CacheDropper).DropCache(off, n)
}

// TestReadRunStreams: runs read in sequence, as Iterator.Each reads a file,
// are read ahead: from the third on, each comes from a prefetch an earlier
// one started, with one device read per run. A prefetch whose bytes no
// longer match the file (read while a value was damaged, since repaired)
// fails the values' CRCs and the run is read again. Close waits for the
// prefetches under way.
func TestReadRunStreams(t *testing.T) {
	// The damaged value is the sixth of its run, or the first.
	for _, at := range []int{5, 0} {
		t.Run(fmt.Sprintf("damaged=%d", at), func(t *testing.T) { testReadRunStreams(t, at) })
	}
}

func testReadRunStreams(t *testing.T, at int) {
	dir := t.TempDir()
	dfs := &directRecorder{FS: vfs.Default}
	w, _ := newTestWriterIn(t, dfs, dir, 64<<20)
	var ps []Pointer
	var vals [][]byte
	for i := range 2048 { // 8 MiB of 4 KiB blocks
		v := bytes.Repeat([]byte{byte(i), byte(i >> 8)}, 2048)
		p, err := w.Append(fmt.Appendf(nil, "%08d", i), v) // keys of one length, as block keys
		if err != nil {
			t.Fatal(err)
		}
		ps, vals = append(ps, p), append(vals, v)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	// Runs as a file's 1 MiB READs make them.
	var runs [][2]int
	for i := 0; i < len(ps); i += 256 {
		runs = append(runs, [2]int{i, i + 256})
	}
	seg, _ := w.Active()
	path := vfs.Join(dir, FileName(seg))
	r := NewReader(dfs, dir, nil, 0)
	// Each value once, in order, whether it came from a prefetch, the file,
	// or (the damaged run) both.
	read := func(run [2]int) error {
		next := 0
		if err := first(r.ReadRun(ps[run[0]:run[1]], func(i int, v []byte) error {
			if i != next {
				return fmt.Errorf("value %d given after %d", run[0]+i, run[0]+next-1)
			}
			next++
			if !bytes.Equal(v, vals[run[0]+i]) {
				return fmt.Errorf("value %d differs", run[0]+i)
			}
			return nil
		})); err != nil {
			return err
		}
		if next != run[1]-run[0] {
			return fmt.Errorf("run %v: %d values given", run, next)
		}
		return nil
	}
	// Damage a value of the third run; the second run's prefetch reads it.
	damaged := []int{runs[2][0] + at}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, d := range damaged {
		if _, err := f.WriteAt([]byte{^vals[d][0]}, int64(ps[d].Offset)); err != nil {
			t.Fatal(err)
		}
	}
	for _, run := range runs[:2] {
		if err := read(run); err != nil {
			t.Fatal(err)
		}
	}
	r.streams.wg.Wait() // the prefetch of the third run has read the damage
	for _, d := range damaged {
		if _, err := f.WriteAt(vals[d][:1], int64(ps[d].Offset)); err != nil {
			t.Fatal(err)
		}
	}
	for _, run := range runs[2:] {
		if err := read(run); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	if live := r.streams.live.Load(); live != 0 {
		t.Errorf("%d prefetches hold buffers after Close", live)
	}
	// Runs 4 to the last came from prefetches; run 3's gave the values
	// before the damaged one and failed its CRC there, and the run was read
	// again from the file for the rest.
	if got, want := r.ReadAheads.Load(), uint64(len(runs)-3); got != want {
		t.Errorf("%d runs read ahead, want %d", got, want)
	}
	// One read per run, one for run 3 again, and the prefetches of the
	// stream at its full depth past its end.
	if got, want := dfs.direct.Load(), int64(len(runs)+1+maxDepth); got != want {
		t.Errorf("%d direct reads for %d runs, want %d", got, len(runs), want)
	}
}

// noReadAhead stops r from starting prefetches.
func noReadAhead(r *Reader) {
	r.streams.mu.Lock()
	r.streams.closed = true
	r.streams.mu.Unlock()
}

// streamSegment writes a segment of n 4 KiB values with keys of one length
// (as block keys are) into a new directory and returns its reader, the
// pointers and the recorder its files go through.
func streamSegment(t *testing.T, n int) (*Reader, []Pointer, *directRecorder) {
	return streamSegments(t, n, 1<<30)
}

// streamSegments is streamSegment with segments of at most maxSize bytes.
func streamSegments(t *testing.T, n int, maxSize int64) (*Reader, []Pointer, *directRecorder) {
	t.Helper()
	dir := t.TempDir()
	dfs := &directRecorder{FS: vfs.Default}
	w, _ := newTestWriterIn(t, dfs, dir, maxSize)
	var ps []Pointer
	for i := range n {
		p, err := w.Append(fmt.Appendf(nil, "%08d", i), bytes.Repeat([]byte{byte(i)}, 4096))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := NewReader(dfs, dir, nil, 0)
	t.Cleanup(func() {
		r.Close()
		if live := r.streams.live.Load(); live != 0 {
			t.Errorf("%d prefetches hold buffers after Close", live)
		}
	})
	return r, ps, dfs
}

// readRuns reads ps[from:to] for each run, checking the values.
func readRuns(t *testing.T, r *Reader, ps []Pointer, runs [][2]int) {
	t.Helper()
	for _, run := range runs {
		if _, err := r.ReadRun(ps[run[0]:run[1]], func(i int, v []byte) error {
			if v[0] != byte(run[0]+i) || len(v) != 4096 {
				return fmt.Errorf("value %d differs", run[0]+i)
			}
			return nil
		}); err != nil {
			t.Fatalf("run %v: %v", run, err)
		}
	}
}

// TestReadRunNoStream: long runs that go backwards start no prefetch, one
// device read per run; runs that jump about the segment waste few reads
// (a run read some time after the one before it looks like a stream that
// goes on).
func TestReadRunNoStream(t *testing.T) {
	r, ps, dfs := streamSegment(t, 64*256)
	var back [][2]int
	for j := 63; j >= 0; j-- {
		back = append(back, [2]int{j * 256, j*256 + 256})
	}
	readRuns(t, r, ps, back)
	r.streams.wg.Wait()
	if got := dfs.direct.Load(); got != int64(len(back)) || r.ReadAheads.Load() != 0 {
		t.Errorf("backwards: %d device reads and %d read ahead for %d runs; want %d and 0", got, r.ReadAheads.Load(), len(back), len(back))
	}

	r, ps, dfs = streamSegment(t, 64*256)
	var jumps [][2]int
	for i := range 64 {
		j := i * 7 % 64 // never the run after the one before
		jumps = append(jumps, [2]int{j * 256, j*256 + 256})
	}
	readRuns(t, r, ps, jumps)
	r.streams.wg.Wait()
	if got := dfs.direct.Load(); got > int64(len(jumps)+len(jumps)/8) {
		t.Errorf("jumps: %d device reads for %d runs", got, len(jumps))
	}
}

// TestReadRunManyStreams: six readers of their own stretch of a segment,
// taking turns, are read ahead (within maxPrefetches buffers), and wasted
// reads are bounded by the streams' depths; a reader through many segments
// is read ahead in each (the streams it left give their buffers up); a
// stream whose READs grow (the kernel's first window) wastes little.
func TestReadRunManyStreams(t *testing.T) {
	r, ps, dfs := streamSegment(t, 6*12*256)
	var runs [][2]int
	for k := range 12 {
		for reader := range 6 {
			at := (reader*12 + k) * 256
			runs = append(runs, [2]int{at, at + 256})
		}
	}
	readRuns(t, r, ps, runs)
	r.streams.wg.Wait()
	aheads, reads := r.ReadAheads.Load(), dfs.direct.Load()
	if aheads < uint64(len(runs))/2 || reads > int64(len(runs)+6*maxDepth) {
		t.Errorf("%d runs: %d read ahead, %d device reads", len(runs), aheads, reads)
	}
	if live := r.streams.live.Load(); live > maxPrefetches {
		t.Errorf("%d prefetches hold buffers, more than %d", live, maxPrefetches)
	}

	// One reader through ten segments: the streams it leaves behind, their
	// prefetches past each segment's end unread, give their buffers up.
	r3, ps3, _ := streamSegments(t, 10*8*256, 8*256*4200)
	var through [][2]int
	for i := 0; i < len(ps3); i += 256 {
		if j := i + 256; ps3[j-1].Segment == ps3[i].Segment {
			through = append(through, [2]int{i, j})
		}
	}
	segs := map[uint64]bool{}
	for _, p := range ps3 {
		segs[p.Segment] = true
	}
	readRuns(t, r3, ps3, through)
	if got := r3.ReadAheads.Load(); len(segs) < 8 || got < uint64(len(through))/2 {
		t.Errorf("%d runs through %d segments: %d read ahead", len(through), len(segs), got)
	}

	r2, ps2, dfs2 := streamSegment(t, 16*256)
	var grow [][2]int
	at := 0
	for _, n := range []int{32, 64, 128, 256, 256, 256, 256, 256, 256, 256, 256, 256} {
		grow = append(grow, [2]int{at, at + n})
		at += n
	}
	readRuns(t, r2, ps2, grow)
	r2.streams.wg.Wait()
	if got := dfs2.direct.Load(); got > int64(len(grow)+maxDepth) || r2.ReadAheads.Load() < 4 {
		t.Errorf("growing READs: %d device reads, %d read ahead, for %d runs", got, r2.ReadAheads.Load(), len(grow))
	}
}

// TestReadRunStreamsEnd: Close with prefetches under way waits for them,
// gives every buffer back and leaves no segment file open; a reader that
// skips a run leaves no prefetch for it behind; Forget gives up
// the segment's prefetches, and reads of it fail from then on; a data
// directory that refuses direct reads soon stops starting prefetches, for a
// while.
func TestReadRunStreamsEnd(t *testing.T) {
	fds := openFDs(t)
	r, ps, _ := streamSegment(t, 8*256)
	runs := [][2]int{{0, 256}, {256, 512}, {512, 768}, {768, 1024}, {1024, 1280}}
	readRuns(t, r, ps, runs)
	r.Close()
	if live := r.streams.live.Load(); live != 0 {
		t.Errorf("%d prefetches hold buffers after Close", live)
	}
	if got := openFDs(t); got != fds {
		t.Errorf("%d descriptors open after Close, %d before", got, fds)
	}

	// A reader that skips a run leaves its prefetch behind: given up.
	r, ps, _ = streamSegment(t, 16*256)
	readRuns(t, r, ps, append(runs, [2]int{6 * 256, 7 * 256}, [2]int{7 * 256, 8 * 256}))
	r.streams.mu.Lock()
	for _, st := range r.streams.list {
		for _, pf := range st.pfs {
			if pf.at <= st.off {
				t.Errorf("a prefetch for the run at %d kept after the run at %d", pf.at, st.off)
			}
		}
	}
	r.streams.mu.Unlock()
	r.Close()

	r, ps, _ = streamSegment(t, 8*256)
	readRuns(t, r, ps, runs)
	r.Forget(ps[0].Segment)
	r.streams.wg.Wait()
	if live := r.streams.live.Load(); live != 0 {
		t.Errorf("%d prefetches hold buffers after Forget", live)
	}
	if _, err := r.ReadRun(ps[1280:1536], func(int, []byte) error { return nil }); err == nil {
		t.Error("a run of a forgotten segment was read")
	}

	r, ps, dfs := streamSegment(t, 16*256)
	dfs.refuse.Store(true)
	var all [][2]int
	for i := range 16 {
		all = append(all, [2]int{i * 256, i*256 + 256})
	}
	readRuns(t, r, ps, all)
	r.streams.wg.Wait()
	if got := dfs.calls.Load(); got > int64(len(all)+maxDepth) {
		t.Errorf("direct reads refused: %d attempts for %d runs", got, len(all))
	}
	// Once direct reads work again, prefetching resumes after its pause.
	dfs.refuse.Store(false)
	r.streams.mu.Lock()
	r.streams.clock += noDirectPause
	r.streams.mu.Unlock()
	readRuns(t, r, ps, all)
	r.streams.wg.Wait()
	if r.ReadAheads.Load() == 0 {
		t.Error("no read-ahead after direct reads worked again")
	}
}

// openFDs counts the process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// TestReadRunPrefetchBound: with every device read stalled, streams that
// give up their prefetches to a new one do not let more than maxPrefetches
// hold buffers (given-up ones count until their read ends), and all come
// back once the reads end and the Reader is closed.
func TestReadRunPrefetchBound(t *testing.T) {
	r0, ps, dfs := streamSegment(t, 64)
	g := &gateFS{directRecorder: dfs, gate: make(chan struct{})}
	r := NewReader(g, r0.dir, nil, 0)
	seg := ps[0].Segment
	const n, gap = 1 << 20, 16
	peak := int64(0)
	note := func(base int64, k int) {
		r.noteRun(seg, base+int64(k)*(n+gap), n)
		peak = max(peak, r.streams.live.Load())
	}
	for s := range 4 { // four streams at full depth: all the buffers
		for k := range 8 {
			note(int64(s)<<32, k)
		}
	}
	for k := range 60 { // a fifth, long enough for the others to be idle
		note(int64(9)<<32, k)
	}
	close(g.gate)
	r.Close()
	if peak > maxPrefetches {
		t.Errorf("%d prefetches held buffers at once, more than %d", peak, maxPrefetches)
	}
	if live := r.streams.live.Load(); live != 0 {
		t.Errorf("%d prefetches hold buffers after Close", live)
	}
}

// gateFS is a directRecorder whose direct reads wait until gate closes.
type gateFS struct {
	*directRecorder
	gate chan struct{}
}

type gateFile struct {
	directFile
	gate chan struct{}
}

func (g *gateFS) Open(name string) (vfs.File, error) {
	f, err := g.directRecorder.Open(name)
	if err != nil {
		return nil, err
	}
	return gateFile{f.(directFile), g.gate}, nil
}

func (f gateFile) ReadAtDirect(p []byte, off int64) (int, error) {
	<-f.gate
	return f.directFile.ReadAtDirect(p, off)
}

// TestReadRunPrefetchFnError: an error of fn on a value from a prefetch is
// ReadRun's, with that value's index; fn gets no value after it, and the
// prefetch counts as read ahead (its bytes were used).
func TestReadRunPrefetchFnError(t *testing.T) {
	r, ps, _ := streamSegment(t, 1024)
	readRuns(t, r, ps, [][2]int{{0, 256}, {256, 512}})
	r.streams.wg.Wait()
	stop := errors.New("stop")
	last := -1
	bad, err := r.ReadRun(ps[512:768], func(i int, v []byte) error {
		last = i
		if i == 7 {
			return stop
		}
		return nil
	})
	if bad != 7 || !errors.Is(err, stop) || last != 7 {
		t.Fatalf("ReadRun = %d, %v after value %d; want 7, %v after value 7", bad, err, last, stop)
	}
	if got := r.ReadAheads.Load(); got != 1 {
		t.Errorf("%d runs read ahead, want 1", got)
	}
	readRuns(t, r, ps, [][2]int{{768, 1024}})
	if got := r.ReadAheads.Load(); got != 2 {
		t.Errorf("%d runs read ahead after the next run, want 2", got)
	}
}
