package lsm_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestOpenOnFullDisk: an engine whose device filled up (here by another
// file on the same filesystem) must still open, so that files can be
// deleted to free space: a full disk must not make the filesystem
// unmountable.
func TestOpenOnFullDisk(t *testing.T) {
	mem := vfs.NewMem()
	mem.SetCapacity(16 << 20)
	o := faultOptions(mem)
	o.SpaceReserve = 256 << 10
	if err := lsm.Format("/db", o); err != nil {
		t.Fatal(err)
	}
	db := openFault(t, mem, o)
	v := strings.Repeat("o", 3000)
	for i := 0; i < 500; i++ {
		if err := put(db, fmt.Sprintf("k%04d", i), v, i%50 == 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Something else takes the rest of the device.
	_, free, _ := mem.Usage("/")
	filler, err := mem.Create("/filler")
	if err != nil {
		t.Fatal(err)
	}
	if err := filler.Truncate(int64(free)); err != nil {
		t.Fatal(err)
	}
	filler.Close()

	db, err = lsm.Open("/db", o)
	if err != nil {
		t.Fatalf("open on a full device: %v", err)
	}
	defer db.Close()
	if got, err := db.Get([]byte("k0001")); err != nil || string(got) != v {
		t.Fatalf("read on a full device: %v", err)
	}
	b := lsm.NewBatch()
	b.Delete([]byte("k0001"))
	if err := db.Apply(b, true); err != nil {
		t.Fatalf("delete on a full device: %v", err)
	}
	if err := put(db, "new", v, true); !errors.Is(err, lsm.ErrNoSpace) {
		t.Fatalf("a write that adds data on a full device: %v, want ErrNoSpace", err)
	}
	// The other file goes: the engine writes again, and what it did while
	// full survives a reopen.
	if err := mem.Remove("/filler"); err != nil {
		t.Fatal(err)
	}
	var perr error
	for i := 0; i < 100; i++ { // the engine reads free space at most every 100 ms
		if perr = put(db, "new", v, true); perr == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if perr != nil {
		t.Fatalf("write after space came back: %v", perr)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = lsm.Open("/db", o)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()
	if _, err := db.Get([]byte("k0001")); !errors.Is(err, lsm.ErrNotFound) {
		t.Errorf("k0001 deleted while full: Get after reopen: %v", err)
	}
	if got, err := db.Get([]byte("new")); err != nil || string(got) != v {
		t.Errorf("new after reopen: %v", err)
	}
	if r, err := db.Check(); err != nil || !r.OK() {
		t.Errorf("check: %v\n%s", err, r.String())
	}
}
