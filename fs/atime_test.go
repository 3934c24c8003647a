package fs_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
)

// helloFile creates name in the root directory with 5 bytes, closed.
func helloFile(e *env, name string) uint64 {
	ino, fh := e.mustCreate(1, name)
	e.mustWrite(ino, fh, 0, []byte("hello"))
	e.release(ino, fh)
	return ino
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestRelatime: under the default policy a read moves the access time when
// it is not after the last change (mtime, ctime) or is a day old, and not
// otherwise; the time outlives a remount.
func TestRelatime(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	ino := helloFile(e, "f")
	a0 := e.attr(ino)
	if atimeOf(a0) > mtimeOf(a0) {
		t.Fatalf("atime %d after mtime %d before any read", atimeOf(a0), mtimeOf(a0))
	}
	fh := e.mustOpen(ino, syscall.O_RDONLY)
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
		ino := helloFile(e, "f")
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
	src := helloFile(e, "src")
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

// TestAtimeLazy: a read moves the access time in memory only: stat shows
// it at once, the engine gets no write until the flusher or Close, a time
// set by utimens replaces a pending one, and the table is bounded.
func TestAtimeLazy(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	var inos []uint64
	for _, name := range []string{"a", "b", "c"} {
		ino, fh := e.mustCreate(1, name)
		e.mustWrite(ino, fh, 0, []byte("hello"))
		e.release(ino, fh)
		inos = append(inos, ino)
	}
	a, b, c := inos[0], inos[1], inos[2]
	read := func(ino uint64) {
		t.Helper()
		fh := e.mustOpen(ino, syscall.O_RDONLY)
		e.mustRead(ino, fh, 0, 5)
		e.release(ino, fh)
	}
	lsn := e.db.Metrics().Journal.LastLSN
	read(a)
	read(b)
	if got := e.db.Metrics().Journal.LastLSN; got != lsn {
		t.Errorf("reads wrote to the engine: last lsn %d -> %d", lsn, got)
	}
	if n := e.fs.PendingAtimes(); n != 2 {
		t.Errorf("%d access times pending, want 2", n)
	}
	ra := e.attr(a)
	if atimeOf(ra) <= mtimeOf(ra) {
		t.Fatalf("stat after the read: atime %d, mtime %d", atimeOf(ra), mtimeOf(ra))
	}
	// utimens on b replaces its pending time.
	var in fuse.SetAttrIn
	in.NodeId, in.Valid, in.Atime = b, fuse.FATTR_ATIME, 1234
	if _, err := e.setattr(in); err != 0 {
		t.Fatal(err)
	}
	if n := e.fs.PendingAtimes(); n != 1 {
		t.Errorf("%d access times pending after utimens, want 1", n)
	}
	// At the bound a new time is not kept (the flusher is asked for a
	// pass; this env has none), and the table does not grow.
	fs.SetAtimeMax(t, 1)
	rc := e.attr(c)
	read(c)
	if n := e.fs.PendingAtimes(); n != 1 {
		t.Errorf("%d access times pending past the bound, want 1", n)
	}
	if got := atimeOf(e.attr(c)); got != atimeOf(rc) {
		t.Errorf("c's time kept past the bound: atime %d -> %d", atimeOf(rc), got)
	}
	e.remount()
	if got := atimeOf(e.attr(a)); got != atimeOf(ra) {
		t.Errorf("a after remount: atime %d, want %d", got, atimeOf(ra))
	}
	if got := atimeOf(e.attr(b)); got != 1234*1e9 {
		t.Errorf("b after remount: atime %d, want the utimens time", got)
	}
	if got := atimeOf(e.attr(c)); got != atimeOf(rc) {
		t.Errorf("c after remount: atime %d, want %d", got, atimeOf(rc))
	}
	e.check()
}

// TestAtimeHandles: a write-only handle's reads (the kernel's, before a
// partial-page write) are no access; under strictatime a read of buffered
// writes is.
func TestAtimeHandles(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	ino := helloFile(e, "f")
	before := atimeOf(e.attr(ino))
	fh := e.mustOpen(ino, syscall.O_WRONLY)
	e.mustRead(ino, fh, 0, 5)
	e.release(ino, fh)
	if a := atimeOf(e.attr(ino)); a != before {
		t.Errorf("read through a write-only handle: atime %d -> %d", before, a)
	}

	e = newEnv(t, fs.Options{Atime: fs.AtimeStrict}, fs.FormatOptions{})
	ino, fh = e.mustCreate(1, "f")
	e.mustWrite(ino, fh, 0, []byte("hello")) // buffered
	before = atimeOf(e.attr(ino))
	e.mustRead(ino, fh, 0, 5)
	if a := atimeOf(e.attr(ino)); a <= before {
		t.Errorf("strictatime, read of buffered writes: atime %d -> %d", before, a)
	}
	e.release(ino, fh)
}

// TestAtimeFlusher: the flusher writes a pending time and forgets it one
// pass later (a reply whose record was read before the write still finds
// it); a file removed with a time pending keeps that time in its ghost.
func TestAtimeFlusher(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{})
	ino := helloFile(e, "f")
	fh := e.mustOpen(ino, syscall.O_RDONLY)
	e.mustRead(ino, fh, 0, 5)
	read := atimeOf(e.attr(ino))
	lsn := e.db.Metrics().Journal.LastLSN
	e.fs.WriteAtimes()
	if got := e.db.Metrics().Journal.LastLSN; got == lsn {
		t.Fatal("the pass wrote nothing")
	}
	if n := e.fs.PendingAtimes(); n != 1 {
		t.Errorf("%d entries after the pass that wrote, want 1 (kept one more pass)", n)
	}
	e.fs.WriteAtimes()
	if n := e.fs.PendingAtimes(); n != 0 {
		t.Errorf("%d entries after the second pass, want 0", n)
	}
	if got := atimeOf(e.attr(ino)); got != read {
		t.Errorf("stored atime %d, want the read's %d", got, read)
	}
	// Removed while open, with a time pending: the ghost has it.
	e.clock.advance(25 * time.Hour)
	e.mustRead(ino, fh, 0, 5)
	read = atimeOf(e.attr(ino))
	if e.unlink(1, "f") != 0 {
		t.Fatal("unlink")
	}
	e.release(ino, fh) // the last release deletes the record
	e.fs.WriteAtimes()
	if n := e.fs.PendingAtimes(); n != 0 {
		t.Errorf("%d entries for a deleted inode, want 0", n)
	}
	if a, err := e.getattr(ino); err != 0 || atimeOf(a) != read {
		t.Errorf("ghost: %v, atime %d, want %d", err, atimeOf(a), read)
	}

	// With a flusher, the time reaches the engine on its own.
	e = newEnv(t, fs.Options{FlushAge: 10 * time.Millisecond}, fs.FormatOptions{})
	ino = helloFile(e, "f")
	fh = e.mustOpen(ino, syscall.O_RDONLY)
	e.mustRead(ino, fh, 0, 5)
	e.release(ino, fh)
	for deadline := time.Now().Add(10 * time.Second); e.fs.PendingAtimes() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the flusher left the access time pending")
		}
	}
	if a := e.attr(ino); atimeOf(a) <= mtimeOf(a) {
		t.Errorf("stored atime %d, mtime %d", atimeOf(a), mtimeOf(a))
	}
}
