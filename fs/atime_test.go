package fs_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
)

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestRelatime: under the default policy a read moves the access time when
// it is not after the last change (mtime, ctime) or is a day old, and not
// otherwise; the time outlives a remount. Reads that change nothing cost
// no write.
func TestRelatime(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	ino, fh := e.mustCreate(1, "f")
	e.mustWrite(ino, fh, 0, []byte("hello"))
	e.release(ino, fh)
	a0 := e.attr(ino)
	if atimeOf(a0) > mtimeOf(a0) {
		t.Fatalf("atime %d after mtime %d before any read", atimeOf(a0), mtimeOf(a0))
	}
	fh = e.mustOpen(ino, syscall.O_RDONLY)
	e.mustRead(ino, fh, 0, 5)
	a1 := e.attr(ino)
	if atimeOf(a1) <= mtimeOf(a1) || atimeOf(a1) <= ctimeOf(a1) {
		t.Fatalf("first read: atime %d, mtime %d, ctime %d: want atime after both", atimeOf(a1), mtimeOf(a1), ctimeOf(a1))
	}
	e.mustRead(ino, fh, 0, 5)
	if a := e.attr(ino); atimeOf(a) != atimeOf(a1) {
		t.Fatalf("second read moved atime %d -> %d", atimeOf(a1), atimeOf(a))
	}
	// A change (chmod: ctime) makes the next read update it again.
	var in fuse.SetAttrIn
	in.NodeId, in.Valid, in.Mode = ino, fuse.FATTR_MODE, 0o600
	e.setattr(in)
	e.mustRead(ino, fh, 0, 5)
	a2 := e.attr(ino)
	if atimeOf(a2) <= ctimeOf(a2) {
		t.Fatalf("read after chmod: atime %d, ctime %d", atimeOf(a2), ctimeOf(a2))
	}
	// A day later a read updates it whatever the other times are.
	e.clock.advance(25 * time.Hour)
	e.mustRead(ino, fh, 0, 5)
	a3 := e.attr(ino)
	if atimeOf(a3)-atimeOf(a2) < int64(25*time.Hour) {
		t.Fatalf("read a day later: atime %d -> %d", atimeOf(a2), atimeOf(a3))
	}
	e.release(ino, fh)
	e.remount()
	if a := e.attr(ino); atimeOf(a) != atimeOf(a3) {
		t.Fatalf("after remount: atime %d, want %d", atimeOf(a), atimeOf(a3))
	}
	e.check()
}

// TestAtimePolicies: strictatime updates on every read, noatime never,
// O_NOATIME handles never, and a read-only mount never (without failing
// the read).
func TestAtimePolicies(t *testing.T) {
	read := func(e *env, ino uint64, flags uint32) int64 {
		t.Helper()
		fh := e.mustOpen(ino, flags)
		e.mustRead(ino, fh, 0, 5)
		e.release(ino, fh)
		return atimeOf(e.attr(ino))
	}
	setup := func(o fs.Options) (*env, uint64, int64) {
		e := newEnv(t, o, fs.FormatOptions{})
		ino, fh := e.mustCreate(1, "f")
		e.mustWrite(ino, fh, 0, []byte("hello"))
		e.release(ino, fh)
		return e, ino, atimeOf(e.attr(ino))
	}

	e, ino, before := setup(fs.Options{Atime: fs.AtimeStrict})
	a1 := read(e, ino, syscall.O_RDONLY)
	a2 := read(e, ino, syscall.O_RDONLY)
	if !(before < a1 && a1 < a2) {
		t.Errorf("strictatime: atimes %d, %d, %d: want each read to move it", before, a1, a2)
	}
	if a := read(e, ino, syscall.O_RDONLY|syscall.O_NOATIME); a != a2 {
		t.Errorf("strictatime, O_NOATIME: atime %d -> %d", a2, a)
	}

	e, ino, before = setup(fs.Options{Atime: fs.AtimeNever})
	if a := read(e, ino, syscall.O_RDONLY); a != before {
		t.Errorf("noatime: atime %d -> %d", before, a)
	}

	e, ino, before = setup(fs.Options{})
	if a := read(e, ino, syscall.O_RDONLY|syscall.O_NOATIME); a != before {
		t.Errorf("relatime, O_NOATIME: atime %d -> %d", before, a)
	}
	e.close()
	e.opts.ReadOnly = true
	e.remount()
	if a := read(e, ino, syscall.O_RDONLY); a != before {
		t.Errorf("read-only: atime %d -> %d", before, a)
	}
}

// TestDirAtime: listing a directory from the start is a read of it
// (relatime), unless nodiratime; reading on from an offset is not.
func TestDirAtime(t *testing.T) {
	for _, nodir := range []bool{false, true} {
		e := newEnv(t, fs.Options{NoDirAtime: nodir}, fs.FormatOptions{})
		d := e.mustMkdir(1, "d")
		x, fh := e.mustCreate(d, "x")
		e.release(x, fh)
		before := e.attr(d)
		e.readdir(d)
		a := e.attr(d)
		if moved := atimeOf(a) != atimeOf(before); moved == nodir {
			t.Errorf("nodiratime=%v: listing moved atime %d -> %d", nodir, atimeOf(before), atimeOf(a))
		}
		if !nodir && atimeOf(a) <= mtimeOf(a) {
			t.Errorf("atime %d not after mtime %d", atimeOf(a), mtimeOf(a))
		}
		e.check()
	}
}

// TestCopyFileRangeAtime: copy_file_range reads its source.
func TestCopyFileRangeAtime(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	src, fh := e.mustCreate(1, "src")
	e.mustWrite(src, fh, 0, []byte("hello"))
	e.release(src, fh)
	before := atimeOf(e.attr(src))
	dst, dfh := e.mustCreate(1, "dst")
	sfh := e.mustOpen(src, syscall.O_RDONLY)
	if n, err := e.copyRange(src, sfh, 0, dst, dfh, 0, 5); err != 0 || n != 5 {
		t.Fatalf("copy_file_range: %d, %v", n, err)
	}
	if a := atimeOf(e.attr(src)); a <= before {
		t.Errorf("source atime %d -> %d", before, a)
	}
}
