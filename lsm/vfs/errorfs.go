package vfs

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// ErrorFS wraps an FS and fails the calls an Injector picks (Pebble's
// errorfs in spirit): EIO on reads, writes and syncs, ENOSPC on writes,
// short writes. Tests drive it with a seeded schedule (Seeded), a fixed
// index (OnIndex: loop over i to fail every call in turn) or a
// probability (Randomly).
//
// Every injected error matches ErrInjected and the errno it carries
// (errors.Is(err, syscall.EIO)). A short write writes part of the buffer
// first, then fails. The injector sees each call before it reaches the
// wrapped FS; a failed call (other than a short write) changes nothing.
type ErrorFS struct {
	fs       FS
	inj      atomic.Pointer[injectorBox]
	off      atomic.Bool
	injected atomic.Int64
	calls    atomic.Int64
}

type injectorBox struct{ Injector }

// OpKind is a kind of FS or File call.
type OpKind uint8

// The calls an Injector sees.
const (
	OpCreate OpKind = iota
	OpOpen
	OpRemove
	OpRename
	OpMkdir
	OpList
	OpStat
	OpSyncDir
	OpLock
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpPreallocate
)

var opNames = [...]string{"create", "open", "remove", "rename", "mkdir", "list", "stat", "syncdir", "lock", "read", "write", "sync", "truncate", "preallocate"}

func (k OpKind) String() string {
	if int(k) < len(opNames) {
		return opNames[k]
	}
	return fmt.Sprintf("op%d", k)
}

// Op is one call.
type Op struct {
	Kind OpKind
	Path string
	Off  int64 // reads and writes
	Len  int   // reads and writes
}

func (o Op) String() string {
	if o.Kind == OpRead || o.Kind == OpWrite {
		return fmt.Sprintf("%s %s@%d+%d", o.Kind, o.Path, o.Off, o.Len)
	}
	return fmt.Sprintf("%s %s", o.Kind, o.Path)
}

// Mutates reports whether the call changes the filesystem (or forces it).
func (o Op) Mutates() bool {
	switch o.Kind {
	case OpCreate, OpRemove, OpRename, OpMkdir, OpSyncDir, OpWrite, OpSync, OpTruncate, OpPreallocate:
		return true
	}
	return false
}

// An Injector decides, for each call, whether it fails and how: nil lets it
// through. It is called concurrently.
type Injector interface {
	MaybeError(op Op) error
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(Op) error

// MaybeError implements Injector.
func (f InjectorFunc) MaybeError(op Op) error { return f(op) }

// ErrInjected is matched by every error an ErrorFS injects.
var ErrInjected = errors.New("vfs: injected error")

// InjectedError is an injected failure with an errno.
type InjectedError struct {
	Errno syscall.Errno
	// Short makes a write write half of its buffer before failing.
	Short bool
	Op    Op
}

func (e *InjectedError) Error() string {
	s := "vfs: injected " + errnoName(e.Errno)
	if e.Short {
		s += " after a short write"
	}
	if e.Op.Path != "" {
		s += " (" + e.Op.String() + ")"
	}
	return s
}

// Is matches ErrInjected and the errno.
func (e *InjectedError) Is(target error) bool { return target == ErrInjected || target == e.Errno }

func errnoName(e syscall.Errno) string {
	switch e {
	case syscall.EIO:
		return "EIO"
	case syscall.ENOSPC:
		return "ENOSPC"
	}
	return e.Error()
}

// EIO and ENOSPC are the usual injected errors; ShortENOSPC is a write that
// writes half its buffer and then fails with ENOSPC.
var (
	EIO         error = &InjectedError{Errno: syscall.EIO}
	ENOSPC      error = &InjectedError{Errno: syscall.ENOSPC}
	ShortENOSPC error = &InjectedError{Errno: syscall.ENOSPC, Short: true}
)

// NewErrorFS wraps fs; inj may be nil (nothing fails until SetInjector).
func NewErrorFS(fs FS, inj Injector) *ErrorFS {
	e := &ErrorFS{fs: fs}
	e.SetInjector(inj)
	return e
}

// SetInjector replaces the injector (nil: none).
func (e *ErrorFS) SetInjector(inj Injector) { e.inj.Store(&injectorBox{inj}) }

// Enable turns injection on or off (it starts on).
func (e *ErrorFS) Enable(on bool) { e.off.Store(!on) }

// Injected returns the number of errors injected so far.
func (e *ErrorFS) Injected() int64 { return e.injected.Load() }

// Calls returns the number of calls the injector saw.
func (e *ErrorFS) Calls() int64 { return e.calls.Load() }

// Unwrap returns the wrapped FS.
func (e *ErrorFS) Unwrap() FS { return e.fs }

func (e *ErrorFS) maybe(op Op) error {
	if e.off.Load() {
		return nil
	}
	b := e.inj.Load()
	if b == nil || b.Injector == nil {
		return nil
	}
	e.calls.Add(1)
	err := b.MaybeError(op)
	if err == nil {
		return nil
	}
	e.injected.Add(1)
	var ie *InjectedError
	if errors.As(err, &ie) {
		c := *ie
		c.Op = op
		if op.Kind != OpWrite {
			c.Short = false
		}
		return &c
	}
	return err
}

func pathErr(op Op, err error) error {
	return &os.PathError{Op: op.Kind.String(), Path: op.Path, Err: err}
}

// Create implements FS.
func (e *ErrorFS) Create(name string) (File, error) {
	op := Op{Kind: OpCreate, Path: name}
	if err := e.maybe(op); err != nil {
		return nil, pathErr(op, err)
	}
	f, err := e.fs.Create(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{e: e, f: f, name: name}, nil
}

// Open implements FS.
func (e *ErrorFS) Open(name string) (File, error) {
	op := Op{Kind: OpOpen, Path: name}
	if err := e.maybe(op); err != nil {
		return nil, pathErr(op, err)
	}
	f, err := e.fs.Open(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{e: e, f: f, name: name}, nil
}

// OpenReadWrite implements FS.
func (e *ErrorFS) OpenReadWrite(name string) (File, error) {
	op := Op{Kind: OpOpen, Path: name}
	if err := e.maybe(op); err != nil {
		return nil, pathErr(op, err)
	}
	f, err := e.fs.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{e: e, f: f, name: name}, nil
}

// Remove implements FS.
func (e *ErrorFS) Remove(name string) error {
	op := Op{Kind: OpRemove, Path: name}
	if err := e.maybe(op); err != nil {
		return pathErr(op, err)
	}
	return e.fs.Remove(name)
}

// Rename implements FS.
func (e *ErrorFS) Rename(oldname, newname string) error {
	op := Op{Kind: OpRename, Path: oldname}
	if err := e.maybe(op); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return e.fs.Rename(oldname, newname)
}

// MkdirAll implements FS.
func (e *ErrorFS) MkdirAll(dir string) error {
	op := Op{Kind: OpMkdir, Path: dir}
	if err := e.maybe(op); err != nil {
		return pathErr(op, err)
	}
	return e.fs.MkdirAll(dir)
}

// List implements FS.
func (e *ErrorFS) List(dir string) ([]string, error) {
	op := Op{Kind: OpList, Path: dir}
	if err := e.maybe(op); err != nil {
		return nil, pathErr(op, err)
	}
	return e.fs.List(dir)
}

// Stat implements FS.
func (e *ErrorFS) Stat(name string) (os.FileInfo, error) {
	op := Op{Kind: OpStat, Path: name}
	if err := e.maybe(op); err != nil {
		return nil, pathErr(op, err)
	}
	return e.fs.Stat(name)
}

// SyncDir implements FS.
func (e *ErrorFS) SyncDir(dir string) error {
	op := Op{Kind: OpSyncDir, Path: dir}
	if err := e.maybe(op); err != nil {
		return pathErr(op, err)
	}
	return e.fs.SyncDir(dir)
}

// Lock implements FS.
func (e *ErrorFS) Lock(name string) (io.Closer, error) {
	op := Op{Kind: OpLock, Path: name}
	if err := e.maybe(op); err != nil {
		return nil, pathErr(op, err)
	}
	return e.fs.Lock(name)
}

// Usage implements FS.
func (e *ErrorFS) Usage(dir string) (total, free uint64, err error) { return e.fs.Usage(dir) }

type errorFile struct {
	e    *ErrorFS
	f    File
	name string
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	op := Op{Kind: OpRead, Path: f.name, Off: off, Len: len(p)}
	if err := f.e.maybe(op); err != nil {
		return 0, pathErr(op, err)
	}
	return f.f.ReadAt(p, off)
}

func (f *errorFile) WriteAt(p []byte, off int64) (int, error) {
	op := Op{Kind: OpWrite, Path: f.name, Off: off, Len: len(p)}
	if err := f.e.maybe(op); err != nil {
		var ie *InjectedError
		if errors.As(err, &ie) && ie.Short && len(p) > 1 {
			n, werr := f.f.WriteAt(p[:len(p)/2], off)
			if werr != nil {
				return n, werr
			}
			return n, pathErr(op, err)
		}
		return 0, pathErr(op, err)
	}
	return f.f.WriteAt(p, off)
}

func (f *errorFile) Write(p []byte) (int, error) {
	off, err := f.f.Size()
	if err != nil {
		return 0, err
	}
	op := Op{Kind: OpWrite, Path: f.name, Off: off, Len: len(p)}
	if err := f.e.maybe(op); err != nil {
		var ie *InjectedError
		if errors.As(err, &ie) && ie.Short && len(p) > 1 {
			n, werr := f.f.Write(p[:len(p)/2])
			if werr != nil {
				return n, werr
			}
			return n, pathErr(op, err)
		}
		return 0, pathErr(op, err)
	}
	return f.f.Write(p)
}

func (f *errorFile) Close() error { return f.f.Close() }

func (f *errorFile) Sync() error {
	op := Op{Kind: OpSync, Path: f.name}
	if err := f.e.maybe(op); err != nil {
		return pathErr(op, err)
	}
	return f.f.Sync()
}

func (f *errorFile) Size() (int64, error) { return f.f.Size() }

func (f *errorFile) Truncate(size int64) error {
	op := Op{Kind: OpTruncate, Path: f.name, Off: size}
	if err := f.e.maybe(op); err != nil {
		return pathErr(op, err)
	}
	return f.f.Truncate(size)
}

func (f *errorFile) Preallocate(size int64) error {
	op := Op{Kind: OpPreallocate, Path: f.name, Off: size}
	if err := f.e.maybe(op); err != nil {
		return pathErr(op, err)
	}
	return f.f.Preallocate(size)
}

// Matchers select the calls an injector may fail.

// Match is a predicate on calls.
type Match func(Op) bool

// Kinds matches calls of the given kinds.
func Kinds(kinds ...OpKind) Match {
	return func(op Op) bool {
		for _, k := range kinds {
			if op.Kind == k {
				return true
			}
		}
		return false
	}
}

// Reads matches file reads.
var Reads Match = Kinds(OpRead)

// Writes matches the calls that change the filesystem or force it.
var Writes Match = func(op Op) bool { return op.Mutates() }

// Syncs matches File.Sync and SyncDir.
var Syncs Match = Kinds(OpSync, OpSyncDir)

// PathContains matches calls on paths containing s.
func PathContains(s string) Match { return func(op Op) bool { return strings.Contains(op.Path, s) } }

// And matches calls every m matches.
func And(ms ...Match) Match {
	return func(op Op) bool {
		for _, m := range ms {
			if m != nil && !m(op) {
				return false
			}
		}
		return true
	}
}

// IndexInjector fails the index-th call (counting from 0) that its match
// selects, once. Loop over index to fail every call of a run in turn.
type IndexInjector struct {
	index int64
	err   error
	match Match
	seen  atomic.Int64
	fired atomic.Bool
	mu    sync.Mutex
	op    Op
}

// OnIndex returns an injector failing the index-th matching call with err
// (match nil: every call).
func OnIndex(index int64, err error, match Match) *IndexInjector {
	return &IndexInjector{index: index, err: err, match: match}
}

// MaybeError implements Injector.
func (i *IndexInjector) MaybeError(op Op) error {
	if i.match != nil && !i.match(op) {
		return nil
	}
	if i.seen.Add(1)-1 != i.index {
		return nil
	}
	i.fired.Store(true)
	i.mu.Lock()
	i.op = op
	i.mu.Unlock()
	return i.err
}

// Fired reports whether the call was reached (and failed), and which it was.
func (i *IndexInjector) Fired() (bool, Op) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.fired.Load(), i.op
}

// Seen returns the number of matching calls so far.
func (i *IndexInjector) Seen() int64 { return i.seen.Load() }

// Randomly fails each matching call with probability p, with err, from a
// seeded source.
func Randomly(seed uint64, p float64, err error, match Match) Injector {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	return InjectorFunc(func(op Op) error {
		if match != nil && !match(op) {
			return nil
		}
		mu.Lock()
		hit := rng.Float64() < p
		mu.Unlock()
		if hit {
			return err
		}
		return nil
	})
}

// Seeded fails each matching call with probability p with an error fitting
// its kind, drawn from a seeded source: EIO on reads and syncs; EIO, ENOSPC
// or a short write with ENOSPC on writes; ENOSPC or EIO on creates,
// truncations and preallocations; EIO on the rest.
func Seeded(seed uint64, p float64, match Match) Injector {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 0xe770))
	return InjectorFunc(func(op Op) error {
		if match != nil && !match(op) {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if rng.Float64() >= p {
			return nil
		}
		switch op.Kind {
		case OpWrite:
			return []error{EIO, ENOSPC, ShortENOSPC}[rng.IntN(3)]
		case OpCreate, OpTruncate, OpPreallocate:
			return []error{EIO, ENOSPC}[rng.IntN(2)]
		}
		return EIO
	})
}

var _ FS = (*ErrorFS)(nil)
