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
