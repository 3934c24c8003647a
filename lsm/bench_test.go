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
	const n = 500000
	k := make([]byte, 16)
	v := make([]byte, 100)
	batch := lsm.NewBatch()
	for i := 0; i < n; i++ {
		binary.BigEndian.PutUint64(k, uint64(i)*0x9e3779b97f4a7c15)
		binary.BigEndian.PutUint64(k[8:], uint64(i))
		batch.Reset()
		batch.Set(k, v)
		if err := db.Apply(batch, false); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	b.Logf("%s", func() string { m := db.Metrics(); return m.String() }())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := uint64(i*7919) % n
		binary.BigEndian.PutUint64(k, j*0x9e3779b97f4a7c15)
		binary.BigEndian.PutUint64(k[8:], j)
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
	const n = 300000
	k := make([]byte, 16)
	v := make([]byte, 100)
	batch := lsm.NewBatch()
	for i := 0; i < n; i++ {
		binary.BigEndian.PutUint64(k, uint64(i)*0x9e3779b97f4a7c15)
		binary.BigEndian.PutUint64(k[8:], uint64(i))
		batch.Reset()
		batch.Set(k, v)
		if err := db.Apply(batch, false); err != nil {
			b.Fatal(err)
		}
	}
	m := db.Metrics()
	if m.Flushes != 0 {
		b.Fatalf("%d flushes: the keys are not all in the memtable", m.Flushes)
	}
	b.Logf("%s", m.String())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := uint64(i*7919) % n
		binary.BigEndian.PutUint64(k, j*0x9e3779b97f4a7c15)
		binary.BigEndian.PutUint64(k[8:], j)
		if _, err := db.Get(k); err != nil {
			b.Fatal(err)
		}
	}
}
