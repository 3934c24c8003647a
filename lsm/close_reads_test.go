package lsm_test

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestGetDuringClose: Gets running while Close runs each return a value or
// ErrClosed. Close closed the block cache, tables and value log under them:
// the cache panicked ("send on closed channel") or the read failed with
// "file already closed" (read-path review).
func TestGetDuringClose(t *testing.T) {
	others := map[string]int{}
	var mu sync.Mutex
	rounds := 10
	if raceEnabled {
		rounds = 3
	}
	for round := 0; round < rounds; round++ {
		opts := &lsm.Options{FS: vfs.NewMem(), UUID: [16]byte{3}, CacheSize: 64 << 10, BlockSize: 1 << 10, ValueThreshold: 200,
			Journal: lsm.JournalOptions{Size: 4 << 20}}
		if err := lsm.Format("/db", opts); err != nil {
			t.Fatal(err)
		}
		db, err := lsm.Open("/db", opts)
		if err != nil {
			t.Fatal(err)
		}
		b := lsm.NewBatch()
		for i := 0; i < 500; i++ {
			b.Set([]byte(fmt.Sprintf("k%05d", i)), bytes.Repeat([]byte{byte(i)}, 100+i%300))
		}
		if err := db.Apply(b, false); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := g; ; i += 7 {
					_, err := db.Get([]byte(fmt.Sprintf("k%05d", i%500)))
					if errors.Is(err, lsm.ErrClosed) {
						return
					}
					if err != nil {
						mu.Lock()
						others[err.Error()]++
						mu.Unlock()
					}
				}
			}(g)
		}
		time.Sleep(5 * time.Millisecond)
		db.Close()
		wg.Wait()
	}
	for e, n := range others {
		t.Errorf("%d Gets failed during Close with %v", n, e)
	}
}

// TestIteratorAfterValueError: after Value fails (a value-log read error),
// the iterator's error is sticky: positioning calls return false and leave
// it off any key, and Next does not move on (Valid stayed true on the old
// key, and Next went on; read-path review).
func TestIteratorAfterValueError(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMem(), nil)
	opts := &lsm.Options{FS: efs, UUID: [16]byte{4}, ValueThreshold: 100, CacheSize: -1, Journal: lsm.JournalOptions{Size: 4 << 20}}
	if err := lsm.Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := lsm.NewBatch()
	for i := 0; i < 3; i++ {
		b.Set([]byte(fmt.Sprintf("k%d", i)), bytes.Repeat([]byte("v"), 1000))
	}
	if err := db.Apply(b, false); err != nil {
		t.Fatal(err)
	}
	it := db.NewIter(nil)
	defer it.Close()
	if !it.First() {
		t.Fatal("First")
	}
	efs.SetInjector(vfs.Randomly(1, 1, vfs.EIO, vfs.And(vfs.Reads, vfs.PathContains(".vlog"))))
	if v := it.Value(); v != nil || it.Error() == nil {
		t.Fatalf("Value = %d bytes, err %v: want a read error", len(v), it.Error())
	}
	efs.SetInjector(nil)
	ok := it.SeekGE([]byte("k2"))
	if !ok && it.Valid() {
		t.Errorf("SeekGE returned false but Valid() is true at %q", it.Key())
	}
	if it.Next() {
		t.Errorf("Next after a sticky error moved on to %q", it.Key())
	}
}
