package lsm

import (
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzBatchReader: the batch decoder (every journal record goes through it
// at replay) returns ErrCorrupt for damaged input, never panics, and never
// yields more entries than the record has bytes for (count sizes the
// memtable replay allocates).
func FuzzBatchReader(f *testing.F) {
	b := NewBatch()
	b.Set([]byte("k"), []byte("v"))
	b.Delete([]byte("d"))
	b.DeleteRange([]byte("a"), []byte("b"))
	b.setPointer([]byte("p"), []byte{1, 2, 3})
	b.setSeq(7)
	f.Add(append([]byte(nil), b.repr...))
	empty := NewBatch()
	empty.setSeq(1)
	f.Add(append([]byte(nil), empty.repr...))
	huge := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint64([]byte{batchVersion}, 2), 37_000_000)
	f.Add(append(huge, 1, 1, 'b', 1, '2'))
	f.Fuzz(func(t *testing.T, repr []byte) {
		r, err := newBatchReader(repr)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("newBatchReader: %v, not ErrCorrupt", err)
			}
			return
		}
		if 2*int(r.count) > len(repr) {
			t.Fatalf("a %d-byte batch accepted with count %d", len(repr), r.count)
		}
		for n := 0; ; n++ {
			_, ok, err := r.next()
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("next: %v, not ErrCorrupt", err)
				}
				return
			}
			if !ok {
				return
			}
			if n >= len(repr) {
				t.Fatal("more entries than bytes")
			}
		}
	})
}
