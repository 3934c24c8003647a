package vfs_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// script runs a fixed sequence of calls and returns the first error.
func script(fs vfs.FS) error {
	if err := fs.MkdirAll("/d"); err != nil {
		return err
	}
	f, err := fs.Create("/d/f")
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write([]byte("0123456789")); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := fs.SyncDir("/d"); err != nil {
		return err
	}
	b := make([]byte, 4)
	if _, err := f.ReadAt(b, 2); err != nil {
		return err
	}
	return fs.Rename("/d/f", "/d/g")
}

// TestErrorFSOnIndex fails every call of the script in turn.
func TestErrorFSOnIndex(t *testing.T) {
	for i := int64(0); ; i++ {
		inj := vfs.OnIndex(i, vfs.EIO, nil)
		efs := vfs.NewErrorFS(vfs.NewMem(), inj)
		err := script(efs)
		fired, op := inj.Fired()
		if !fired {
			if err != nil {
				t.Fatalf("index %d: nothing injected, but %v", i, err)
			}
			if i != 7 {
				t.Fatalf("the script made %d calls, want 7", i)
			}
			return
		}
		if !errors.Is(err, vfs.ErrInjected) || !errors.Is(err, syscall.EIO) {
			t.Fatalf("index %d (%s): error %v, want the injected EIO", i, op, err)
		}
		if efs.Injected() != 1 {
			t.Fatalf("index %d: %d injected", i, efs.Injected())
		}
	}
}

func TestErrorFSShortWrite(t *testing.T) {
	mem := vfs.NewMem()
	efs := vfs.NewErrorFS(mem, vfs.OnIndex(0, vfs.ShortENOSPC, vfs.Kinds(vfs.OpWrite)))
	f, err := efs.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	n, err := f.WriteAt([]byte("abcdefgh"), 0)
	if n != 4 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("short write: %d, %v", n, err)
	}
	if sz, _ := f.Size(); sz != 4 {
		t.Fatalf("size %d after a short write of 4", sz)
	}
	// The next write goes through.
	if n, err := f.WriteAt([]byte("xy"), 4); n != 2 || err != nil {
		t.Fatalf("write after: %d, %v", n, err)
	}
}

func TestErrorFSSeeded(t *testing.T) {
	run := func(seed uint64) (int64, string) {
		efs := vfs.NewErrorFS(vfs.NewMem(), vfs.Seeded(seed, 0.3, nil))
		var first string
		for i := 0; i < 50; i++ {
			if err := script(efs); err != nil && first == "" {
				first = err.Error()
			}
		}
		return efs.Injected(), first
	}
	a, fa := run(42)
	b, fb := run(42)
	if a != b || fa != fb || a == 0 {
		t.Fatalf("seed 42 twice: %d %q, %d %q", a, fa, b, fb)
	}
	// Injection can be switched off.
	efs := vfs.NewErrorFS(vfs.NewMem(), vfs.Randomly(1, 1, vfs.EIO, vfs.Writes))
	efs.Enable(false)
	if err := script(efs); err != nil {
		t.Fatal(err)
	}
	efs.Enable(true)
	if err := efs.MkdirAll("/x"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("after Enable: %v", err)
	}
	if _, err := efs.Stat("/d"); err != nil {
		t.Fatalf("Writes matched a stat: %v", err)
	}
}
