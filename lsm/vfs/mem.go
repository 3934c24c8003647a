package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// MemFS is an in-memory FS with strict durability semantics, for tests.
//
// File data written since the last File.Sync, and directory entries created,
// renamed or removed since the last SyncDir of their directory, are lost by
// CrashClone. Everything else survives it.
type MemFS struct {
	// syncMu makes CrashClone atomic with respect to File.Sync: syncs hold
	// it for reading, CrashClone for writing, so a clone never mixes the
	// synced state of one file before a sync with another's after.
	syncMu sync.RWMutex
	mu     struct {
		sync.Mutex
		root  *memNode
		locks map[string]bool
	}
	// capacity, when non-zero, bounds the bytes of all files; writes past it
	// fail with ErrNoSpace. used counts the bytes of files not removed.
	capacity atomic.Int64
	used     atomic.Int64
}

// ErrNoSpace is returned by MemFS writes past its capacity.
var ErrNoSpace = fmt.Errorf("vfs: %w", syscall.ENOSPC)

type memNode struct {
	mu      sync.Mutex
	isDir   bool
	removed bool    // unlinked: its bytes no longer count against capacity
	data    memData // current contents (files)
	synced  memData // contents as of the last Sync (files)
	// children are the current entries; syncedChildren those as of the last
	// SyncDir (directories).
	children       map[string]*memNode
	syncedChildren map[string]*memNode
	modTime        time.Time
}

func newDir() *memNode {
	return &memNode{isDir: true, children: map[string]*memNode{}, syncedChildren: map[string]*memNode{}}
}

// NewMem returns an empty MemFS.
func NewMem() *MemFS {
	m := &MemFS{}
	m.mu.root = newDir()
	m.mu.locks = map[string]bool{}
	return m
}

// SetCapacity bounds the total bytes of file data; 0 removes the bound.
func (m *MemFS) SetCapacity(n int64) { m.capacity.Store(n) }

func split(name string) []string {
	name = path.Clean("/" + name)
	if name == "/" {
		return nil
	}
	return strings.Split(name[1:], "/")
}

// walkLocked returns the parent directory of name and the final element.
func (m *MemFS) walkLocked(name string) (*memNode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", &fs.PathError{Op: "walk", Path: name, Err: fs.ErrInvalid}
	}
	dir := m.mu.root
	for _, p := range parts[:len(parts)-1] {
		c, ok := dir.children[p]
		if !ok {
			return nil, "", &fs.PathError{Op: "walk", Path: name, Err: fs.ErrNotExist}
		}
		if !c.isDir {
			return nil, "", &fs.PathError{Op: "walk", Path: name, Err: errors.New("not a directory")}
		}
		dir = c
	}
	return dir, parts[len(parts)-1], nil
}

func (m *MemFS) lookupLocked(name string) (*memNode, error) {
	if len(split(name)) == 0 {
		return m.mu.root, nil
	}
	dir, base, err := m.walkLocked(name)
	if err != nil {
		return nil, err
	}
	n, ok := dir.children[base]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return n, nil
}

// Create implements FS.
func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.walkLocked(name)
	if err != nil {
		return nil, err
	}
	if n, ok := dir.children[base]; ok && n.isDir {
		return nil, &fs.PathError{Op: "create", Path: name, Err: errors.New("is a directory")}
	}
	if old, ok := dir.children[base]; ok {
		m.forget(old)
	}
	n := &memNode{modTime: time.Now()}
	dir.children[base] = n
	return &memFile{fs: m, n: n, name: name, write: true}, nil
}

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupLocked(name)
	if err != nil {
		return nil, err
	}
	return &memFile{fs: m, n: n, name: name}, nil
}

// OpenReadWrite implements FS.
func (m *MemFS) OpenReadWrite(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupLocked(name)
	if err != nil {
		return nil, err
	}
	if n.isDir {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	}
	return &memFile{fs: m, n: n, name: name, write: true}, nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base, err := m.walkLocked(name)
	if err != nil {
		return err
	}
	n, ok := dir.children[base]
	if !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.isDir && len(n.children) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: errors.New("directory not empty")}
	}
	delete(dir.children, base)
	m.forget(n)
	return nil
}

// forget stops counting an unlinked node's bytes.
func (m *MemFS) forget(n *memNode) {
	if n.isDir {
		return
	}
	n.mu.Lock()
	if !n.removed {
		n.removed = true
		m.used.Add(-n.data.len())
	}
	n.mu.Unlock()
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	odir, obase, err := m.walkLocked(oldname)
	if err != nil {
		return err
	}
	ndir, nbase, err := m.walkLocked(newname)
	if err != nil {
		return err
	}
	n, ok := odir.children[obase]
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	if old, ok := ndir.children[nbase]; ok && old != n {
		m.forget(old)
	}
	delete(odir.children, obase)
	ndir.children[nbase] = n
	return nil
}

// MkdirAll implements FS. New directories are durable at once in their
// parent (as if the parent were synced), which matches what the engine
// needs from mkdir at format time and keeps tests short.
func (m *MemFS) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.mu.root
	for _, p := range split(dir) {
		c, ok := cur.children[p]
		if !ok {
			c = newDir()
			cur.children[p] = c
			cur.syncedChildren[p] = c
		} else if !c.isDir {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: errors.New("not a directory")}
		}
		cur = c
	}
	return nil
}

// List implements FS.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupLocked(dir)
	if err != nil {
		return nil, err
	}
	if !n.isDir {
		return nil, &fs.PathError{Op: "list", Path: dir, Err: errors.New("not a directory")}
	}
	names := make([]string, 0, len(n.children))
	for k := range n.children {
		names = append(names, k)
	}
	sort.Strings(names)
	return names, nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupLocked(name)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return memFileInfo{name: path.Base(name), size: n.data.len(), dir: n.isDir, mod: n.modTime}, nil
}

// SyncDir implements FS.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookupLocked(dir)
	if err != nil {
		return err
	}
	if !n.isDir {
		return &fs.PathError{Op: "syncdir", Path: dir, Err: errors.New("not a directory")}
	}
	n.syncedChildren = make(map[string]*memNode, len(n.children))
	for k, v := range n.children {
		n.syncedChildren[k] = v
	}
	return nil
}

// Lock implements FS.
func (m *MemFS) Lock(name string) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := path.Clean("/" + name)
	if m.mu.locks[key] {
		return nil, fmt.Errorf("lock %s: %w", name, ErrLocked)
	}
	dir, base, err := m.walkLocked(name)
	if err != nil {
		return nil, err
	}
	if _, ok := dir.children[base]; !ok {
		dir.children[base] = &memNode{modTime: time.Now()}
	}
	m.mu.locks[key] = true
	return &memLock{m: m, key: key}, nil
}

// Usage implements FS.
func (m *MemFS) Usage(dir string) (total, free uint64, err error) {
	used := m.used.Load()
	capacity := m.capacity.Load()
	if capacity == 0 {
		capacity = 1 << 40
	}
	if used > capacity {
		used = capacity
	}
	return uint64(capacity), uint64(capacity - used), nil
}

type memLock struct {
	m    *MemFS
	key  string
	once sync.Once
}

func (l *memLock) Close() error {
	l.once.Do(func() {
		l.m.mu.Lock()
		delete(l.m.mu.locks, l.key)
		l.m.mu.Unlock()
	})
	return nil
}

// CrashClone returns a new MemFS holding only what would survive a power loss
// at this instant: synced file contents under synced directory entries.
// Locks are not carried over. The receiver is unchanged and stays usable, so a
// test may clone while the engine is still running and then abandon it.
func (m *MemFS) CrashClone() *MemFS {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	c := NewMem()
	c.capacity.Store(m.capacity.Load())
	seen := map[*memNode]*memNode{}
	var clone func(n *memNode) *memNode
	clone = func(n *memNode) *memNode {
		if x, ok := seen[n]; ok {
			return x
		}
		n.mu.Lock()
		if !n.isDir {
			x := &memNode{data: n.synced.snapshot(), synced: n.synced.snapshot(), modTime: n.modTime}
			c.used.Add(x.data.len())
			n.mu.Unlock()
			seen[n] = x
			return x
		}
		children := make(map[string]*memNode, len(n.syncedChildren))
		for k, v := range n.syncedChildren {
			children[k] = v
		}
		n.mu.Unlock()
		x := newDir()
		seen[n] = x
		for k, v := range children {
			cv := clone(v)
			x.children[k] = cv
			x.syncedChildren[k] = cv
		}
		return x
	}
	c.mu.root = clone(m.mu.root)
	return c
}

// String lists the tree with sizes, for test failure messages.
func (m *MemFS) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	var walk func(n *memNode, p string)
	walk = func(n *memNode, p string) {
		names := make([]string, 0, len(n.children))
		for k := range n.children {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			c := n.children[k]
			if c.isDir {
				fmt.Fprintf(&b, "%s/%s/\n", p, k)
				walk(c, p+"/"+k)
				continue
			}
			c.mu.Lock()
			fmt.Fprintf(&b, "%s/%s %d (synced %d)\n", p, k, c.data.len(), c.synced.len())
			c.mu.Unlock()
		}
	}
	walk(m.mu.root, "")
	return b.String()
}

type memFile struct {
	fs     *MemFS
	n      *memNode
	name   string
	write  bool
	closed bool
}

func (f *memFile) errClosed(op string) error {
	return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if f.closed {
		return 0, f.errClosed("read")
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrInvalid}
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	if off >= f.n.data.len() {
		return 0, io.EOF
	}
	n := f.n.data.readAt(p, off)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// grow extends the file to end bytes (zero-filled); the caller holds f.n.mu.
func (f *memFile) grow(end int64) error {
	cur := f.n.data.len()
	if end <= cur {
		return nil
	}
	if !f.n.removed {
		if c := f.fs.capacity.Load(); c > 0 && f.fs.used.Load()+end-cur > c {
			return &fs.PathError{Op: "write", Path: f.name, Err: ErrNoSpace}
		}
		f.fs.used.Add(end - cur)
	}
	f.n.data.resize(end)
	return nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if f.closed {
		return 0, f.errClosed("write")
	}
	if !f.write {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrPermission}
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	if err := f.grow(off + int64(len(p))); err != nil {
		return 0, err
	}
	f.n.data.writeAt(p, off)
	f.n.modTime = time.Now()
	return len(p), nil
}

func (f *memFile) Write(p []byte) (int, error) {
	if f.closed {
		return 0, f.errClosed("write")
	}
	f.n.mu.Lock()
	off := f.n.data.len()
	f.n.mu.Unlock()
	return f.WriteAt(p, off)
}

func (f *memFile) Close() error {
	if f.closed {
		return f.errClosed("close")
	}
	f.closed = true
	return nil
}

func (f *memFile) Sync() error {
	if f.closed {
		return f.errClosed("sync")
	}
	f.fs.syncMu.RLock()
	defer f.fs.syncMu.RUnlock()
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	f.n.synced = f.n.data.snapshot()
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	return f.n.data.len(), nil
}

func (f *memFile) Truncate(size int64) error {
	if f.closed {
		return f.errClosed("truncate")
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	if cur := f.n.data.len(); size <= cur {
		if !f.n.removed {
			f.fs.used.Add(size - cur)
		}
		f.n.data.resize(size)
		return nil
	}
	return f.grow(size)
}

func (f *memFile) Preallocate(size int64) error {
	if f.closed {
		return f.errClosed("preallocate")
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	if size <= f.n.data.len() {
		return nil
	}
	return f.grow(size)
}

type memFileInfo struct {
	name string
	size int64
	dir  bool
	mod  time.Time
}

func (i memFileInfo) Name() string { return i.name }
func (i memFileInfo) Size() int64  { return i.size }
func (i memFileInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o700
	}
	return 0o600
}
func (i memFileInfo) ModTime() time.Time { return i.mod }
func (i memFileInfo) IsDir() bool        { return i.dir }
func (i memFileInfo) Sys() any           { return nil }
