package tests

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lsmfs/lsmfs/fs"
)

// TestFsx is an fsx-style data test (after fsx of xfstests): a long seeded
// sequence of write, read, truncate, fallocate (extend, keep-size, punch
// hole, zero range), mmap write and read, copy_file_range, fsync and
// close-and-reopen on one file, with every read and every size checked
// byte-for-byte against an in-memory model, the whole file compared every
// few hundred operations, and a remount in the middle. A few thousand
// operations by default, 100,000 with LSMFS_LONG=1; LSMFS_SEED replays a
// run. A failure prints the last operations. It runs with the default
// mount options and again with the kernel's writeback cache, which moves
// size and time keeping and write gathering into the kernel.
func TestFsx(t *testing.T) {
	seed := testSeed(t)
	for _, v := range []struct {
		name      string
		mountOpts string
		blockSize int
	}{
		{"default", "", fs.DefaultBlockSize},
		{"writeback_cache", "writeback_cache", fs.DefaultBlockSize},
		// Blocks of several pages: writes of part of a block, which
		// read the stored block when the buffer is flushed.
		{"block_size=16K", "", 16 << 10},
	} {
		t.Run(v.name, func(t *testing.T) { runFsx(t, v.mountOpts, v.blockSize, seed) })
	}
}

func runFsx(t *testing.T, mountOpts string, blockSize int, seed uint64) {
	f := newFS(t, fsOptions{mountOpts: mountOpts, mkfsArgs: []string{"--block-size", strconv.Itoa(blockSize)}})
	ops := 3000
	if long() {
		ops = 100_000
	}
	x := &fsx{
		t:      t,
		path:   f.path("fsx"),
		fd:     -1,
		rng:    rand.New(rand.NewPCG(seed, seed^0x5eed)),
		page:   os.Getpagesize(),
		block:  blockSize,
		maxLen: 1 << 20,
		maxOp:  64 << 10,
		counts: map[string]int{},
	}
	x.open(unix.O_CREAT)
	for i := 0; i < ops; i++ {
		if i == ops/2 {
			x.closeFile()
			f.remount()
			x.record("remount")
			x.open(0)
			x.verifyAll("after the remount")
		}
		x.step(i)
		if i%500 == 499 {
			x.verifyAll("periodic check")
		}
	}
	x.verifyAll("at the end")
	x.closeFile()
	f.remount()
	x.open(0)
	x.verifyAll("after the final remount")
	x.closeFile()
	t.Logf("%d operations: %s", ops, x.summary())
}

// fsx drives one file and its model.
type fsx struct {
	t      *testing.T
	path   string
	fd     int
	rng    *rand.Rand
	model  []byte // the file's expected contents; len is its size
	page   int
	block  int // the filesystem's block size
	maxLen int // the file never grows past this
	maxOp  int // longest single operation
	op     int // index of the current operation
	// history holds the last operations, printed on failure.
	history []string
	counts  map[string]int
	// noZeroRange is set when the kernel refuses FALLOC_FL_ZERO_RANGE.
	noZeroRange bool
}

const fsxHistory = 40

func (x *fsx) open(flags int) {
	fd, err := unix.Open(x.path, unix.O_RDWR|flags, 0o644)
	if err != nil {
		x.fail("open: %v", err)
	}
	x.fd = fd
}

func (x *fsx) closeFile() {
	if err := unix.Close(x.fd); err != nil {
		x.fail("close: %v", err)
	}
	x.fd = -1
}

func (x *fsx) record(format string, args ...any) {
	desc := fmt.Sprintf("%6d ", x.op) + fmt.Sprintf(format, args...)
	x.history = append(x.history, desc)
	if len(x.history) > fsxHistory {
		x.history = x.history[1:]
	}
	x.counts[strings.Fields(desc)[1]]++
}

func (x *fsx) fail(format string, args ...any) {
	x.t.Helper()
	if x.fd >= 0 {
		unix.Close(x.fd)
		x.fd = -1
	}
	x.t.Fatalf("operation %d: %s\nsize in the model: %d\nlast operations:\n%s",
		x.op, fmt.Sprintf(format, args...), len(x.model), strings.Join(x.history, "\n"))
}

func (x *fsx) summary() string {
	var parts []string
	for _, k := range []string{"write", "read", "mapwrite", "mapread", "truncate", "falloc", "falloc-keep",
		"punch", "zero", "zero-keep", "copy", "fsync", "fdatasync", "reopen", "remount"} {
		if n := x.counts[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, n))
		}
	}
	return strings.Join(parts, " ")
}

// offset picks an offset below limit, often near a page or block boundary.
func (x *fsx) offset(limit int) int {
	if limit <= 0 {
		return 0
	}
	switch x.rng.IntN(4) {
	case 0: // a page boundary, give or take a few bytes
		o := x.rng.IntN(limit/x.page+1)*x.page + x.rng.IntN(9) - 4
		return min(max(o, 0), limit-1)
	case 1: // a block boundary
		o := x.rng.IntN(limit/x.block+1)*x.block + x.rng.IntN(3) - 1
		return min(max(o, 0), limit-1)
	}
	return x.rng.IntN(limit)
}

// length picks an operation length of at least 1.
func (x *fsx) length() int {
	switch x.rng.IntN(4) {
	case 0:
		return 1 + x.rng.IntN(16)
	case 1:
		return 1 + x.rng.IntN(x.page)
	}
	return 1 + x.rng.IntN(x.maxOp)
}

func (x *fsx) randBytes(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := x.rng.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// resize sets the model's size, zero-filling growth.
func (x *fsx) resize(size int) {
	if size <= len(x.model) {
		x.model = x.model[:size]
		return
	}
	x.model = append(x.model, make([]byte, size-len(x.model))...)
}

func (x *fsx) step(i int) {
	x.op = i
	switch r := x.rng.IntN(100); {
	case r < 16:
		x.write()
	case r < 32:
		x.read()
	case r < 42:
		x.mapWrite()
	case r < 52:
		x.mapRead()
	case r < 59:
		x.truncate()
	case r < 72:
		x.fallocate()
	case r < 82:
		x.copyRange()
	case r < 87:
		if x.rng.IntN(2) == 0 {
			x.record("fsync")
			x.check("fsync", unix.Fsync(x.fd))
		} else {
			x.record("fdatasync")
			x.check("fdatasync", unix.Fdatasync(x.fd))
		}
	case r < 89:
		x.record("reopen")
		x.closeFile()
		x.open(0)
	default:
		x.read()
	}
	x.checkSize()
}

func (x *fsx) check(what string, err error) {
	x.t.Helper()
	if err != nil {
		x.fail("%s: %v", what, err)
	}
}

// checkSize compares fstat's size with the model's.
func (x *fsx) checkSize() {
	var st unix.Stat_t
	x.check("fstat", unix.Fstat(x.fd, &st))
	if st.Size != int64(len(x.model)) {
		x.fail("size %d, want %d", st.Size, len(x.model))
	}
}

func (x *fsx) write() {
	off := x.offset(x.maxLen)
	n := min(x.length(), x.maxLen-off)
	data := x.randBytes(n)
	x.record("write %d+%d", off, n)
	got, err := unix.Pwrite(x.fd, data, int64(off))
	x.check("pwrite", err)
	if got != n {
		x.fail("pwrite wrote %d of %d bytes", got, n)
	}
	if off+n > len(x.model) {
		x.resize(off + n)
	}
	copy(x.model[off:], data)
}

func (x *fsx) read() {
	off := x.offset(len(x.model) + x.page)
	n := x.length()
	x.record("read %d+%d", off, n)
	buf := make([]byte, n)
	got, err := unix.Pread(x.fd, buf, int64(off))
	x.check("pread", err)
	want := x.model[min(off, len(x.model)):min(off+n, len(x.model))]
	x.compare("read", off, buf[:got], want)
}

func (x *fsx) compare(what string, off int, got, want []byte) {
	x.t.Helper()
	if len(got) != len(want) {
		x.fail("%s at %d: %d bytes, want %d", what, off, len(got), len(want))
	}
	if !bytes.Equal(got, want) {
		d := firstDiff(got, want)
		x.fail("%s at %d: bytes differ from offset %d of the file (got %#x, want %#x)",
			what, off, off+d, got[d:min(d+16, len(got))], want[d:min(d+16, len(want))])
	}
}

// mapping maps [off, off+n) of the file (from the page below off) and
// returns the whole mapping and the part for [off, off+n).
func (x *fsx) mapping(off, n, prot int) ([]byte, []byte) {
	pgoff := off &^ (x.page - 1)
	m, err := unix.Mmap(x.fd, int64(pgoff), off+n-pgoff, prot, unix.MAP_SHARED)
	x.check("mmap", err)
	return m, m[off-pgoff:]
}

func (x *fsx) mapWrite() {
	off := x.offset(x.maxLen)
	n := min(x.length(), x.maxLen-off)
	data := x.randBytes(n)
	sync := x.rng.IntN(3) // 0: none, 1: MS_ASYNC, 2: MS_SYNC
	x.record("mapwrite %d+%d msync=%s", off, n, []string{"none", "async", "sync"}[sync])
	if off+n > len(x.model) {
		// A mapping cannot extend a file: grow it first, as fsx does.
		x.check("ftruncate", unix.Ftruncate(x.fd, int64(off+n)))
		x.resize(off + n)
	}
	m, part := x.mapping(off, n, unix.PROT_READ|unix.PROT_WRITE)
	copy(part, data)
	switch sync {
	case 1:
		x.check("msync", unix.Msync(m, unix.MS_ASYNC))
	case 2:
		x.check("msync", unix.Msync(m, unix.MS_SYNC))
	}
	x.check("munmap", unix.Munmap(m))
	copy(x.model[off:], data)
}

func (x *fsx) mapRead() {
	if len(x.model) == 0 {
		x.read()
		return
	}
	off := x.offset(len(x.model))
	n := min(x.length(), len(x.model)-off)
	x.record("mapread %d+%d", off, n)
	m, part := x.mapping(off, n, unix.PROT_READ)
	got := bytes.Clone(part[:n])
	x.check("munmap", unix.Munmap(m))
	x.compare("mapread", off, got, x.model[off:off+n])
}

func (x *fsx) truncate() {
	size := x.rng.IntN(x.maxLen + 1)
	if x.rng.IntN(3) == 0 {
		size = x.offset(x.maxLen) // near a boundary
	}
	x.record("truncate %d (from %d)", size, len(x.model))
	x.check("ftruncate", unix.Ftruncate(x.fd, int64(size)))
	x.resize(size)
}

func (x *fsx) fallocate() {
	off := x.offset(x.maxLen)
	n := min(x.length(), x.maxLen-off)
	end := off + n
	kinds := []string{"falloc", "falloc-keep", "punch", "zero", "zero-keep"}
	modes := []uint32{0, unix.FALLOC_FL_KEEP_SIZE, unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE,
		unix.FALLOC_FL_ZERO_RANGE, unix.FALLOC_FL_ZERO_RANGE | unix.FALLOC_FL_KEEP_SIZE}
	k := x.rng.IntN(len(modes))
	if k >= 3 && x.noZeroRange {
		k = 2
	}
	x.record("%s %d+%d", kinds[k], off, n)
	err := unix.Fallocate(x.fd, modes[k], int64(off), int64(n))
	if k >= 3 && errors.Is(err, unix.EOPNOTSUPP) {
		x.t.Logf("fallocate(FALLOC_FL_ZERO_RANGE): EOPNOTSUPP; not used from now on")
		x.noZeroRange = true
		return
	}
	x.check("fallocate", err)
	keep := modes[k]&unix.FALLOC_FL_KEEP_SIZE != 0
	if !keep && end > len(x.model) {
		x.resize(end)
	}
	if k >= 2 { // punch or zero: zeros within the size
		clear(x.model[min(off, len(x.model)):min(end, len(x.model))])
	}
}

func (x *fsx) copyRange() {
	n := x.length()
	var in, out int
	for tries := 0; ; tries++ {
		in = x.offset(len(x.model) + 1)
		out = x.offset(x.maxLen - n)
		if out+n <= in || in+n <= out {
			break
		}
		if tries > 20 {
			x.read()
			return
		}
	}
	want := max(0, min(n, len(x.model)-in))
	x.record("copy %d+%d -> %d", in, n, out)
	inOff, outOff := int64(in), int64(out)
	got, err := unix.CopyFileRange(x.fd, &inOff, x.fd, &outOff, n, 0)
	x.check("copy_file_range", err)
	if got != want {
		x.fail("copy_file_range copied %d bytes, want %d", got, want)
	}
	if want == 0 {
		return
	}
	data := bytes.Clone(x.model[in : in+want])
	if out+want > len(x.model) {
		x.resize(out + want)
	}
	copy(x.model[out:], data)
}

// verifyAll compares the whole file, through read(2), with the model.
func (x *fsx) verifyAll(when string) {
	x.t.Helper()
	x.checkSize()
	buf := make([]byte, len(x.model)+1)
	got, err := unix.Pread(x.fd, buf, 0)
	x.check("pread", err)
	x.compare(when+": whole file", 0, buf[:got], x.model)
}
