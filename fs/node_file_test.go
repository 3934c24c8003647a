package fs_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
)

const bs = 4 << 10 // the block size of these tests: many blocks per file

func newFileEnv(t *testing.T, o fs.Options) *env {
	return newEnv(t, o, fs.FormatOptions{BlockSize: bs})
}

func TestWriteReadAcrossHandles(t *testing.T) {
	e := newFileEnv(t, fs.Options{})
	ino, fh := e.mustCreate(1, "f")
	fh2 := e.mustOpen(ino, syscall.O_RDONLY)
	data := pattern(3*bs+100, 1)
	e.mustWrite(ino, fh, 0, data[:1000])
	e.mustWrite(ino, fh, 1000, data[1000:])
	// Unflushed writes are visible through the other handle and getattr.
	if got := e.mustRead(ino, fh2, 0, len(data)+50); !bytes.Equal(got, data) {
		t.Fatalf("read through second handle: %d bytes, mismatch", len(got))
	}
	if a := e.attr(ino); a.Size != uint64(len(data)) || a.Blocks == 0 {
		t.Fatalf("attr with buffered data: %+v", a)
	}
	if got := e.mustRead(ino, fh2, uint64(bs-10), 20); !bytes.Equal(got, data[bs-10:bs+10]) {
		t.Fatal("read across a block boundary")
	}
	if got := e.mustRead(ino, fh2, uint64(len(data)), 10); len(got) != 0 {
		t.Fatalf("read at EOF: %d bytes", len(got))
	}
	wantErr(t, "flush", e.flush(ino, fh), 0)
	if got := e.mustRead(ino, fh2, 0, len(data)); !bytes.Equal(got, data) {
		t.Fatal("read after flush")
	}
	// Overwrite the middle of flushed data: read-modify-write of a block.
	e.mustWrite(ino, fh, 10, []byte("XYZ"))
	copy(data[10:], "XYZ")
	if got := e.mustRead(ino, fh2, 0, len(data)); !bytes.Equal(got, data) {
		t.Fatal("read after overwrite")
	}
	e.release(ino, fh)
	e.release(ino, fh2)
	fh = e.mustOpen(ino, syscall.O_RDONLY)
	if got := e.mustRead(ino, fh, 0, len(data)); !bytes.Equal(got, data) {
		t.Fatal("read after release")
	}
	e.release(ino, fh)
	if a := e.attr(ino); a.Blocks != (uint64(len(data))+511)/512 {
		t.Fatalf("st_blocks %d for %d bytes", a.Blocks, len(data))
	}
	e.check()
}

func TestSparseFile(t *testing.T) {
	e := newFileEnv(t, fs.Options{})
	ino, fh := e.mustCreate(1, "sparse")
	e.mustWrite(ino, fh, 10*bs+5, []byte("tail"))
	e.mustWrite(ino, fh, 3, []byte("head"))
	e.flush(ino, fh)
	want := make([]byte, 10*bs+9)
	copy(want[3:], "head")
	copy(want[10*bs+5:], "tail")
	if got := e.mustRead(ino, fh, 0, len(want)+100); !bytes.Equal(got, want) {
		t.Fatal("sparse read mismatch")
	}
	a := e.attr(ino)
	if a.Size != uint64(len(want)) {
		t.Fatalf("size %d", a.Size)
	}
	// Two short blocks stored: 7 + 9 bytes, one 512-byte unit.
	if a.Blocks != 1 {
		t.Fatalf("st_blocks %d, want 1 (two short blocks)", a.Blocks)
	}
	// A hole read alone.
	if got := e.mustRead(ino, fh, 5*bs, 100); !bytes.Equal(got, make([]byte, 100)) {
		t.Fatal("hole is not zeros")
	}
	// While a handle open for writing exists (a shared writable mapping
	// may hold dirty pages lsmfs has not seen), the whole file is data.
	if off, err := e.lseek(ino, fh, bs, 3); err != 0 || off != bs {
		t.Fatalf("SEEK_DATA from hole, file open for writing: %d %v; want %d", off, err, bs)
	}
	if off, err := e.lseek(ino, fh, 0, 4); err != 0 || off != uint64(len(want)) {
		t.Fatalf("SEEK_HOLE, file open for writing: %d %v; want %d", off, err, len(want))
	}
	e.release(ino, fh)
	fh = e.mustOpen(ino, syscall.O_RDONLY)
	off, err := e.lseek(ino, fh, 100, 3) // SEEK_DATA
	if err != 0 || off != 100 {
		t.Fatalf("SEEK_DATA in data block: %d %v", off, err)
	}
	off, err = e.lseek(ino, fh, bs, 3)
	if err != 0 || off != 10*bs {
		t.Fatalf("SEEK_DATA from hole: %d %v", off, err)
	}
	off, err = e.lseek(ino, fh, 0, 4) // SEEK_HOLE
	if err != 0 || off != bs {
		t.Fatalf("SEEK_HOLE: %d %v", off, err)
	}
	off, err = e.lseek(ino, fh, 10*bs, 4)
	if err != 0 || off != uint64(len(want)) {
		t.Fatalf("SEEK_HOLE in last block: %d %v", off, err)
	}
	_, err = e.lseek(ino, fh, uint64(len(want)), 3)
	wantErr(t, "SEEK_DATA at EOF", err, syscall.ENXIO)
	_, err = e.lseek(ino, fh, uint64(len(want)), 4)
	wantErr(t, "SEEK_HOLE at EOF", err, syscall.ENXIO)
	_, err = e.lseek(ino, fh, uint64(len(want))+1, 4)
	wantErr(t, "SEEK_HOLE past EOF", err, syscall.ENXIO)
	e.release(ino, fh)
	e.check()
}

func TestTruncate(t *testing.T) {
	for _, size := range []int{100, 3 * bs, 40 * bs} { // point and range deletions
		e := newFileEnv(t, fs.Options{})
		ino, fh := e.mustCreate(1, "f")
		data := pattern(size+bs/2, 3)
		e.mustWrite(ino, fh, 0, data)
		// Truncate with buffered data: the buffer is flushed first.
		wantErr(t, "truncate down", e.truncate(ino, uint64(size/2)), 0)
		if got := e.mustRead(ino, fh, 0, size*2); !bytes.Equal(got, data[:size/2]) {
			t.Fatalf("size %d: read after truncate down: %d bytes", size, len(got))
		}
		e.check()
		wantErr(t, "truncate up", e.truncate(ino, uint64(size)), 0)
		want := append(bytes.Clone(data[:size/2]), make([]byte, size-size/2)...)
		if got := e.mustRead(ino, fh, 0, size*2); !bytes.Equal(got, want) {
			t.Fatalf("size %d: truncate up does not read zeros", size)
		}
		if a := e.attr(ino); a.Blocks != uint64(size/2+511)/512 {
			t.Fatalf("size %d: st_blocks %d after truncate up", size, a.Blocks)
		}
		// Writing past the end after a truncate up keeps the gap zero.
		e.mustWrite(ino, fh, uint64(size)+10, []byte("z"))
		want = append(want, make([]byte, 10)...)
		want = append(want, 'z')
		if got := e.mustRead(ino, fh, 0, size*2); !bytes.Equal(got, want) {
			t.Fatalf("size %d: write after truncate up", size)
		}
		e.flush(ino, fh)
		e.check()
		wantErr(t, "truncate to 0", e.truncate(ino, 0), 0)
		if a := e.attr(ino); a.Size != 0 || a.Blocks != 0 {
			t.Fatalf("after truncate to 0: %+v", a)
		}
		e.release(ino, fh)
		e.check()
	}
	e := newFileEnv(t, fs.Options{})
	d := e.mustMkdir(1, "d")
	wantErr(t, "truncate dir", e.truncate(d, 0), syscall.EISDIR)
}

func TestOpenTrunc(t *testing.T) {
	e := newFileEnv(t, fs.Options{})
	ino, fh := e.mustCreate(1, "f")
	e.mustWrite(ino, fh, 0, pattern(5*bs, 1))
	fh2 := e.mustOpen(ino, syscall.O_WRONLY|syscall.O_TRUNC)
	if a := e.attr(ino); a.Size != 0 || a.Blocks != 0 {
		t.Fatalf("after O_TRUNC: %+v", a)
	}
	e.release(ino, fh)
	e.release(ino, fh2)
	e.check()
}

func TestLargeWritesSplitAndBuffer(t *testing.T) {
	// A 256 KiB buffer flushes by itself; the test engine refuses batches
	// over 1 MiB, so a 4 MiB buffer's flush is split.
	for _, wbs := range []int{256 << 10, 4 << 20} {
		e := newFileEnv(t, fs.Options{WriteBufferSize: wbs})
		ino, fh := e.mustCreate(1, "big")
		data := pattern(3<<20+123, 9)
		for off := 0; off < len(data); off += 100 << 10 {
			e.mustWrite(ino, fh, uint64(off), data[off:min(off+100<<10, len(data))])
		}
		wantErr(t, "fsync", e.fsync(ino, fh), 0)
		e.release(ino, fh)
		fh = e.mustOpen(ino, syscall.O_RDONLY)
		if got := e.mustRead(ino, fh, 0, len(data)); !bytes.Equal(got, data) {
			t.Fatalf("buffer %d: data mismatch", wbs)
		}
		e.release(ino, fh)
		e.check()
		// Unlink of a large file: one range deletion.
		wantErr(t, "unlink", e.unlink(1, "big"), 0)
		e.check()
	}
}

func TestRandomWritesAgainstModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	e := newFileEnv(t, fs.Options{WriteBufferSize: 16 << 10})
	ino, fh := e.mustCreate(1, "f")
	var model []byte
	for i := 0; i < 400; i++ {
		switch op := rng.IntN(10); {
		case op < 6:
			off := rng.IntN(20 * bs)
			data := pattern(1+rng.IntN(2*bs), byte(i))
			e.mustWrite(ino, fh, uint64(off), data)
			if end := off + len(data); end > len(model) {
				model = append(model, make([]byte, end-len(model))...)
			}
			copy(model[off:], data)
		case op < 7:
			size := rng.IntN(20 * bs)
			wantErr(t, "truncate", e.truncate(ino, uint64(size)), 0)
			if size < len(model) {
				model = model[:size]
			} else {
				model = append(model, make([]byte, size-len(model))...)
			}
		case op < 8:
			off, n := rng.IntN(20*bs), 1+rng.IntN(4*bs)
			wantErr(t, "punch", e.fallocate(ino, fh, uint64(off), uint64(n), 3), 0)
			if off < len(model) {
				clear(model[off:min(off+n, len(model))])
			}
		case op < 9:
			e.flush(ino, fh)
		default:
			off := rng.IntN(len(model) + 1)
			n := rng.IntN(3 * bs)
			got := e.mustRead(ino, fh, uint64(off), n)
			want := model[off:min(off+n, len(model))]
			if !bytes.Equal(got, want) {
				t.Fatalf("seed %d step %d: read %d@%d mismatch", seed, i, n, off)
			}
		}
	}
	if got := e.mustRead(ino, fh, 0, len(model)+10); !bytes.Equal(got, model) {
		t.Fatalf("seed %d: final read mismatch", seed)
	}
	e.release(ino, fh)
	e.check()
}

func TestFallocate(t *testing.T) {
	e := newFileEnv(t, fs.Options{})
	ino, fh := e.mustCreate(1, "f")
	wantErr(t, "fallocate", e.fallocate(ino, fh, 1024, 4096, 0), 0)
	if a := e.attr(ino); a.Size != 1024+4096 {
		t.Fatalf("size after fallocate %d", a.Size)
	}
	e.mustWrite(ino, fh, 0, bytes.Repeat([]byte{42}, 100))
	wantErr(t, "keep size", e.fallocate(ino, fh, 50, 100000, 1), 0)
	if a := e.attr(ino); a.Size != 1024+4096 {
		t.Fatalf("KEEP_SIZE changed the size: %d", a.Size)
	}
	wantErr(t, "punch without keep", e.fallocate(ino, fh, 0, 10, 2), syscall.EINVAL)
	wantErr(t, "collapse", e.fallocate(ino, fh, 0, bs, 0x08), syscall.EOPNOTSUPP)
	wantErr(t, "zero length", e.fallocate(ino, fh, 0, 0, 0), syscall.EINVAL)
	// Zero range extends the size unless KEEP_SIZE.
	wantErr(t, "zero range", e.fallocate(ino, fh, 10, 20000, 0x10), 0)
	if a := e.attr(ino); a.Size != 20010 {
		t.Fatalf("size after zero range %d", a.Size)
	}
	want := make([]byte, 20010)
	copy(want, bytes.Repeat([]byte{42}, 10))
	if got := e.mustRead(ino, fh, 0, 30000); !bytes.Equal(got, want) {
		t.Fatal("zero range content")
	}
	e.release(ino, fh)
	e.check()
}

func TestPunchHole(t *testing.T) {
	e := newFileEnv(t, fs.Options{})
	ino, fh := e.mustCreate(1, "f")
	data := pattern(40*bs, 5)
	e.mustWrite(ino, fh, 0, data)
	// Punch the middle of one block, across blocks, and a large range.
	for _, r := range [][2]int{{10, 20}, {bs - 5, 2*bs + 7}, {5 * bs, 30 * bs}, {39*bs + 100, bs}} {
		wantErr(t, "punch", e.fallocate(ino, fh, uint64(r[0]), uint64(r[1]), 3), 0)
		clear(data[r[0]:min(r[0]+r[1], len(data))])
		if got := e.mustRead(ino, fh, 0, len(data)); !bytes.Equal(got, data) {
			t.Fatalf("punch %v: content", r)
		}
		e.check()
	}
	if a := e.attr(ino); a.Size != 40*bs || a.Blocks >= 40*bs/512 {
		t.Fatalf("after punches: size %d blocks %d", a.Size, a.Blocks)
	}
	e.release(ino, fh)
}

func TestCopyFileRange(t *testing.T) {
	e := newFileEnv(t, fs.Options{})
	src, sfh := e.mustCreate(1, "src")
	dst, dfh := e.mustCreate(1, "dst")
	data := pattern(5*bs+77, 2)
	e.mustWrite(src, sfh, 0, data)
	in := fuse.CopyFileRangeIn{InHeader: e.hdr(src), FhIn: sfh, OffIn: 100, NodeIdOut: dst, FhOut: dfh, OffOut: 10, Len: 1 << 40}
	n, st := e.raw.CopyFileRange(nil, &in)
	if st != fuse.OK || int(n) != len(data)-100 {
		t.Fatalf("copy_file_range: %d %v", n, st)
	}
	want := append(make([]byte, 10), data[100:]...)
	if got := e.mustRead(dst, dfh, 0, len(want)+10); !bytes.Equal(got, want) {
		t.Fatal("copied content")
	}
	// Overlapping ranges of one file.
	in = fuse.CopyFileRangeIn{InHeader: e.hdr(src), FhIn: sfh, OffIn: 0, NodeIdOut: src, FhOut: sfh, OffOut: 10, Len: 100}
	if _, st := e.raw.CopyFileRange(nil, &in); st != fuse.EINVAL {
		t.Fatalf("overlapping copy: %v", st)
	}
	e.release(src, sfh)
	e.release(dst, dfh)
	e.check()
}

func TestOrphanLifecycle(t *testing.T) {
	e := newFileEnv(t, fs.Options{})
	ino, fh := e.mustCreate(1, "f")
	e.mustWrite(ino, fh, 0, []byte("still here"))
	wantErr(t, "unlink", e.unlink(1, "f"), 0)
	// Open and unlinked: readable, writable, nlink 0, and an orphan.
	if a := e.attr(ino); a.Nlink != 0 || a.Size != 10 {
		t.Fatalf("orphan attr %+v", a)
	}
	e.mustWrite(ino, fh, 10, []byte("!"))
	if got := e.mustRead(ino, fh, 0, 100); string(got) != "still here!" {
		t.Fatalf("orphan read %q", got)
	}
	wantErr(t, "ftruncate orphan", e.truncate(ino, 5), 0)
	e.flush(ino, fh)
	r := mustCheck(t, e)
	if r.Orphans != 1 {
		t.Fatalf("orphans %d, want 1", r.Orphans)
	}
	e.release(ino, fh)
	if err := e.forgottenGetattr(ino); err != syscall.ENOENT {
		t.Fatalf("orphan survives last release: %v", err)
	}
	if r := mustCheck(t, e); r.Orphans != 0 || r.Inodes != 1 || r.Blocks != 0 {
		t.Fatalf("after release: %s", r)
	}
}

func TestOrphanRemovedDirectory(t *testing.T) {
	e := newFileEnv(t, fs.Options{})
	d := e.mustMkdir(1, "d")
	fh, err := e.opendir(d)
	wantErr(t, "opendir", err, 0)
	wantErr(t, "rmdir", e.rmdir(1, "d"), 0)
	if a := e.attr(d); a.Nlink != 0 || a.Mode&syscall.S_IFDIR == 0 {
		t.Fatalf("removed open dir: %+v", a)
	}
	ents, _, err := e.readdirAt(d, fh, 0, 4096, false)
	if err != 0 || len(ents) != 2 {
		t.Fatalf("readdir of removed dir: %v %v", ents, err)
	}
	_, err = e.mkdir(d, "x", 0o755)
	wantErr(t, "mkdir in removed dir", err, syscall.ENOENT)
	e.check()
	e.releasedir(d, fh)
	if err := e.forgottenGetattr(d); err != syscall.ENOENT {
		t.Fatalf("removed dir survives release: %v", err)
	}
	e.check()
}

func TestOrphansReclaimedAtNew(t *testing.T) {
	e := newFileEnv(t, fs.Options{})
	ino, fh := e.mustCreate(1, "f")
	e.mustWrite(ino, fh, 0, pattern(3*bs, 1))
	e.flush(ino, fh)
	wantErr(t, "unlink", e.unlink(1, "f"), 0)
	// The FS stops without the release (a crash, or an unmount with the file
	// open): the next New reclaims the orphan.
	if err := e.fs.Close(); err != nil {
		t.Fatal(err)
	}
	e.open()
	if _, err := e.getattr(ino); err != syscall.ENOENT {
		t.Fatalf("orphan not reclaimed by New: %v", err)
	}
	if r := mustCheck(t, e); r.Orphans != 0 || r.Blocks != 0 {
		t.Fatalf("after New: %s", r)
	}
}

func TestTmpfile(t *testing.T) {
	e := newFileEnv(t, fs.Options{})
	in := fuse.CreateIn{InHeader: e.hdr(1), Mode: 0o600, Flags: syscall.O_RDWR}
	var out fuse.CreateOut
	if st := e.raw.Tmpfile(nil, &in, &out); st != fuse.OK {
		t.Fatal(st)
	}
	ino, fh := out.NodeId, out.Fh
	e.mustWrite(ino, fh, 0, []byte("temporary"))
	if a := e.attr(ino); a.Nlink != 0 {
		t.Fatalf("tmpfile nlink %d", a.Nlink)
	}
	if names := e.names(1); len(names) != 0 {
		t.Fatalf("tmpfile listed: %v", names)
	}
	e.check()
	// linkat gives it a name: no longer an orphan.
	if _, err := e.link(ino, 1, "kept"); err != 0 {
		t.Fatal(err)
	}
	e.release(ino, fh)
	if a := e.attr(ino); a.Nlink != 1 || a.Size != 9 {
		t.Fatalf("linked tmpfile: %+v", a)
	}
	if r := mustCheck(t, e); r.Orphans != 0 {
		t.Fatalf("%s", r)
	}
	// An unlinked tmpfile disappears at release.
	if st := e.raw.Tmpfile(nil, &in, &out); st != fuse.OK {
		t.Fatal(st)
	}
	e.release(out.NodeId, out.Fh)
	if err := e.forgottenGetattr(out.NodeId); err != syscall.ENOENT {
		t.Fatalf("tmpfile survives release: %v", err)
	}
	e.check()
}

func TestSyncWrites(t *testing.T) {
	e := newFileEnv(t, fs.Options{})
	ino, fh, err := e.create(1, "f", 0o644, syscall.O_RDWR|syscall.O_SYNC)
	wantErr(t, "create", err, 0)
	e.mustWrite(ino, fh, 0, []byte("durable"))
	// An O_SYNC write leaves nothing buffered: Check sees it in the engine.
	if r := mustCheck(t, e); r.BlockBytes != 7 {
		t.Fatalf("O_SYNC write not in the engine: %s", r)
	}
	wantErr(t, "fsync clean", e.fsync(ino, fh), 0)
	e.release(ino, fh)
}

func TestWriteClearsSetuid(t *testing.T) {
	e := newFileEnv(t, fs.Options{})
	ino, fh := e.mustCreate(1, "f")
	var in fuse.SetAttrIn
	in.NodeId, in.Valid, in.Mode = ino, fuse.FATTR_MODE, 0o6755
	if _, err := e.setattr(in); err != 0 {
		t.Fatal(err)
	}
	e.mustWrite(ino, fh, 0, []byte("root keeps bits"))
	if a := e.attr(ino); a.Mode&0o7777 != 0o6755 {
		t.Fatalf("root write cleared bits: %#o", a.Mode)
	}
	e.caller.Uid = 1000
	e.mustWrite(ino, fh, 0, []byte("user clears"))
	if a := e.attr(ino); a.Mode&0o7777 != 0o755 {
		t.Fatalf("unprivileged write: mode %#o, want 0755", a.Mode)
	}
	e.release(ino, fh)
	if a := e.attr(ino); a.Mode&0o7777 != 0o755 {
		t.Fatalf("after flush: mode %#o, want 0755", a.Mode)
	}
	e.check()
}

func TestWriteRemovesCapabilities(t *testing.T) {
	e := newFileEnv(t, fs.Options{})
	ino, fh := e.mustCreate(1, "f")
	wantErr(t, "setxattr", e.setxattr(ino, "security.capability", []byte{1, 2, 3}, 0), 0)
	wantErr(t, "setxattr", e.setxattr(ino, "user.keep", []byte{1}, 0), 0)
	e.mustWrite(ino, fh, 0, []byte("root write"))
	e.flush(ino, fh)
	_, _, err := e.getxattr(ino, "security.capability", 100)
	wantErr(t, "capability after write", err, syscall.ENODATA)
	if _, _, err := e.getxattr(ino, "user.keep", 100); err != 0 {
		t.Fatalf("other xattr removed: %v", err)
	}
	wantErr(t, "setxattr", e.setxattr(ino, "security.capability", []byte{1, 2, 3}, 0), 0)
	var in fuse.SetAttrIn
	in.NodeId, in.Valid, in.Uid = ino, fuse.FATTR_UID, 5
	e.setattr(in)
	_, _, err = e.getxattr(ino, "security.capability", 100)
	wantErr(t, "capability after chown", err, syscall.ENODATA)
	e.release(ino, fh)
	e.check()
}

func TestEFBIGAndBadHandles(t *testing.T) {
	e := newFileEnv(t, fs.Options{})
	ino, fh := e.mustCreate(1, "f")
	wantErr(t, "write past max", e.write(ino, fh, 1<<62, []byte("x")), syscall.EFBIG)
	wantErr(t, "write bad fh", e.write(ino, 9999, 0, []byte("x")), syscall.EBADF)
	_, err := e.read(ino, 9999, 0, 10)
	wantErr(t, "read bad fh", err, syscall.EBADF)
	e.release(ino, fh)
}

func mustCheck(t *testing.T, e *env) fs.Report {
	t.Helper()
	r, err := fs.Check(e.db)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("Check:\n%s", r)
	}
	return r
}

// TestWriteOnlyHandlesAreDirect: on a kernel new enough (protocol 7.45),
// write-only handles bypass the kernel's page cache (FOPEN_DIRECT_IO), others
// keep it (FOPEN_KEEP_CACHE); with the writeback cache, or an older kernel,
// every handle keeps it. Read-only handles ask for no FLUSH at close
// (FOPEN_NOFLUSH).
func TestWriteOnlyHandlesAreDirect(t *testing.T) {
	for _, minor := range []uint32{44, 45} {
		for _, wbc := range []bool{false, true} {
			e := newFileEnv(t, fs.Options{WritebackCache: wbc})
			e.fs.SetKernelMinor(minor)
			for i, flags := range []uint32{syscall.O_WRONLY, syscall.O_RDWR, syscall.O_RDONLY, syscall.O_WRONLY | syscall.O_APPEND} {
				name := fmt.Sprintf("f%d", i)
				var co fuse.CreateOut
				if st := e.raw.Create(nil, &fuse.CreateIn{InHeader: e.hdr(1), Mode: 0o644, Flags: flags}, name, &co); st != fuse.OK {
					t.Fatalf("create %s: %v", name, st)
				}
				var oo fuse.OpenOut
				if st := e.raw.Open(nil, &fuse.OpenIn{InHeader: e.hdr(co.NodeId), Flags: flags}, &oo); st != fuse.OK {
					t.Fatalf("open %s: %v", name, st)
				}
				want := uint32(fuse.FOPEN_KEEP_CACHE)
				if minor >= 45 && !wbc && flags&syscall.O_ACCMODE == syscall.O_WRONLY {
					want |= fuse.FOPEN_DIRECT_IO
				}
				if flags&syscall.O_ACCMODE == syscall.O_RDONLY {
					want |= fuse.FOPEN_NOFLUSH
				}
				if co.OpenFlags != want || oo.OpenFlags != want {
					t.Errorf("kernel 7.%d, writeback cache %v, flags %#o: create %#x, open %#x; want %#x", minor, wbc, flags, co.OpenFlags, oo.OpenFlags, want)
				}
				e.release(co.NodeId, co.Fh)
				e.release(co.NodeId, oo.Fh)
			}
		}
	}
}
