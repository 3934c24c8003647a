package manifest

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
)

// TestManyFalseHeadersAreDamage: after a bad record header, ReadAll looks
// for a whole record further on to tell a torn tail from damage in the
// middle. A log crafted with a header-valid candidate at every offset, each
// with a payload checksum that fails, cost time quadratic in its length (a
// 4 MiB manifest: minutes at Open). Past 64 such candidates the log is
// damaged (format review).
func TestManyFalseHeadersAreDamage(t *testing.T) {
	data := append([]byte(magic), fileVersion)
	data = append(data, 0xff) // a bad header at the first record
	for len(data) < 64<<10 {
		var h [recordHdrLen]byte
		binary.LittleEndian.PutUint32(h[:], 100)         // payload length
		binary.LittleEndian.PutUint32(h[4:], 0xdeadbeef) // a payload checksum that fails
		binary.LittleEndian.PutUint32(h[8:], crc32.Checksum(h[:8], castagnoli))
		data = append(data, h[:]...)
	}
	_, err := ReadAll("MANIFEST-000001", data)
	var ce *base.CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("ReadAll of a log of false headers: %v, want a corruption error", err)
	}
}
