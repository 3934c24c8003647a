package lsm_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestReadYourWritesUnderLoad: a key is visible to Get as soon as Apply
// returns, while other writers insert next to it and rotate, flatten and
// flush segments.
func TestReadYourWritesUnderLoad(t *testing.T) {
	dur := 2 * time.Second
	if d, err := time.ParseDuration(os.Getenv("LSMFS_RYW")); err == nil {
		dur = d
	}
	for _, policy := range []lsm.MemtablePolicy{lsm.PolicyBasic, lsm.PolicyEager, lsm.PolicyAdaptive, lsm.PolicyNone} {
		t.Run(string(policy), func(t *testing.T) {
			dir := t.TempDir()
			opts := &lsm.Options{FS: vfs.Default, UUID: [16]byte{1}, MemtablePolicy: policy,
				MemtableSize: 4 << 20, Journal: lsm.JournalOptions{Size: 64 << 20},
				CacheSize: 1 << 20, VlogSegmentSize: 8 << 20, VlogCleanThreshold: 0.5}
			if err := lsm.Format(dir, opts); err != nil {
				t.Fatal(err)
			}
			db, err := lsm.Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			deadline := time.Now().Add(dur)
			var wg sync.WaitGroup
			big := make([]byte, 16<<10)
			var next atomic.Uint64
			for w := 0; w < 16; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; time.Now().Before(deadline); i++ {
						// Keys from one counter, as inode numbers are: the
						// workers apply neighbouring keys out of order, so
						// inserts land right in front of keys being read.
						k := []byte(fmt.Sprintf("i%012d", next.Add(1)))
						b := lsm.NewBatch()
						b.Set(k, binary.BigEndian.AppendUint64(make([]byte, 0, 100), uint64(i)))
						if err := db.Apply(b, false); err != nil {
							t.Error(err)
							return
						}
						if _, err := db.Get(k); err != nil {
							t.Errorf("worker %d: Get(%s) right after Apply: %v", w, k, err)
							return
						}
						b = lsm.NewBatch()
						for j := 0; j < 4; j++ {
							b.Set([]byte(fmt.Sprintf("b%02d%08d-%d", w, i, j)), big)
						}
						b.Set(k, binary.BigEndian.AppendUint64(make([]byte, 0, 100), uint64(i+1)))
						if err := db.Apply(b, false); err != nil {
							t.Error(err)
							return
						}
						if _, err := db.Get(k); err != nil {
							t.Errorf("worker %d: Get(%s) after the second Apply: %v", w, k, err)
							return
						}
						if i%50 == 0 {
							b = lsm.NewBatch()
							b.DeleteRange([]byte(fmt.Sprintf("b%02d", w)), []byte(fmt.Sprintf("b%02d%08d", w, i)))
							if err := db.Apply(b, false); err != nil {
								t.Error(err)
								return
							}
						}
					}
				}()
			}
			// Readers that scan (as readdir does, with snapshots) and
			// compactions, beside the writers.
			for r := 0; r < 2; r++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; time.Now().Before(deadline); i++ {
						var it *lsm.Iterator
						if i%2 == 0 {
							snap := db.NewSnapshot()
							it = snap.NewIter(&lsm.IterOptions{LowerBound: []byte("b"), UpperBound: []byte("c")})
							n := 0
							for ok := it.First(); ok && n < 200; ok = it.Next() {
								n++
							}
							if err := it.Close(); err != nil {
								t.Error(err)
							}
							snap.Close()
						} else {
							it = db.NewIter(&lsm.IterOptions{LowerBound: []byte("i")})
							for ok := it.Last(); ok; ok = it.Prev() {
								if len(it.Value()) == 0 {
									break
								}
								break
							}
							if err := it.Close(); err != nil {
								t.Error(err)
							}
						}
						if i%200 == 199 {
							if err := db.Compact(nil, nil); err != nil {
								t.Error(err)
							}
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}
