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

// TestReclaimWithLargeTree: large values (a big file's blocks) written
// first, so their pointers sit in the bottom level, then a tree of small
// inline values (inodes, directory entries, small files) that fills the
// disk and is much larger than the space reserve. Deleting the large values
// must give their space back. The reclaim pass is Compact(nil, nil): each
// level step merges a whole level with the whole next one, so the step that
// reaches the bottom needs about as much free space as the tree: ENOSPC.
// The deletion never reached the pointers, the segments' discard counts
// stayed 0, the cleaner picked nothing, and writes got ENOSPC forever.
//
// reopen: the same with a remount between filling the disk and deleting.
// The key ranges retireDeadSegments walks were known only for segments
// sealed since the open, so segments sealed before it were never found
// dead; and the first delete came before the engine knew it was full, so
// no reclaim pass was asked for.
func TestReclaimWithLargeTree(t *testing.T) {
	for _, reopen := range []bool{false, true} {
		t.Run(fmt.Sprint("reopen=", reopen), func(t *testing.T) {
			testReclaimWithLargeTree(t, reopen)
		})
	}
}

func testReclaimWithLargeTree(t *testing.T, reopen bool) {
	mem := vfs.NewMem()
	mem.SetCapacity(48 << 20)
	o := faultOptions(mem)
	o.SpaceReserve = 0 // default: 1% of the device
	o.ValueThreshold = 512
	o.VlogSegmentSize = 1 << 20
	if err := lsm.Format("/db", o); err != nil {
		t.Fatal(err)
	}
	db := openFault(t, mem, o)
	big := strings.Repeat("B", 4000) // value log
	for i := 0; i < 3000; i++ {
		if err := put(db, fmt.Sprintf("b%06d", i), big, false); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	small := make([]byte, 200) // inline, incompressible
	var err error
	n := 0
	for ; n < 1000000; n++ {
		b := lsm.NewBatch()
		for j := 0; j < 16; j++ {
			for k := range small {
				small[k] = byte(rng.Uint32())
			}
			b.Set([]byte(fmt.Sprintf("a%09d", rng.IntN(1e9))), small)
		}
		// Until writes fail for good (not while a compaction's outputs
		// briefly take the reserve).
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
		t.Fatalf("after %d writes: %v, want ErrNoSpace", n, err)
	}
	_, free, _ := mem.Usage("/")
	t.Logf("full after %d batches (free %d)\n%s", n, free, metricsOf(db))
	if reopen {
		if err := db.Close(); err != nil {
			t.Logf("close when full: %v", err)
		}
		if db, err = lsm.Open("/db", o); err != nil {
			t.Fatalf("reopen when full: %v", err)
		}
	}
	defer db.Close()
	// Delete the large values (a big file removed: 12 MB of 48).
	b := lsm.NewBatch()
	b.DeleteRange([]byte("b"), []byte("c"))
	if err := db.Apply(b, true); err != nil {
		t.Fatalf("delete when full: %v\n%s", err, metricsOf(db))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err = put(db, "after", "x", true)
		if err == nil || !errors.Is(err, syscall.ENOSPC) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		_, free, _ := mem.Usage("/")
		t.Fatalf("write 10 s after deleting 12 MB of large values: %v (free %d)\n%s", err, free, metricsOf(db))
	}
}

func metricsOf(db *lsm.DB) string {
	m := db.Metrics()
	return m.String()
}
