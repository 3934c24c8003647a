package journal_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lsmfs/lsmfs/journal"
)

// tornImage builds a journal of five synced frames on a memDevice; frames 3
// and 5 span several blocks (incompressible records). It returns the image, the
// frames and the records by lsn.
func tornImage(t *testing.T) (*memDevice, []journal.FrameInfo, [][]byte) {
	t.Helper()
	d := formatMem(t, 96<<10) // small: every damaged image is opened
	j := mustOpen(t, d, journal.Options{})
	rng := rand.New(rand.NewPCG(1, 2))
	all := [][]byte{nil} // index = lsn
	for f := 1; f <= 5; f++ {
		var batch [][]byte
		for i := 0; i < f; i++ {
			r := []byte(strings.Repeat(fmt.Sprintf("frame %d record %d ", f, i), 3))
			if f == 3 || f == 5 {
				r = make([]byte, 1500)
				for k := range r {
					r[k] = byte(rng.Uint32())
				}
			}
			batch = append(batch, r)
		}
		if _, err := j.Append(batch, true); err != nil {
			t.Fatal(err)
		}
		all = append(all, batch...)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	frames, rec, err := journal.ListFrames(d.reopen())
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 5 || rec.TailErr != nil || frames[2].Len < 2*journal.BlockSize || frames[4].Len < 2*journal.BlockSize {
		t.Fatalf("unexpected layout: %+v %+v", frames, rec)
	}
	return d, frames, all
}

// expectLog opens img and checks that it replays exactly lsns 1..last with
// the given records, and (if andAppend) that appending continues at last+1.
func expectLog(t *testing.T, img journal.Device, all [][]byte, last uint64, andAppend bool) journal.Recovery {
	t.Helper()
	j, err := journal.Open(img, journal.Options{UUID: uuidA})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer j.Close()
	next := uint64(1)
	if err := j.Replay(0, func(lsn uint64, rec []byte) error {
		if lsn != next || string(rec) != string(all[lsn]) {
			return fmt.Errorf("lsn %d (want %d) differs", lsn, next)
		}
		next++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if next != last+1 {
		t.Fatalf("replay ended at lsn %d, want %d", next-1, last)
	}
	if !andAppend {
		return j.Recovery()
	}
	if lsn, err := j.Append(recs("after"), true); err != nil || lsn != last+1 {
		t.Fatalf("append after recovery: lsn=%d err=%v, want %d", lsn, err, last+1)
	}
	return j.Recovery()
}

// TestTornTail damages the last frame at every byte offset, by zeroing
// from there to the end of the frame (a write cut short) and by flipping
// the byte (a scribbled sector): replay ends cleanly at the previous frame
// while the damage is inside the checksummed bytes, and keeps the frame
// when only its padding is hit (sampled every 61st byte). A flipped byte
// is always reported as a torn frame, in the header too.
func TestTornTail(t *testing.T) {
	base, frames, all := tornImage(t)
	last := frames[4]
	prevLSN := frames[3].LastLSN
	torn := 0
	img := base.Clone()
	for k := int64(0); k < last.Len; k++ {
		if k >= last.Covered && k%61 != 0 {
			continue // padding: sampled
		}
		if raceEnabled && k < last.Covered && k > 64 && k%7 != 0 {
			continue // under -race, past the header: sampled
		}
		for _, mode := range []string{"truncate", "scribble"} {
			img.restore(base)
			b := img.Bytes()
			if mode == "truncate" {
				clear(b[last.Off+k : last.Off+last.Len])
			} else {
				b[last.Off+k] ^= 0xff
			}
			want := prevLSN
			if k >= last.Covered || (mode == "truncate" && allZero(base.Bytes()[last.Off+k:last.Off+last.Covered])) {
				want = last.LastLSN // only padding was hit
			}
			r := expectLog(t, img, all, want, k%16 == 0)
			if mode == "scribble" && k < last.Covered && r.TailErr == nil {
				// A damaged header field (magic, seq) must not pass
				// for the clean end of the log.
				t.Fatalf("scribble at byte %d of the last frame: records dropped without a torn-frame report", k)
			}
			if want == prevLSN && r.TailErr != nil {
				torn++
				if !errors.Is(r.TailErr, journal.ErrTornFrame) || errors.Is(r.TailErr, journal.ErrCorrupt) {
					t.Fatalf("%s at %d: tail error %v", mode, k, r.TailErr)
				}
			}
			if t.Failed() {
				t.Fatalf("%s at byte %d of the last frame", mode, k)
			}
		}
	}
	t.Logf("%d damaged images reported a torn frame (the rest were cut short before the seq field: a clean end)", torn)
	if torn == 0 {
		t.Fatal("no image reported a torn frame")
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// TestTornTailFile truncates a journal file inside its last frame at every
// 61st byte (a regular file cut short): bytes past the end read as zeros,
// and replay ends at the previous frame.
func TestTornTailFile(t *testing.T) {
	base, frames, all := tornImage(t)
	last := frames[4]
	path := filepath.Join(t.TempDir(), "journal")
	for k := int64(0); k < last.Covered; k += 61 {
		if err := os.WriteFile(path, base.Bytes()[:last.Off+k], 0o600); err != nil {
			t.Fatal(err)
		}
		dev, _, err := journal.OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		expectLog(t, dev, all, frames[3].LastLSN, true)
	}
}

// TestMidLogCorruption flips every byte of frames before the last one:
// Open fails with ErrCorrupt naming the damaged frame's offset and seq
// (never a torn tail, never a panic), unless only padding was hit (sampled
// every 61st byte).
func TestMidLogCorruption(t *testing.T) {
	base, frames, all := tornImage(t)
	img := base.Clone()
	for _, f := range frames[:4] {
		for k := int64(0); k < f.Len; k++ {
			if k >= f.Covered && k%61 != 0 {
				continue // padding: sampled
			}
			img.restore(base)
			img.Bytes()[f.Off+k] ^= 0xff
			j, err := journal.Open(img, journal.Options{UUID: uuidA})
			if k >= f.Covered {
				if err != nil {
					t.Fatalf("frame %d byte %d (padding): %v", f.Seq, k, err)
				}
				j.Close()
				continue
			}
			if !errors.Is(err, journal.ErrCorrupt) || errors.Is(err, journal.ErrTornFrame) {
				t.Fatalf("frame %d byte %d: %v, want ErrCorrupt", f.Seq, k, err)
			}
			if want := fmt.Sprintf("frame seq=%d off=%d", f.Seq, f.Off); !strings.Contains(err.Error(), want) {
				t.Fatalf("frame %d byte %d: error %q does not name %q", f.Seq, k, err, want)
			}
			if k == 0 && f.Seq == 3 {
				t.Logf("example: %v", err)
			}
		}
	}
	// The undamaged image is fine.
	expectLog(t, base.Clone(), all, frames[4].LastLSN, true)
}

// TestDamagedFirstFrameHeader flips each byte of the header of the only
// frame after the checkpoint (no previous frame tells which lsn it holds):
// the loss of its records is reported as a torn frame, never taken for the
// clean end of the log.
func TestDamagedFirstFrameHeader(t *testing.T) {
	d := formatMem(t, 96<<10)
	j := mustOpen(t, d, journal.Options{})
	if _, err := j.Append(recs("one", "two"), true); err != nil {
		t.Fatal(err)
	}
	crashed := d.CrashClone()
	j.Close()
	frames, _, err := journal.ListFrames(crashed.Clone())
	if err != nil || len(frames) != 1 {
		t.Fatalf("frames %+v, %v", frames, err)
	}
	for k := int64(0); k < 40; k++ { // the header
		img := crashed.Clone()
		img.Bytes()[frames[0].Off+k] ^= 0x01
		j, err := journal.Open(img, journal.Options{UUID: uuidA})
		if err != nil {
			t.Fatalf("byte %d: %v", k, err)
		}
		r := j.Recovery()
		j.Close()
		if r.Records != 0 || !errors.Is(r.TailErr, journal.ErrTornFrame) {
			t.Fatalf("byte %d: %d records, tail error %v; want a torn frame", k, r.Records, r.TailErr)
		}
	}
}
