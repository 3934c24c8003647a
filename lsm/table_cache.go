package lsm

import (
	"container/list"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/lsmfs/lsmfs/blockcache"
	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/sstable"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// tableCache keeps SSTable readers open, up to a bound, evicting the least
// recently used reader that nobody holds.
type tableCache struct {
	fs       vfs.FS
	dirname  string
	cache    *blockcache.Cache
	cacheNS  uint64 // ORed into cache keys' file numbers (shared caches)
	stats    *sstable.ReaderStats
	capacity int

	mu struct {
		sync.Mutex
		m   map[uint64]*tableEntry
		lru list.List // of *tableEntry, front = most recent, only refs == 0
	}
}

type tableEntry struct {
	fileNum uint64
	reader  *sstable.Reader
	err     error
	ready   chan struct{}
	refs    int
	elem    *list.Element
	evicted bool
}

func newTableCache(fs vfs.FS, dirname string, cache *blockcache.Cache, cacheNS uint64, stats *sstable.ReaderStats, capacity int) *tableCache {
	c := &tableCache{fs: fs, dirname: dirname, cache: cache, cacheNS: cacheNS, stats: stats, capacity: capacity}
	c.mu.m = map[uint64]*tableEntry{}
	return c
}

func tableFileName(n uint64) string { return fmt.Sprintf("%06d.sst", n) }

// get returns the reader of a table, with a reference that release drops.
func (c *tableCache) get(fileNum uint64) (*sstable.Reader, func(), error) {
	c.mu.Lock()
	e := c.mu.m[fileNum]
	if e == nil {
		e = &tableEntry{fileNum: fileNum, ready: make(chan struct{})}
		c.mu.m[fileNum] = e
		e.refs++
		c.mu.Unlock()
		e.reader, e.err = c.open(fileNum)
		close(e.ready)
		if e.err != nil {
			c.mu.Lock()
			if c.mu.m[fileNum] == e {
				delete(c.mu.m, fileNum)
			}
			e.refs-- // no reader to keep: waiters drop theirs in release
			c.mu.Unlock()
			return nil, nil, e.err
		}
	} else {
		e.refs++
		if e.elem != nil {
			c.mu.lru.Remove(e.elem)
			e.elem = nil
		}
		c.mu.Unlock()
		<-e.ready
		if e.err != nil {
			c.release(e)
			return nil, nil, e.err
		}
	}
	return e.reader, func() { c.release(e) }, nil
}

func (c *tableCache) open(fileNum uint64) (*sstable.Reader, error) {
	name := tableFileName(fileNum)
	f, err := c.fs.Open(vfs.Join(c.dirname, name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, base.Corruptf(name, -1, "table named by the manifest is missing")
		}
		return nil, fmt.Errorf("open sstable %s: %w", name, err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open sstable %s: %w", name, err)
	}
	r, err := sstable.Open(f, size, sstable.ReaderOptions{Cache: c.cache, FileNum: fileNum | c.cacheNS, FileName: name, Stats: c.stats})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open sstable %s: %w", name, err)
	}
	return r, nil
}

func (c *tableCache) release(e *tableEntry) {
	c.mu.Lock()
	e.refs--
	var toClose []*tableEntry
	if e.refs == 0 {
		if e.evicted || e.err != nil {
			toClose = append(toClose, e)
		} else {
			e.elem = c.mu.lru.PushFront(e)
			for len(c.mu.m) > c.capacity && c.mu.lru.Len() > 0 {
				old := c.mu.lru.Remove(c.mu.lru.Back()).(*tableEntry)
				old.elem = nil
				delete(c.mu.m, old.fileNum)
				toClose = append(toClose, old)
			}
		}
	}
	c.mu.Unlock()
	for _, x := range toClose {
		if x.reader != nil {
			x.reader.Close()
		}
	}
}

// evict drops a table's reader (its file is about to be deleted). A reader
// still held is closed by its last release.
func (c *tableCache) evict(fileNum uint64) {
	c.mu.Lock()
	e := c.mu.m[fileNum]
	if e == nil {
		c.mu.Unlock()
		return
	}
	delete(c.mu.m, fileNum)
	e.evicted = true
	var closeNow bool
	if e.refs == 0 {
		if e.elem != nil {
			c.mu.lru.Remove(e.elem)
			e.elem = nil
		}
		closeNow = true
	}
	c.mu.Unlock()
	if closeNow && e.reader != nil {
		e.reader.Close()
	}
}

// close closes every reader not held.
func (c *tableCache) close() {
	c.mu.Lock()
	var toClose []*tableEntry
	for _, e := range c.mu.m {
		e.evicted = true
		e.elem = nil
		if e.refs == 0 {
			toClose = append(toClose, e)
		}
	}
	c.mu.m = map[uint64]*tableEntry{}
	c.mu.lru.Init()
	c.mu.Unlock()
	for _, e := range toClose {
		if e.reader != nil {
			e.reader.Close()
		}
	}
}
