package lsm_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

func filesWith(t *testing.T, m *vfs.MemFS, suffix string) []string {
	t.Helper()
	names, err := m.List("/db")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, suffix) {
			out = append(out, "/db/"+n)
		}
	}
	return out
}

func TestCheck(t *testing.T) {
	mem := vfs.NewMem()
	o := faultOptions(mem)
	if err := lsm.Format("/db", o); err != nil {
		t.Fatal(err)
	}
	db := openFault(t, mem, o)
	for i := 0; i < 3000; i++ {
		if err := put(db, fmt.Sprintf("k%05d", i), fmt.Sprintf("%d%s", i, strings.Repeat("c", i%300)), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro := *o
	ro.ReadOnly = true
	check := func(what string) lsm.CheckReport {
		t.Helper()
		db, err := lsm.Open("/db", &ro)
		if err != nil {
			t.Fatalf("%s: open: %v", what, err)
		}
		defer db.Close()
		r, err := db.Check()
		if err != nil {
			t.Fatalf("%s: check: %v", what, err)
		}
		t.Logf("%s: %s", what, r.String())
		return r
	}
	r := check("clean")
	if !r.OK() || r.Tables == 0 || r.Pointers == 0 || len(r.Garbage) != 0 {
		t.Fatalf("clean engine:\n%s", r.String())
	}

	// Garbage: a table and a manifest no one names.
	for _, name := range []string{"/db/999999.sst", "/db/MANIFEST-999998"} {
		f, _ := mem.Create(name)
		f.Write([]byte("junk"))
		f.Close()
	}
	r = check("garbage")
	if !r.OK() || len(r.Garbage) != 2 {
		t.Fatalf("garbage not listed (or taken for damage):\n%s", r.String())
	}

	count := func(r lsm.CheckReport) (tables, pointers int) {
		for _, p := range r.Problems {
			switch {
			case strings.HasPrefix(p, "table "):
				tables++
			case strings.Contains(p, "value pointer"):
				pointers++
			}
		}
		return tables, pointers
	}
	// A flipped byte in the middle of each value-log segment.
	for _, name := range filesWith(t, mem, ".vlog") {
		size, _ := mem.Stat(name)
		flipByte(t, mem, name, size.Size()/2, 0x5a)
	}
	r = check("damaged value log")
	if tables, pointers := count(r); tables != 0 || pointers == 0 {
		t.Fatalf("value-log damage not found (tables %d, pointers %d):\n%s", tables, pointers, r.String())
	}
	// And in a data block of each table.
	for _, name := range filesWith(t, mem, ".sst") {
		if !strings.HasSuffix(name, "999999.sst") {
			flipByte(t, mem, name, 20, 0x5a)
		}
	}
	r = check("damaged tables")
	if tables, _ := count(r); tables == 0 {
		t.Fatalf("table damage not found:\n%s", r.String())
	}
}
