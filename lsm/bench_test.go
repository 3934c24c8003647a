package lsm_test

import (
	"encoding/binary"
	"testing"

	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

func BenchmarkApplyNoSync(b *testing.B) {
	dir := b.TempDir()
	opts := &lsm.Options{UUID: [16]byte{1}}
	if err := lsm.Format(dir, opts); err != nil {
		b.Fatal(err)
	}
	db, err := lsm.Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	k := make([]byte, 16)
	v := make([]byte, 100)
	batch := lsm.NewBatch()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		binary.BigEndian.PutUint64(k, uint64(i)*0x9e3779b97f4a7c15)
		batch.Reset()
		batch.Set(k, v)
		if err := db.Apply(batch, false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGetFromTables(b *testing.B) {
	const n = 500000
	db := filledDB(b, n)
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	b.Logf("%s", func() string { m := db.Metrics(); return m.String() }())
	benchGets(b, db, n)
}

// filledDB returns an engine with the default options holding n keys of
// 16 bytes with 100-byte values (benchKey).
func filledDB(b *testing.B, n int) *lsm.DB {
	dir := b.TempDir()
	opts := &lsm.Options{UUID: [16]byte{1}}
	if err := lsm.Format(dir, opts); err != nil {
		b.Fatal(err)
	}
	db, err := lsm.Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	k := make([]byte, 16)
	v := make([]byte, 100)
	batch := lsm.NewBatch()
	for i := range n {
		benchKey(k, uint64(i))
		batch.Reset()
		batch.Set(k, v)
		if err := db.Apply(batch, false); err != nil {
			b.Fatal(err)
		}
	}
	return db
}

// benchKey writes the i-th key of filledDB into k: spread over the
// keyspace, unique.
func benchKey(k []byte, i uint64) {
	binary.BigEndian.PutUint64(k, i*0x9e3779b97f4a7c15)
	binary.BigEndian.PutUint64(k[8:], i)
}

// benchGets times Gets of filledDB's n keys in a scattered order.
func benchGets(b *testing.B, db *lsm.DB, n int) {
	k := make([]byte, 16)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchKey(k, uint64(i*7919)%uint64(n))
		if _, err := db.Get(k); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetFromMemtables reads keys spread over the memtable's segments
// (about 50 MiB of entries under the default 64 MiB memtable_size, nothing
// flushed): a Get searches the segments newest first, and each segment's key
// filter lets it skip the segments that cannot hold the key.
func BenchmarkGetFromMemtables(b *testing.B) {
	const n = 300000
	db := filledDB(b, n)
	m := db.Metrics()
	if m.Flushes != 0 {
		b.Fatalf("%d flushes: the keys are not all in the memtable", m.Flushes)
	}
	b.Logf("%s", m.String())
	benchGets(b, db, n)
}

// BenchmarkSyncSmallFiles commits 16,384 small files the way an fsync of
// each does (one synchronous batch: a 4 KiB block and a 100-byte inode
// record), then flushes and compacts everything to the last level. It
// reports the bytes flushes and compactions wrote per user byte (values
// that sit in tables are copied at each level; a flush's move of values to
// the value log counts once), the tables' size per user byte at the end,
// and the engine's write amplification. Synchronous batches this small keep
// their values inline until the flush, which moves them to the value log.
func BenchmarkSyncSmallFiles(b *testing.B) {
	const files = 16384
	for range b.N {
		dir := b.TempDir()
		opts := &lsm.Options{UUID: [16]byte{1}, FS: vfs.NewMem()}
		if err := lsm.Format(dir, opts); err != nil {
			b.Fatal(err)
		}
		db, err := lsm.Open(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		block := make([]byte, 4096)
		inode := make([]byte, 100)
		batch := lsm.NewBatch()
		for i := range uint64(files) {
			for j := 0; j < len(block); j += 8 { // incompressible
				binary.LittleEndian.PutUint64(block[j:], (i*512+uint64(j))*0x9e3779b97f4a7c15)
			}
			binary.LittleEndian.PutUint64(inode, i)
			batch.Reset()
			batch.Set(binary.BigEndian.AppendUint64([]byte("B"), i), block)
			batch.Set(binary.BigEndian.AppendUint64([]byte("I"), i), inode)
			if err := db.Apply(batch, true); err != nil {
				b.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := db.Compact(nil, nil); err != nil {
			b.Fatal(err)
		}
		m := db.Metrics()
		user := float64(m.UserBytes)
		var tables uint64
		for _, l := range m.Levels {
			tables += l.Bytes
		}
		b.ReportMetric(float64(m.FlushBytes+m.CompactionBytes)/user, "flush+compaction-B/user-B")
		b.ReportMetric(float64(tables)/user, "tree-B/user-B")
		b.ReportMetric(m.WriteAmplification(), "write-amp")
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
