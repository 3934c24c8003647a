package fs_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
)

func TestReaddirDotEntries(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	d := e.mustMkdir(1, "d")
	f, fh := e.mustCreate(d, "f")
	e.release(f, fh)
	ents := e.readdir(d)
	want := []fuse.DirEntry{
		{Name: ".", Ino: d, Mode: syscall.S_IFDIR, Off: 1},
		{Name: "..", Ino: 1, Mode: syscall.S_IFDIR, Off: 2},
		{Name: "f", Ino: f, Mode: syscall.S_IFREG, Off: 3},
	}
	if !reflect.DeepEqual(ents, want) {
		t.Fatalf("got %v\nwant %v", ents, want)
	}
	if ents := e.readdir(1); ents[1].Ino != 1 {
		t.Fatalf("root .. = %d", ents[1].Ino)
	}
	_, err := e.opendir(f)
	wantErr(t, "opendir file", err, syscall.ENOTDIR)
}

// TestReaddirSeek is posixtest's DirSeek (xfstests generic/257): after a
// full listing in small buffers, seeking to each entry's predecessor's
// cookie returns that entry.
func TestReaddirSeek(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	d := e.mustMkdir(1, "ttt")
	for i := 1; i <= 168; i++ {
		ino, fh := e.mustCreate(d, fmt.Sprint(i))
		e.release(ino, fh)
	}
	fh, _ := e.opendir(d)
	defer e.releasedir(d, fh)
	var all []fuse.DirEntry
	off := uint64(0)
	for {
		ents, _, err := e.readdirAt(d, fh, off, 300, false)
		wantErr(t, "readdir", err, 0)
		if len(ents) == 0 {
			break
		}
		all = append(all, ents...)
		off = ents[len(ents)-1].Off
	}
	if len(all) != 170 {
		t.Fatalf("%d entries, want 170", len(all))
	}
	for i := len(all) - 1; i >= 0; i-- {
		var seek uint64
		if i > 0 {
			seek = all[i-1].Off
		}
		ents, _, err := e.readdirAt(d, fh, seek, 300, false)
		if err != 0 || len(ents) == 0 || ents[0] != all[i] {
			t.Fatalf("seek to %d: got %v (%v), want %v", seek, ents, err, all[i])
		}
	}
	// Past the end.
	ents, _, _ := e.readdirAt(d, fh, 1000, 300, false)
	if len(ents) != 0 {
		t.Fatalf("read past the end: %v", ents)
	}
}

// TestReaddirConcurrentChanges lists a directory in small steps while
// entries are created and removed: every entry that survives from the
// opendir to the end is returned exactly once, and no entry twice.
func TestReaddirConcurrentChanges(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	d := e.mustMkdir(1, "d")
	live := map[string]bool{}
	for i := 0; i < 300; i++ {
		name := fmt.Sprintf("f%04d", rng.IntN(10000))
		if live[name] {
			continue
		}
		ino, fh := e.mustCreate(d, name)
		e.release(ino, fh)
		live[name] = true
	}
	initial := map[string]bool{}
	for n := range live {
		initial[n] = true
	}
	fh, _ := e.opendir(d)
	defer e.releasedir(d, fh)
	seen := map[string]int{}
	off := uint64(0)
	for step := 0; ; step++ {
		ents, _, err := e.readdirAt(d, fh, off, 200, step%2 == 1)
		wantErr(t, "readdir", err, 0)
		if len(ents) == 0 {
			break
		}
		for _, en := range ents {
			seen[en.Name]++
		}
		off = ents[len(ents)-1].Off
		// Change the directory between calls.
		for j := 0; j < 5; j++ {
			name := fmt.Sprintf("f%04d", rng.IntN(10000))
			if live[name] {
				wantErr(t, "unlink", e.unlink(d, name), 0)
				delete(live, name)
			} else {
				ino, fh := e.mustCreate(d, name)
				e.release(ino, fh)
				live[name] = true
			}
		}
	}
	for n, c := range seen {
		if c != 1 {
			t.Fatalf("seed %d: %q returned %d times", seed, n, c)
		}
	}
	for n := range initial {
		if live[n] && seen[n] == 0 {
			t.Fatalf("seed %d: surviving entry %q skipped", seed, n)
		}
	}
	// Rewind: the listing now shows the current directory.
	ents, _, _ := e.readdirAt(d, fh, 0, 1<<16, false)
	got := map[string]bool{}
	for _, en := range ents {
		if en.Name != "." && en.Name != ".." {
			got[en.Name] = true
		}
	}
	if !reflect.DeepEqual(got, live) {
		t.Fatalf("seed %d: after rewind %d names, want %d", seed, len(got), len(live))
	}
	e.check()
}

func TestReaddirPlus(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	d := e.mustMkdir(1, "d")
	a, fh := e.mustCreate(d, "a")
	e.mustWrite(a, fh, 0, []byte("12345")) // buffered: readdirplus sees it
	b, bfh := e.mustCreate(d, "b")
	e.release(b, bfh)
	dfh, _ := e.opendir(d)
	ents, outs, err := e.readdirAt(d, dfh, 0, 4096, true)
	wantErr(t, "readdirplus", err, 0)
	if len(ents) != 4 || outs[0].NodeId != 0 || outs[1].NodeId != 0 {
		t.Fatalf("entries %v outs %+v", ents, outs)
	}
	if outs[2].NodeId != a || outs[2].Size != 5 || outs[2].Mode != syscall.S_IFREG|0o644 || outs[3].NodeId != b {
		t.Fatalf("attrs %+v", outs[2:])
	}
	// Rewound, and read short of the end so that the snapshot stays.
	ents, _, _ = e.readdirAt(d, dfh, 0, 3*readdirPlusEntrySize, true)
	if len(ents) != 3 {
		t.Fatalf("a read of 3 entries' room returned %d", len(ents))
	}
	// After a change the snapshot is stale: a renamed entry gets no
	// attributes (no kernel dentry), an untouched one still does.
	if err := e.rename(d, "b", d, "c", 0); err != 0 {
		t.Fatal(err)
	}
	ents, outs, _ = e.readdirAt(d, dfh, 2, 4096, true)
	if len(ents) != 2 || ents[1].Name != "b" || outs[1].NodeId != 0 || outs[0].NodeId != a {
		t.Fatalf("stale snapshot: %v %+v", ents, outs)
	}
	e.releasedir(d, dfh)
	e.release(a, fh)
}

// readdirPlusEntrySize is the room a READDIRPLUS entry with a one-letter
// name takes in the reply: its fuse_entry_out (128 bytes) and fuse_dirent
// (24 bytes and the name, padded to 8).
const readdirPlusEntrySize = 128 + 24 + 8

// TestReaddirPlusMatchesStat: readdirplus reads its entries' inode records
// with one iterator (inodeCursor); the attributes it returns must be those
// GETATTR returns, whatever order the children's inode numbers come in
// (hard links and renames from elsewhere, new files), with files open and
// buffered, records changed between replies, entries removed, and records
// in the memtables and in tables. Seeded; random reply sizes.
func TestReaddirPlusMatchesStat(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			e := newEnv(t, fs.Options{}, fs.FormatOptions{})
			other := e.mustMkdir(1, "other")
			d := e.mustMkdir(1, "d")
			var elsewhere []uint64 // files made in other, older than most in d
			for i := range 40 {
				ino, fh := e.mustCreate(other, fmt.Sprintf("o%d", i))
				e.release(ino, fh)
				elsewhere = append(elsewhere, ino)
			}
			names := map[string]bool{}
			next := 0
			create := func() {
				name := fmt.Sprintf("f%04d", next)
				next++
				ino, fh := e.mustCreate(d, name)
				if rng.IntN(2) == 0 {
					e.mustWrite(ino, fh, 0, make([]byte, rng.IntN(10000)))
				}
				e.release(ino, fh)
				names[name] = true
			}
			for range 300 {
				create()
			}
			var open [][2]uint64 // ino, fh of files left open
			pick := func() (string, uint64) {
				for name := range names {
					return name, e.mustLookup(d, name)
				}
				t.Fatal("no names")
				return "", 0
			}
			mutate := func() {
				switch rng.IntN(8) {
				case 0:
					create()
				case 1: // chmod
					_, ino := pick()
					in := fuse.SetAttrIn{}
					in.NodeId, in.Valid, in.Mode = ino, fuse.FATTR_MODE, uint32(rng.IntN(0o777))
					if _, err := e.setattr(in); err != 0 {
						t.Fatal(err)
					}
				case 2: // open, write, keep open (buffered)
					_, ino := pick()
					fh := e.mustOpen(ino, syscall.O_RDWR)
					e.mustWrite(ino, fh, uint64(rng.IntN(50000)), []byte("data"))
					open = append(open, [2]uint64{ino, fh})
				case 3: // unlink (while open, at times)
					name, ino := pick()
					if rng.IntN(2) == 0 {
						open = append(open, [2]uint64{ino, e.mustOpen(ino, syscall.O_RDONLY)})
					}
					if err := e.unlink(d, name); err != 0 {
						t.Fatal(err)
					}
					delete(names, name)
				case 4: // a hard link to an older inode
					ino := elsewhere[rng.IntN(len(elsewhere))]
					name := fmt.Sprintf("l%04d", next)
					next++
					if _, err := e.link(ino, d, name); err == syscall.ENOENT {
						return // renamed into d and unlinked since
					} else if err != 0 {
						t.Fatal(err)
					}
					names[name] = true
				case 5: // rename an older file in
					if len(elsewhere) == 0 {
						return
					}
					i := rng.IntN(len(elsewhere))
					name := fmt.Sprintf("r%04d", next)
					next++
					if err := e.rename(other, fmt.Sprintf("o%d", i), d, name, 0); err != 0 {
						return // moved already
					}
					names[name] = true
				case 6: // close some open files
					if len(open) > 0 {
						i := rng.IntN(len(open))
						e.release(open[i][0], open[i][1])
						open = append(open[:i], open[i+1:]...)
					}
				case 7: // records into tables
					if err := e.db.Flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			for pass := range 12 {
				dfh, err := e.opendir(d)
				if err != 0 {
					t.Fatal(err)
				}
				off, seen := uint64(0), 0
				for {
					room := readdirPlusEntrySize * (1 + rng.IntN(40))
					ents, outs, err := e.readdirAt(d, dfh, off, room, true)
					if err != 0 {
						t.Fatal(err)
					}
					if len(ents) == 0 {
						break
					}
					for i, ent := range ents {
						if ent.Name == "." || ent.Name == ".." || outs[i].NodeId == 0 {
							continue
						}
						if outs[i].NodeId != ent.Ino {
							t.Fatalf("pass %d: %s: node %d, entry ino %d", pass, ent.Name, outs[i].NodeId, ent.Ino)
						}
						want, err := e.getattr(ent.Ino)
						if err != 0 {
							t.Fatalf("pass %d: getattr %s: %v", pass, ent.Name, err)
						}
						if outs[i].Attr != want {
							t.Fatalf("pass %d: %s (ino %d): readdirplus %+v, getattr %+v", pass, ent.Name, ent.Ino, outs[i].Attr, want)
						}
						seen++
					}
					off = ents[len(ents)-1].Off
					for range rng.IntN(3) {
						mutate() // between replies of one listing
					}
				}
				e.releasedir(d, dfh)
				if seen == 0 {
					t.Fatalf("pass %d: no entry with attributes", pass)
				}
				for range 20 {
					mutate()
				}
			}
			for _, o := range open {
				e.release(o[0], o[1])
			}
		})
	}
}

// TestReaddirPlusWhileClosing: a file written and closed over and over
// while its directory is listed; every listing that starts after a write
// shows at least that write's size, whether the file is still open (its
// buffer) or closed by then (its record). Readdirplus's cursor once
// returned the record as it was before a close that came during the reply.
func TestReaddirPlusWhileClosing(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	d := e.mustMkdir(1, "d")
	for i := range 200 { // listed before x: the reply's work before x's entry
		ino, fh := e.mustCreate(d, fmt.Sprintf("f%03d", i))
		e.release(ino, fh)
	}
	x, xfh := e.mustCreate(d, "x")
	e.release(x, xfh)
	var size atomic.Uint64 // the size after the last write
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for k := uint64(0); ; k++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			fh, err := e.open_(x, syscall.O_WRONLY)
			if err == 0 {
				if err = e.write(x, fh, k, []byte{'x'}); err == 0 {
					size.Store(k + 1) // buffered: stat sees it
				}
				e.release(x, fh) // writes the buffer
			}
			if err != 0 {
				done <- fmt.Errorf("write %d: %v", k, err)
				return
			}
		}
	}()
	defer func() {
		close(stop)
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	deadline := time.Now().Add(2 * time.Second)
	for n := 0; time.Now().Before(deadline); n++ {
		want := size.Load()
		dfh, err := e.opendir(d)
		if err != 0 {
			t.Fatal(err)
		}
		ents, outs, err := e.readdirAt(d, dfh, 0, 256<<10, true)
		e.releasedir(d, dfh)
		if err != 0 {
			t.Fatal(err)
		}
		for i, ent := range ents {
			if ent.Name == "x" && outs[i].NodeId != 0 && outs[i].Size < want {
				t.Fatalf("listing %d: readdirplus size %d, a write before it made it %d", n, outs[i].Size, want)
			}
		}
	}
}
