package lsm

import (
	"errors"
	"fmt"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestStepLimitCountsSkippedVersions: the value-log cleaner's bounded walk
// (segmentDead) relies on Iterator.stepLimit bounding "the entries forward
// moves pass over (live or not)". Older versions of a key that Next skips
// (and the versions of a deleted key) are not counted: a walk over a key
// with many versions passes any number of entries without stopping.
func TestStepLimitCountsSkippedVersions(t *testing.T) {
	opts := &Options{FS: vfs.NewMem(), UUID: [16]byte{5}, ValueThreshold: -1, Journal: JournalOptions{Size: 4 << 20}}
	if err := Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	d, err := Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// 1000 versions of "a" (the memtable keeps them all), then "b".
	for i := 0; i < 1000; i++ {
		b := NewBatch()
		b.Set([]byte("a"), []byte(fmt.Sprint(i)))
		if err := d.Apply(b, false); err != nil {
			t.Fatal(err)
		}
	}
	b := NewBatch()
	b.Set([]byte("b"), []byte("x"))
	if err := d.Apply(b, false); err != nil {
		t.Fatal(err)
	}
	it := d.NewIter(nil)
	defer it.Close()
	it.stepLimit = 10
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if !errors.Is(it.Error(), errStepLimit) {
		t.Fatalf("walked %d keys over 1001 entries with a step limit of 10: err %v, want errStepLimit", n, it.Error())
	}
}
