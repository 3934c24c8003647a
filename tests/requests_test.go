package tests

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCloseFlush: closing a read-only descriptor sends no FLUSH
// (FOPEN_NOFLUSH), so open, read and close of a small file cost one round
// trip fewer; a descriptor that can write still sends one, so close(2)
// still writes its buffer (and can report a failure to write it). A
// read-only close that skips the FLUSH leaves another descriptor's buffered
// writes readable.
func TestCloseFlush(t *testing.T) {
	if !kernelAtLeast(t, 5, 16) { // FOPEN_NOFLUSH: Linux 5.16
		t.Skip("the kernel predates FOPEN_NOFLUSH")
	}
	f := newFS(t, fsOptions{})
	p := f.path("f")
	data := bytes.Repeat([]byte("lsmfs "), 1000)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	flushes := func() uint64 { return opCount(statsJSON(t, f.mnt), "flush") }

	before := flushes()
	for range 10 {
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read back %d bytes (%v), want %d", len(got), err, len(data))
		}
	}
	if n := flushes() - before; n != 0 {
		t.Errorf("10 read-only opens and closes sent %d FLUSH requests, want 0", n)
	}

	for _, flag := range []int{os.O_WRONLY, os.O_RDWR} {
		before = flushes()
		w, err := os.OpenFile(p, flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if n := flushes() - before; n != 1 {
			t.Errorf("close of a descriptor opened with flags %#x sent %d FLUSH requests, want 1", flag, n)
		}
	}

	// A writer keeps its buffer; a reader opens, reads and closes (no
	// FLUSH) and sees the buffered bytes, and so does a reader after it.
	w, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteAt([]byte("BUFFERED"), 100); err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), data...)
	copy(want[100:], "BUFFERED")
	for range 2 {
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read beside a writer: %d bytes (%v), equal %v; want the buffered bytes", len(got), err, bytes.Equal(got, want))
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// kernelAtLeast reports whether the running kernel is major.minor or later.
func kernelAtLeast(t *testing.T, major, minor int) bool {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	rel := unix.ByteSliceToString(u.Release[:])
	parts := strings.SplitN(rel, ".", 3)
	if len(parts) < 2 {
		t.Fatalf("kernel release %q", rel)
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		t.Fatalf("kernel release %q", rel)
	}
	return ma > major || ma == major && mi >= minor
}
