package lsm_test

import (
	"errors"
	"testing"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/internal/manifest"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// Manifests whose checksums are good but whose contents disagree with the
// tables (a bug in flush or compaction, a bad rewrite) are refused by Open
// or reported by Check (format review): before, Open and Check accepted
// each of these.

// rewriteManifest applies fn to the edits of the current manifest and
// writes them back with valid checksums.
func rewriteManifest(t *testing.T, mem *vfs.MemFS, fn func([]*manifest.Edit) []*manifest.Edit) {
	t.Helper()
	cur, err := manifest.ReadFile(mem, "/db/CURRENT")
	if err != nil {
		t.Fatal(err)
	}
	num, err := manifest.DecodeCurrent(cur)
	if err != nil {
		t.Fatal(err)
	}
	name := "/db/" + manifest.FileName(num)
	data, err := manifest.ReadFile(mem, name)
	if err != nil {
		t.Fatal(err)
	}
	edits, err := manifest.ReadAll(name, data)
	if err != nil {
		t.Fatal(err)
	}
	edits = fn(edits)
	f, err := mem.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	w, err := manifest.NewWriter(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range edits {
		if err := w.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// consistencyDB makes an engine with one table holding a..e (seqs 1-5) and
// the range tombstone [x, zz) (seq 6).
func consistencyDB(t *testing.T) (*vfs.MemFS, *lsm.Options) {
	mem := vfs.NewMem()
	opts := &lsm.Options{FS: mem, UUID: [16]byte{1}, Journal: lsm.JournalOptions{Size: 4 << 20}}
	if err := lsm.Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		b := lsm.NewBatch()
		b.Set([]byte(k), []byte("v-"+k))
		if err := db.Apply(b, true); err != nil {
			t.Fatal(err)
		}
	}
	b := lsm.NewBatch()
	b.DeleteRange([]byte("x"), []byte("zz"))
	if err := db.Apply(b, true); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return mem, opts
}

// eachTable calls fn with every table an edit adds.
func eachTable(es []*manifest.Edit, fn func(e *manifest.Edit, m *manifest.FileMetadata)) {
	for _, e := range es {
		for _, a := range e.Added {
			fn(e, a.Meta)
		}
	}
}

func TestManifestInconsistentWithTables(t *testing.T) {
	refused := map[string]func([]*manifest.Edit) []*manifest.Edit{
		// Entries above LastSeq are invisible, and new writes would reuse
		// their sequence numbers.
		"last-seq-below-a-table": func(es []*manifest.Edit) []*manifest.Edit {
			for _, e := range es {
				if e.LastSeq != 0 {
					e.LastSeq = 2
				}
			}
			return es
		},
		// Deleted from one level by a compaction, the table would still be
		// named by the other.
		"table-in-two-levels": func(es []*manifest.Edit) []*manifest.Edit {
			var m manifest.FileMetadata
			eachTable(es, func(_ *manifest.Edit, a *manifest.FileMetadata) { m = *a })
			return append(es, &manifest.Edit{Added: []manifest.NewFile{{Level: 5, Meta: &m}}})
		},
		"later-edit-of-another-format-version": func(es []*manifest.Edit) []*manifest.Edit {
			return append(es, &manifest.Edit{FormatVersion: manifest.FormatVersion + 1})
		},
	}
	for name, fn := range refused {
		t.Run(name, func(t *testing.T) {
			mem, opts := consistencyDB(t)
			rewriteManifest(t, mem, fn)
			db, err := lsm.Open("/db", opts)
			if err == nil {
				db.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, lsm.ErrCorrupt) {
				t.Errorf("Open: %v, want ErrCorrupt", err)
			}
		})
	}

	reported := map[string]func(e *manifest.Edit, m *manifest.FileMetadata){
		// Readers pick tables by these bounds: keys the tombstone deletes
		// would come back.
		"tombstone-outside-the-bounds": func(_ *manifest.Edit, m *manifest.FileMetadata) {
			m.Largest, m.LargestExclusive = []byte("e"), false
		},
		// L0 tables are ordered by these: a lookup stopping at the first
		// L0 hit could return an older version.
		"sequence-bounds": func(_ *manifest.Edit, m *manifest.FileMetadata) {
			m.SmallestSeq = 3
		},
	}
	for name, fn := range reported {
		t.Run(name, func(t *testing.T) {
			mem, opts := consistencyDB(t)
			rewriteManifest(t, mem, func(es []*manifest.Edit) []*manifest.Edit { eachTable(es, fn); return es })
			ro := *opts
			ro.ReadOnly = true
			db, err := lsm.Open("/db", &ro)
			if err != nil {
				t.Fatalf("read-only open: %v", err)
			}
			defer db.Close()
			r, err := db.Check()
			if err != nil {
				t.Fatal(err)
			}
			if r.OK() {
				t.Errorf("Check found nothing:\n%s", r.String())
			}
		})
	}
}
