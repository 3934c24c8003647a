package mount

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// FUSE operation counters
//
// countingFS wraps the fuse.RawFileSystem that fs/ hands out and times every
// operation the kernel sends: a count, a count of non-OK replies, and a
// latency histogram per operation type, all lock-free atomics. `lsmfs stats`
// derives percentiles from the histograms and the Prometheus endpoint
// exports them as histograms (lsmfs_fuse_operation_duration_seconds).

// Latency buckets: the upper bounds are 1µs·2^k for k = 0..latencyBuckets-1
// (1µs to about 16.8s); one more bucket counts slower operations.
const latencyBuckets = 25

// latencyBound returns the upper bound of bucket k in seconds.
func latencyBound(k int) float64 { return float64(uint64(1000)<<k) / 1e9 }

// bucketOf returns the bucket of a duration: the smallest k whose bound is
// at least d, or latencyBuckets for slower ones.
func bucketOf(d time.Duration) int {
	if d <= time.Microsecond {
		return 0
	}
	us := (uint64(d) + 999) / 1000 // ceiling, in microseconds
	k := bits.Len64(us - 1)
	if k > latencyBuckets {
		return latencyBuckets
	}
	return k
}

// opKind indexes the operation types.
type opKind int

// The operation types, named as in the FUSE protocol (lowercase).
const (
	opLookup opKind = iota
	opForget
	opGetattr
	opSetattr
	opMknod
	opMkdir
	opUnlink
	opRmdir
	opRename
	opLink
	opSymlink
	opReadlink
	opAccess
	opGetxattr
	opListxattr
	opSetxattr
	opRemovexattr
	opCreate
	opTmpfile
	opOpen
	opRead
	opLseek
	opGetlk
	opSetlk
	opSetlkw
	opRelease
	opWrite
	opCopyFileRange
	opIoctl
	opFlush
	opFsync
	opFallocate
	opOpendir
	opReaddir
	opReaddirplus
	opReleasedir
	opFsyncdir
	opStatfs
	opStatx
	numOps
)

var opNames = [numOps]string{
	opLookup: "lookup", opForget: "forget", opGetattr: "getattr", opSetattr: "setattr",
	opMknod: "mknod", opMkdir: "mkdir", opUnlink: "unlink", opRmdir: "rmdir",
	opRename: "rename", opLink: "link", opSymlink: "symlink", opReadlink: "readlink",
	opAccess: "access", opGetxattr: "getxattr", opListxattr: "listxattr",
	opSetxattr: "setxattr", opRemovexattr: "removexattr", opCreate: "create",
	opTmpfile: "tmpfile", opOpen: "open", opRead: "read", opLseek: "lseek",
	opGetlk: "getlk", opSetlk: "setlk", opSetlkw: "setlkw", opRelease: "release",
	opWrite: "write", opCopyFileRange: "copy_file_range", opIoctl: "ioctl",
	opFlush: "flush", opFsync: "fsync", opFallocate: "fallocate", opOpendir: "opendir",
	opReaddir: "readdir", opReaddirplus: "readdirplus", opReleasedir: "releasedir",
	opFsyncdir: "fsyncdir", opStatfs: "statfs", opStatx: "statx",
}

// opCounter counts one operation type.
type opCounter struct {
	count    atomic.Uint64
	errors   atomic.Uint64
	sumNanos atomic.Uint64
	maxNanos atomic.Uint64
	buckets  [latencyBuckets + 1]atomic.Uint64
}

// opCounters count every operation type. Safe for concurrent use.
type opCounters struct {
	ops [numOps]opCounter
}

func (c *opCounters) record(op opKind, start time.Time, st fuse.Status) {
	d := time.Since(start)
	oc := &c.ops[op]
	oc.count.Add(1)
	if st != fuse.OK {
		oc.errors.Add(1)
	}
	oc.sumNanos.Add(uint64(d))
	oc.buckets[bucketOf(d)].Add(1)
	for {
		m := oc.maxNanos.Load()
		if uint64(d) <= m || oc.maxNanos.CompareAndSwap(m, uint64(d)) {
			break
		}
	}
}

// OpStats describe one FUSE operation type since the mount. Latencies are in
// seconds, measured in the daemon from the request's arrival at lsmfs to its
// reply (kernel and queueing time not included); percentiles are estimated
// from a histogram with power-of-two buckets (1µs, 2µs, 4µs, ...), so they are
// exact to within a factor of two.
type OpStats struct {
	Op string `json:"op"`
	// Count is the number of requests; Errors those answered with an error
	// (ENOENT from lookup included).
	Count  uint64 `json:"count"`
	Errors uint64 `json:"errors"`
	// Mean, P50, P90, P99 and Max latencies, in seconds.
	Mean float64 `json:"mean_seconds"`
	P50  float64 `json:"p50_seconds"`
	P90  float64 `json:"p90_seconds"`
	P99  float64 `json:"p99_seconds"`
	Max  float64 `json:"max_seconds"`
	// Buckets are the histogram's cumulative counts at the bounds
	// BucketBounds (the last bound is +Inf, shown as 0 in JSON).
	Buckets []uint64 `json:"buckets"`
	// Sum is the total latency in seconds.
	Sum float64 `json:"sum_seconds"`
}

// BucketBounds returns the upper bounds (seconds) of the latency buckets
// of OpStats.Buckets, without the final +Inf.
func BucketBounds() []float64 {
	b := make([]float64, latencyBuckets)
	for k := range b {
		b[k] = latencyBound(k)
	}
	return b
}

// snapshot returns the counters of the operation types seen so far, in
// protocol order.
func (c *opCounters) snapshot() []OpStats {
	var out []OpStats
	for op := range numOps {
		oc := &c.ops[op]
		n := oc.count.Load()
		if n == 0 {
			continue
		}
		s := OpStats{Op: opNames[op], Count: n, Errors: oc.errors.Load(),
			Sum: float64(oc.sumNanos.Load()) / 1e9, Max: float64(oc.maxNanos.Load()) / 1e9}
		s.Mean = s.Sum / float64(n)
		var raw [latencyBuckets + 1]uint64
		var total uint64
		for k := range raw {
			raw[k] = oc.buckets[k].Load()
			total += raw[k]
		}
		s.Buckets = make([]uint64, len(raw))
		var cum uint64
		for k, v := range raw {
			cum += v
			s.Buckets[k] = cum
		}
		s.P50 = quantile(raw[:], total, 0.50, s.Max)
		s.P90 = quantile(raw[:], total, 0.90, s.Max)
		s.P99 = quantile(raw[:], total, 0.99, s.Max)
		out = append(out, s)
	}
	return out
}

// quantile estimates the q-quantile from bucket counts by linear
// interpolation inside the bucket that holds it, capped at the maximum seen.
func quantile(buckets []uint64, total uint64, q, max float64) float64 {
	if total == 0 {
		return 0
	}
	rank := q * float64(total)
	var cum float64
	for k, n := range buckets {
		if n == 0 {
			continue
		}
		if cum+float64(n) >= rank {
			if k == latencyBuckets {
				return max
			}
			lo := 0.0
			if k > 0 {
				lo = latencyBound(k - 1)
			}
			v := lo + (latencyBound(k)-lo)*(rank-cum)/float64(n)
			return math.Min(v, max)
		}
		cum += float64(n)
	}
	return max
}

// countingFS is the fuse.RawFileSystem of fs/ with every operation timed
// and counted. Methods that are not operations (String, SetDebug, Init,
// OnUnmount) pass through the embedded interface.
type countingFS struct {
	fuse.RawFileSystem
	c *opCounters
}

func (f *countingFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Lookup(cancel, h, name, out)
	f.c.record(opLookup, t, st)
	return st
}

func (f *countingFS) Forget(nodeid, nlookup uint64) {
	t := time.Now()
	f.RawFileSystem.Forget(nodeid, nlookup)
	f.c.record(opForget, t, fuse.OK)
}

func (f *countingFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.GetAttr(cancel, in, out)
	f.c.record(opGetattr, t, st)
	return st
}

func (f *countingFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.SetAttr(cancel, in, out)
	f.c.record(opSetattr, t, st)
	return st
}

func (f *countingFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Mknod(cancel, in, name, out)
	f.c.record(opMknod, t, st)
	return st
}

func (f *countingFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Mkdir(cancel, in, name, out)
	f.c.record(opMkdir, t, st)
	return st
}

func (f *countingFS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Unlink(cancel, h, name)
	f.c.record(opUnlink, t, st)
	return st
}

func (f *countingFS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Rmdir(cancel, h, name)
	f.c.record(opRmdir, t, st)
	return st
}

func (f *countingFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Rename(cancel, in, oldName, newName)
	f.c.record(opRename, t, st)
	return st
}

func (f *countingFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Link(cancel, in, name, out)
	f.c.record(opLink, t, st)
	return st
}

func (f *countingFS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Symlink(cancel, h, target, name, out)
	f.c.record(opSymlink, t, st)
	return st
}

func (f *countingFS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	t := time.Now()
	out, st := f.RawFileSystem.Readlink(cancel, h)
	f.c.record(opReadlink, t, st)
	return out, st
}

func (f *countingFS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Access(cancel, in)
	f.c.record(opAccess, t, st)
	return st
}

func (f *countingFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	t := time.Now()
	n, st := f.RawFileSystem.GetXAttr(cancel, h, attr, dest)
	f.c.record(opGetxattr, t, st)
	return n, st
}

func (f *countingFS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	t := time.Now()
	n, st := f.RawFileSystem.ListXAttr(cancel, h, dest)
	f.c.record(opListxattr, t, st)
	return n, st
}

func (f *countingFS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.SetXAttr(cancel, in, attr, data)
	f.c.record(opSetxattr, t, st)
	return st
}

func (f *countingFS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.RemoveXAttr(cancel, h, attr)
	f.c.record(opRemovexattr, t, st)
	return st
}

func (f *countingFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Create(cancel, in, name, out)
	f.c.record(opCreate, t, st)
	return st
}

func (f *countingFS) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Tmpfile(cancel, in, out)
	f.c.record(opTmpfile, t, st)
	return st
}

func (f *countingFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Open(cancel, in, out)
	f.c.record(opOpen, t, st)
	return st
}

func (f *countingFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	t := time.Now()
	r, st := f.RawFileSystem.Read(cancel, in, buf)
	f.c.record(opRead, t, st)
	return r, st
}

func (f *countingFS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Lseek(cancel, in, out)
	f.c.record(opLseek, t, st)
	return st
}

func (f *countingFS) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.GetLk(cancel, in, out)
	f.c.record(opGetlk, t, st)
	return st
}

func (f *countingFS) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.SetLk(cancel, in)
	f.c.record(opSetlk, t, st)
	return st
}

func (f *countingFS) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.SetLkw(cancel, in)
	f.c.record(opSetlkw, t, st)
	return st
}

func (f *countingFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	t := time.Now()
	f.RawFileSystem.Release(cancel, in)
	f.c.record(opRelease, t, fuse.OK)
}

func (f *countingFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	t := time.Now()
	n, st := f.RawFileSystem.Write(cancel, in, data)
	f.c.record(opWrite, t, st)
	return n, st
}

// Writev counts as write; ENOSYS (go-fuse then calls Write) is not counted.
func (f *countingFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	t := time.Now()
	n, st := f.RawFileSystem.Writev(cancel, in, data)
	if st != fuse.ENOSYS {
		f.c.record(opWrite, t, st)
	}
	return n, st
}

func (f *countingFS) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	t := time.Now()
	n, st := f.RawFileSystem.CopyFileRange(cancel, in)
	f.c.record(opCopyFileRange, t, st)
	return n, st
}

func (f *countingFS) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Ioctl(cancel, in, inbuf, out, outbuf)
	f.c.record(opIoctl, t, st)
	return st
}

func (f *countingFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Flush(cancel, in)
	f.c.record(opFlush, t, st)
	return st
}

func (f *countingFS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Fsync(cancel, in)
	f.c.record(opFsync, t, st)
	return st
}

func (f *countingFS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Fallocate(cancel, in)
	f.c.record(opFallocate, t, st)
	return st
}

func (f *countingFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.OpenDir(cancel, in, out)
	f.c.record(opOpendir, t, st)
	return st
}

func (f *countingFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.ReadDir(cancel, in, out)
	f.c.record(opReaddir, t, st)
	return st
}

func (f *countingFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.ReadDirPlus(cancel, in, out)
	f.c.record(opReaddirplus, t, st)
	return st
}

func (f *countingFS) ReleaseDir(in *fuse.ReleaseIn) {
	t := time.Now()
	f.RawFileSystem.ReleaseDir(in)
	f.c.record(opReleasedir, t, fuse.OK)
}

func (f *countingFS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.FsyncDir(cancel, in)
	f.c.record(opFsyncdir, t, st)
	return st
}

func (f *countingFS) StatFs(cancel <-chan struct{}, in *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.StatFs(cancel, in, out)
	f.c.record(opStatfs, t, st)
	return st
}

func (f *countingFS) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	t := time.Now()
	st := f.RawFileSystem.Statx(cancel, in, out)
	f.c.record(opStatx, t, st)
	return st
}
