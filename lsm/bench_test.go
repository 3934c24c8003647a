package lsm_test

import (
	"encoding/binary"
	"testing"

	"github.com/lsmfs/lsmfs/lsm"
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
