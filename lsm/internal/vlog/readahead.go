package vlog

import (
	"hash/crc32"
	"io"
	"slices"
	"sync"

	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// Streams: long runs read around the page cache (readRun) one after the
// other in a segment, each starting a record's header and key after the
// previous one ended, are a stream (a file read in sequence), and the Reader
// reads the stream's next runs ahead, in the background, into buffers of
// their own (prefetches); a run of the stream then takes its bytes from its
// prefetch instead of waiting for the device. The kernel asks a FUSE daemon
// for one or two READs of up to 1 MiB at a time per sequential reader, so
// without this each READ waited for a device read of its own; a wider
// kernel readahead would do the same, but it also widens mmap's
// read-around of every random page fault.
//
// The next runs are predicted to be as long as the last and as far apart
// (a file's 1 MiB READs of blocks written in sequence are); a prediction
// that misses costs a wasted read and the run is read as before. A stream's
// depth (prefetches under way) grows with its length, to maxDepth, so that
// a short stream wastes little at its end.
//
// A prefetch cannot serve stale values: segments are append-only, and an
// append that failed is cut off before any pointer to it is handed out. The
// bytes of a record still being written, or of a failed append, fail their
// value's CRC, and the run is then read again from the file.
//
// At most maxStreams streams are followed (the least recently used gives
// way), so prefetches hold at most maxStreams*maxDepth buffers of about
// MaxRun.
const (
	maxStreams = 4
	maxDepth   = 3
	// streamWindow is how far from a stream's furthest end a run may start
	// and still belong to it.
	streamWindow = (maxDepth + 1) * MaxRun
)

type stream struct {
	seg  uint64
	end  int64 // the furthest end of its runs
	gap  int64 // bytes between its last two runs
	n    int   // length of its last run
	runs int
	next int64       // where the first run no prefetch covers is predicted to start
	pfs  []*prefetch // under way or done, not yet taken
	used uint64      // streams.clock at its last run
}

// prefetch is a read of [off, off+size) of a segment around the page cache.
// Its fields after size are the reading goroutine's until done closes.
type prefetch struct {
	off  int64 // aligned to vfs.DirectAlign, as size
	size int
	done chan struct{}
	bp   *[]byte // from runBufs; nil if the read did not start
	k    int
	err  error
}

type streams struct {
	mu     sync.Mutex
	list   []*stream
	clock  uint64
	closed bool
	wg     sync.WaitGroup // prefetches under way
}

// takePrefetch returns a prefetch of seg that holds [lo, hi), taken from
// its stream, or nil.
func (r *Reader) takePrefetch(seg uint64, lo, hi int64) *prefetch {
	s := &r.streams
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.list {
		if st.seg != seg {
			continue
		}
		for i, pf := range st.pfs {
			if pf.off <= lo && hi <= pf.off+int64(pf.size) {
				st.pfs = slices.Delete(st.pfs, i, i+1)
				return pf
			}
		}
	}
	return nil
}

// usePrefetch waits for pf and returns the n bytes at off of the segment
// from it if it read them whole and every value of ps (the run's pointers,
// the first at off) passes its CRC. Otherwise it gives pf's buffer back and
// returns false. The caller gives the buffer back (runBufs) after using the
// bytes.
func usePrefetch(pf *prefetch, ps []Pointer, off int64, n int) ([]byte, bool) {
	<-pf.done
	start := int(off - pf.off)
	if pf.bp == nil || (pf.err != nil && pf.err != io.EOF) || pf.k < start+n {
		if pf.bp != nil {
			runBufs.Put(pf.bp)
		}
		return nil, false
	}
	b := (*pf.bp)[start : start+n]
	for _, p := range ps {
		lo := int64(p.Offset) - off
		if crc32.Checksum(b[lo:lo+int64(p.Len)], castagnoli) != p.CRC {
			runBufs.Put(pf.bp)
			return nil, false
		}
	}
	return b, true
}

// noteRun records a run of seg, [off, off+n), read around the page cache
// (noted as its read starts, or as it is taken from a prefetch), and starts
// the prefetches of its stream's next runs.
func (r *Reader) noteRun(seg uint64, off int64, n int) {
	const a = vfs.DirectAlign
	s := &r.streams
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock++
	end := off + int64(n)
	var st *stream
	for _, x := range s.list {
		// Runs of a stream are noted about in order: reads under way at
		// once (the kernel sends a sequential reader's READs two at a
		// time) may be noted a few runs apart.
		if x.seg == seg && off >= x.end-streamWindow && off <= x.end+streamWindow {
			st = x
			break
		}
	}
	if st == nil {
		st = &stream{seg: seg, end: end, n: n, runs: 1, next: end, used: s.clock}
		if len(s.list) < maxStreams {
			s.list = append(s.list, st)
			return
		}
		lru := 0
		for i, x := range s.list {
			if x.used < s.list[lru].used {
				lru = i
			}
		}
		s.list[lru] = st // its prefetches are left to finish and be collected
		return
	}
	if off >= st.end && off-st.end <= maxRecordGap {
		st.gap = off - st.end
	}
	st.end = max(st.end, end)
	st.n = n
	st.runs++
	st.used = s.clock
	// Prefetches wholly behind the run are not going to be taken.
	st.pfs = slices.DeleteFunc(st.pfs, func(pf *prefetch) bool { return pf.off+int64(pf.size) <= off })
	st.next = max(st.next, st.end+st.gap)
	depth := min(maxDepth, st.runs/2)
	for len(st.pfs) < depth && !s.closed {
		lo := st.next &^ (a - 1)
		hi := (st.next + int64(st.n) + a - 1) &^ (a - 1)
		st.pfs = append(st.pfs, r.startPrefetch(seg, lo, int(hi-lo)))
		st.next += int64(st.n) + st.gap
	}
}

// startPrefetch starts reading [off, off+size) of seg around the page
// cache. r.streams.mu is held.
func (r *Reader) startPrefetch(seg uint64, off int64, size int) *prefetch {
	pf := &prefetch{off: off, size: size, done: make(chan struct{})}
	r.streams.wg.Add(1)
	go func() {
		defer r.streams.wg.Done()
		defer close(pf.done)
		f, release, err := r.file(seg)
		if err != nil {
			pf.err = err
			return
		}
		defer release()
		dr, ok := f.(vfs.DirectReader)
		if !ok {
			pf.err = vfs.ErrNoDirect
			return
		}
		pf.bp = runBufs.Get().(*[]byte)
		if cap(*pf.bp) < size {
			*pf.bp = vfs.AlignedBuffer(size)
		}
		pf.k, pf.err = dr.ReadAtDirect((*pf.bp)[:size], off)
	}()
	return pf
}

// forgetStreams stops following seg's streams (Forget).
func (r *Reader) forgetStreams(seg uint64) {
	s := &r.streams
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = slices.DeleteFunc(s.list, func(st *stream) bool { return st.seg == seg })
}

// closeStreams stops prefetching and waits for the prefetches under way
// (Close), so that none opens a segment file after it.
func (r *Reader) closeStreams() {
	s := &r.streams
	s.mu.Lock()
	s.closed = true
	s.list = nil
	s.mu.Unlock()
	s.wg.Wait()
}
