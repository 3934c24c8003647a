package fs_test

import (
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
)

// TestDirHandleAtEndHoldsNoSnapshot: a directory handle read to its end
// holds no engine snapshot, so the data of a file deleted while the handle
// stays open is freed by compaction and value-log cleaning, as ext4 frees
// it at unlink. The snapshot stayed until the handle was closed (a file
// manager or watcher keeps directories open for hours; directory review).
func TestDirHandleAtEndHoldsNoSnapshot(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	sub := e.mustMkdir(1, "sub")
	ino, fh := e.mustCreate(1, "big")
	for off := uint64(0); off < 2<<20; off += 64 << 10 {
		e.mustWrite(ino, fh, off, pattern(64<<10, byte(off>>16)))
	}
	e.release(ino, fh)
	reclaim := func() uint64 {
		if err := e.db.Compact(nil, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := e.db.CleanValueLog(); err != nil {
			t.Fatal(err)
		}
		return e.db.Metrics().Vlog.Bytes
	}
	before := reclaim()
	dfh, _ := e.opendir(sub)
	e.readdirAt(sub, dfh, 0, 4096, false) // ls-like read; the handle stays open
	wantErr(t, "unlink", e.unlink(1, "big"), 0)
	held := reclaim()
	e.releasedir(sub, dfh)
	after := reclaim()
	t.Logf("value log: %d bytes with the file, %d after unlink with a read dir handle open, %d after closing it", before, held, after)
	if held > after+1<<20 {
		t.Errorf("an open directory handle kept %d bytes of a deleted file through compaction", held-after)
	}
}

// TestEstimatedBlocksNotCached: GETATTR of an open file whose buffered
// write goes into a hole (or over an existing block) reports st_blocks
// without that block, whose stored length is known only at the flush: the
// kernel must not cache that answer. It was cached for the attribute
// timeout (1 h), and the flush at close changed st_blocks with nothing to
// tell the kernel (mount: 0 blocks instead of 8 until a remount; ext4: 8;
// directory review).
func TestEstimatedBlocksNotCached(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	ino, fh := e.mustCreate(1, "f")
	wantErr(t, "truncate", e.truncate(ino, 1<<20), 0)
	e.release(ino, fh)
	fh = e.mustOpen(ino, 1 /* O_WRONLY */)
	e.mustWrite(ino, fh, 8192, pattern(4096, 1))
	in := fuse.GetAttrIn{InHeader: e.hdr(ino)}
	var out fuse.AttrOut
	if st := e.raw.GetAttr(nil, &in, &out); st != fuse.OK {
		t.Fatal(st)
	}
	e.release(ino, fh)
	final := e.attr(ino).Blocks
	if out.Blocks != final && out.AttrValid > 0 {
		t.Errorf("GETATTR while open: blocks %d, cacheable for %ds; after close the file has %d blocks and the kernel is not told", out.Blocks, out.AttrValid, final)
	}
}

// TestDeletedNodeTheKernelHolds: the kernel may hold a node (a working
// directory, an O_PATH descriptor: a lookup, no open handle) whose last name
// is removed; until it forgets the node, GETATTR answers with nlink 0 and a
// removed directory opens, as on ext4. lsmfs answered ENOENT (directory
// review). After FORGET the node is gone.
func TestDeletedNodeTheKernelHolds(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	ino, fh := e.mustCreate(1, "f")
	e.release(ino, fh)
	e.mustLookup(1, "f")
	wantErr(t, "unlink", e.unlink(1, "f"), 0)
	a, err := e.getattr(ino)
	if err != 0 || a.Nlink != 0 || a.Mode != syscall.S_IFREG|0o644 {
		t.Errorf("getattr of a held, unlinked file: nlink %d mode %#o, err %v; want nlink 0, no error", a.Nlink, a.Mode, err)
	}
	e.raw.Forget(ino, 1)
	if _, err := e.getattr(ino); err != syscall.ENOENT {
		t.Errorf("getattr after FORGET: %v, want ENOENT", err)
	}

	d := e.mustMkdir(1, "d") // a shell's working directory
	wantErr(t, "rmdir", e.rmdir(1, "d"), 0)
	if a, err := e.getattr(d); err != 0 || a.Nlink != 0 {
		t.Errorf("getattr of a removed working directory: nlink %d, err %v; want nlink 0, no error", a.Nlink, err)
	}
	dfh, err := e.opendir(d)
	wantErr(t, "opendir of a removed working directory", err, 0)
	ents, _, err := e.readdirAt(d, dfh, 0, 4096, false)
	wantErr(t, "readdir of a removed working directory", err, 0)
	for _, en := range ents {
		if en.Name != "." && en.Name != ".." {
			t.Errorf("a removed directory lists %q", en.Name)
		}
	}
	e.releasedir(d, dfh)

	// Rename over a file the kernel holds.
	x, xfh := e.mustCreate(1, "x")
	e.release(x, xfh)
	y, yfh := e.mustCreate(1, "y")
	e.release(y, yfh)
	wantErr(t, "rename", e.rename(1, "x", 1, "y", 0), 0)
	if a, err := e.getattr(y); err != 0 || a.Nlink != 0 {
		t.Errorf("getattr of a held file renamed over: nlink %d, err %v; want nlink 0, no error", a.Nlink, err)
	}
	e.check()
}
