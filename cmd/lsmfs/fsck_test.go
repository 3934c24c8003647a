package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lsmfs/lsmfs/lsm"
)

// Keys and values by the on-disk format (fs/keys.go, fs/values.go), to
// damage a filesystem through the engine.
func u64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func dentryKey(parent uint64, name string) []byte { return append(u64([]byte{'D'}, parent), name...) }

func dentryVal(ino uint64, typ byte) []byte { return append(u64([]byte{1}, ino), typ) }

func inodeVal(mode, nlink uint32, size uint64) []byte {
	v := []byte{1}
	for _, x := range []uint32{mode, 0, 0, nlink, 0, 0} {
		v = binary.BigEndian.AppendUint32(v, x)
	}
	for _, x := range []uint64{size, 0, 0, 1, 1, 1, 1} {
		v = u64(v, x)
	}
	return binary.BigEndian.AppendUint32(v, 0)
}

// damagedDataDir makes a filesystem with mkfs and writes what damage adds
// to a batch into its engine.
func damagedDataDir(t *testing.T, damage func(*lsm.Batch)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if _, stderr, err := runArgs("mkfs", "--journal-size", "8M", dir); err != nil {
		t.Fatalf("mkfs: %v: %s", err, stderr)
	}
	db, err := lsm.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := lsm.NewBatch()
	damage(b)
	if err := db.Apply(b, true); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestFsckRepairInterrupted: a signal during fsck --repair (here its
// context, canceled once the first check has printed its report) stops the
// repair: exit 32 and the advice to run it again, with the engine closed
// cleanly; fsck --repair then repairs everything and fsck is clean.
func TestFsckRepairInterrupted(t *testing.T) {
	dir := damagedDataDir(t, func(b *lsm.Batch) {
		for i := uint64(100); i < 20_100; i++ { // unnamed files
			b.Set(u64([]byte{'I'}, i), inodeVal(0o100644, 1, 0))
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout := cancelOnWrite{cancel: cancel}
	var stderr bytes.Buffer
	err := run(ctx, []string{"lsmfs", "fsck", "--repair", dir}, &stdout, &stderr)
	t.Logf("interrupted fsck --repair: %v\n%s", err, stdout.String())
	if exitCode(err) != exitFsckCancelled || !strings.Contains(err.Error(), "run lsmfs fsck --repair again") {
		t.Fatalf("fsck --repair, interrupted: exit %d (%v), want 32 and the advice", exitCode(err), err)
	}
	out, _, err := runArgs("fsck", "--repair", dir)
	if exitCode(err) != exitFsckFixed || !strings.Contains(out, "linked unreachable inode 20099") {
		t.Fatalf("fsck --repair after the interruption: exit %d (%v)\n%s", exitCode(err), err, out)
	}
	if out, _, err := runArgs("fsck", dir); err != nil {
		t.Fatalf("fsck after the repair: %v\n%s", err, out)
	}
}

// cancelOnWrite is a writer that cancels at its first write.
type cancelOnWrite struct {
	bytes.Buffer
	cancel func()
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	w.cancel()
	return w.Buffer.Write(p)
}

// TestFsckRepair damages the keyspace of a data directory (an entry naming
// a missing inode, an orphan key of a missing inode, an unreachable file)
// and leaves a garbage table: fsck exits 4 and changes nothing; fsck
// --repair says what it changed and exits 1; fsck then exits 0.
func TestFsckRepair(t *testing.T) {
	dir := damagedDataDir(t, func(b *lsm.Batch) {
		b.Set(dentryKey(1, "dangling"), dentryVal(777, 8))
		b.Set(u64([]byte{'O'}, 5151), nil)
		b.Set(u64([]byte{'I'}, 40), inodeVal(0o100644, 1, 0)) // no name
	})
	if err := os.WriteFile(filepath.Join(dir, "999999.sst"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}

	out, _, err := runArgs("fsck", dir)
	if exitCode(err) != exitFsckErrors || !strings.Contains(out, `names missing inode 777`) || !strings.Contains(out, "999999.sst") {
		t.Fatalf("fsck of a damaged filesystem: exit %d (%v):\n%s", exitCode(err), err, out)
	}
	out, _, err = runArgs("fsck", "--repair", dir)
	t.Logf("fsck --repair:\n%s", out)
	if exitCode(err) != exitFsckFixed {
		t.Fatalf("fsck --repair: exit %d (%v), want 1", exitCode(err), err)
	}
	for _, want := range []string{
		"repaired: removed garbage file 999999.sst",
		`repaired: removed dentry 1/"dangling"`,
		"repaired: removed orphan key of missing inode 5151",
		"repaired: linked unreachable inode 40 into /lost+found/#40",
		"after repair",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("fsck --repair did not say %q", want)
		}
	}
	if out, _, err := runArgs("fsck", dir); err != nil || !strings.Contains(out, "orphans=0") {
		t.Fatalf("fsck after repair: %v\n%s", err, out)
	}
	if out, _, err := runArgs("fsck", "--repair", dir); err != nil || strings.Contains(out, "repaired:") {
		t.Fatalf("fsck --repair of a clean filesystem: %v\n%s", err, out)
	}
}

// TestFsckOneBadValue: a value-log record damaged beside an unrelated
// dangling dentry. fsck lists both, from both checkers; the keyspace check
// stopped at the unreadable value, and fsck printed nothing but that error.
func TestFsckOneBadValue(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if _, stderr, err := runArgs("mkfs", "--journal-size", "8M", dir); err != nil {
		t.Fatalf("mkfs: %v: %s", err, stderr)
	}
	db, err := lsm.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	u64 := func(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }
	b := lsm.NewBatch()
	b.Set(append(u64([]byte{'D'}, 1), "dangling"...), append(u64([]byte{1}, 777), 8))
	b.Set([]byte("Zbig"), []byte(strings.Repeat("x", 100<<10))) // in the value log; a key of no family
	if err := db.Apply(b, false); err != nil {
		t.Fatal(err)
	}
	if err := db.SyncJournal(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	damaged := false
	for _, s := range segs {
		if fi, err := os.Stat(s); err == nil && fi.Size() > 50<<10 {
			f, err := os.OpenFile(s, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt([]byte{'Q'}, 50<<10)
			f.Close()
			damaged = true
		}
	}
	if !damaged {
		t.Fatalf("no value-log segment holds the 100 KiB value: %v", segs)
	}
	out, stderr, err := runArgs("fsck", dir)
	if exitCode(err) != exitFsckErrors || !strings.Contains(out, "names missing inode 777") || !strings.Contains(out, "checksum mismatch") {
		t.Errorf("fsck: exit %d (%v), want 4 with the dangling dentry and the damaged value listed\nstdout:\n%s\nstderr:\n%s", exitCode(err), err, out, stderr)
	}
}
