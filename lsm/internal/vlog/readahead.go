package vlog

import (
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"

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
// A stream's runs lie on a grid: as long as its last and as far apart (a
// file's 1 MiB READs of blocks written in sequence are). A run that starts
// at most a record's header and key after the stream's end continues it; a
// run on its grid a few runs ahead or behind belongs to it too (READs under
// way at once are noted out of order), and one ahead moves it on, one behind
// does not. Any
// other run starts a stream of its own, and prefetches begin only once a
// stream has run at one length for a while (the depth, prefetches under way
// at once, grows to maxDepth with it): random long reads, a reader going
// backwards, files interleaved in a segment and the kernel's growing first
// READs start none, and a short stream wastes little at its end.
//
// A prefetch cannot serve stale values: segments are append-only, segment
// numbers are never reused, and an append that failed is cut off before any
// pointer to it is handed out. The bytes of a record still being written, or
// of a failed append, fail their value's CRC, and the run is then read again
// from the file. A prefetch of a range the page cache holds whole (just
// written) reads nothing: the run is copied from the cache as before.
//
// At most maxStreams streams are followed (the least recently used gives
// way) and at most maxPrefetches prefetches hold buffers at once, whether
// under way, waiting to be taken, or given up but not yet finished; a
// stream that needs one past that gives up those of the least recently used
// stream that holds any and has been idle for idleRuns runs of the others.
const (
	maxStreams    = 16
	maxDepth      = 3
	maxPrefetches = 12
	// idleRuns is how many runs of other streams pass before a stream
	// with none counts as ended.
	idleRuns = 2 * maxStreams
	// noDirectPause is how many runs prefetching pauses for after a
	// prefetch found direct reads refused.
	noDirectPause = 1024
)

type stream struct {
	seg  uint64
	off  int64 // where its furthest run starts
	n    int   // that run's length
	gap  int64 // bytes between its runs; -1 until two runs followed each other
	same int   // runs in a row of length n that moved it on
	next int64 // where the first run no prefetch covers is predicted to start
	pfs  []*prefetch
	used uint64 // streams.clock at its last run
}

// end is where the stream's furthest run ends.
func (st *stream) end() int64 { return st.off + int64(st.n) }

// Prefetch states: the reading goroutine and a stream that gives up the
// prefetch race to finish; the second to arrive gives the buffer back.
const (
	pfRunning int32 = iota
	pfDone
	pfAbandoned
)

// prefetch is a read of [off, off+size) of a segment around the page cache.
// Its fields after state are the reading goroutine's until done closes.
type prefetch struct {
	seg   uint64
	at    int64 // where the run it is for is predicted to start
	off   int64 // aligned to vfs.DirectAlign, as size
	size  int
	state atomic.Int32
	done  chan struct{}
	bp    *[]byte // from runBufs; nil if the read did not start
	k     int
	err   error
}

type streams struct {
	mu     sync.Mutex
	list   []*stream
	clock  uint64
	closed bool
	live   atomic.Int64 // prefetches holding or about to hold a buffer
	// noDirect is set by a prefetch that found direct reads refused (a
	// filesystem without O_DIRECT, or no descriptor to spare); prefetching
	// then pauses until clock reaches resume.
	noDirect atomic.Bool
	resume   uint64
	wg       sync.WaitGroup
}

// errPrefetchCached ends a prefetch of a range the page cache holds.
var errPrefetchCached = errors.New("vlog: prefetch: range cached")

// takePrefetch returns a prefetch of seg that holds [off, off+n) widened to
// aligned blocks, taken from its stream, or nil. The caller waits for it
// and releases it.
func (r *Reader) takePrefetch(seg uint64, off int64, n int) *prefetch {
	lo, hi := alignedSpan(off, n)
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

// usePrefetch waits for pf, a prefetch taken from its stream, and returns
// the n bytes at off of the segment from it if it read them whole; the
// caller checks each value's CRC as it uses it, and releases pf after
// using the bytes, whatever the outcome.
func usePrefetch(pf *prefetch, off int64, n int) ([]byte, bool) {
	<-pf.done
	start := int(off - pf.off)
	if pf.bp == nil || (pf.err != nil && pf.err != io.EOF) || pf.k < start+n {
		return nil, false
	}
	return (*pf.bp)[start : start+n], true
}

// releasePrefetch gives pf's buffer back: once pf is done and no stream
// holds it.
func (r *Reader) releasePrefetch(pf *prefetch) {
	if pf.bp != nil {
		runBufs.Put(pf.bp)
		pf.bp = nil
	}
	r.streams.live.Add(-1)
}

// abandon gives up a prefetch that a stream held: its buffer goes back now
// if it is done, or when its read ends.
func (r *Reader) abandon(pf *prefetch) {
	if !pf.state.CompareAndSwap(pfRunning, pfAbandoned) {
		r.releasePrefetch(pf) // done: the goroutine has left it to us
	}
}

// noteRun records a run of seg, [off, off+n), read around the page cache (as
// its read starts, or as it is taken from a prefetch), and starts the
// prefetches of its stream's next runs.
func (r *Reader) noteRun(seg uint64, off int64, n int) {
	s := &r.streams
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock++
	for _, st := range s.list {
		if st.seg != seg {
			continue
		}
		switch {
		case off >= st.end() && off-st.end() <= maxRecordGap: // continues it
			st.gap = off - st.end()
		case st.gap >= 0 && n == st.n && off != st.off && (off-st.off)%(int64(n)+st.gap) == 0 &&
			abs((off-st.off)/(int64(n)+st.gap)) <= maxDepth+1: // on its grid
			if off < st.off {
				st.used = s.clock // behind: noted late
				return
			}
		case off == st.off && n == st.n: // the same run again
			st.used = s.clock
			return
		default:
			continue
		}
		if n == st.n {
			st.same++
		} else {
			st.same = 1
		}
		st.off, st.n, st.used = off, n, s.clock
		r.topUp(st)
		return
	}
	st := &stream{seg: seg, off: off, n: n, gap: -1, same: 1, next: off + int64(n), used: s.clock}
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
	for _, pf := range s.list[lru].pfs {
		r.abandon(pf)
	}
	s.list[lru] = st
}

// topUp gives up st's prefetches for runs before its last and starts those of
// its next runs, up to its depth. r.streams.mu is held.
func (r *Reader) topUp(st *stream) {
	s := &r.streams
	st.pfs = slices.DeleteFunc(st.pfs, func(pf *prefetch) bool {
		if pf.at < st.off {
			r.abandon(pf)
			return true
		}
		return false
	})
	if s.noDirect.Swap(false) {
		s.resume = s.clock + noDirectPause
	}
	if st.gap < 0 || st.n > MaxRun || s.closed || s.clock < s.resume {
		return
	}
	st.next = max(st.next, st.end()+st.gap)
	depth := min(maxDepth, st.same/2)
	for len(st.pfs) < depth {
		// Given-up prefetches still reading keep their buffers: reclaim
		// until one is free or no idle stream holds any.
		for s.live.Load() >= maxPrefetches && r.reclaimPrefetches(st) {
		}
		if s.live.Load() >= maxPrefetches {
			break
		}
		lo, hi := alignedSpan(st.next, st.n)
		st.pfs = append(st.pfs, r.startPrefetch(st.seg, st.next, lo, int(hi-lo)))
		st.next += int64(st.n) + st.gap
	}
}

// reclaimPrefetches gives up the prefetches of the least recently used
// stream that holds any and has had no run for the last idleRuns runs of
// any stream (it ended: its reader moved on to another segment, or
// stopped), and reports whether there was one. Streams still read keep
// theirs: taking from each other in turn, they would waste every read.
// r.streams.mu is held.
func (r *Reader) reclaimPrefetches(st *stream) bool {
	var lru *stream
	for _, x := range r.streams.list {
		if x != st && len(x.pfs) > 0 && x.used+idleRuns < r.streams.clock && (lru == nil || x.used < lru.used) {
			lru = x
		}
	}
	if lru == nil {
		return false
	}
	for _, pf := range lru.pfs {
		r.abandon(pf)
	}
	lru.pfs = nil
	lru.next = lru.end() // if it goes on, its prefetches start again from there
	return true
}

// startPrefetch starts reading [off, off+size) of seg around the page
// cache, for the run predicted to start at at. r.streams.mu is held.
func (r *Reader) startPrefetch(seg uint64, at, off int64, size int) *prefetch {
	s := &r.streams
	pf := &prefetch{seg: seg, at: at, off: off, size: size, done: make(chan struct{})}
	s.live.Add(1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		pf.k, pf.err = r.prefetch(pf)
		if !pf.state.CompareAndSwap(pfRunning, pfDone) {
			r.releasePrefetch(pf) // abandoned while it ran
		}
		close(pf.done)
	}()
	return pf
}

// prefetch reads pf's range into a buffer from the pool.
func (r *Reader) prefetch(pf *prefetch) (int, error) {
	f, release, err := r.file(pf.seg)
	if err != nil {
		return 0, err
	}
	defer release()
	dr, ok := f.(vfs.DirectReader)
	if !ok {
		r.streams.noDirect.Store(true)
		return 0, vfs.ErrNoDirect
	}
	if dr.Cached(pf.off, int64(pf.size)) {
		return 0, errPrefetchCached
	}
	bp := runBufs.Get().(*[]byte)
	if cap(*bp) < pf.size {
		*bp = vfs.AlignedBuffer(pf.size)
	}
	pf.bp = bp
	k, err := dr.ReadAtDirect((*bp)[:pf.size], pf.off)
	if errors.Is(err, vfs.ErrNoDirect) {
		r.streams.noDirect.Store(true)
	}
	return k, err
}

// forgetStreams stops following seg's streams (Forget).
func (r *Reader) forgetStreams(seg uint64) {
	s := &r.streams
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = slices.DeleteFunc(s.list, func(st *stream) bool {
		if st.seg != seg {
			return false
		}
		for _, pf := range st.pfs {
			r.abandon(pf)
		}
		return true
	})
}

// closeStreams stops prefetching and waits for the prefetches under way
// (Close), so that none opens a segment file after it.
func (r *Reader) closeStreams() {
	s := &r.streams
	s.mu.Lock()
	s.closed = true
	for _, st := range s.list {
		for _, pf := range st.pfs {
			r.abandon(pf)
		}
	}
	s.list = nil
	s.mu.Unlock()
	s.wg.Wait()
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
