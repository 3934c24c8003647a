package vfs

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
)

// RecordingFS is a MemFS that logs every change it has not made durable yet,
// so that a crash test can rebuild every state a power loss could leave, not
// only the one CrashClone gives (CrashClone keeps exactly the synced state).
//
// The model is MemFS's: a file's writes, truncations and preallocations are
// pending until the next File.Sync of that file; a directory entry created,
// renamed or removed is pending until the next SyncDir of its directory (of
// both directories for a rename). A pending change may or may not have
// reached the disk at a crash, and a disk cache may write pending changes in
// any order. Capture takes a Window: the durable state plus the pending
// changes in call order. From a window, Prefix(k) is the durable state with
// the first k pending changes applied, Subset applies any subset (in call
// order, which is what a reordering cache leaves: a change that reached the
// disk is there, a later one that did not is not), and Torn applies a prefix
// and then only the first bytes of the next write.
//
// Directory operations of one directory are applied in call order in every
// state (as a journaling filesystem persists them); data writes are the ones
// a reordering may drop.
//
// Every mutating call holds the recorder's lock from the call to its log
// entry, so a window is always taken between two calls. A hook (SetHook) runs
// after every mutating call under that lock; it may capture a window, which is
// how a test crashes "inside" an engine operation (between the value-log
// write and the journal force, in the middle of a flush).
type RecordingFS struct {
	mem *MemFS

	mu struct {
		sync.Mutex
		pending []*recOp
		calls   int
		hook    func(Event)
	}
}

// Event describes a mutating call, for a RecordingFS hook.
type Event struct {
	// Index counts mutating calls from 0 (syncs included).
	Index int
	// Op names the call: "write 000003.sst@4096+512", "sync journal", ...
	Op string
	// Pending is the number of changes not yet durable after the call.
	Pending int

	r *RecordingFS
}

// Capture returns the window after this call (see RecordingFS.Capture). It
// may be called only from the hook, while the event is being delivered.
func (e Event) Capture() *Window { return e.r.captureLocked() }

type recKind uint8

const (
	recWrite recKind = iota
	recTruncate
	recCreate
	recRemove
	recRename
)

// recOp is one pending change. Nodes are the MemFS's; a captured window
// holds copies bound to the window's own nodes.
type recOp struct {
	kind recKind
	desc string
	node *memNode // the file written, or the child of an entry change
	off  int64
	data []byte
	size int64
	// Entry changes: the directory and name (rename: from dir/name to
	// dir2/name2), and the directories whose SyncDir is still awaited.
	dir, dir2     *memNode
	name, name2   string
	awaitingSyncs map[*memNode]bool
}

// NewRecording returns a RecordingFS over m, which it owns from then on:
// use m only through the RecordingFS (or read it after the test).
func NewRecording(m *MemFS) *RecordingFS {
	return &RecordingFS{mem: m}
}

// Mem returns the underlying MemFS.
func (r *RecordingFS) Mem() *MemFS { return r.mem }

// SetHook installs fn (nil removes it). fn runs after every mutating call,
// with the recorder locked: it may call Event.Capture but no method of the
// RecordingFS or its files.
func (r *RecordingFS) SetHook(fn func(Event)) {
	r.mu.Lock()
	r.mu.hook = fn
	r.mu.Unlock()
}

// Calls returns the number of mutating calls so far.
func (r *RecordingFS) Calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.calls
}

// Pending returns the number of changes not yet durable.
func (r *RecordingFS) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.mu.pending)
}

// Capture returns the window at this instant.
func (r *RecordingFS) Capture() *Window {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.captureLocked()
}

// doneLocked ends a mutating call: it counts it and runs the hook.
func (r *RecordingFS) doneLocked(desc string) {
	i := r.mu.calls
	r.mu.calls++
	if r.mu.hook != nil {
		r.mu.hook(Event{Index: i, Op: desc, Pending: len(r.mu.pending), r: r})
	}
}

func (r *RecordingFS) addLocked(op *recOp) { r.mu.pending = append(r.mu.pending, op) }

// syncFileLocked drops the pending data changes of n: they are durable.
func (r *RecordingFS) syncFileLocked(n *memNode) {
	kept := r.mu.pending[:0]
	for _, op := range r.mu.pending {
		if (op.kind == recWrite || op.kind == recTruncate) && op.node == n {
			continue
		}
		kept = append(kept, op)
	}
	clear(r.mu.pending[len(kept):])
	r.mu.pending = kept
}

// syncDirLocked drops the pending entry changes of dir.
func (r *RecordingFS) syncDirLocked(dir *memNode) {
	kept := r.mu.pending[:0]
	for _, op := range r.mu.pending {
		if op.awaitingSyncs != nil && op.awaitingSyncs[dir] {
			delete(op.awaitingSyncs, dir)
			if len(op.awaitingSyncs) == 0 {
				continue
			}
		}
		kept = append(kept, op)
	}
	clear(r.mu.pending[len(kept):])
	r.mu.pending = kept
}

// entry returns the directory node and child (nil if absent) of name.
func (r *RecordingFS) entryLocked(name string) (dir *memNode, base string, child *memNode) {
	r.mem.mu.Lock()
	defer r.mem.mu.Unlock()
	d, b, err := r.mem.walkLocked(name)
	if err != nil {
		return nil, "", nil
	}
	return d, b, d.children[b]
}

// Create implements FS.
func (r *RecordingFS) Create(name string) (File, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := r.mem.Create(name)
	if err != nil {
		return nil, err
	}
	mf := f.(*memFile)
	dir, base, _ := r.entryLocked(name)
	desc := "create " + name
	r.addLocked(&recOp{kind: recCreate, desc: desc, node: mf.n, dir: dir, name: base, awaitingSyncs: map[*memNode]bool{dir: true}})
	r.doneLocked(desc)
	return &recFile{r: r, f: mf}, nil
}

// Open implements FS.
func (r *RecordingFS) Open(name string) (File, error) {
	f, err := r.mem.Open(name)
	if err != nil {
		return nil, err
	}
	return &recFile{r: r, f: f.(*memFile)}, nil
}

// OpenReadWrite implements FS.
func (r *RecordingFS) OpenReadWrite(name string) (File, error) {
	f, err := r.mem.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return &recFile{r: r, f: f.(*memFile)}, nil
}

// Remove implements FS.
func (r *RecordingFS) Remove(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	dir, base, child := r.entryLocked(name)
	if err := r.mem.Remove(name); err != nil {
		return err
	}
	desc := "remove " + name
	r.addLocked(&recOp{kind: recRemove, desc: desc, node: child, dir: dir, name: base, awaitingSyncs: map[*memNode]bool{dir: true}})
	r.doneLocked(desc)
	return nil
}

// Rename implements FS.
func (r *RecordingFS) Rename(oldname, newname string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	odir, obase, child := r.entryLocked(oldname)
	ndir, nbase, _ := r.entryLocked(newname)
	if err := r.mem.Rename(oldname, newname); err != nil {
		return err
	}
	desc := "rename " + oldname + " " + newname
	r.addLocked(&recOp{kind: recRename, desc: desc, node: child, dir: odir, name: obase, dir2: ndir, name2: nbase,
		awaitingSyncs: map[*memNode]bool{odir: true, ndir: true}})
	r.doneLocked(desc)
	return nil
}

// MkdirAll implements FS (MemFS makes new directories durable at once).
func (r *RecordingFS) MkdirAll(dir string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mem.MkdirAll(dir)
}

// List implements FS.
func (r *RecordingFS) List(dir string) ([]string, error) { return r.mem.List(dir) }

// Stat implements FS.
func (r *RecordingFS) Stat(name string) (os.FileInfo, error) { return r.mem.Stat(name) }

// SyncDir implements FS.
func (r *RecordingFS) SyncDir(dir string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.mem.SyncDir(dir); err != nil {
		return err
	}
	r.mem.mu.Lock()
	n, err := r.mem.lookupLocked(dir)
	r.mem.mu.Unlock()
	if err == nil {
		r.syncDirLocked(n)
	}
	r.doneLocked("syncdir " + dir)
	return nil
}

// Lock implements FS.
func (r *RecordingFS) Lock(name string) (io.Closer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mem.Lock(name)
}

// Usage implements FS.
func (r *RecordingFS) Usage(dir string) (total, free uint64, err error) { return r.mem.Usage(dir) }

// recFile records the changes made through a MemFS file.
type recFile struct {
	r *RecordingFS
	f *memFile
}

func (f *recFile) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }
func (f *recFile) Size() (int64, error)                    { return f.f.Size() }
func (f *recFile) Close() error                            { return f.f.Close() }

func (f *recFile) WriteAt(p []byte, off int64) (int, error) {
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	return f.writeAtLocked(p, off)
}

func (f *recFile) writeAtLocked(p []byte, off int64) (int, error) {
	n, err := f.f.WriteAt(p, off)
	if n > 0 {
		desc := fmt.Sprintf("write %s@%d+%d", f.f.name, off, n)
		f.r.addLocked(&recOp{kind: recWrite, desc: desc, node: f.f.n, off: off, data: append([]byte(nil), p[:n]...)})
		f.r.doneLocked(desc)
	}
	return n, err
}

func (f *recFile) Write(p []byte) (int, error) {
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	off, err := f.f.Size()
	if err != nil {
		return 0, err
	}
	return f.writeAtLocked(p, off)
}

func (f *recFile) Sync() error {
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	if err := f.f.Sync(); err != nil {
		return err
	}
	f.r.syncFileLocked(f.f.n)
	f.r.doneLocked("sync " + f.f.name)
	return nil
}

func (f *recFile) Truncate(size int64) error {
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	if err := f.f.Truncate(size); err != nil {
		return err
	}
	desc := fmt.Sprintf("truncate %s %d", f.f.name, size)
	f.r.addLocked(&recOp{kind: recTruncate, desc: desc, node: f.f.n, size: size})
	f.r.doneLocked(desc)
	return nil
}

func (f *recFile) Preallocate(size int64) error {
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	before, _ := f.f.Size()
	if err := f.f.Preallocate(size); err != nil {
		return err
	}
	if size > before {
		// Growing with zeros: a truncation upwards.
		desc := fmt.Sprintf("preallocate %s %d", f.f.name, size)
		f.r.addLocked(&recOp{kind: recTruncate, desc: desc, node: f.f.n, size: size})
		f.r.doneLocked(desc)
	}
	return nil
}

// Window is the durable state of a RecordingFS at one instant plus the
// changes pending then, from which the crash states are built. It is
// immutable and independent of the RecordingFS.
type Window struct {
	root     *memNode
	detached []*memNode // nodes pending changes refer to that no durable entry names
	ops      []*recOp   // bound to root's (and detached) nodes
	capacity int64
}

// captureLocked copies the durable tree and the pending changes.
func (r *RecordingFS) captureLocked() *Window {
	m := r.mem
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[*memNode]*memNode{}
	w := &Window{capacity: m.capacity.Load()}
	w.root = cloneNode(m.mu.root, seen, true)
	bind := func(n *memNode) *memNode {
		if n == nil {
			return nil
		}
		if c, ok := seen[n]; ok {
			return c
		}
		c := cloneNode(n, seen, true)
		w.detached = append(w.detached, c)
		return c
	}
	for _, op := range r.mu.pending {
		c := *op
		c.node, c.dir, c.dir2 = bind(op.node), bind(op.dir), bind(op.dir2)
		c.awaitingSyncs = nil
		w.ops = append(w.ops, &c)
	}
	return w
}

// cloneNode copies n and what it names; synced: take the durable contents
// and entries (a MemFS node), else the current ones (a window's node, whose
// contents are all durable). seen maps originals to copies.
func cloneNode(n *memNode, seen map[*memNode]*memNode, synced bool) *memNode {
	if c, ok := seen[n]; ok {
		return c
	}
	n.mu.Lock()
	if !n.isDir {
		src := &n.data
		if synced {
			src = &n.synced
		}
		c := &memNode{data: src.snapshot(), modTime: n.modTime}
		n.mu.Unlock()
		seen[n] = c
		return c
	}
	src := n.children
	if synced {
		src = n.syncedChildren
	}
	children := make(map[string]*memNode, len(src))
	for k, v := range src {
		children[k] = v
	}
	n.mu.Unlock()
	c := newDir()
	c.modTime = n.modTime
	seen[n] = c
	for k, v := range children {
		c.children[k] = cloneNode(v, seen, synced)
	}
	return c
}

// Len is the number of pending changes.
func (w *Window) Len() int { return len(w.ops) }

// Op describes pending change i.
func (w *Window) Op(i int) string { return w.ops[i].desc }

// IsWrite reports whether pending change i writes file data (the changes
// Torn can tear).
func (w *Window) IsWrite(i int) bool { return w.ops[i].kind == recWrite && len(w.ops[i].data) > 1 }

// Prefix returns the state with the first k pending changes applied.
func (w *Window) Prefix(k int) *MemFS {
	return w.state(func(i int) bool { return i < k }, -1, 0)
}

// Subset returns the state with the pending changes keep selects applied,
// in call order. Entry changes are always applied in order up to the last
// one selected (see RecordingFS).
func (w *Window) Subset(keep func(i int) bool) *MemFS { return w.state(keep, -1, 0) }

// Torn returns the state with the first k pending changes applied and then
// only the first n bytes of change k, a write.
func (w *Window) Torn(k, n int) *MemFS {
	return w.state(func(i int) bool { return i < k }, k, n)
}

// state builds a MemFS: a copy of the durable tree with the selected
// changes applied, everything durable.
func (w *Window) state(keep func(i int) bool, torn, tornLen int) *MemFS {
	seen := map[*memNode]*memNode{}
	root := cloneNode(w.root, seen, false)
	for _, d := range w.detached {
		cloneNode(d, seen, false)
	}
	// Entry changes persist in order: apply each one up to the last kept.
	lastEntry := -1
	for i, op := range w.ops {
		if op.kind != recWrite && op.kind != recTruncate && keep(i) {
			lastEntry = i
		}
	}
	for i, op := range w.ops {
		isData := op.kind == recWrite || op.kind == recTruncate
		switch {
		case i == torn && op.kind == recWrite:
			o := *op
			o.data = op.data[:min(tornLen, len(op.data))]
			applyOp(&o, seen)
		case isData && keep(i), !isData && i <= lastEntry:
			applyOp(op, seen)
		}
	}
	m := NewMem()
	m.capacity.Store(w.capacity)
	m.mu.root = root
	finishState(root, m, map[*memNode]bool{})
	return m
}

func applyOp(op *recOp, seen map[*memNode]*memNode) {
	n := seen[op.node]
	switch op.kind {
	case recWrite:
		n.data.writeAt(op.data, op.off)
	case recTruncate:
		n.data.resize(op.size)
	case recCreate:
		seen[op.dir].children[op.name] = n
	case recRemove:
		if d := seen[op.dir]; d.children[op.name] == n {
			delete(d.children, op.name)
		}
	case recRename:
		if d := seen[op.dir]; d.children[op.name] == n {
			delete(d.children, op.name)
		}
		seen[op.dir2].children[op.name2] = n
	}
}

// finishState makes every node of a built state durable and counts its
// bytes.
func finishState(n *memNode, m *MemFS, done map[*memNode]bool) {
	if done[n] {
		return
	}
	done[n] = true
	if !n.isDir {
		n.synced = n.data.snapshot()
		m.used.Add(n.data.len())
		return
	}
	n.syncedChildren = make(map[string]*memNode, len(n.children))
	for k, v := range n.children {
		n.syncedChildren[k] = v
		finishState(v, m, done)
	}
}

// States calls fn with every crash state of the window: each prefix of the
// pending changes (Len()+1 states), each pending write torn in half after
// the changes before it, and reorderings random subsets (drawn from rng).
// It stops early when fn returns false, and returns the number of states
// passed to fn. desc says how a state was made.
func (w *Window) States(rng *rand.Rand, reorderings int, fn func(desc string, m *MemFS) bool) int {
	n := 0
	for k := 0; k <= len(w.ops); k++ {
		n++
		if !fn(fmt.Sprintf("prefix %d/%d", k, len(w.ops)), w.Prefix(k)) {
			return n
		}
		if k < len(w.ops) && w.IsWrite(k) {
			half := len(w.ops[k].data) / 2
			n++
			if !fn(fmt.Sprintf("prefix %d/%d + torn %s (%d bytes)", k, len(w.ops), w.ops[k].desc, half), w.Torn(k, half)) {
				return n
			}
		}
	}
	if len(w.ops) < 2 {
		return n
	}
	for i := 0; i < reorderings; i++ {
		keep := make([]bool, len(w.ops))
		mask := make([]byte, len(w.ops))
		for j := range keep {
			keep[j] = rng.IntN(2) == 0
			mask[j] = '0'
			if keep[j] {
				mask[j] = '1'
			}
		}
		n++
		if !fn(fmt.Sprintf("reordering %s", mask), w.Subset(func(j int) bool { return keep[j] })) {
			return n
		}
	}
	return n
}

// String lists the pending changes.
func (w *Window) String() string {
	s := fmt.Sprintf("%d pending changes:\n", len(w.ops))
	for i, op := range w.ops {
		s += fmt.Sprintf("  %d: %s\n", i, op.desc)
	}
	return s
}

var _ FS = (*RecordingFS)(nil)
