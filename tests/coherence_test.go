package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// coherence scenarios: each runs in a fresh directory on ext4 (under
// /var/tmp) and on lsmfs, recording what a user observes; the two records
// must agree line for line.

type observer struct {
	t     *testing.T
	lines []string
}

func (o *observer) see(format string, args ...any) {
	o.lines = append(o.lines, fmt.Sprintf(format, args...))
}

func (o *observer) must(err error, what string) {
	o.t.Helper()
	if err != nil {
		o.t.Fatalf("%s: %v", what, err)
	}
}

func (o *observer) stat(p string) unix.Stat_t {
	o.t.Helper()
	var st unix.Stat_t
	o.must(unix.Stat(p, &st), "stat "+p)
	return st
}

func (o *observer) fstat(fd int) unix.Stat_t {
	o.t.Helper()
	var st unix.Stat_t
	o.must(unix.Fstat(fd, &st), "fstat")
	return st
}

func (o *observer) open(p string, flags int) int {
	o.t.Helper()
	fd, err := unix.Open(p, flags|unix.O_CLOEXEC, 0o644)
	o.must(err, "open "+p)
	o.t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func (o *observer) pwrite(fd int, b []byte, off int64) {
	o.t.Helper()
	n, err := unix.Pwrite(fd, b, off)
	o.must(err, "pwrite")
	if n != len(b) {
		o.t.Fatalf("short pwrite %d of %d", n, len(b))
	}
}

func (o *observer) pread(fd int, n int, off int64) []byte {
	o.t.Helper()
	b := make([]byte, n)
	got, err := unix.Pread(fd, b, off)
	o.must(err, "pread")
	return b[:got]
}

func mtimeNs(st unix.Stat_t) int64 { return st.Mtim.Nano() }
func ctimeNs(st unix.Stat_t) int64 { return st.Ctim.Nano() }

// tick sleeps long enough for coarse timestamps to move.
func tick() { time.Sleep(30 * time.Millisecond) }

func digest(b []byte) string {
	nz := 0
	for _, c := range b {
		if c != 0 {
			nz++
		}
	}
	return fmt.Sprintf("len=%d nonzero=%d head=%q", len(b), nz, b[:min(8, len(b))])
}

type scenario func(o *observer, dir string)

// compareWithExt4 runs sc on ext4 and on a fresh lsmfs (mounted with
// mountOpts) and fails t where the observations differ.
func compareWithExt4(t *testing.T, mountOpts string, sc scenario) {
	t.Helper()
	extDir, err := os.MkdirTemp("/var/tmp", "coherence-ext4-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(extDir) })
	var ext, lsm []string
	t.Run("ext4", func(t *testing.T) {
		o := &observer{t: t}
		sc(o, extDir)
		ext = o.lines
	})
	t.Run("lsmfs", func(t *testing.T) {
		f := newFS(t, fsOptions{mountOpts: mountOpts})
		dir := f.path("d")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		o := &observer{t: t}
		sc(o, dir)
		lsm = o.lines
	})
	for i := range max(len(ext), len(lsm)) {
		var e, l string
		if i < len(ext) {
			e = ext[i]
		}
		if i < len(lsm) {
			l = lsm[i]
		}
		if e != l {
			t.Errorf("observation %d differs:\n  ext4:  %s\n  lsmfs: %s", i, e, l)
		}
	}
}

func TestCoherenceMmapMtime(t *testing.T) {
	compareWithExt4(t, "", func(o *observer, dir string) {
		p := filepath.Join(dir, "f")
		fd := o.open(p, unix.O_RDWR|unix.O_CREAT)
		o.must(unix.Ftruncate(fd, 64<<10), "ftruncate")
		st0 := o.stat(p)
		o.see("sparse: size=%d blocks=%d", st0.Size, st0.Blocks)
		tick()
		m, err := unix.Mmap(fd, 0, 64<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		o.must(err, "mmap")
		defer unix.Munmap(m)
		copy(m[8192:], bytes.Repeat([]byte("m"), 4096))
		o.must(unix.Msync(m, unix.MS_SYNC), "msync")
		st1 := o.stat(p)
		o.see("after mmap write+msync: mtime advanced=%v blocks>0=%v size=%d", mtimeNs(st1) > mtimeNs(st0), st1.Blocks > 0, st1.Size)
		o.must(unix.Munmap(m), "munmap")
		unix.Close(fd)
		st2 := o.stat(p)
		o.see("after close: mtime advanced=%v blocks=%d", mtimeNs(st2) > mtimeNs(st0), st2.Blocks)
	})
}

func TestCoherenceHardLinkAttrs(t *testing.T) {
	compareWithExt4(t, "", func(o *observer, dir string) {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		o.must(os.WriteFile(a, bytes.Repeat([]byte("a"), 4096), 0o644), "write a")
		o.must(os.Link(a, b), "link")
		st0 := o.stat(b)
		o.see("b: nlink=%d size=%d blocks=%d", st0.Nlink, st0.Size, st0.Blocks)
		tick()
		fd := o.open(a, unix.O_RDWR)
		o.pwrite(fd, bytes.Repeat([]byte("x"), 8192), 4096)
		st1 := o.stat(b)
		o.see("b after write via a (open): size=%d blocks=%d mtime advanced=%v ctime advanced=%v", st1.Size, st1.Blocks, mtimeNs(st1) > mtimeNs(st0), ctimeNs(st1) > ctimeNs(st0))
		got, err := os.ReadFile(b)
		o.must(err, "read b")
		o.see("b content: %s", digest(got))
		o.must(unix.Fchmod(fd, 0o600), "fchmod")
		o.see("b mode after fchmod via a: %o", o.stat(b).Mode&0o7777)
		unix.Close(fd)
		st2 := o.stat(b)
		o.see("b after close: size=%d blocks=%d mtime same as while open=%v", st2.Size, st2.Blocks, mtimeNs(st2) == mtimeNs(st1))
		tick()
		o.must(os.Remove(a), "unlink a")
		st3 := o.stat(b)
		o.see("b after unlink a: nlink=%d ctime advanced=%v", st3.Nlink, ctimeNs(st3) > ctimeNs(st2))
	})
}

func TestCoherenceTruncateWhileMapped(t *testing.T) {
	compareWithExt4(t, "", func(o *observer, dir string) {
		page := os.Getpagesize()
		p := filepath.Join(dir, "f")
		o.must(os.WriteFile(p, bytes.Repeat([]byte("a"), 3*page), 0o644), "write")
		fd1 := o.open(p, unix.O_RDWR)
		fd2 := o.open(p, unix.O_RDWR)
		m, err := unix.Mmap(fd2, 0, 3*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		o.must(err, "mmap")
		defer unix.Munmap(m)
		copy(m[2*page:], "dirty in mapping") // a dirty page past the new size
		_ = m[0]
		o.must(unix.Ftruncate(fd1, int64(page+100)), "ftruncate down")
		o.see("map[0:page+100]: %s", digest(bytes.Clone(m[:page+100])))
		o.see("map[page+100:2page]: %s", digest(bytes.Clone(m[page+100:2*page])))
		o.must(unix.Ftruncate(fd1, int64(3*page)), "ftruncate up")
		o.see("map after extend: %s ; page2 %s", digest(bytes.Clone(m[page+100:2*page])), digest(bytes.Clone(m[2*page:])))
		o.see("read fd1: %s", digest(o.pread(fd1, 3*page+10, 0)))
		o.see("read tail fd1: %s", digest(o.pread(fd1, 3*page, int64(page+100))))
		o.must(unix.Fsync(fd2), "fsync")
		st := o.fstat(fd1)
		o.see("size=%d blocks>0=%v", st.Size, st.Blocks > 0) // lsmfs stores short blocks short: counts differ by design
	})
}

func TestCoherencePunchHole(t *testing.T) {
	compareWithExt4(t, "", func(o *observer, dir string) {
		p := filepath.Join(dir, "f")
		fd := o.open(p, unix.O_RDWR|unix.O_CREAT)
		o.pwrite(fd, bytes.Repeat([]byte("p"), 16*4096), 0)
		o.must(unix.Fsync(fd), "fsync")
		rd := o.open(p, unix.O_RDONLY)
		o.see("before: %s", digest(o.pread(rd, 1<<20, 0)))
		o.must(unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 4096, 8192), "punch")
		st := o.fstat(rd)
		o.see("after aligned punch: size=%d blocks=%d", st.Size, st.Blocks)
		o.see("read: %s", digest(o.pread(rd, 1<<20, 0)))
		h, err := unix.Seek(rd, 0, unix.SEEK_HOLE)
		o.must(err, "seek hole")
		d, err := unix.Seek(rd, 4096, unix.SEEK_DATA)
		o.must(err, "seek data")
		// fd stays open for writing: lsmfs then reports holes as data (a
		// shared mapping may hold dirty pages it has not seen), which
		// POSIX allows. Data must never be reported as a hole.
		o.see("no data before the first hole: %v; no data skipped: %v", h >= 4096, d <= 12288)
		o.must(unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 20000, 10000), "punch unaligned")
		st = o.fstat(rd)
		o.see("after unaligned punch: size=%d blocks=%d read=%s", st.Size, st.Blocks, digest(o.pread(rd, 1<<20, 0)))
		o.must(unix.Fallocate(fd, unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, 50000, 1000), "zero keep")
		o.see("after zero range: read=%s", digest(o.pread(rd, 1<<20, 0)))
		o.must(unix.Fallocate(fd, unix.FALLOC_FL_ZERO_RANGE, 16*4096-10, 1000), "zero extend")
		st = o.fstat(rd)
		o.see("after zero range extending: size=%d read=%s", st.Size, digest(o.pread(rd, 1<<20, 0)))
		o.must(unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 1<<20), "punch all")
		st = o.fstat(rd)
		// At most one block: lsmfs reports one while a file that stores
		// nothing is open for writing (see TestCoherenceMmapCopy).
		o.see("after punch all: size=%d blocks<=1=%v read=%s", st.Size, st.Blocks <= 1, digest(o.pread(rd, 1<<20, 0)))
	})
}

func TestCoherenceCopyFileRange(t *testing.T) {
	compareWithExt4(t, "", func(o *observer, dir string) {
		src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
		sfd := o.open(src, unix.O_RDWR|unix.O_CREAT)
		o.pwrite(sfd, bytes.Repeat([]byte("s"), 10000), 0)
		o.pwrite(sfd, bytes.Repeat([]byte("t"), 5000), 100000)
		dfd := o.open(dst, unix.O_RDWR|unix.O_CREAT)
		o.pwrite(dfd, bytes.Repeat([]byte("d"), 20000), 0)
		rd := o.open(dst, unix.O_RDONLY)
		o.see("dst before: %s", digest(o.pread(rd, 1<<20, 0))) // cache it
		st0 := o.fstat(rd)
		tick()
		in, out := int64(5000), int64(3000)
		n, err := unix.CopyFileRange(sfd, &in, dfd, &out, 200000, 0)
		o.must(err, "copy_file_range")
		o.see("copied %d", n)
		st1 := o.fstat(rd)
		o.see("dst: size=%d mtime advanced=%v", st1.Size, mtimeNs(st1) > mtimeNs(st0))
		got := o.pread(rd, 1<<20, 0)
		o.see("dst read: %s", digest(got))
		o.see("dst[2990:3010]=%q dst[7990:8010]=%q", got[2990:3010], got[7990:8010])
		// The source's dirty mmap pages must be copied.
		m, err := unix.Mmap(sfd, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		o.must(err, "mmap")
		defer unix.Munmap(m)
		copy(m, "MAPPED")
		in, out = 0, 0
		_, err = unix.CopyFileRange(sfd, &in, dfd, &out, 100, 0)
		o.must(err, "copy_file_range 2")
		o.see("dst head after copying from dirty map: %q", o.pread(rd, 8, 0))
	})
}

func TestCoherenceSparseCp(t *testing.T) { compareWithExt4(t, "", sparseCp) }

func TestCoherenceSparseCpWritebackCache(t *testing.T) {
	compareWithExt4(t, "writeback_cache", sparseCp)
}

func sparseCp(o *observer, dir string) {
	{
		src := filepath.Join(dir, "src")
		fd := o.open(src, unix.O_RDWR|unix.O_CREAT)
		o.pwrite(fd, bytes.Repeat([]byte("a"), 8192), 0)
		o.pwrite(fd, bytes.Repeat([]byte("b"), 4096), 1<<20)
		o.must(unix.Ftruncate(fd, 2<<20), "ftruncate")
		// still open, writes possibly buffered
		for _, mode := range []string{"always", "auto"} {
			dst := filepath.Join(dir, "dst-"+mode)
			if out, err := exec.Command("cp", "--sparse="+mode, src, dst).CombinedOutput(); err != nil {
				o.t.Fatalf("cp: %v %s", err, out)
			}
			st := o.stat(dst)
			got, err := os.ReadFile(dst)
			o.must(err, "read")
			want, _ := os.ReadFile(src)
			o.see("cp --sparse=%s: size=%d blocks=%d same=%v", mode, st.Size, st.Blocks, bytes.Equal(got, want))
		}
		// Dirty mmap pages in a hole must count as data for SEEK_DATA.
		m, err := unix.Mmap(fd, 0, 2<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		o.must(err, "mmap")
		defer unix.Munmap(m)
		copy(m[1536<<10:], "mapped data in a hole")
		d, err := unix.Seek(fd, 1100<<10, unix.SEEK_DATA)
		o.see("SEEK_DATA after mmap write into hole finds it: %v (%v)", err == nil && d <= 1536<<10, err)
		dst := filepath.Join(dir, "dst-mapped")
		if out, err := exec.Command("cp", "--sparse=always", src, dst).CombinedOutput(); err != nil {
			o.t.Fatalf("cp: %v %s", err, out)
		}
		got, _ := os.ReadFile(dst)
		o.see("copy has mapped data: %v", bytes.Contains(got, []byte("mapped data in a hole")))
	}
}

func TestCoherenceRenameOverOpen(t *testing.T) {
	compareWithExt4(t, "", func(o *observer, dir string) {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		o.must(os.WriteFile(a, []byte("old contents of a"), 0o644), "write a")
		fd := o.open(a, unix.O_RDWR)
		o.see("fd reads: %q", o.pread(fd, 100, 0))
		o.must(os.WriteFile(b, []byte("new"), 0o644), "write b")
		o.must(os.Rename(b, a), "rename")
		o.see("fd reads after rename: %q", o.pread(fd, 100, 0))
		got, _ := os.ReadFile(a)
		o.see("path reads: %q", got)
		st := o.fstat(fd)
		o.see("fd nlink=%d size=%d", st.Nlink, st.Size)
		o.pwrite(fd, []byte("WRITTEN"), 0)
		o.see("fd reads own write: %q", o.pread(fd, 100, 0))
		got, _ = os.ReadFile(a)
		o.see("path still reads: %q", got)
		st = o.fstat(fd)
		o.see("fd after write: nlink=%d size=%d blocks>0=%v", st.Nlink, st.Size, st.Blocks > 0)
		o.must(unix.Ftruncate(fd, 3), "ftruncate unlinked")
		o.see("fd after truncate: %q size=%d", o.pread(fd, 100, 0), o.fstat(fd).Size)
	})
}

func TestCoherenceODirect(t *testing.T) {
	compareWithExt4(t, "", func(o *observer, dir string) {
		p := filepath.Join(dir, "f")
		fd1 := o.open(p, unix.O_RDWR|unix.O_CREAT)
		o.pwrite(fd1, bytes.Repeat([]byte("b"), 3*4096), 0)
		fd2 := o.open(p, unix.O_RDWR|unix.O_DIRECT)
		buf, err := unix.Mmap(-1, 0, 3*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
		o.must(err, "anon")
		defer unix.Munmap(buf)
		n, err := unix.Pread(fd2, buf, 0)
		o.must(err, "direct read")
		o.see("direct read of buffered write: n=%d %s", n, digest(buf[:n]))
		// cache it through fd1 and a mapping
		o.see("buffered read: %s", digest(o.pread(fd1, 3*4096, 0)))
		m, err := unix.Mmap(fd1, 0, 3*4096, unix.PROT_READ, unix.MAP_SHARED)
		o.must(err, "mmap")
		defer unix.Munmap(m)
		_ = m[4096]
		copy(buf, bytes.Repeat([]byte("D"), 4096))
		_, err = unix.Pwrite(fd2, buf[:4096], 4096)
		o.must(err, "direct write")
		o.see("buffered read after direct write: %q", o.pread(fd1, 4, 4094))
		o.see("map after direct write: %q", bytes.Clone(m[4094:4098]))
		// direct write extending the file
		_, err = unix.Pwrite(fd2, buf[:4096], 3*4096)
		o.must(err, "direct write extend")
		o.see("size=%d tail=%q", o.fstat(fd1).Size, o.pread(fd1, 4, 3*4096))
		// buffered write after direct, direct read sees it
		o.pwrite(fd1, []byte("BUF"), 4096)
		n, err = unix.Pread(fd2, buf[:4096], 4096)
		o.must(err, "direct read 2")
		o.see("direct read after buffered write: %q", buf[:3])
		_ = n
	})
}

// TestCoherenceWriteOnlyFd: writes through a write-only descriptor (lsmfs
// opens those with FOPEN_DIRECT_IO, past the kernel's page cache) are seen
// at once by reads and mappings of other descriptors that have the file
// cached, and a page dirtied through a shared mapping is neither lost nor
// written over a later write(2) to the same page.
func TestCoherenceWriteOnlyFd(t *testing.T) {
	compareWithExt4(t, "", func(o *observer, dir string) {
		p := filepath.Join(dir, "f")
		rw := o.open(p, unix.O_RDWR|unix.O_CREAT)
		o.pwrite(rw, bytes.Repeat([]byte("a"), 4*4096), 0)
		r := o.open(p, unix.O_RDONLY)
		o.see("cached: %s", digest(o.pread(r, 1<<20, 0)))
		m, err := unix.Mmap(rw, 0, 4*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		o.must(err, "mmap")
		defer unix.Munmap(m)
		o.see("map: %q", bytes.Clone(m[4094:4098]))
		w := o.open(p, unix.O_WRONLY)
		st0 := o.fstat(r)
		tick()
		o.pwrite(w, bytes.Repeat([]byte("b"), 3000), 4000)
		st1 := o.stat(p)
		o.see("mtime advanced=%v ctime advanced=%v", mtimeNs(st1) > mtimeNs(st0), ctimeNs(st1) > ctimeNs(st0))
		o.see("r after write-only write: %q %q", o.pread(r, 4, 3998), o.pread(r, 4, 6998))
		o.see("map after write-only write: %q %q", bytes.Clone(m[3998:4002]), bytes.Clone(m[6998:7002]))
		// A page dirtied through the mapping, then written through w in
		// another part of the same page: both land.
		copy(m[8192:8200], "MAPPED!!")
		o.pwrite(w, []byte("written"), 8192+100)
		o.see("r after map+write: %q %q", o.pread(r, 8, 8192), o.pread(r, 7, 8192+100))
		o.must(unix.Msync(m, unix.MS_SYNC), "msync")
		o.see("r after msync: %q %q", o.pread(r, 8, 8192), o.pread(r, 7, 8192+100))
		// Extending writes and O_APPEND through a write-only descriptor.
		o.pwrite(w, []byte("tail"), 5*4096)
		o.see("size=%d tail=%q hole=%s", o.fstat(r).Size, o.pread(r, 4, 5*4096), digest(o.pread(r, 4096, 4*4096)))
		a := o.open(p, unix.O_WRONLY|unix.O_APPEND)
		_, err = unix.Write(a, []byte("APPENDED"))
		o.must(err, "append")
		o.see("size=%d end=%q", o.fstat(r).Size, o.pread(r, 8, 5*4096+4))
		// Truncating open, write, read back through the cached descriptor.
		tw := o.open(p, unix.O_WRONLY|unix.O_TRUNC)
		o.pwrite(tw, []byte("new"), 0)
		o.see("after O_TRUNC: size=%d %q", o.fstat(r).Size, o.pread(r, 16, 0))
		got, err := os.ReadFile(p)
		o.must(err, "read file")
		o.see("read file: %q", got)
	})
}

func TestCoherencePrivateMap(t *testing.T) {
	compareWithExt4(t, "", func(o *observer, dir string) {
		page := os.Getpagesize()
		p := filepath.Join(dir, "f")
		o.must(os.WriteFile(p, bytes.Repeat([]byte("o"), 2*page), 0o644), "write")
		fd := o.open(p, unix.O_RDWR)
		m, err := unix.Mmap(fd, 0, 2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
		o.must(err, "mmap")
		defer unix.Munmap(m)
		m[0] = 'P'
		_ = m[page]
		o.pwrite(fd, []byte("WW"), 0)
		o.pwrite(fd, []byte("WW"), int64(page))
		o.see("private: %q %q", bytes.Clone(m[0:2]), bytes.Clone(m[page:page+2]))
	})
}

func TestCoherenceOTruncWhileOpen(t *testing.T) {
	compareWithExt4(t, "", func(o *observer, dir string) {
		p := filepath.Join(dir, "f")
		fd1 := o.open(p, unix.O_RDWR|unix.O_CREAT)
		o.pwrite(fd1, bytes.Repeat([]byte("1"), 10000), 0)
		o.see("fd1 read: %s", digest(o.pread(fd1, 20000, 0)))
		fd2 := o.open(p, unix.O_RDWR|unix.O_TRUNC)
		o.pwrite(fd2, []byte("xyz"), 0)
		o.see("fd1 read after O_TRUNC: %q", o.pread(fd1, 20000, 0))
		o.pwrite(fd1, []byte("Q"), 10)
		unix.Close(fd1)
		got, _ := os.ReadFile(p)
		o.see("final: %q", got)
		st := o.stat(p)
		o.see("size=%d blocks>0=%v", st.Size, st.Blocks > 0)
	})
}

func TestCoherenceTwoFds(t *testing.T) {
	compareWithExt4(t, "", func(o *observer, dir string) {
		p := filepath.Join(dir, "f")
		w := o.open(p, unix.O_RDWR|unix.O_CREAT)
		r := o.open(p, unix.O_RDONLY)
		o.pwrite(w, bytes.Repeat([]byte("a"), 5000), 0)
		o.see("r: %s size=%d", digest(o.pread(r, 1<<20, 0)), o.fstat(r).Size)
		o.pwrite(w, bytes.Repeat([]byte("b"), 3000), 4000)
		o.see("r: %s size=%d", digest(o.pread(r, 1<<20, 0)), o.fstat(r).Size)
		o.see("r[3998:4002]=%q", o.pread(r, 4, 3998))
		o.must(unix.Ftruncate(w, 4500), "trunc")
		o.pwrite(w, []byte("z"), 6000)
		got := o.pread(r, 1<<20, 0)
		o.see("r after truncate+write: %s [4498:4502]=%q", digest(got), got[4498:4502])
		st := o.fstat(r)
		o.see("size=%d blocks>0=%v", st.Size, st.Blocks > 0)
		// A sparse file filled in place (preallocate by ftruncate, then write)
		q := filepath.Join(dir, "g")
		g := o.open(q, unix.O_RDWR|unix.O_CREAT)
		o.must(unix.Ftruncate(g, 1<<20), "ftruncate g")
		o.pwrite(g, bytes.Repeat([]byte("g"), 100), 100)
		st = o.stat(q)
		o.see("g after write into preallocated size: size=%d blocks>0=%v", st.Size, st.Blocks > 0)
	})
}

// writebackCacheCopy writes a file through a descriptor that stays open (and
// is inherited by cp and tar, so no close(2) writes the kernel's dirty pages
// back before they run), then copies it with tools that trust st_blocks and
// SEEK_DATA.
func writebackCacheCopy(o *observer, dir string) {
	p := filepath.Join(dir, "f")
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT, 0o644) // no O_CLOEXEC
	o.must(err, "open")
	o.t.Cleanup(func() { unix.Close(fd) })
	o.pwrite(fd, bytes.Repeat([]byte("w"), 64<<10), 0)
	// Not compared: st_blocks, which lsmfs cannot know while the data is
	// in the kernel's cache (README, writeback_cache), and tar --sparse,
	// which takes st_blocks 0 for a file of holes.
	st := o.stat(p)
	o.see("after write: size=%d", st.Size)
	r, err := unix.Open(p, unix.O_RDONLY, 0) // no O_CLOEXEC
	o.must(err, "open")
	o.t.Cleanup(func() { unix.Close(r) })
	d, err := unix.Seek(r, 0, unix.SEEK_DATA)
	o.see("SEEK_DATA(0)=%d %v", d, err)
	h, err := unix.Seek(r, 0, unix.SEEK_HOLE)
	o.see("SEEK_HOLE(0)=%d %v", h, err)
	dst := filepath.Join(dir, "copy")
	if out, err := exec.Command("cp", p, dst).CombinedOutput(); err != nil {
		o.t.Fatalf("cp: %v %s", err, out)
	}
	got, _ := os.ReadFile(dst)
	o.see("cp: %s", digest(got))
}

func TestCoherenceWritebackCacheCopy(t *testing.T) {
	compareWithExt4(t, "writeback_cache", writebackCacheCopy)
}

func TestCoherenceMmapCopy(t *testing.T) {
	compareWithExt4(t, "", func(o *observer, dir string) {
		p := filepath.Join(dir, "f")
		fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT, 0o644) // no O_CLOEXEC
		o.must(err, "open")
		o.t.Cleanup(func() { unix.Close(fd) })
		o.must(unix.Ftruncate(fd, 64<<10), "ftruncate")
		m, err := unix.Mmap(fd, 0, 64<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		o.must(err, "mmap")
		defer unix.Munmap(m)
		copy(m, bytes.Repeat([]byte("m"), 64<<10))
		st := o.stat(p)
		o.see("after mmap write: size=%d blocks>0=%v", st.Size, st.Blocks > 0)
		dst := filepath.Join(dir, "copy")
		if out, err := exec.Command("cp", p, dst).CombinedOutput(); err != nil {
			o.t.Fatalf("cp: %v %s", err, out)
		}
		got, _ := os.ReadFile(dst)
		o.see("cp: %s", digest(got))
	})
}

// TestCoherenceFillPreallocated: a file sized with ftruncate and then
// written in place (downloaders, databases) by a process that keeps it open;
// another process archives it with tar --sparse.
func TestCoherenceFillPreallocated(t *testing.T) {
	compareWithExt4(t, "", func(o *observer, dir string) {
		p := filepath.Join(dir, "f")
		fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT, 0o644) // no O_CLOEXEC: tar's exec does not close it
		o.must(err, "open")
		o.t.Cleanup(func() { unix.Close(fd) })
		o.must(unix.Ftruncate(fd, 1<<20), "ftruncate")
		o.pwrite(fd, bytes.Repeat([]byte("g"), 64<<10), 0)
		st := o.stat(p)
		o.see("size=%d blocks>0=%v", st.Size, st.Blocks > 0)
		tarball := filepath.Join(o.t.TempDir(), "t.tar")
		if out, err := exec.Command("tar", "--sparse", "-C", dir, "-cf", tarball, "f").CombinedOutput(); err != nil {
			o.t.Fatalf("tar: %v %s", err, out)
		}
		out, err := exec.Command("tar", "-xOf", tarball).Output()
		o.must(err, "tar x")
		o.see("tar --sparse: %s", digest(out))
	})
}

// TestCoherenceCompactRemount: truncations, hole punches and overwrites
// (point and range deletions, value-log garbage), then lsmfs compact and
// remounts between steps; every file must read as its model, through an fd
// held across the compaction and after remounts, with st_size and st_blocks
// unchanged by compaction.
func TestCoherenceCompactRemount(t *testing.T) {
	f := newFS(t, fsOptions{mountOpts: "memtable_size=1M"})
	const bs = 4096
	models := map[string][]byte{}
	write := func(name string, off int, b []byte) {
		fd, err := unix.Open(f.path(name), unix.O_RDWR|unix.O_CREAT, 0o644)
		must(t, err)
		if _, err := unix.Pwrite(fd, b, int64(off)); err != nil {
			t.Fatal(err)
		}
		must(t, unix.Close(fd))
		m := models[name]
		if len(m) < off+len(b) {
			m = append(m, make([]byte, off+len(b)-len(m))...)
		}
		copy(m[off:], b)
		models[name] = m
	}
	trunc := func(name string, size int) {
		must(t, os.Truncate(f.path(name), int64(size)))
		m := models[name]
		if size < len(m) {
			m = m[:size]
		} else {
			m = append(m, make([]byte, size-len(m))...)
		}
		models[name] = m
	}
	punch := func(name string, off, n int) {
		fd, err := unix.Open(f.path(name), unix.O_RDWR, 0)
		must(t, err)
		must(t, unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(off), int64(n)))
		must(t, unix.Close(fd))
		clear(models[name][off:min(off+n, len(models[name]))])
	}
	blob := func(seed, n int) []byte { b := make([]byte, n); fillContent(int64(seed), 0, b); return b }
	compact := func() {
		if out, stderr, code := lsmfsOut("compact", f.mnt); code != 0 {
			t.Fatalf("compact: %d %s %s", code, out, stderr)
		}
	}
	verify := func(when string) {
		t.Helper()
		for name, want := range models {
			got, err := os.ReadFile(f.path(name))
			must(t, err)
			if !bytes.Equal(got, want) {
				t.Errorf("%s: %s: %d bytes, want %d, first difference at %d", when, name, len(got), len(want), firstDiff(got, want))
			}
		}
	}
	// Large files: range deletions (more than 16 blocks).
	write("big", 0, blob(1, 100*bs))
	write("punched", 0, blob(2, 100*bs))
	write("over", 0, blob(3, 100*bs))
	write("small", 0, blob(4, 10*bs+7))
	f.remount() // everything in tables
	compact()
	trunc("big", 0)
	write("big", 5*bs+3, blob(5, 3*bs))
	trunc("big", 100*bs) // must read zeros where the old data was
	punch("punched", 10*bs, 60*bs)
	write("punched", 30*bs+100, blob(6, 100))
	for i := range 5 {
		write("over", 0, blob(10+i, 100*bs))
	}
	trunc("small", 3*bs+5)
	trunc("small", 12*bs)
	verify("before compact")
	held, err := os.Open(f.path("big"))
	must(t, err)
	before := map[string]unix.Stat_t{}
	for name := range models {
		var st unix.Stat_t
		must(t, unix.Stat(f.path(name), &st))
		before[name] = st
	}
	compact()
	verify("after compact")
	got := make([]byte, 100*bs)
	n, err := held.ReadAt(got, 0)
	if n != len(got) || !bytes.Equal(got, models["big"]) {
		t.Errorf("fd held across compact: %d bytes, differ at %d (%v)", n, firstDiff(got[:n], models["big"]), err)
	}
	held.Close()
	f.remount()
	verify("after compact and remount")
	for name := range models {
		var st unix.Stat_t
		must(t, unix.Stat(f.path(name), &st))
		if st.Size != before[name].Size || st.Blocks != before[name].Blocks {
			t.Errorf("%s: size/blocks %d/%d before compact+remount, %d/%d after", name, before[name].Size, before[name].Blocks, st.Size, st.Blocks)
		}
	}
	compact()
	f.remount()
	verify("after a second compact and remount")
}

// remountConsistency: what stat and read show before an unmount is what they
// show after the remount.
func remountConsistency(t *testing.T, mountOpts string) {
	f := newFS(t, fsOptions{mountOpts: mountOpts})
	page := os.Getpagesize()
	ops := map[string]func(p string){
		"write-close": func(p string) { must(t, os.WriteFile(p, bytes.Repeat([]byte("a"), 10000), 0o644)) },
		"write-open": func(p string) {
			fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT, 0o644)
			must(t, err)
			unix.Pwrite(fd, bytes.Repeat([]byte("b"), 7000), 0)
			tick()
			unix.Pwrite(fd, []byte("c"), 20000)
			t.Cleanup(func() { unix.Close(fd) }) // closed by the unmount's check? no: closed below
			openFDs = append(openFDs, fd)
		},
		"mmap": func(p string) {
			fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT, 0o644)
			must(t, err)
			must(t, unix.Ftruncate(fd, int64(3*page)))
			m, err := unix.Mmap(fd, 0, 3*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			must(t, err)
			tick()
			copy(m[page:], "mapped")
			unix.Munmap(m)
			unix.Close(fd)
		},
		"utimens-after-write": func(p string) {
			fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT, 0o644)
			must(t, err)
			unix.Pwrite(fd, []byte("x"), 0)
			ts := []unix.Timespec{unix.NsecToTimespec(1e18), unix.NsecToTimespec(1e18 + 5)}
			must(t, unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, 0))
			unix.Pwrite(fd, []byte("y"), 1)
			unix.Close(fd)
		},
		"punch": func(p string) {
			fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT, 0o644)
			must(t, err)
			unix.Pwrite(fd, bytes.Repeat([]byte("p"), 5*page), 0)
			tick()
			must(t, unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(page), int64(2*page)))
			unix.Close(fd)
		},
		"truncate-open": func(p string) {
			fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT, 0o644)
			must(t, err)
			unix.Pwrite(fd, bytes.Repeat([]byte("t"), 5*page), 0)
			tick()
			must(t, unix.Ftruncate(fd, 100))
			unix.Pwrite(fd, []byte("after"), 200)
			unix.Close(fd)
		},
	}
	openFDs = nil
	type state struct {
		size, blocks, mtime, ctime int64
		data                       string
	}
	look := func(p string) state {
		var st unix.Stat_t
		must(t, unix.Stat(p, &st))
		b, err := os.ReadFile(p)
		must(t, err)
		return state{st.Size, st.Blocks, st.Mtim.Nano(), st.Ctim.Nano(), digest(b)}
	}
	before := map[string]state{}
	for name, op := range ops {
		op(f.path(name))
	}
	for name := range ops {
		before[name] = look(f.path(name))
	}
	for _, fd := range openFDs {
		unix.Close(fd)
	}
	for name := range ops {
		s := look(f.path(name))
		if mountOpts == "writeback_cache" && name == "write-open" {
			// The data was in the kernel's cache until the close: lsmfs
			// could not count its blocks (README, writeback_cache).
			before[name] = state{before[name].size, s.blocks, before[name].mtime, before[name].ctime, before[name].data}
		}
		if s != before[name] {
			t.Errorf("%s: before close %+v, after %+v", name, before[name], s)
			before[name] = s
		}
	}
	f.remount()
	for name := range ops {
		if s := look(f.path(name)); s != before[name] {
			t.Errorf("%s: before remount %+v, after %+v", name, before[name], s)
		}
	}
}

var openFDs []int

func TestCoherenceRemount(t *testing.T)               { remountConsistency(t, "") }
func TestCoherenceRemountWritebackCache(t *testing.T) { remountConsistency(t, "writeback_cache") }

func TestCoherenceNegativeEntries(t *testing.T) {
	compareWithExt4(t, "", func(o *observer, dir string) {
		exists := func(p string) bool { _, err := os.Lstat(p); return err == nil }
		names := []string{"link", "rename", "tmpfile", "mkdir", "symlink", "exch"}
		for _, n := range names {
			o.see("%s exists before: %v", n, exists(filepath.Join(dir, n)))
		}
		src := filepath.Join(dir, "src")
		o.must(os.WriteFile(src, []byte("src"), 0o644), "write")
		o.must(os.Link(src, filepath.Join(dir, "link")), "link")
		o.must(os.WriteFile(src+"2", []byte("src2"), 0o644), "write")
		o.must(os.Rename(src+"2", filepath.Join(dir, "rename")), "rename")
		fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR, 0o644)
		o.must(err, "tmpfile")
		unix.Write(fd, []byte("tmp"))
		o.must(unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.AT_FDCWD, filepath.Join(dir, "tmpfile"), unix.AT_SYMLINK_FOLLOW), "linkat")
		unix.Close(fd)
		o.must(os.Mkdir(filepath.Join(dir, "mkdir"), 0o755), "mkdir")
		o.must(os.Symlink("src", filepath.Join(dir, "symlink")), "symlink")
		o.must(os.Mkdir(filepath.Join(dir, "sub"), 0o755), "mkdir sub")
		o.must(os.WriteFile(filepath.Join(dir, "sub", "exch"), []byte("e"), 0o644), "write")
		o.must(unix.Renameat2(unix.AT_FDCWD, filepath.Join(dir, "sub", "exch"), unix.AT_FDCWD, filepath.Join(dir, "exch"), unix.RENAME_NOREPLACE), "renameat2")
		for _, n := range names {
			o.see("%s exists after: %v", n, exists(filepath.Join(dir, n)))
		}
		o.see("sub/exch exists: %v", exists(filepath.Join(dir, "sub", "exch")))
		// a negative entry inside a directory replaced by rename
		o.must(os.Mkdir(filepath.Join(dir, "d1"), 0o755), "mkdir")
		o.must(os.WriteFile(filepath.Join(dir, "d1", "x"), nil, 0o644), "write")
		o.must(os.Mkdir(filepath.Join(dir, "d2"), 0o755), "mkdir")
		o.see("d2/x before: %v", exists(filepath.Join(dir, "d2", "x")))
		o.must(unix.Rename(filepath.Join(dir, "d1"), filepath.Join(dir, "d2")), "rename dir")
		o.see("d2/x after: %v d1/x: %v", exists(filepath.Join(dir, "d2", "x")), exists(filepath.Join(dir, "d1", "x")))
	})
}
