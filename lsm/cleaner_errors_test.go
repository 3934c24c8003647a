package lsm_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestCleanerReadErrorNotFatal: a read error met by the background
// value-log cleaner while it scans a segment (a bad sector in an old
// segment) must not stop the engine from accepting writes: nothing was
// written, nothing is half done. The cleaner should skip the segment (and
// the reads of its live values report the error to their readers).
func TestCleanerReadErrorNotFatal(t *testing.T) {
	mem := vfs.NewMem()
	var failReads atomic.Bool
	var failed atomic.Int64
	efs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
		if failReads.Load() && op.Kind == vfs.OpRead && strings.HasSuffix(op.Path, ".vlog") {
			failed.Add(1)
			return vfs.EIO
		}
		return nil
	}))
	o := faultOptions(efs)
	if err := lsm.Format("/db", o); err != nil {
		t.Fatal(err)
	}
	db := openFault(t, efs, o)
	defer db.Close()
	v := strings.Repeat("a", 1000)
	for i := 0; i < 400; i++ {
		if err := put(db, fmt.Sprintf("k%04d", i), v, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	// From now on every read of a value-log segment fails.
	failReads.Store(true)
	// Three keys in four are overwritten: the old segments fall below the
	// cleaning threshold once compactions drop the old pointers.
	w := strings.Repeat("b", 1000)
	for i := 0; i < 400; i++ {
		if i%4 == 0 {
			continue
		}
		if err := put(db, fmt.Sprintf("k%04d", i), w, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for failed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if failed.Load() == 0 {
		t.Fatal("the cleaner read no segment")
	}
	db.WaitCleaner()
	t.Logf("%d value-log reads failed", failed.Load())
	if err := put(db, "after", "x", true); err != nil {
		t.Fatalf("write after the cleaner met a read error: %v", err)
	}
	// An explicit cleaning reports what it could not read; a segment
	// found unreadable is then skipped, not read again and again.
	if _, err := db.CleanValueLog(); err == nil && failed.Load() == 0 {
		t.Errorf("CleanValueLog read nothing and reported nothing")
	}
	n := failed.Load()
	cleaned, err := db.CleanValueLog()
	if err != nil || failed.Load() != n {
		t.Errorf("CleanValueLog after the segments were found unreadable: %d cleaned, %v; %d more failed reads", cleaned, err, failed.Load()-n)
	}
	if err := put(db, "after2", "x", true); err != nil {
		t.Fatalf("write after CleanValueLog: %v", err)
	}
}
