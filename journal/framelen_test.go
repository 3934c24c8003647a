package journal_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/lsmfs/lsmfs/journal"
)

// TestGatheredFrameWithinQuarterRing: with a ring whose quarter is not
// a whole number of blocks (a 4 MiB device: ring 1022 blocks, quarter
// 1046528 bytes) and MaxFrameBytes at its default (1 MiB, clamped to
// quarter-40), records gathered from several Enqueue calls fill a frame
// whose device length rounds up past the quarter (1048576 bytes). The
// committer writes, forces and acks it, but recovery's decodeFrameHeader
// refuses any frame longer than a quarter of the ring: the acknowledged
// frame is treated as a torn tail (records silently dropped) or, with
// frames after it, as mid-log corruption (the journal will not open).
func TestGatheredFrameWithinQuarterRing(t *testing.T) {
	const size = 4 << 20
	dev := formatMem(t, size)
	j := mustOpen(t, dev, journal.Options{DisableCompression: true})
	rng := rand.New(rand.NewPCG(3, 4))
	rec := make([]byte, 4000)
	var acked uint64
	for i := 0; i < 300; i++ {
		for k := range rec {
			rec[k] = byte(rng.Uint32())
		}
		lsn, err := j.Append([][]byte{rec}, false)
		if err != nil {
			t.Fatal(err)
		}
		acked = lsn
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	// One more synced frame after it: now the oversized frame is mid-log.
	if lsn, err := j.Append([][]byte{[]byte("after")}, true); err != nil {
		t.Fatal(err)
	} else {
		acked = lsn
	}
	crashed := dev.CrashClone()
	j.Close()

	j2, err := journal.Open(crashed, journal.Options{UUID: uuidA})
	if err != nil {
		t.Fatalf("reopen after acknowledged appends: %v", err)
	}
	defer j2.Close()
	r := j2.Recovery()
	if r.LastLSN != acked {
		t.Fatalf("recovered up to lsn %d, acknowledged up to %d (tail err: %v)", r.LastLSN, acked, r.TailErr)
	}
	// The writer keeps every frame within a quarter of the ring (the
	// reader also accepts the quarter rounded up, which earlier writers
	// produced).
	var out strings.Builder
	if err := journal.Dump(&out, crashed, journal.DumpOptions{}); err != nil {
		t.Fatal(err)
	}
	var lo, hi int64
	frames := 0
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "superblock 0:") {
			i := strings.Index(line, "ring=[")
			fmt.Sscanf(line[i:], "ring=[%d,%d)", &lo, &hi)
		}
		if strings.HasPrefix(line, "frame ") {
			var l int64
			i := strings.Index(line, " len=")
			fmt.Sscanf(line[i:], " len=%d", &l)
			frames++
			if quarter := (hi - lo) / 4; l > quarter {
				t.Errorf("frame longer than a quarter of the ring (%d): %s", quarter, line)
			}
		}
	}
	if frames < 2 || hi == 0 {
		t.Fatalf("dump: %d frames, ring [%d,%d):\n%s", frames, lo, hi, out.String())
	}
}

// TestBlockDeviceGeometries: 4 KiB logical sectors (O_DIRECT needs
// 4 KiB alignment) and a device size that is not a multiple of 4 KiB.
func TestBlockDeviceGeometries(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int64
		args []string
	}{
		{"4k-sectors", 8 << 20, []string{"--sector-size", "4096", "--direct-io=on"}},
		{"odd-size", 8<<20 + 3*512, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := attachLoop(t, tc.size, tc.args...)
			dev, size, err := journal.OpenBlockDevice(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: size %d", path, size)
			if err := journal.Format(dev, journal.FormatOptions{UUID: uuidA}); err != nil {
				t.Fatal(err)
			}
			j, err := journal.Open(dev, journal.Options{UUID: uuidA, Size: size})
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(7, 8))
			rec := make([]byte, 9000)
			var last uint64
			for i := 0; i < 2000; i++ {
				for k := range rec {
					rec[k] = byte(rng.Uint32())
				}
				if last, err = j.Append([][]byte{rec}, i%3 == 0); err != nil {
					t.Fatal(err)
				}
				if i%100 == 99 {
					if err := j.Checkpoint(last - 50); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := j.Sync(); err != nil {
				t.Fatal(err)
			}
			// Reopen without Close (as after a crash) on a second handle.
			dev2, _, err := journal.OpenBlockDevice(path)
			if err == nil {
				t.Fatal("O_EXCL did not refuse a second open")
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			dev2, size2, err := journal.OpenBlockDevice(path)
			if err != nil {
				t.Fatal(err)
			}
			j2, err := journal.Open(dev2, journal.Options{UUID: uuidA, Size: size2})
			if err != nil {
				t.Fatal(err)
			}
			defer j2.Close()
			n := 0
			if err := j2.Replay(0, func(uint64, []byte) error { n++; return nil }); err != nil {
				t.Fatal(err)
			}
			t.Logf("recovery %+v, replayed %d", j2.Recovery(), n)
			if r := j2.Recovery(); r.LastLSN != last && !r.Clean {
				t.Fatalf("last lsn %d, want %d", r.LastLSN, last)
			}
		})
	}
}
