package lsm_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestReclaimAfterReopen is TestReclaimWithLargeTree with a remount
// between filling the disk and deleting: the engine now opens on a full
// disk (770a2f2), but the key ranges retireDeadSegments walks are not
// persisted, so segments sealed before the open are never found dead.
func TestReclaimAfterReopen(t *testing.T) {
	mem := vfs.NewMem()
	mem.SetCapacity(48 << 20)
	o := faultOptions(mem)
	o.SpaceReserve = 0
	o.ValueThreshold = 512
	o.VlogSegmentSize = 1 << 20
	if err := lsm.Format("/db", o); err != nil {
		t.Fatal(err)
	}
	db := openFault(t, mem, o)
	big := strings.Repeat("B", 4000)
	for i := 0; i < 3000; i++ {
		if err := put(db, fmt.Sprintf("b%06d", i), big, false); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	small := make([]byte, 200)
	var err error
	for n := 0; n < 1000000; n++ {
		b := lsm.NewBatch()
		for j := 0; j < 16; j++ {
			for k := range small {
				small[k] = byte(rng.Uint32())
			}
			b.Set([]byte(fmt.Sprintf("a%09d", rng.IntN(1e9))), small)
		}
		refused := time.Now()
		for {
			if err = db.Apply(b, n%100 == 0); err == nil || !errors.Is(err, lsm.ErrNoSpace) || time.Since(refused) > 2*time.Second {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			break
		}
	}
	if !errors.Is(err, lsm.ErrNoSpace) {
		t.Fatalf("fill: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Logf("close when full: %v", err)
	}
	db, err = lsm.Open("/db", o)
	if err != nil {
		t.Fatalf("reopen when full: %v", err)
	}
	defer db.Close()
	b := lsm.NewBatch()
	b.DeleteRange([]byte("b"), []byte("c"))
	var derr error
	for i := 0; i < 100; i++ { // while the journal is full of what could not be flushed
		if derr = db.Apply(b, true); !errors.Is(derr, lsm.ErrNoSpace) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if derr != nil {
		t.Fatalf("delete when full: %v\n%s", derr, func() string { m := db.Metrics(); return m.String() }())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err = put(db, "after", "x", true)
		if err == nil || !errors.Is(err, syscall.ENOSPC) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		_, free, _ := mem.Usage("/")
		t.Fatalf("write 10 s after deleting 12 MB of large values (after a reopen): %v (free %d)\n%s", err, free, func() string { m := db.Metrics(); return m.String() }())
	}
}
