package fs_test

import (
	"bytes"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// fillDevice leaves 1 MiB free, under an 8 MiB space reserve, and waits out
// the engine's interval between free-space checks.
func fillDevice(t *testing.T, mem *vfs.MemFS) {
	t.Helper()
	total, free, err := mem.Usage("/")
	if err != nil {
		t.Fatal(err)
	}
	mem.SetCapacity(int64(total-free) + 1<<20)
	time.Sleep(1100 * time.Millisecond)
}

// unfillDevice gives the space back and waits for the engine to see it.
func unfillDevice(mem *vfs.MemFS) {
	mem.SetCapacity(0)
	time.Sleep(1100 * time.Millisecond)
}

// TestFailedTruncatingOpenKeepsWrites: an open(O_TRUNC) that fails (no
// space for its batch) leaves the file as it was, with another handle's
// buffered, acknowledged writes.
func TestFailedTruncatingOpenKeepsWrites(t *testing.T) {
	mem := vfs.NewMem()
	o := engineOptions(nil)
	o.SpaceReserve = 8 << 20
	e, _ := faultEnv(t, o, mem)
	ino, fhA := e.mustCreate(1, "a")
	data := pattern(4096, 7)
	e.mustWrite(ino, fhA, 0, data) // buffered, acknowledged
	fillDevice(t, mem)
	if _, errno := e.open_(ino, syscall.O_WRONLY|syscall.O_TRUNC); errno != syscall.ENOSPC {
		t.Fatalf("open(O_TRUNC) on a full device: %v, want ENOSPC", errno)
	}
	unfillDevice(mem)
	if errno := e.flush(ino, fhA); errno != 0 {
		t.Fatalf("close of the writer: %v", errno)
	}
	if got := e.mustRead(ino, fhA, 0, 8192); !bytes.Equal(got, data) {
		t.Fatalf("after a failed O_TRUNC open: read %d bytes, want the writer's %d", len(got), len(data))
	}
	e.check()
}

// TestFailedWriteHasNoEffect: a write that fails (here ENOSPC from the
// flush its size calls for) changes neither the size nor the data, now or
// after a later flush succeeds; what was written before it stays.
func TestFailedWriteHasNoEffect(t *testing.T) {
	for _, sync := range []bool{false, true} {
		mem := vfs.NewMem()
		o := engineOptions(nil)
		o.SpaceReserve = 8 << 20
		e, _ := faultEnv(t, o, mem) // WriteBufferSize 16 KiB
		ino, fh := e.mustCreate(1, "a")
		first := pattern(4096, 1)
		e.mustWrite(ino, fh, 0, first)
		if sync { // the next write comes through an O_SYNC handle
			e.release(ino, fh)
			var errno syscall.Errno
			if fh, errno = e.open_(ino, syscall.O_WRONLY|syscall.O_SYNC); errno != 0 {
				t.Fatal(errno)
			}
		}
		fillDevice(t, mem)
		size := 16 << 10 // with the 4 KiB before, past the buffer
		if sync {
			size = 4096
		}
		if errno := e.write(ino, fh, 4096, pattern(size, 2)); errno != syscall.ENOSPC {
			t.Fatalf("sync=%v: write on a full device: %v, want ENOSPC", sync, errno)
		}
		if a := e.attr(ino); a.Size != 4096 {
			t.Errorf("sync=%v: size after the failed write: %d, want 4096", sync, a.Size)
		}
		if got := e.mustRead(ino, fh, 0, 32<<10); !bytes.Equal(got, first) {
			t.Errorf("sync=%v: read after the failed write: %d bytes, want the first 4096", sync, len(got))
		}
		unfillDevice(mem)
		if errno := e.fsync(ino, fh); errno != 0 {
			t.Fatalf("sync=%v: fsync with space again: %v", sync, errno)
		}
		if a := e.attr(ino); a.Size != 4096 {
			t.Errorf("sync=%v: size after a successful fsync: %d, want 4096", sync, a.Size)
		}
		e.check()
	}
}

// TestCapabilitySetAfterWrite: a file capability set after a write, while
// the file is open, survives the write's flush (as on ext4, where the write
// removed capabilities when it happened).
func TestCapabilitySetAfterWrite(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{BlockSize: bs})
	ino, fh := e.mustCreate(1, "bin")
	e.mustWrite(ino, fh, 0, pattern(100, 1))
	capv := []byte{1, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if errno := e.setxattr(ino, "security.capability", capv, 0); errno != 0 {
		t.Fatal(errno)
	}
	if errno := e.flush(ino, fh); errno != 0 {
		t.Fatal(errno)
	}
	if v, _, errno := e.getxattr(ino, "security.capability", 64); errno != 0 || !bytes.Equal(v, capv) {
		t.Fatalf("capability set after the write, read after close: %x, %v", v, errno)
	}
	// A write after it removes it.
	e.mustWrite(ino, fh, 0, pattern(10, 2))
	if errno := e.flush(ino, fh); errno != 0 {
		t.Fatal(errno)
	}
	if _, _, errno := e.getxattr(ino, "security.capability", 64); errno != syscall.ENODATA {
		t.Fatalf("capability after a later write: %v, want ENODATA", errno)
	}
}

// TestFailedWriteLeavesNoBlockPastSize: a write past the end of the file
// into a block with maxSpans spans, whose stored bytes cannot be read,
// fails without copying anything: no block ends past the size, and
// extending the file shows zeros there.
func TestFailedWriteLeavesNoBlockPastSize(t *testing.T) {
	e, efs := faultEnv(t, engineOptions(nil), vfs.NewMem())
	ino, fh := e.mustCreate(1, "a")
	e.mustWrite(ino, fh, 0, pattern(2*bs+100, 1))
	if errno := e.flush(ino, fh); errno != 0 { // stored in the value log
		t.Fatal(errno)
	}
	for i := range 16 { // 16 disjoint spans in block 2
		e.mustWrite(ino, fh, uint64(2*bs+2*i), []byte{9})
	}
	efs.SetInjector(vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpRead {
			return vfs.EIO
		}
		return nil
	}))
	errno := e.write(ino, fh, 2*bs+200, bytes.Repeat([]byte{0xee}, 100)) // past the end, a 17th span
	efs.SetInjector(nil)
	if errno != syscall.EIO {
		t.Fatalf("write whose block's stored bytes cannot be read: %v, want EIO", errno)
	}
	if errno := e.flush(ino, fh); errno != 0 {
		t.Fatal(errno)
	}
	if r, err := fs.Check(e.db); err != nil || !r.OK() {
		t.Fatalf("Check after the flush: %v\n%s", err, r)
	}
	if errno := e.truncate(ino, 3*bs); errno != 0 {
		t.Fatal(errno)
	}
	if got := e.mustRead(ino, fh, 2*bs+100, 200); !bytes.Equal(got, make([]byte, 200)) {
		t.Fatalf("bytes past the old end after extending: %x..., want zeros", got[100:110])
	}
	e.check()
}

// TestFallocateRemovesPrivileges: fallocate removes privileges as a write
// does (ext4's file_modified): an unprivileged caller clears setuid and
// setgid (with group execute), root keeps them, and either removes the
// file's capabilities.
func TestFallocateRemovesPrivileges(t *testing.T) {
	e := newEnv(t, fs.Options{}, fs.FormatOptions{BlockSize: bs})
	ino, fh := e.mustCreate(1, "bin")
	capv := []byte{1, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	setuid := func() {
		var in fuse.SetAttrIn
		in.NodeId, in.Valid, in.Mode = ino, fuse.FATTR_MODE, 0o6755
		if _, errno := e.setattr(in); errno != 0 {
			t.Fatal(errno)
		}
		if errno := e.setxattr(ino, "security.capability", capv, 0); errno != 0 {
			t.Fatal(errno)
		}
	}
	setuid()
	if errno := e.fallocate(ino, fh, 0, 8192, 0); errno != 0 { // root
		t.Fatal(errno)
	}
	if m := e.attr(ino).Mode &^ syscall.S_IFMT; m != 0o6755 {
		t.Fatalf("mode after root's fallocate: %#o, want 06755", m)
	}
	if _, _, errno := e.getxattr(ino, "security.capability", 64); errno != syscall.ENODATA {
		t.Fatalf("capability after root's fallocate: %v, want ENODATA", errno)
	}
	setuid()
	e.caller = fuse.Caller{Owner: fuse.Owner{Uid: 1000, Gid: 100}}
	if errno := e.fallocate(ino, fh, 0, 4096, 0x01 /* KEEP_SIZE */); errno != 0 {
		t.Fatal(errno)
	}
	if m := e.attr(ino).Mode &^ syscall.S_IFMT; m != 0o755 {
		t.Fatalf("mode after an unprivileged fallocate: %#o, want 0755", m)
	}
}

// TestFailedTruncateKeepsBufferedKill: a truncation that fails (ENOSPC)
// after cutting buffered blocks out of the write buffer gives them back,
// with the setuid/setgid removal an unprivileged write asked for: the
// mode stays cleared, and the next flush stores the data and the mode.
func TestFailedTruncateKeepsBufferedKill(t *testing.T) {
	mem := vfs.NewMem()
	e, efs := faultEnv(t, csEngineOptions(nil), mem) // inode records go to the value log
	ino, fh := e.mustCreate(1, "bin")
	var in fuse.SetAttrIn
	in.NodeId, in.Valid, in.Mode = ino, fuse.FATTR_MODE, 0o4755
	if _, errno := e.setattr(in); errno != 0 {
		t.Fatal(errno)
	}
	e.mustWrite(ino, fh, 0, pattern(bs, 1))
	wantErr(t, "fsync", e.fsync(ino, fh), 0)
	e.caller = fuse.Caller{Owner: fuse.Owner{Uid: 1000, Gid: 100}}
	data := pattern(bs, 2)
	e.mustWrite(ino, fh, 2*bs, data) // buffered; asks for setuid removal
	e.caller = fuse.Caller{}
	if m := e.attr(ino).Mode &^ syscall.S_IFMT; m != 0o755 {
		t.Fatalf("mode after the unprivileged write: %#o, want 0755", m)
	}
	efs.SetInjector(vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpWrite && (strings.HasSuffix(op.Path, ".vlog") || strings.HasSuffix(op.Path, ".sst")) {
			return vfs.ENOSPC
		}
		return nil
	}))
	if errno := e.truncate(ino, bs); errno != syscall.ENOSPC {
		t.Fatalf("truncate with value-log writes failing: %v, want ENOSPC", errno)
	}
	efs.Enable(false)
	if err := e.db.Flush(); err != nil { // retries what the injection failed at once
		t.Fatal(err)
	}
	want := append(append(pattern(bs, 1), make([]byte, bs)...), data...)
	check := func(when string) {
		t.Helper()
		a := e.attr(ino)
		if m := a.Mode &^ syscall.S_IFMT; m != 0o755 || a.Size != uint64(len(want)) {
			t.Fatalf("%s: mode %#o size %d, want 0755 and %d", when, m, a.Size, len(want))
		}
		if got := e.mustRead(ino, fh, 0, 4*bs); !bytes.Equal(got, want) {
			t.Fatalf("%s: read %d bytes, differ from the %d written", when, len(got), len(want))
		}
	}
	check("after the failed truncate")
	wantErr(t, "fsync", e.fsync(ino, fh), 0)
	check("after fsync")
	e.release(ino, fh)
	e.remount()
	fh = e.mustOpen(ino, syscall.O_RDONLY)
	check("after a remount")
	e.release(ino, fh)
}

// TestFailStopPunchShowsItsBatch: a hole punched through an O_SYNC handle
// whose journal force fails (fail-stop) is already in the engine's memory:
// reads after it show the punched range as zeros, as the engine holds it,
// not the buffered bytes the punch had cut out of the write buffer.
func TestFailStopPunchShowsItsBatch(t *testing.T) {
	mem := vfs.NewMem()
	e, efs := faultEnv(t, csEngineOptions(nil), mem)
	ino, fh := e.mustCreate(1, "f")
	e.mustWrite(ino, fh, 0, pattern(4*bs, 1))
	wantErr(t, "fsync", e.fsync(ino, fh), 0)
	e.mustWrite(ino, fh, bs, pattern(2*bs, 2)) // buffered: blocks 1 and 2
	sfh, errno := e.open_(ino, syscall.O_RDWR|syscall.O_SYNC)
	if errno != 0 {
		t.Fatal(errno)
	}
	efs.SetInjector(vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpSync && strings.Contains(op.Path, "journal") {
			return vfs.EIO
		}
		return nil
	}))
	if errno := e.fallocate(ino, sfh, bs, 2*bs, 3 /* PUNCH_HOLE|KEEP_SIZE */); errno != syscall.EIO {
		t.Fatalf("punch with the journal force failing: %v, want EIO", errno)
	}
	got := e.mustRead(ino, fh, 0, 4*bs)
	want := pattern(4*bs, 1)
	clear(want[bs : 3*bs])
	if !bytes.Equal(got, want) {
		t.Fatalf("read after the failed punch: %d bytes, not the punched file", len(got))
	}
}
