package lsm_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/internal/vlog"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestSetShared: values given by reference read back like copied ones, with
// and without a value log, above and below the threshold, mixed in order
// with other entries (a later entry of the same key wins), and the caller's
// buffers may change once Apply has returned. The same after a reopen
// (journal replay).
func TestSetShared(t *testing.T) {
	for _, threshold := range []int{4 << 10, -1} {
		t.Run(fmt.Sprintf("threshold=%d", threshold), func(t *testing.T) {
			opts := &lsm.Options{UUID: [16]byte{7}, ValueThreshold: threshold}
			dir, db := formatOpen(t, opts)
			var err error
			defer func() { db.Close() }()
			big := bytes.Repeat([]byte("b"), 16<<10)
			small := []byte("small shared")
			want := map[string][]byte{
				"a": append([]byte(nil), big...),
				"b": append([]byte(nil), small...),
				"c": []byte("copied"),
				"d": []byte("last write wins"),
			}
			b := lsm.NewBatch()
			b.SetShared([]byte("a"), big)
			b.SetShared([]byte("b"), small)
			b.Set([]byte("c"), []byte("copied"))
			b.SetShared([]byte("d"), big)
			b.Set([]byte("d"), []byte("last write wins"))
			b.SetShared([]byte("e"), small)
			b.Delete([]byte("e"))
			if err := db.Apply(b, true); err != nil {
				t.Fatal(err)
			}
			// The caller reuses its buffers.
			clear(big)
			clear(small)
			check := func(when string) {
				t.Helper()
				for k, v := range want {
					got, err := db.Get([]byte(k))
					if err != nil || !bytes.Equal(got, v) {
						t.Fatalf("%s: Get(%s) = %d bytes, %v; want %d bytes", when, k, len(got), err, len(v))
					}
				}
				if _, err := db.Get([]byte("e")); err != lsm.ErrNotFound {
					t.Fatalf("%s: Get(e) after its delete: %v", when, err)
				}
			}
			check("after apply")
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if db, err = lsm.Open(dir, opts); err != nil {
				t.Fatal(err)
			}
			check("after reopen")
			// Reset drops the references.
			b.Reset()
			b.SetShared([]byte("f"), []byte("after reset"))
			if b.Count() != 1 || b.Len() <= len("after reset") {
				t.Fatalf("after Reset: count %d len %d", b.Count(), b.Len())
			}
		})
	}
}

// TestValueLen: the length of an inline value, of one in the value log (read
// from its pointer), and ErrNotFound for a missing or deleted key.
func TestValueLen(t *testing.T) {
	_, db := formatOpen(t, &lsm.Options{UUID: [16]byte{8}})
	defer db.Close()
	b := lsm.NewBatch()
	b.Set([]byte("small"), []byte("12345"))
	b.Set([]byte("big"), make([]byte, 20000))
	b.Set([]byte("gone"), []byte("x"))
	b.Delete([]byte("gone"))
	if err := db.Apply(b, false); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key  string
		want int
		err  error
	}{{"small", 5, nil}, {"big", 20000, nil}, {"gone", 0, lsm.ErrNotFound}, {"never", 0, lsm.ErrNotFound}} {
		n, err := db.ValueLen([]byte(c.key))
		if n != c.want || err != c.err {
			t.Errorf("ValueLen(%s) = %d, %v; want %d, %v", c.key, n, err, c.want, c.err)
		}
	}
}

// TestSmallSyncBatchesStayInline: a synchronous batch of at most 64 KiB
// keeps its large values inline, in the journal and the memtable (its commit
// then forces only the journal; a flush moves them to the value log later);
// a larger one, or an asynchronous one, moves them to the value log at
// once. Either way the values read back, also after a reopen.
func TestSmallSyncBatchesStayInline(t *testing.T) {
	opts := &lsm.Options{UUID: [16]byte{9}}
	dir, db := formatOpen(t, opts)
	var err error
	defer func() { db.Close() }()
	vlogBytes := func() uint64 { return db.Metrics().Vlog.BytesWritten }
	want := map[string][]byte{}
	apply := func(sync bool, vals ...int) {
		t.Helper()
		b := lsm.NewBatch()
		for _, n := range vals {
			k := fmt.Sprintf("k%03d", len(want))
			v := bytes.Repeat([]byte{byte(len(want))}, n)
			b.Set([]byte(k), v)
			want[k] = v
		}
		if err := db.Apply(b, sync); err != nil {
			t.Fatal(err)
		}
	}
	before := vlogBytes()
	apply(true, 4096, 4096, 100)
	if got := vlogBytes(); got != before {
		t.Fatalf("a small synchronous batch wrote %d bytes to the value log", got-before)
	}
	apply(true, 30<<10, 30<<10)
	if got := vlogBytes(); got != before {
		t.Fatalf("a 60 KiB synchronous batch wrote %d bytes to the value log", got-before)
	}
	apply(true, 40<<10, 40<<10)
	if got := vlogBytes(); got < before+80<<10 {
		t.Fatalf("an 80 KiB synchronous batch wrote %d bytes to the value log, want its values", got-before)
	}
	before = vlogBytes()
	apply(false, 4096)
	if got := vlogBytes(); got < before+4096 {
		t.Fatalf("an asynchronous batch wrote %d bytes to the value log, want its value", got-before)
	}
	for pass := 0; pass < 2; pass++ {
		for k, v := range want {
			got, err := db.Get([]byte(k))
			if err != nil || !bytes.Equal(got, v) {
				t.Fatalf("pass %d: Get(%s): %d bytes, %v", pass, k, len(got), err)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if db, err = lsm.Open(dir, opts); err != nil {
			t.Fatal(err)
		}
	}
}

// formatOpen formats a DB in a fresh directory with opts and opens it: /db
// when opts has an FS of its own (a fresh one, as vfs.NewMem gives), else a
// temporary directory.
func formatOpen(t *testing.T, opts *lsm.Options) (string, *lsm.DB) {
	t.Helper()
	dir := "/db"
	if opts.FS == nil {
		dir = filepath.Join(t.TempDir(), "db")
	}
	if err := lsm.Format(dir, opts); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return dir, db
}

// TestFailedSeparationLeavesNoRecord: a batch whose separation fails
// midway (a key over the value log's limit after a shared large value)
// leaves no record of it in the value log. The writer's buffer refers to
// the batch's values instead of copying them, and they are the caller's
// again once Apply has returned: a record written later from them would
// fail its value checksum.
func TestFailedSeparationLeavesNoRecord(t *testing.T) {
	opts := &lsm.Options{UUID: [16]byte{7}, ValueThreshold: 64}
	dir, db := formatOpen(t, opts)
	val := bytes.Repeat([]byte("v"), 1000)
	b := lsm.NewBatch()
	b.SetShared([]byte("a"), val)
	b.Set(bytes.Repeat([]byte("k"), 1<<16+1), val)
	if err := db.Apply(b, false); err == nil {
		t.Fatal("Apply of a batch with a key over the value log's limit succeeded")
	}
	clear(val)
	db.Close() // the engine has failed: its error is expected
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		var seg uint64
		if _, err := fmt.Sscanf(e.Name(), "%d.vlog", &seg); err != nil || filepath.Ext(e.Name()) != ".vlog" {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		if err := vlog.Scan(vfs.Default, dir, seg, fi.Size(), func(vlog.Record) error { n++; return nil }); err != nil {
			t.Fatalf("scan %s: %v", e.Name(), err)
		}
		if n != 0 {
			t.Errorf("%s holds %d records of the failed batch", e.Name(), n)
		}
	}
}
