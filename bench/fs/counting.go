package main

import (
	"encoding/json"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Request counting for the filesystems served by this command (the ceiling
// and the passthrough).
//
// countingFS wraps a fuse.RawFileSystem and counts every request that reaches
// it by operation, under the names lsmfs's own counters use (mount/opstats.go:
// lowercase FUSE opcodes; a BATCH_FORGET counts one "forget" per node, a
// WRITE answered by Writev counts once). Counting sits where lsmfs's does, at
// the RawFileSystem boundary, so the two are comparable: requests go-fuse
// answers by itself (INIT, INTERRUPT, DESTROY) are counted by neither.
// GETXATTR is also counted per attribute name, to show the kernel's
// security.capability and POSIX ACL probes.
//
// The counts are served as JSON, {"ops":[{"op":"lookup","count":N},...],
// "getxattr_names":{...}}, on a unix socket (GET /v1/stats), the shape of
// `lsmfs stats --json`'s "ops".

type opCount struct {
	Op    string `json:"op"`
	Count uint64 `json:"count"`
}

type countsJSON struct {
	Ops           []opCount         `json:"ops"`
	GetxattrNames map[string]uint64 `json:"getxattr_names,omitempty"`
}

var opNames = []string{"lookup", "forget", "getattr", "setattr", "mknod", "mkdir", "unlink",
	"rmdir", "rename", "link", "symlink", "readlink", "access", "getxattr", "listxattr",
	"setxattr", "removexattr", "create", "tmpfile", "open", "read", "lseek", "getlk", "setlk",
	"setlkw", "release", "write", "copy_file_range", "ioctl", "flush", "fsync", "fallocate",
	"opendir", "readdir", "readdirplus", "releasedir", "fsyncdir", "statfs", "statx"}

const (
	cLookup = iota
	cForget
	cGetattr
	cSetattr
	cMknod
	cMkdir
	cUnlink
	cRmdir
	cRename
	cLink
	cSymlink
	cReadlink
	cAccess
	cGetxattr
	cListxattr
	cSetxattr
	cRemovexattr
	cCreate
	cTmpfile
	cOpen
	cRead
	cLseek
	cGetlk
	cSetlk
	cSetlkw
	cRelease
	cWrite
	cCopyFileRange
	cIoctl
	cFlush
	cFsync
	cFallocate
	cOpendir
	cReaddir
	cReaddirplus
	cReleasedir
	cFsyncdir
	cStatfs
	cStatx
	numCounted
)

type counters struct {
	n     [numCounted]atomic.Uint64
	xmu   sync.Mutex
	xattr map[string]uint64
}

func (c *counters) getxattr(name string) {
	c.n[cGetxattr].Add(1)
	c.xmu.Lock()
	if c.xattr == nil {
		c.xattr = make(map[string]uint64)
	}
	c.xattr[name]++
	c.xmu.Unlock()
}

func (c *counters) snapshot() countsJSON {
	var out countsJSON
	for i := range numCounted {
		if v := c.n[i].Load(); v > 0 {
			out.Ops = append(out.Ops, opCount{opNames[i], v})
		}
	}
	c.xmu.Lock()
	if len(c.xattr) > 0 {
		out.GetxattrNames = make(map[string]uint64, len(c.xattr))
		for k, v := range c.xattr {
			out.GetxattrNames[k] = v
		}
	}
	c.xmu.Unlock()
	return out
}

// serveCounts serves c on the unix socket ln until the process exits.
func serveCounts(ln net.Listener, c *counters) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(c.snapshot())
	})
	go http.Serve(ln, mux)
}

// countingFS counts the requests reaching the embedded filesystem.
type countingFS struct {
	fuse.RawFileSystem
	c *counters
}

func (f *countingFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	f.c.n[cLookup].Add(1)
	return f.RawFileSystem.Lookup(cancel, h, name, out)
}

func (f *countingFS) Forget(nodeid, nlookup uint64) {
	f.c.n[cForget].Add(1)
	f.RawFileSystem.Forget(nodeid, nlookup)
}

func (f *countingFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	f.c.n[cGetattr].Add(1)
	return f.RawFileSystem.GetAttr(cancel, in, out)
}

func (f *countingFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	f.c.n[cSetattr].Add(1)
	return f.RawFileSystem.SetAttr(cancel, in, out)
}

func (f *countingFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	f.c.n[cMknod].Add(1)
	return f.RawFileSystem.Mknod(cancel, in, name, out)
}

func (f *countingFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	f.c.n[cMkdir].Add(1)
	return f.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (f *countingFS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	f.c.n[cUnlink].Add(1)
	return f.RawFileSystem.Unlink(cancel, h, name)
}

func (f *countingFS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	f.c.n[cRmdir].Add(1)
	return f.RawFileSystem.Rmdir(cancel, h, name)
}

func (f *countingFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	f.c.n[cRename].Add(1)
	return f.RawFileSystem.Rename(cancel, in, oldName, newName)
}

func (f *countingFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	f.c.n[cLink].Add(1)
	return f.RawFileSystem.Link(cancel, in, name, out)
}

func (f *countingFS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	f.c.n[cSymlink].Add(1)
	return f.RawFileSystem.Symlink(cancel, h, target, name, out)
}

func (f *countingFS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	f.c.n[cReadlink].Add(1)
	return f.RawFileSystem.Readlink(cancel, h)
}

func (f *countingFS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	f.c.n[cAccess].Add(1)
	return f.RawFileSystem.Access(cancel, in)
}

func (f *countingFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	f.c.getxattr(attr)
	return f.RawFileSystem.GetXAttr(cancel, h, attr, dest)
}

func (f *countingFS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	f.c.n[cListxattr].Add(1)
	return f.RawFileSystem.ListXAttr(cancel, h, dest)
}

func (f *countingFS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	f.c.n[cSetxattr].Add(1)
	return f.RawFileSystem.SetXAttr(cancel, in, attr, data)
}

func (f *countingFS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	f.c.n[cRemovexattr].Add(1)
	return f.RawFileSystem.RemoveXAttr(cancel, h, attr)
}

func (f *countingFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	f.c.n[cCreate].Add(1)
	return f.RawFileSystem.Create(cancel, in, name, out)
}

func (f *countingFS) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	f.c.n[cTmpfile].Add(1)
	return f.RawFileSystem.Tmpfile(cancel, in, out)
}

func (f *countingFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	f.c.n[cOpen].Add(1)
	return f.RawFileSystem.Open(cancel, in, out)
}

func (f *countingFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	f.c.n[cRead].Add(1)
	return f.RawFileSystem.Read(cancel, in, buf)
}

func (f *countingFS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	f.c.n[cLseek].Add(1)
	return f.RawFileSystem.Lseek(cancel, in, out)
}

func (f *countingFS) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	f.c.n[cGetlk].Add(1)
	return f.RawFileSystem.GetLk(cancel, in, out)
}

func (f *countingFS) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	f.c.n[cSetlk].Add(1)
	return f.RawFileSystem.SetLk(cancel, in)
}

func (f *countingFS) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	f.c.n[cSetlkw].Add(1)
	return f.RawFileSystem.SetLkw(cancel, in)
}

func (f *countingFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	f.c.n[cRelease].Add(1)
	f.RawFileSystem.Release(cancel, in)
}

func (f *countingFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	f.c.n[cWrite].Add(1)
	return f.RawFileSystem.Write(cancel, in, data)
}

// Writev counts as write; ENOSYS (go-fuse then calls Write) is not counted.
func (f *countingFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	n, st := f.RawFileSystem.Writev(cancel, in, data)
	if st != fuse.ENOSYS {
		f.c.n[cWrite].Add(1)
	}
	return n, st
}

func (f *countingFS) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	f.c.n[cCopyFileRange].Add(1)
	return f.RawFileSystem.CopyFileRange(cancel, in)
}

func (f *countingFS) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	f.c.n[cIoctl].Add(1)
	return f.RawFileSystem.Ioctl(cancel, in, inbuf, out, outbuf)
}

func (f *countingFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	f.c.n[cFlush].Add(1)
	return f.RawFileSystem.Flush(cancel, in)
}

func (f *countingFS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	f.c.n[cFsync].Add(1)
	return f.RawFileSystem.Fsync(cancel, in)
}

func (f *countingFS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	f.c.n[cFallocate].Add(1)
	return f.RawFileSystem.Fallocate(cancel, in)
}

func (f *countingFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	f.c.n[cOpendir].Add(1)
	return f.RawFileSystem.OpenDir(cancel, in, out)
}

func (f *countingFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	f.c.n[cReaddir].Add(1)
	return f.RawFileSystem.ReadDir(cancel, in, out)
}

func (f *countingFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	f.c.n[cReaddirplus].Add(1)
	return f.RawFileSystem.ReadDirPlus(cancel, in, out)
}

func (f *countingFS) ReleaseDir(in *fuse.ReleaseIn) {
	f.c.n[cReleasedir].Add(1)
	f.RawFileSystem.ReleaseDir(in)
}

func (f *countingFS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	f.c.n[cFsyncdir].Add(1)
	return f.RawFileSystem.FsyncDir(cancel, in)
}

func (f *countingFS) StatFs(cancel <-chan struct{}, in *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	f.c.n[cStatfs].Add(1)
	return f.RawFileSystem.StatFs(cancel, in, out)
}

func (f *countingFS) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	f.c.n[cStatx].Add(1)
	return f.RawFileSystem.Statx(cancel, in, out)
}
