package sstable_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/sstable"
)

var rewriteFixtures = flag.Bool("rewrite-fixtures", false, "rewrite testdata/fixtures (only when adding a format version)")

// fixtureTable is the content of the format fixtures: every kind, versions
// across blocks, compressible and incompressible values, range tombstones.
func fixtureTable() ([]kv, []base.RangeTombstone) {
	var kvs []kv
	for i := range 24 {
		u := fmt.Appendf(nil, "key-%02d", i)
		switch i % 4 {
		case 0:
			kvs = append(kvs, kv{base.MakeInternalKey(u, uint64(100+i), base.KindSet), []byte(strings.Repeat("abc", 20))})
		case 1:
			kvs = append(kvs, kv{base.MakeInternalKey(u, uint64(100+i), base.KindDelete), nil})
		case 2:
			kvs = append(kvs, kv{base.MakeInternalKey(u, uint64(100+i), base.KindValuePointer), []byte{byte(i), 0, 0, 0, 1, 2, 3, 4}})
		case 3:
			for s := uint64(9); s >= 5; s-- {
				kvs = append(kvs, kv{base.MakeInternalKey(u, s, base.KindSet), fmt.Appendf(nil, "v%d-%x", s, i*7919)})
			}
		}
	}
	tombs := []base.RangeTombstone{
		{Start: []byte("key-03"), End: []byte("key-07"), Seq: 200},
		{Start: []byte("key-03"), End: []byte("key-07"), Seq: 4},
		{Start: []byte("key-20"), End: []byte("zzz"), Seq: 150},
	}
	return kvs, tombs
}

// TestFormatFixtures opens tables written by earlier builds and compares
// their dump with the one checked in: a reader change that breaks an old
// table shows up here. Regenerate (-rewrite-fixtures) only when a new
// format version is added, and then add files, never replace them.
func TestFormatFixtures(t *testing.T) {
	dir := filepath.Join("testdata", "fixtures")
	if *rewriteFixtures {
		kvs, tombs := fixtureTable()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, opts := range map[string]sstable.WriterOptions{
			"v1.sst":              {BlockSize: 512, RestartInterval: 4, BloomBitsPerKey: 10},
			"v1-uncompressed.sst": {BlockSize: 256, BloomBitsPerKey: 10, DisableCompression: true},
		} {
			data, _ := writeTable(t, opts, kvs, tombs)
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	names, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no fixtures in %s: %v", dir, err)
	}
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		r := openBytes(t, data, sstable.ReaderOptions{FileName: filepath.Base(name)})
		var b strings.Builder
		if err := sstable.Dump(&b, r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		it := r.NewIter()
		if _, err := scanAll(it); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		it.Close()
		r.Close()
		dumpName := strings.TrimSuffix(name, ".sst") + ".dump"
		if *rewriteFixtures {
			if err := os.WriteFile(dumpName, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(dumpName)
		if err != nil {
			t.Fatal(err)
		}
		if b.String() != string(want) {
			t.Errorf("%s: dump differs from %s:\n%s", name, dumpName, b.String())
		}
	}
}

// TestImports keeps the package's arrows pointing down: it may import only
// lsm/internal/base, lsm/vfs and blockcache of ours.
func TestImports(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err) // a layering check must not vanish
	}
	allowed := map[string]bool{
		"github.com/lsmfs/lsmfs/lsm/internal/sstable": true,
		"github.com/lsmfs/lsmfs/lsm/internal/base":    true,
		"github.com/lsmfs/lsmfs/lsm/vfs":              true,
		"github.com/lsmfs/lsmfs/blockcache":           true,
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/lsmfs/lsmfs/") && !allowed[p] {
			t.Errorf("sstable depends on %s", p)
		}
	}
}
