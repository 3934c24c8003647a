package lsm_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/lsmfs/lsmfs/lsm"
)

// TestSetShared: values given by reference read back like copied ones, with
// and without a value log, above and below the threshold, mixed in order
// with other entries (a later entry of the same key wins), and the caller's
// buffers may change once Apply has returned. The same after a reopen
// (journal replay).
func TestSetShared(t *testing.T) {
	for _, threshold := range []int{4 << 10, -1} {
		t.Run(fmt.Sprintf("threshold=%d", threshold), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			opts := &lsm.Options{UUID: [16]byte{7}, ValueThreshold: threshold}
			if err := lsm.Format(dir, opts); err != nil {
				t.Fatal(err)
			}
			db, err := lsm.Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
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
	dir := filepath.Join(t.TempDir(), "db")
	opts := &lsm.Options{UUID: [16]byte{8}}
	if err := lsm.Format(dir, opts); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
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
