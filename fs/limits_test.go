package fs_test

import (
	"bytes"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

const maxFS = uint64(1) << 62

func (e *env) copyRange(inIno, fhIn, offIn, outIno, fhOut, offOut, n uint64) (uint32, syscall.Errno) {
	in := fuse.CopyFileRangeIn{InHeader: e.hdr(outIno), FhIn: fhIn, OffIn: offIn, NodeIdOut: outIno, FhOut: fhOut, OffOut: offOut, Len: n}
	w, st := e.raw.CopyFileRange(nil, &in)
	return w, errno(st)
}

// newBigEnv is newEnv with a 64 MiB journal, so that a 1 MiB block fits a batch.
func newBigEnv(t *testing.T, fo fs.FormatOptions) *env {
	t.Helper()
	e := &env{t: t, mem: vfs.NewMem(), clock: &fakeClock{now: time.Unix(1_700_000_000, 0)}}
	eo := func() *lsm.Options {
		o := engineOptions(e.mem)
		o.Journal.Size = 16 << 20
		o.MemtableSize = 16 << 20
		return o
	}
	if err := lsm.Format(testDir, eo()); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open(testDir, eo())
	if err != nil {
		t.Fatal(err)
	}
	e.db = db
	fo.Clock = e.clock.Now
	if err := fs.Format(db, fo); err != nil {
		t.Fatal(err)
	}
	e.opts = fs.Options{Clock: e.clock.Now}
	e.open()
	t.Cleanup(e.close)
	return e
}

// Edge offsets at the maximum file size, for both block sizes.
func TestLimitsHugeOffsets(t *testing.T) {
	for _, blk := range []int{4 << 10, 1 << 20} {
		t.Run(fmt.Sprint(blk), func(t *testing.T) {
			e := newBigEnv(t, fs.FormatOptions{BlockSize: blk})
			ino, fh := e.mustCreate(1, "f")
			e.mustWrite(ino, fh, 0, []byte("head"))
			e.mustWrite(ino, fh, maxFS-3, []byte("end"))
			wantErr(t, "write past max", e.write(ino, fh, maxFS, []byte("x")), syscall.EFBIG)
			// A write crossing it is short: TestLimitsWriteCrossingMaxIsShort.
			wantErr(t, "write at 2^64-1", e.write(ino, fh, ^uint64(0), []byte("x")), syscall.EFBIG)
			if a := e.attr(ino); a.Size != maxFS {
				t.Fatalf("size %d", a.Size)
			}
			if got := e.mustRead(ino, fh, maxFS-5, 100); !bytes.Equal(got, []byte("\x00\x00end")) {
				t.Fatalf("read near max (buffered): %q", got)
			}
			wantErr(t, "flush", e.flush(ino, fh), 0)
			if got := e.mustRead(ino, fh, maxFS-5, 100); !bytes.Equal(got, []byte("\x00\x00end")) {
				t.Fatalf("read near max: %q", got)
			}
			if got := e.mustRead(ino, fh, ^uint64(0)-10, 100); len(got) != 0 {
				t.Fatalf("read at 2^64-11: %q", got)
			}
			// Read spanning blocks far out.
			if got := e.mustRead(ino, fh, maxFS-uint64(blk)-5, blk+10); len(got) != blk+5 || !bytes.Equal(got[len(got)-3:], []byte("end")) {
				t.Fatalf("spanning read: %d", len(got))
			}
			e.release(ino, fh)
			fh = e.mustOpen(ino, syscall.O_RDONLY)
			off, err := e.lseek(ino, fh, uint64(blk), 3)
			if err != 0 || off != (maxFS-3)/uint64(blk)*uint64(blk) {
				t.Fatalf("SEEK_DATA from 4: %d %v", off, err)
			}
			off, err = e.lseek(ino, fh, 0, 4)
			if err != 0 || off != uint64(blk) && off != 4 {
				t.Fatalf("SEEK_HOLE from 0: %d %v", off, err)
			}
			off, err = e.lseek(ino, fh, maxFS-2, 4)
			if err != 0 || off != maxFS {
				t.Fatalf("SEEK_HOLE near end: %d %v", off, err)
			}
			_, err = e.lseek(ino, fh, maxFS, 3)
			wantErr(t, "SEEK_DATA at end", err, syscall.ENXIO)
			_, err = e.lseek(ino, fh, ^uint64(0), 4)
			wantErr(t, "SEEK_HOLE at 2^64-1", err, syscall.ENXIO)
			if a := e.attr(ino); a.Blocks != uint64(4+blk+511)/512 {
				t.Fatalf("st_blocks %d", a.Blocks)
			}
			e.release(ino, fh)
			fh = e.mustOpen(ino, syscall.O_RDWR)
			// fallocate at the edge.
			wantErr(t, "falloc to max", e.fallocate(ino, fh, maxFS-1, 1, 0), 0)
			wantErr(t, "falloc past max", e.fallocate(ino, fh, maxFS-1, 2, 0), syscall.EFBIG)
			wantErr(t, "falloc off+len wraps", e.fallocate(ino, fh, ^uint64(0)-1, 4, 0), syscall.EFBIG)
			wantErr(t, "punch whole", e.fallocate(ino, fh, 1, maxFS-1, 3), 0)
			if got := e.mustRead(ino, fh, maxFS-5, 100); !bytes.Equal(got, make([]byte, 5)) {
				t.Fatalf("after punch: %q", got)
			}
			if got := e.mustRead(ino, fh, 0, 4); !bytes.Equal(got, []byte("h\x00\x00\x00")) {
				t.Fatalf("after punch head: %q", got)
			}
			if a := e.attr(ino); a.Blocks != 1 || a.Size != maxFS {
				t.Fatalf("after punch attr %+v", a)
			}
			e.mustWrite(ino, fh, maxFS-3, []byte("end"))
			wantErr(t, "zero range at end", e.fallocate(ino, fh, maxFS-2, 2, 0x10), 0)
			if got := e.mustRead(ino, fh, maxFS-3, 3); !bytes.Equal(got, []byte("e\x00\x00")) {
				t.Fatalf("after zero: %q", got)
			}
			// copy_file_range to the edge.
			src, sfh := e.mustCreate(1, "src")
			e.mustWrite(src, sfh, 0, []byte("0123456789"))
			e.flush(src, sfh)
			n, cerr := e.copyRange(src, sfh, 0, ino, fh, maxFS-4, 4)
			if cerr != 0 || n != 4 {
				t.Fatalf("copy to max-4: %d %v", n, cerr)
			}
			if n, cerr = e.copyRange(src, sfh, 0, ino, fh, maxFS-4, 5); cerr != 0 || n != 4 {
				t.Fatalf("copy of 5 bytes to max-4: %d %v; want 4 (short, as write)", n, cerr)
			}
			_, cerr = e.copyRange(src, sfh, 0, ino, fh, maxFS, 1)
			wantErr(t, "copy at max", cerr, syscall.EFBIG)
			_, cerr = e.copyRange(src, sfh, ^uint64(0)-2, ino, fh, 0, 5)
			t.Logf("copy from off_in 2^64-3: %v", cerr)
			if got := e.mustRead(ino, fh, maxFS-4, 10); string(got) != "0123" {
				t.Fatalf("after copy: %q", got)
			}
			// Truncation at the edge.
			wantErr(t, "truncate max+1", e.truncate(ino, maxFS+1), syscall.EFBIG)
			wantErr(t, "truncate 2^64-1", e.truncate(ino, ^uint64(0)), syscall.EFBIG)
			wantErr(t, "truncate max", e.truncate(ino, maxFS), 0)
			wantErr(t, "truncate max-2", e.truncate(ino, maxFS-2), 0)
			if got := e.mustRead(ino, fh, maxFS-4, 10); string(got) != "01" {
				t.Fatalf("after truncate: %q", got)
			}
			wantErr(t, "truncate 1", e.truncate(ino, 1), 0)
			if a := e.attr(ino); a.Size != 1 || a.Blocks != 1 {
				t.Fatalf("after truncate 1: %+v", a)
			}
			e.release(ino, fh)
			e.release(src, sfh)
			e.check()
			e.remount()
			e.check()
		})
	}
}

func TestLimitsNames(t *testing.T) {
	e := newFileEnv(t, fs.Options{})
	n255 := strings.Repeat("a", 255)
	n256 := strings.Repeat("a", 256)
	if _, err := e.mkdir(1, n255, 0o755); err != 0 {
		t.Fatalf("mkdir 255: %v", err)
	}
	_, err := e.mkdir(1, n256, 0o755)
	wantErr(t, "mkdir 256", err, syscall.ENAMETOOLONG)
	_, err = e.lookup(1, n256)
	wantErr(t, "lookup 256", err, syscall.ENAMETOOLONG)
	_, _, err = e.create(1, n256, 0o644, syscall.O_RDWR)
	wantErr(t, "create 256", err, syscall.ENAMETOOLONG)
	_, err = e.symlink(1, "t", n256)
	wantErr(t, "symlink 256", err, syscall.ENAMETOOLONG)
	_, err = e.mknod(1, n256, syscall.S_IFIFO|0o644, 0)
	wantErr(t, "mknod 256", err, syscall.ENAMETOOLONG)
	wantErr(t, "rename to 256", e.rename(1, n255, 1, n256, 0), syscall.ENAMETOOLONG)
	wantErr(t, "rename from 256", e.rename(1, n256, 1, "x", 0), syscall.ENAMETOOLONG)
	wantErr(t, "unlink 256", e.unlink(1, n256), syscall.ENAMETOOLONG)
	wantErr(t, "rmdir 256", e.rmdir(1, n256), syscall.ENAMETOOLONG)
	// Every byte 1..255 but '/'.
	var all []byte
	for b := 1; b < 256; b++ {
		if b != '/' {
			all = append(all, byte(b))
		}
	}
	name := string(all[:254])
	name2 := string(all[254:]) + string(all[:200])
	d := e.mustMkdir(1, "d")
	for _, nm := range []string{name, name2, "\xff", "\xff\xff", "\x01"} {
		ino, fh, err := e.create(d, nm, 0o644, syscall.O_RDWR)
		if err != 0 {
			t.Fatalf("create %q: %v", nm, err)
		}
		e.release(ino, fh)
		if got := e.mustLookup(d, nm); got != ino {
			t.Fatalf("lookup %q", nm)
		}
	}
	if got := e.names(d); len(got) != 5 {
		t.Fatalf("names: %q", got)
	}
	e.mustMkdir(d, "\xff\xff\xff")
	e.mustMkdir(e.mustLookup(d, "\xff\xff\xff"), "sub")
	if got := e.names(d); len(got) != 6 {
		t.Fatalf("names: %q", got)
	}
	wantErr(t, "rmdir nonempty", e.rmdir(d, "\xff\xff\xff"), syscall.ENOTEMPTY)
	// Symlink targets.
	t4095 := strings.Repeat("x", 4095)
	s, err := e.symlink(1, t4095, "s4095")
	if err != 0 {
		t.Fatalf("symlink 4095: %v", err)
	}
	if got, err := e.readlink(s); err != 0 || got != t4095 {
		t.Fatalf("readlink 4095: %d %v", len(got), err)
	}
	if a := e.attr(s); a.Size != 4095 {
		t.Fatalf("symlink size %d", a.Size)
	}
	_, err = e.symlink(1, t4095+"x", "s4096")
	wantErr(t, "symlink 4096", err, syscall.ENAMETOOLONG)
	_, err = e.symlink(1, "", "sempty")
	t.Logf("symlink empty target: %v (ext4: ENOENT from the kernel)", err)
	e.check()
}

func TestLimitsXattrs(t *testing.T) {
	e := newFileEnv(t, fs.Options{})
	ino, fh := e.mustCreate(1, "f")
	e.release(ino, fh)
	n255 := "user." + strings.Repeat("n", 250)
	big := bytes.Repeat([]byte{7}, 64<<10)
	wantErr(t, "set 255/64K", e.setxattr(ino, n255, big, 0), 0)
	if v, _, err := e.getxattr(ino, n255, 64<<10); err != 0 || !bytes.Equal(v, big) {
		t.Fatalf("get: %v", err)
	}
	wantErr(t, "name 256", e.setxattr(ino, n255+"x", nil, 0), syscall.ERANGE)
	wantErr(t, "value 64K+1", e.setxattr(ino, "user.b", append(big, 1), 0), syscall.E2BIG)
	_, _, err := e.getxattr(ino, n255+"x", 10)
	wantErr(t, "get 256", err, syscall.ERANGE)
	wantErr(t, "remove 256", e.removexattr(ino, n255+"x"), syscall.ERANGE)
	// Many xattrs: up to the list limit.
	i := 0
	for ; ; i++ {
		nm := fmt.Sprintf("user.%0250d", i)
		if err := e.setxattr(ino, nm, []byte("v"), 0); err != 0 {
			wantErr(t, "past list limit", err, syscall.ENOSPC)
			break
		}
	}
	_, sz, err := e.listxattr(ino, 0)
	t.Logf("%d xattrs, list size %d (%v)", i+1, sz, err)
	if sz > 64<<10 {
		t.Fatalf("list size %d > 64K", sz)
	}
	l, _, err := e.listxattr(ino, 64<<10)
	if err != 0 || len(l) != int(sz) {
		t.Fatalf("list: %v %d", err, len(l))
	}
	wantErr(t, "unlink", e.unlink(1, "f"), 0)
	e.check()
}

func TestLimitsTimesIDs(t *testing.T) {
	e := newFileEnv(t, fs.Options{})
	e.caller = fuse.Caller{Owner: fuse.Owner{Uid: ^uint32(0), Gid: ^uint32(0)}}
	ino, fh := e.mustCreate(1, "f")
	e.release(ino, fh)
	if a := e.attr(ino); a.Uid != ^uint32(0) || a.Gid != ^uint32(0) {
		t.Fatalf("ids %d %d", a.Uid, a.Gid)
	}
	e.caller = fuse.Caller{}
	for _, c := range []struct {
		sec  int64
		nsec uint32
		want int64
	}{
		{1<<63 - 1, 999999999, 9_223_372_035},
		{-1 << 63, 0, -9_223_372_035},
		{-1, 999999999, -1},
		{9_223_372_035, 999999999, 9_223_372_035},
		{9_223_372_036, 0, 9_223_372_035},
	} {
		var in fuse.SetAttrIn
		in.NodeId, in.Valid = ino, fuse.FATTR_MTIME|fuse.FATTR_ATIME
		in.Mtime, in.Mtimensec = uint64(c.sec), c.nsec
		in.Atime, in.Atimensec = uint64(c.sec), c.nsec
		if _, err := e.setattr(in); err != 0 {
			t.Fatalf("setattr %d: %v", c.sec, err)
		}
		a := e.attr(ino)
		if int64(a.Mtime) != c.want || int64(a.Atime) != c.want {
			t.Errorf("time %d.%d: got mtime %d.%d atime %d", c.sec, c.nsec, int64(a.Mtime), a.Mtimensec, int64(a.Atime))
		}
	}
	e.remount()
	e.check()
}

// Every engine configuration lsm accepts (journal >= 4 MiB, memtable >=
// 256 KiB) with every block size fs accepts (up to 1 MiB) must store a
// full block, or be refused at Format/New. A batch holding one 1 MiB block
// is larger than the engine's largest batch (a quarter of a 4 MiB journal,
// or a 1 MiB memtable): every write that fills a block fails with EIO at
// flush/close, and the data is lost.
func TestLimitsFullBlockFitsABatch(t *testing.T) {
	for _, c := range []struct {
		name     string
		journal  int64
		memtable int64
	}{
		{"journal=4MiB", 4 << 20, 16 << 20},
		{"memtable=1MiB", 64 << 20, 1 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			eo := func() *lsm.Options {
				o := engineOptions(mem)
				o.Journal.Size, o.MemtableSize = c.journal, c.memtable
				return o
			}
			if err := lsm.Format(testDir, eo()); err != nil {
				t.Fatal(err)
			}
			db, err := lsm.Open(testDir, eo())
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := fs.Format(db, fs.FormatOptions{BlockSize: 1 << 20}); err != nil {
				t.Logf("Format refused: %v", err)
				return
			}
			f, err := fs.New(db, fs.Options{FlushAge: -1})
			if err != nil {
				t.Logf("New refused: %v", err)
				return
			}
			defer f.Close()
			e := &env{t: t, mem: mem, db: db, fs: f, raw: f.Raw()}
			ino, fh := e.mustCreate(1, "f")
			e.mustWrite(ino, fh, 0, bytes.Repeat([]byte{1}, 1<<20))
			if err := e.flush(ino, fh); err != 0 {
				t.Fatalf("flush of one full 1 MiB block: %v", err)
			}
		})
	}
}

// A write that crosses the maximum file size writes what fits and returns
// a short count, as Linux's generic_write_check_limits does for ext4
// (EFBIG only when nothing fits). The kernel does not know lsmfs's limit
// (FUSE's s_maxbytes is 2^63-1), so lsmfs must do it: with O_DIRECT (and
// any write the kernel does not split at a page boundary) the whole write
// failed with EFBIG instead. copy_file_range the same.
func TestLimitsWriteCrossingMaxIsShort(t *testing.T) {
	e := newFileEnv(t, fs.Options{})
	ino, fh := e.mustCreate(1, "f")
	in := fuse.WriteIn{InHeader: e.hdr(ino), Fh: fh, Offset: maxFS - 1, Size: 2}
	n, st := e.raw.Write(nil, &in, []byte("ab"))
	if st != fuse.OK || n != 1 {
		t.Errorf("write of 2 bytes at max-1: %d, %v; want 1 (short write, as ext4)", n, st)
	}
	src, sfh := e.mustCreate(1, "src")
	e.mustWrite(src, sfh, 0, []byte("0123456789"))
	n, err := e.copyRange(src, sfh, 0, ino, fh, maxFS-4, 10)
	if err != 0 || n != 4 {
		t.Errorf("copy_file_range of 10 bytes to max-4: %d, %v; want 4", n, err)
	}
}
