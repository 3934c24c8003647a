package journal_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lsmfs/lsmfs/journal"
)

// The fuzzers read their seeds from testdata/fuzz/<FuzzName>/ (committed;
// regenerate with go test ./journal/ -run TestFuzzCorpus -update-fuzz-corpus).
// Run one with e.g.
//
//	go test ./journal/ -run XXX -fuzz '^FuzzFrame$' -fuzztime 30s
//	go test ./journal/ -run XXX -fuzz '^FuzzOpen$' -fuzztime 30s -fuzzminimizetime 3s
//
// (FuzzOpen's inputs are ring images of several KiB: without a bound on
// minimization the fuzzer spends its time shrinking them.)

var updateFuzzCorpus = flag.Bool("update-fuzz-corpus", false, "rewrite the seed corpus under testdata/fuzz")

const fuzzNonce = 42

// FuzzFrame feeds arbitrary bytes to the frame decoder: every failure is a
// typed ErrInvalidFrame, never a panic. Each input is decoded twice: as
// given, and with its checksum fixed so that mutations reach the LZ4 and
// record decoders. A frame that decodes re-encodes to the same records.
func FuzzFrame(f *testing.F) {
	f.Add(journal.EncodeFrame(uuidA, fuzzNonce, 1, 1, recs("a"), true))
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(b []byte) {
			seq, first, rs, err := journal.DecodeFrame(b, uuidA, fuzzNonce)
			if err != nil {
				if !errors.Is(err, journal.ErrInvalidFrame) {
					t.Fatalf("untyped error: %v", err)
				}
				return
			}
			if len(rs) == 0 {
				t.Fatal("a valid frame without records")
			}
			for _, compress := range []bool{false, true} {
				again := journal.EncodeFrame(uuidA, fuzzNonce, seq, first, rs, compress)
				seq2, first2, rs2, err := journal.DecodeFrame(again, uuidA, fuzzNonce)
				if err != nil || seq2 != seq || first2 != first || len(rs2) != len(rs) {
					t.Fatalf("re-encoded frame: seq=%d first=%d n=%d err=%v", seq2, first2, len(rs2), err)
				}
				for i := range rs {
					if !bytes.Equal(rs[i], rs2[i]) {
						t.Fatalf("record %d differs after re-encoding", i)
					}
				}
			}
		}
		check(b)
		c := append([]byte(nil), b...)
		if journal.FixFrameChecksum(c, uuidA, fuzzNonce) {
			check(c)
		}
	})
}

// FuzzSuperblock feeds arbitrary bytes to the superblock decoder (as given
// and with a fixed checksum): failures are typed, and a copy that decodes
// re-encodes to the same bytes.
func FuzzSuperblock(f *testing.F) {
	f.Add(journal.EncodeSuperblock(journal.Superblock{UUID: uuidA, Nonce: 1, Generation: 1,
		RingStart: 8192, RingSize: 1 << 20, CkptOff: 8192, CkptSeq: 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(b []byte) {
			for slot := 0; slot < 2; slot++ {
				sb, err := journal.DecodeSuperblock(b, slot)
				if err != nil {
					if !errors.Is(err, journal.ErrInvalidSuperblock) && !errors.Is(err, journal.ErrUnsupportedVersion) {
						t.Fatalf("untyped error: %v", err)
					}
					continue
				}
				if again := journal.EncodeSuperblock(sb); !bytes.Equal(again[:journal.SuperblockLen], b[:journal.SuperblockLen]) {
					t.Fatalf("superblock %+v re-encodes differently", sb)
				}
			}
		}
		check(b)
		c := append([]byte(nil), b...)
		journal.FixSuperblockChecksum(c)
		check(c)
	})
}

// fuzzRingDevice is the device FuzzOpen lays its input on: a valid
// superblock (ring of 16 blocks) followed by the input as ring content.
const fuzzRingDevice = 8192 + 16*journal.BlockSize

// FuzzOpen feeds arbitrary ring contents behind a valid superblock to Open
// and Replay: Open either fails with ErrCorrupt or succeeds, and then replay
// delivers consecutive lsns without error. Never a panic.
func FuzzOpen(f *testing.F) {
	f.Fuzz(func(t *testing.T, ring []byte) {
		d := formatFuzzDevice(t)
		copy(d.Bytes()[8192:], ring)
		j, err := journal.Open(d.Clone(), journal.Options{UUID: uuidA})
		if err != nil {
			if !errors.Is(err, journal.ErrCorrupt) {
				t.Fatalf("open: untyped error: %v", err)
			}
			return
		}
		defer j.Close()
		r := j.Recovery()
		next := r.FirstLSN
		err = j.Replay(0, func(lsn uint64, rec []byte) error {
			if lsn != next {
				return fmt.Errorf("lsn %d, want %d", lsn, next)
			}
			next++
			return nil
		})
		if err != nil {
			t.Fatalf("replay after a successful open: %v", err)
		}
		if r.Frames > 0 && next != r.LastLSN+1 {
			t.Fatalf("replay ended at %d, recovery said %d", next-1, r.LastLSN)
		}
	})
}

func formatFuzzDevice(t testing.TB) *memDevice {
	d := newMemDevice(fuzzRingDevice)
	if err := journal.Format(d, journal.FormatOptions{UUID: uuidA, Nonce: fuzzNonce}); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestFuzzCorpus checks that the committed seed corpus exists, and with
// -update-fuzz-corpus regenerates it.
func TestFuzzCorpus(t *testing.T) {
	seeds := map[string][][]byte{}

	// Frames: raw and compressed, one and many records, empty records,
	// large records.
	big := bytes.Repeat([]byte("dentry 17 name=file-0001.txt child=4242 "), 50)
	seeds["FuzzFrame"] = [][]byte{
		unpadded(journal.EncodeFrame(uuidA, fuzzNonce, 1, 1, recs("alpha"), false)),
		unpadded(journal.EncodeFrame(uuidA, fuzzNonce, 7, 100, recs("a", "", "bcd", strings.Repeat("z", 300)), false)),
		unpadded(journal.EncodeFrame(uuidA, fuzzNonce, 2, 5, [][]byte{big, big[:100]}, true)),
		unpadded(journal.EncodeFrame(uuidA, fuzzNonce, 3, 9, [][]byte{make([]byte, 5000)}, true)),
		unpadded(journal.EncodeFrame(uuidA, fuzzNonce, 1<<40, 1<<50, recs("x", "y"), true))[:50],
	}
	seeds["FuzzSuperblock"] = [][]byte{
		journal.EncodeSuperblock(journal.Superblock{UUID: uuidA, Nonce: fuzzNonce, Generation: 0,
			RingStart: 8192, RingSize: 65536, CkptOff: 8192, CkptSeq: 1})[:512],
		journal.EncodeSuperblock(journal.Superblock{UUID: uuidB, Nonce: 7, Generation: 9,
			RingStart: 8192, RingSize: 1 << 30, CkptLSN: 12345, CkptOff: 8192 + 40960, CkptSeq: 77})[:512],
	}
	// Rings: a short log, a torn tail.
	seeds["FuzzOpen"] = fuzzRingSeeds(t)

	for name, inputs := range seeds {
		dir := filepath.Join("testdata", "fuzz", name)
		if !*updateFuzzCorpus {
			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) < len(inputs) {
				t.Fatalf("seed corpus %s: %d files (err %v), want %d; run with -update-fuzz-corpus", dir, len(entries), err, len(inputs))
			}
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, in := range inputs {
			content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", in)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// unpadded cuts a frame after its stored payload (the decoder needs no
// padding).
func unpadded(frame []byte) []byte {
	n := journal.FrameHeaderSize + int(binary.LittleEndian.Uint32(frame[32:]))
	return frame[:n]
}

// fuzzRingSeeds builds ring images on a fuzz device, trimmed of trailing
// zeros.
func fuzzRingSeeds(t *testing.T) [][]byte {
	var out [][]byte
	ring := func(d *memDevice) []byte {
		b := bytes.TrimRight(d.Bytes()[8192:], "\x00")
		return append([]byte(nil), b...)
	}
	// A short log.
	d := formatFuzzDevice(t)
	j := mustOpen(t, d, journal.Options{})
	for i := 0; i < 3; i++ {
		if _, err := j.Append(recs(fmt.Sprint("record ", i), "second"), true); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	out = append(out, ring(d))
	// A torn tail.
	d = formatFuzzDevice(t)
	j = mustOpen(t, d, journal.Options{})
	for i := 0; i < 4; i++ {
		if _, err := j.Append(recs(strings.Repeat("payload ", 100)), true); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	b := ring(d)
	out = append(out, b[:len(b)-30])
	return out
}
