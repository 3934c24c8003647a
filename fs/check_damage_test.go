package fs_test

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm"
)

// TestCheckGoesOnPastADamagedValue: a value that fails its checksum is a
// problem of the report, and the check goes on after it: before, fs.Check
// returned the read error, and fsck printed no report of either checker.
func TestCheckGoesOnPastADamagedValue(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	rng := rand.New(rand.NewPCG(7, 7))
	values := make([][]byte, 2)
	for i, name := range []string{"a", "b"} {
		ino, fh := e.mustCreate(1, name)
		e.release(ino, fh)
		values[i] = make([]byte, 8<<10)
		for j := range values[i] {
			values[i][j] = byte(rng.Uint32())
		}
		if errno := e.setxattr(ino, "user.big", values[i], 0); errno != 0 {
			t.Fatalf("setxattr %s: %v", name, errno)
		}
	}
	e.close()

	// Damage the first xattr value (the first in key order) where the
	// value log holds it.
	names, err := e.mem.List(testDir)
	if err != nil {
		t.Fatal(err)
	}
	damaged := false
	for _, n := range names {
		if !strings.HasSuffix(n, ".vlog") {
			continue
		}
		f, err := e.mem.OpenReadWrite(testDir + "/" + n)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := e.mem.Stat(testDir + "/" + n)
		b := make([]byte, fi.Size())
		f.ReadAt(b, 0)
		if i := bytes.Index(b, values[0]); i >= 0 {
			f.WriteAt([]byte{^b[i+100]}, int64(i+100))
			f.Sync()
			damaged = true
		}
		f.Close()
	}
	if !damaged {
		t.Fatal("the xattr value is not in the value log")
	}

	db, err := lsm.Open(testDir, engineOptions(e.mem))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := fs.Check(db)
	if err != nil {
		t.Fatalf("Check returned an error instead of a report: %v", err)
	}
	if r.OK() || !strings.Contains(r.String(), "checksum") {
		t.Errorf("Check did not report the damaged value:\n%s", r)
	}
	if r.Xattrs != 1 {
		t.Errorf("Check counted %d xattrs, want 1: the one after the damaged one\n%s", r.Xattrs, r)
	}
}
