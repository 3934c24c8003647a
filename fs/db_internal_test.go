package fs

import (
	"testing"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// newTestDB formats and opens an engine on a fresh in-memory filesystem,
// with small memtables and journal; it is closed when the test ends (after
// the test's own deferred calls, so after an FS on it is closed).
func newTestDB(t testing.TB) *lsm.DB {
	t.Helper()
	lo := &lsm.Options{FS: vfs.NewMem(), UUID: [16]byte{9}, MemtableSize: 1 << 20, Journal: lsm.JournalOptions{Size: 4 << 20}}
	if err := lsm.Format("/db", lo); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open("/db", lo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newTestFS formats a filesystem of 4 KiB blocks on a newTestDB and
// returns an FS on it with opts; the caller closes the FS.
func newTestFS(t testing.TB, opts Options) (*FS, *lsm.DB) {
	t.Helper()
	db := newTestDB(t)
	if err := Format(db, FormatOptions{BlockSize: 4096}); err != nil {
		t.Fatal(err)
	}
	f, err := New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	return f, db
}
