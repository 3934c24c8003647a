package vfs_test

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestMemFileModel: random writes (zeros and data, across page boundaries),
// truncates, syncs and crash clones of one MemFS file agree with a plain
// byte slice for the current contents and another for the synced ones; a
// clone is independent of later writes to either side. MemFS shares pages
// between a file, its synced copy and clones, so this is what guards that
// sharing.
func TestMemFileModel(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		fill := rand.NewChaCha8([32]byte{byte(seed)})
		m := vfs.NewMem()
		f, err := m.Create("/f")
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SyncDir("/"); err != nil {
			t.Fatal(err)
		}
		var cur, synced []byte
		type clone struct {
			fs   *vfs.MemFS
			want []byte
		}
		var clones []clone
		check := func(fs *vfs.MemFS, want []byte, what string) {
			t.Helper()
			g, err := fs.Open("/f")
			if err != nil {
				t.Fatalf("seed %d: %s: %v", seed, what, err)
			}
			defer g.Close()
			if sz, _ := g.Size(); sz != int64(len(want)) {
				t.Fatalf("seed %d: %s: size %d, want %d", seed, what, sz, len(want))
			}
			got := make([]byte, len(want)+10)
			n, err := g.ReadAt(got, 0)
			if err != io.EOF || !bytes.Equal(got[:n], want) {
				t.Fatalf("seed %d: %s: contents differ (read %d of %d, %v)", seed, what, n, len(want), err)
			}
			// A read from the middle.
			if len(want) > 0 {
				off := rng.IntN(len(want))
				p := make([]byte, 1+rng.IntN(50000))
				n, _ := g.ReadAt(p, int64(off))
				if !bytes.Equal(p[:n], want[off:min(len(want), off+len(p))]) {
					t.Fatalf("seed %d: %s: read at %d differs", seed, what, off)
				}
			}
		}
		for op := 0; op < 300; op++ {
			switch r := rng.IntN(10); {
			case r < 5:
				off := rng.IntN(len(cur) + 40000)
				p := make([]byte, rng.IntN(40000))
				if rng.IntN(3) > 0 {
					fill.Read(p)
				}
				if _, err := f.WriteAt(p, int64(off)); err != nil {
					t.Fatal(err)
				}
				if end := off + len(p); end > len(cur) {
					cur = append(cur, make([]byte, end-len(cur))...)
				}
				copy(cur[off:], p)
			case r < 7:
				size := rng.IntN(len(cur) + 40000)
				if err := f.Truncate(int64(size)); err != nil {
					t.Fatal(err)
				}
				if size <= len(cur) {
					cur = cur[:size]
				} else {
					cur = append(cur, make([]byte, size-len(cur))...)
				}
			case r < 9:
				if err := f.Sync(); err != nil {
					t.Fatal(err)
				}
				synced = bytes.Clone(cur)
			default:
				clones = append(clones, clone{m.CrashClone(), bytes.Clone(synced)})
				if c := clones[len(clones)-1]; rng.IntN(2) == 0 {
					// Write to the clone: neither the original nor
					// other clones may see it.
					g, err := c.fs.OpenReadWrite("/f")
					if err != nil {
						t.Fatal(err)
					}
					if _, err := g.WriteAt([]byte("clone"), 3); err != nil {
						t.Fatal(err)
					}
					g.Close()
					if len(c.want) < 8 {
						c.want = append(c.want, make([]byte, 8-len(c.want))...)
					}
					copy(c.want[3:], "clone")
					clones[len(clones)-1] = c
				}
			}
			check(m, cur, "current")
		}
		check(m.CrashClone(), synced, "crash clone")
		for i, c := range clones {
			check(c.fs, c.want, "clone "+string(rune('a'+i%26)))
		}
		f.Close()
	}
}
