package lsm_test

import (
	"errors"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// TestCleanDeadSegmentsUnread: segments that hold only a deleted file's
// blocks are cleaned without being read, and the deletes that made them
// dead are durable before they go (a crash right after the cleaning finds
// the file deleted, not its blocks missing). Then a segment with one live
// value among deleted ones keeps it.
func TestCleanDeadSegmentsUnread(t *testing.T) {
	mem := vfs.NewMem()
	var vlogRead atomic.Int64
	var mu sync.Mutex
	readFiles := map[string]bool{}
	fs := vfs.NewErrorFS(mem, vfs.InjectorFunc(func(op vfs.Op) error {
		if op.Kind == vfs.OpRead && strings.HasSuffix(op.Path, ".vlog") {
			vlogRead.Add(int64(op.Len))
			mu.Lock()
			readFiles[path.Base(op.Path)] = true
			mu.Unlock()
		}
		return nil
	}))
	segments := func() map[string]bool {
		names, err := mem.List("/db")
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, n := range names {
			if strings.HasSuffix(n, ".vlog") {
				m[n] = true
			}
		}
		return m
	}
	opts := &lsm.Options{FS: fs, UUID: [16]byte{9}, ValueThreshold: 100, VlogSegmentSize: 64 << 10, VlogCleanThreshold: 0.001}
	if err := lsm.Format("/db", opts); err != nil {
		t.Fatal(err)
	}
	db, err := lsm.Open("/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	const blockLen = 1024
	buf := make([]byte, blockLen)
	write := func(ino, blocks uint64) {
		for blk := range blocks {
			b := lsm.NewBatch()
			fillBlock(buf, 1, ino, blk)
			b.Set(blockKey(ino, blk), buf)
			if err := db.Apply(b, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	apply := func(b *lsm.Batch, sync bool) {
		if err := db.Apply(b, sync); err != nil {
			t.Fatal(err)
		}
	}
	clean := func() int {
		n, err := db.CleanValueLog()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	check := func(db *lsm.DB, when string, live [][2]uint64, dead [][]byte) {
		t.Helper()
		want := make([]byte, blockLen)
		for _, f := range live {
			got, err := db.Get(blockKey(f[0], f[1]))
			fillBlock(want, 1, f[0], f[1])
			if err != nil || string(got) != string(want) {
				t.Fatalf("%s: block %d of file %d: %v", when, f[1], f[0], err)
			}
		}
		for _, k := range dead {
			if _, err := db.Get(k); !errors.Is(err, lsm.ErrNotFound) {
				t.Fatalf("%s: deleted key %x: %v", when, k, err)
			}
		}
	}

	// File 1: 640 KiB, about ten segments of its blocks alone. Most of it is
	// deleted and compacted (which accounts the dead bytes, so that the
	// cleaner picks every segment); the rest (a block in 16) goes with a
	// write that is not synced.
	write(1, 640)
	if err := db.SyncJournal(); err != nil {
		t.Fatal(err)
	}
	b := lsm.NewBatch()
	for blk := range uint64(640) {
		if blk%16 != 0 {
			b.Delete(blockKey(1, blk))
		}
	}
	apply(b, true)
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	b = lsm.NewBatch()
	b.DeleteRange(blockKey(1, 0), blockKey(2, 0))
	apply(b, false)
	vlogRead.Store(0)
	cleaned := clean()
	read := vlogRead.Load()
	t.Logf("deleted file: %d segments cleaned, %d KiB of segments read", cleaned, read>>10)
	if cleaned < 8 {
		t.Fatalf("%d segments cleaned, want at least 8", cleaned)
	}
	if read > 0 {
		t.Errorf("the cleaner read %d KiB of segments that only held a deleted file's blocks", read>>10)
	}
	gone := [][]byte{blockKey(1, 0), blockKey(1, 512), blockKey(1, 100)}
	check(db, "after cleaning", nil, gone)
	o := *opts
	o.FS = mem.CrashClone()
	db2, err := lsm.Open("/db", &o)
	if err != nil {
		t.Fatal(err)
	}
	check(db2, "after a crash", nil, gone)
	db2.Close()

	// File 2's one block sits among file 3's, which are all deleted; file 4
	// stays whole.
	write(3, 30)
	write(2, 1)
	write(3, 60)
	write(4, 60)
	b = lsm.NewBatch()
	b.DeleteRange(blockKey(3, 0), blockKey(4, 0))
	apply(b, true)
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	if n := clean(); n == 0 {
		t.Fatal("nothing cleaned")
	}
	live := [][2]uint64{{2, 0}}
	for blk := range uint64(60) {
		live = append(live, [2]uint64{4, blk})
	}
	check(db, "after cleaning around a live block", live, [][]byte{blockKey(3, 0), blockKey(3, 50)})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = lsm.Open("/db", opts); err != nil {
		t.Fatal(err)
	}
	check(db, "after reopen", live, nil)
	db.Close()

	// File 6's blocks are spread (every 11th index) with small values
	// between them, kept in the tree. Its segment's key range then holds
	// ten times more keys than records: the walk gives up, and the scan
	// does the cleaning.
	if db, err = lsm.Open("/db", opts); err != nil {
		t.Fatal(err)
	}
	for blk := uint64(0); blk < 11*120; blk += 11 {
		b := lsm.NewBatch()
		fillBlock(buf, 1, 6, blk)
		b.Set(blockKey(6, blk), buf)
		apply(b, false)
	}
	write(7, 70) // rolls file 6's segment
	b = lsm.NewBatch()
	for blk := range uint64(11 * 120) {
		if blk%11 != 0 {
			b.Set(blockKey(6, blk), []byte("small"))
		}
	}
	apply(b, false)
	b = lsm.NewBatch()
	for blk := uint64(0); blk < 11*120; blk += 11 {
		b.Delete(blockKey(6, blk))
	}
	apply(b, true)
	if err := db.Compact(nil, nil); err != nil {
		t.Fatal(err)
	}
	before := segments()
	clear(readFiles)
	if n := clean(); n == 0 {
		t.Fatal("nothing cleaned")
	}
	for seg := range before {
		if !segments()[seg] && !readFiles[seg] {
			t.Errorf("%s, whose key range holds ten keys per record, was cleaned unread (the walk has no step limit)", seg)
		}
	}
	for _, blk := range []uint64{1, 500, 11*120 - 1} {
		if v, err := db.Get(blockKey(6, blk)); err != nil || string(v) != "small" {
			t.Fatalf("small value %d: %q %v", blk, v, err)
		}
	}
	live = nil
	for blk := range uint64(70) {
		live = append(live, [2]uint64{7, blk})
	}
	check(db, "after the bounded walk", live, [][]byte{blockKey(6, 0), blockKey(6, 110)})
}
