package fs

import (
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/lsm"
)

// TestInodeCursor: the cursor readdirplus reads inode records with is
// placed once two inode numbers in a row are close, then steps forward to
// each asked-for record within cursorSteps; it declines (the caller looks
// the record up) anything else: the first number, numbers far apart or
// going back, and a missing record, whatever record follows it. In the
// memtable and after a flush.
func TestInodeCursor(t *testing.T) {
	db := newTestDB(t)
	inos := []uint64{10, 100}
	for ino := uint64(20); ino <= 40; ino++ {
		if ino != 33 {
			inos = append(inos, ino)
		}
	}
	var b lsm.Batch
	for _, ino := range inos {
		b.Set(inodeKey(ino), encodeInode(&inode{Mode: 0o100644, Nlink: 1, Size: ino * 7}))
	}
	b.Set([]byte{famInode + 1, 0}, []byte("not an inode")) // past the family
	if err := db.Apply(&b, false); err != nil {
		t.Fatal(err)
	}
	f := &FS{db: db}
	check := func(t *testing.T) {
		var c inodeCursor
		defer c.close()
		for _, q := range []struct {
			ino uint64
			ok  bool
		}{
			{20, false}, // the first: no locality yet
			{21, true},  // placed (a seek)
			{25, true},  // stepped
			{24, false}, // back
			{30, true},  // stepped
			{33, false}, // missing: the cursor is at 34 now
			{34, true},
			{22, false}, // back
			{39, true},  // stepped from 34
			{41, false}, // missing: at 100
			{100, true},
			{5, false},
			{10, true}, // placed again
			{1000, false},
			{20, false}, // far from both the cursor and the last asked
			{24, true},  // placed
			{40, false}, // 16 ahead
			{36, false},
			{40, true}, // placed
			{41, false},
			{101, false}, // past the last record
			{102, false}, // a seek past the end
			{99, false},
			{100, true}, // placed from 99
		} {
			n, ok := c.get(f, q.ino)
			if ok != q.ok || ok && n.Size != q.ino*7 {
				t.Fatalf("get %d: ok %v size %d, want ok %v size %d", q.ino, ok, n.Size, q.ok, q.ino*7)
			}
		}
	}
	t.Run("memtable", check)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Run("tables", check)
}

// TestInodeCursorAfterClose: a file open with buffered writes when the
// cursor made its iterator, and closed (its buffer written) before its
// entry comes, gets the record as written, not the iterator's older view.
func TestInodeCursorAfterClose(t *testing.T) {
	f, _ := newTestFS(t, Options{})
	defer f.Close()
	var out fuse.EntryOut
	if st := f.Mkdir(nil, &fuse.MkdirIn{InHeader: fuse.InHeader{NodeId: 1}, Mode: 0o755}, "d", &out); st != fuse.OK {
		t.Fatal(st)
	}
	d := out.NodeId
	create := func(name string) (ino, fh uint64) {
		var cout fuse.CreateOut
		if st := f.Create(nil, &fuse.CreateIn{InHeader: fuse.InHeader{NodeId: d}, Mode: 0o644}, name, &cout); st != fuse.OK {
			t.Fatal(st)
		}
		return cout.NodeId, cout.Fh
	}
	a, afh := create("a")
	f.Release(nil, &fuse.ReleaseIn{Fh: afh})
	b, bfh := create("b")
	f.Release(nil, &fuse.ReleaseIn{Fh: bfh})
	x, xfh := create("x")
	if _, st := f.Write(nil, &fuse.WriteIn{InHeader: fuse.InHeader{NodeId: x}, Fh: xfh}, make([]byte, 5000)); st != fuse.OK {
		t.Fatal(st)
	}
	var cur inodeCursor
	defer cur.close()
	var eo fuse.EntryOut
	f.lookupForPlus(&cur, d, "a", a, true, &eo)
	f.lookupForPlus(&cur, d, "b", b, true, &eo) // places the cursor
	if cur.it == nil {
		t.Fatal("the cursor was not placed")
	}
	f.Release(nil, &fuse.ReleaseIn{Fh: xfh}) // writes x's buffer
	eo = fuse.EntryOut{}
	f.lookupForPlus(&cur, d, "x", x, true, &eo)
	var want fuse.AttrOut
	if st := f.GetAttr(nil, &fuse.GetAttrIn{InHeader: fuse.InHeader{NodeId: x}}, &want); st != fuse.OK {
		t.Fatal(st)
	}
	if eo.NodeId != x || eo.Attr != want.Attr || eo.Size != 5000 {
		t.Fatalf("x after its close: readdirplus %+v, getattr %+v", eo.Attr, want.Attr)
	}
}

// TestInodeCursorGivesWay: closes during a reply make the cursor drop its
// iterator; after cursorRemakes of them it answers nothing more, and the
// caller looks records up.
func TestInodeCursorGivesWay(t *testing.T) {
	f, _ := newTestFS(t, Options{})
	defer f.Close()
	var inos []uint64
	for i := range 12 {
		var cout fuse.CreateOut
		if st := f.Create(nil, &fuse.CreateIn{InHeader: fuse.InHeader{NodeId: 1}, Mode: 0o644}, string(rune('a'+i)), &cout); st != fuse.OK {
			t.Fatal(st)
		}
		f.Release(nil, &fuse.ReleaseIn{Fh: cout.Fh})
		inos = append(inos, cout.NodeId)
	}
	var cur inodeCursor
	defer cur.close()
	get := func(i int) bool {
		n, ok := cur.get(f, inos[i])
		if ok && n.Mode != 0o100644 {
			t.Fatalf("get %d: mode %o", inos[i], n.Mode)
		}
		return ok
	}
	get(0)
	if !get(1) || !get(2) {
		t.Fatal("the cursor was not placed")
	}
	for i := 3; i < 3+cursorRemakes; i++ {
		f.releases.Add(1) // a close elsewhere
		if i < 2+cursorRemakes && !get(i) {
			t.Fatalf("get %d after a close: declined before giving way", i)
		}
		if i == 2+cursorRemakes && get(i) {
			t.Fatalf("get %d after %d closes: still answering", i, cursorRemakes)
		}
	}
	if get(3+cursorRemakes) || get(4+cursorRemakes) {
		t.Fatal("answered after giving way")
	}
}
