package fs

import (
	"bytes"
	"testing"
)

// EnableACL turns POSIX ACL support on as if the kernel had negotiated
// FUSE_POSIX_ACL at Init, for tests that drive an FS without a kernel.
func (f *FS) EnableACL() { f.acl.Store(true) }

// BaseReads returns how many stored blocks flushes have looked up.
func (f *FS) BaseReads() uint64 { return f.baseReads.Load() }

// PendingAtimes returns how many access times reads moved that no batch
// has written yet.
func (f *FS) PendingAtimes() int { return int(f.atimes.n.Load()) }

// WriteAtimes runs one pass of the flusher over the pending access times.
func (f *FS) WriteAtimes() { f.writeAtimes() }

// SetAtimeMax sets the bound on pending access times until the test ends.
func SetAtimeMax(t *testing.T, n int) {
	old := atimeMax
	atimeMax = n
	t.Cleanup(func() { atimeMax = old })
}

// SetKernelMinor sets the FUSE protocol minor as if the kernel had
// reported m at Init.
func (f *FS) SetKernelMinor(m uint32) { f.kernelMinor.Store(m) }

// CheckACLRoundTrip decodes v as an ACL xattr; what decodes must encode to
// v again and stay valid through chmod and createMasq.
func CheckACLRoundTrip(t *testing.T, v []byte) {
	a, err := parseACL(v)
	if err != nil || a == nil {
		return
	}
	if got := a.encode(); !bytes.Equal(got, v) {
		t.Fatalf("parse/encode: %x became %x", v, got)
	}
	c := a.clone()
	c.chmod(0o751)
	if !c.valid() {
		t.Fatalf("chmod made %x invalid: %x", v, c.encode())
	}
	c = a.clone()
	if mode, _ := c.createMasq(0o100666); mode&^0o777 != 0o100000 || !c.valid() {
		t.Fatalf("createMasq of %x: mode %#o, acl %x", v, mode, c.encode())
	}
}

// Buffered is the memory all write buffers hold.
func (f *FS) Buffered() int64 { return f.buffered.Load() }
