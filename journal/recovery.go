package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Recovery is what Open found in the log.
type Recovery struct {
	// CheckpointLSN is the checkpoint recorded in the superblock: records at
	// or below it are not replayed.
	CheckpointLSN uint64
	// Frames and Records count the valid frames from the checkpoint position
	// to the end of the log, and the records they hold.
	Frames  int
	Records uint64
	// FirstLSN and LastLSN span the records of those frames (0 if none).
	FirstLSN, LastLSN uint64
	// End is the device offset where the log ends (where the next frame
	// goes, if it fits before the ring end) and EndSeq the next frame's seq.
	End    int64
	EndSeq uint64
	// Clean is set when the journal was closed with everything checkpointed
	// (the free ring was then not scanned).
	Clean bool
	// TailErr is nil when the log ended on a clean boundary, and wraps
	// ErrTornFrame when a frame with the next sequence number was found but
	// failed validation: what a crash during its write leaves behind. Its
	// records were never acknowledged.
	TailErr error
	// ScannedBytes is what Open read beyond the end of the log to make sure
	// no later frame exists (which would make a bad frame corruption).
	ScannedBytes int64
}

// frameProbe is the outcome of reading a frame where one with sequence
// number seq is expected.
type frameProbe int

const (
	probeValid   frameProbe = iota // a valid frame with the expected seq
	probeAbsent                    // no frame with the expected seq starts here (stale data, zeros)
	probeInvalid                   // a header naming the expected seq, but the frame fails validation
)

// readFrame reads the frame expected at off with sequence number seq into
// *buf (grown as needed) and validates it. It returns the frame's header and
// the probe outcome; err explains probeInvalid and carries device errors
// (with probeAbsent and a non-nil err, the caller must fail). wantLSN is an
// lsn the frame must hold, 0 when unknown.
func (j *Journal) readFrame(off int64, seq, wantLSN uint64, buf *[]byte) (frameHeader, frameProbe, error) {
	if len(*buf) < BlockSize {
		*buf = alignedBuf(BlockSize)
	}
	b := *buf
	if err := readFull(j.dev, b[:BlockSize], off); err != nil {
		return frameHeader{}, probeAbsent, err
	}
	h, err := decodeFrameHeader(b[:BlockSize], j.readFrameLen)
	if err != nil {
		if ownsHeader(b, seq, wantLSN) {
			return h, probeInvalid, err
		}
		return h, probeAbsent, nil
	}
	if h.seq != seq {
		if ownsHeader(b, seq, wantLSN) {
			return h, probeInvalid, fmt.Errorf("%w: damaged seq field %d", ErrInvalidFrame, h.seq)
		}
		return h, probeAbsent, nil
	}
	flen := h.len()
	if off+flen > j.ringEnd {
		return h, probeInvalid, fmt.Errorf("%w: frame of %d bytes at off=%d crosses the ring end %d", ErrInvalidFrame, flen, off, j.ringEnd)
	}
	if int64(len(b)) < flen {
		nb := alignedBuf(int(max(flen, 2*int64(len(b)))))
		copy(nb, b[:BlockSize])
		*buf, b = nb, nb
	}
	if flen > BlockSize {
		if err := readFull(j.dev, b[BlockSize:flen], off+BlockSize); err != nil {
			return h, probeAbsent, err
		}
	}
	if err := verifyFrame(b[:flen], &h, j.seed); err != nil {
		return h, probeInvalid, err
	}
	return h, probeValid, nil
}

// ownsHeader reports whether a header that does not decode, or names
// another seq, is the damaged header of the frame expected here rather than
// stale bytes or zeros: its seq field is the expected one (stale frames have
// lower ones; a frame never reuses a seq at another place), or, the seq
// field being damaged, it has the magic and its lsn range holds wantLSN
// (stale frames hold older lsns). So one damaged field cannot make a
// written frame look absent, which would drop its records without a word.
func ownsHeader(b []byte, seq, wantLSN uint64) bool {
	if rawSeq(b) == seq {
		return true
	}
	first := binary.LittleEndian.Uint64(b[fhOffFirstLSN:])
	count := uint64(binary.LittleEndian.Uint32(b[fhOffCount:]))
	return hasFrameMagic(b) && wantLSN != 0 && first <= wantLSN && wantLSN-first < count
}

// rawSeq reads the seq field of a header that may not decode.
func rawSeq(b []byte) uint64 { return binary.LittleEndian.Uint64(b[fhOffSeq:]) }

// recover scans the log from the checkpoint in sb, fills j.recovery and the
// ring state, and fails on mid-log corruption.
func (j *Journal) recover(sb superblock) error {
	rec := Recovery{CheckpointLSN: sb.ckpt.lsn}
	var buf, scratch []byte
	off, seq := sb.ckpt.off, sb.ckpt.seq
	var frames []frameMeta
	var used int64
	var prevLast uint64
	// badOff is where the frame with seq was found invalid (-1: not found).
	badOff := int64(-1)
	var badErr error
	for {
		// The frame must hold the lsn after the previous frame's, or the
		// first not checkpointed. Both, when the checkpoint is ahead of
		// the previous frame: Checkpoint can name the slot of a frame the
		// committer holds but has not placed yet with an lsn in a later
		// frame; a crash that keeps the first and loses the later leaves
		// a log that continues at the checkpoint lsn + 1 after it (the
		// records between are in tables).
		wantLSN := max(prevLast, sb.ckpt.lsn) + 1
		h, probe, err := j.readFrame(off, seq, wantLSN, &buf)
		if probe == probeAbsent && err != nil {
			return fmt.Errorf("journal: recover frame seq=%d off=%d: %w", seq, off, err)
		}
		at := off
		if probe != probeValid && off != j.ringStart {
			// A frame that did not fit before the ring end went to its start.
			h2, probe2, err2 := j.readFrame(j.ringStart, seq, wantLSN, &buf)
			if probe2 == probeAbsent && err2 != nil {
				return fmt.Errorf("journal: recover frame seq=%d off=%d: %w", seq, j.ringStart, err2)
			}
			if probe2 == probeValid || (probe2 == probeInvalid && probe == probeAbsent) {
				h, probe, err, at = h2, probe2, err2, j.ringStart
			}
		}
		if probe != probeValid {
			if probe == probeInvalid {
				badOff, badErr = at, err
			}
			break
		}
		// A valid frame: its payload must decode (a checksummed frame with a
		// malformed payload is no torn write but corruption), and it must
		// continue the log.
		raw, err := framePayload(buf, &h, &scratch)
		if err == nil {
			err = forEachRecord(raw, h.count, nil)
		}
		if err != nil {
			return fmt.Errorf("journal: recover frame seq=%d off=%d: %w: %w", seq, at, ErrCorrupt, err)
		}
		switch {
		case prevLast == 0 && h.firstLSN > sb.ckpt.lsn+1:
			return fmt.Errorf("journal: recover frame seq=%d off=%d: %w: first lsn %d leaves a gap after checkpoint lsn %d",
				seq, at, ErrCorrupt, h.firstLSN, sb.ckpt.lsn)
		case prevLast != 0 && h.firstLSN != prevLast+1 && !(prevLast < sb.ckpt.lsn && h.firstLSN == sb.ckpt.lsn+1):
			return fmt.Errorf("journal: recover frame seq=%d off=%d: %w: first lsn %d does not follow lsn %d",
				seq, at, ErrCorrupt, h.firstLSN, prevLast)
		}
		// Account for the frame as the committer did when it placed it.
		newUsed := used + h.len()
		if at != off {
			newUsed += j.ringEnd - off // skipped at the ring end
		}
		if newUsed > j.ringSize {
			return fmt.Errorf("journal: recover frame seq=%d off=%d: %w: log longer than the ring", seq, at, ErrCorrupt)
		}
		newHead := at + h.len()
		frames = append(frames, frameMeta{seq: seq, off: at, len: h.len(), firstLSN: h.firstLSN, lastLSN: h.lastLSN(), durable: true})
		if rec.FirstLSN == 0 {
			rec.FirstLSN = h.firstLSN
		}
		rec.Frames++
		rec.Records += uint64(h.count)
		rec.LastLSN = h.lastLSN()
		prevLast = h.lastLSN()
		off, used, seq = newHead, newUsed, seq+1
		if off == j.ringEnd {
			off = j.ringStart
		}
	}
	rec.End, rec.EndSeq = off, seq

	// The log ends at off. If any valid frame with seq or later exists in the
	// free part of the ring, the frame that stopped us sat in the middle of
	// the log: corruption, not a torn tail.
	// A clean close promised that nothing follows the checkpoint.
	var scanned int64
	var later uint64
	var laterOff int64
	var err error
	rec.Clean = sb.clean
	if !sb.clean || badOff >= 0 || rec.Frames > 0 {
		scanned, later, laterOff, err = j.scanForLater(off, j.ringSize-used, seq, &buf)
	}
	rec.ScannedBytes = scanned
	if err != nil {
		return fmt.Errorf("journal: recover: scan after off=%d: %w", off, err)
	}
	if later != 0 {
		where := badOff
		if where < 0 {
			where = off
		}
		why := badErr
		if why == nil {
			why = errors.New("no frame with this sequence number")
		}
		return fmt.Errorf("journal: replay frame seq=%d off=%d: %w: frame invalid (%v) but frame seq=%d follows at off=%d",
			seq, where, ErrCorrupt, why, later, laterOff)
	}
	if badOff >= 0 {
		rec.TailErr = fmt.Errorf("journal: frame seq=%d off=%d: %w: %w", seq, badOff, ErrTornFrame, badErr)
		j.log.Warn("journal: torn frame at the end of the log; its records were never acknowledged",
			"seq", seq, "off", badOff, "error", badErr)
	}
	j.recovery = rec

	j.mu.ckpt = sb.ckpt
	j.mu.frames = frames
	j.mu.head = off
	j.mu.used = used
	j.mu.takeSeq = seq
	j.mu.placedSeq = seq - 1
	j.mu.durableLSN = max(sb.ckpt.lsn, rec.LastLSN)
	j.mu.nextLSN = j.mu.durableLSN + 1
	return nil
}

// scanForLater reads n bytes of the ring from off (wrapping at the ring end)
// block by block, looking for a valid frame with sequence number >= seq. It
// returns the bytes read and the first such frame's seq and offset (seq 0 if
// none).
func (j *Journal) scanForLater(off, n int64, seq uint64, fbuf *[]byte) (scanned int64, laterSeq uint64, laterOff int64, err error) {
	chunk := min(1<<20, n)
	cbuf := alignedBuf(int(chunk))
	for n > 0 {
		m := min(n, chunk, j.ringEnd-off)
		if err := readFull(j.dev, cbuf[:m], off); err != nil {
			return scanned, 0, 0, err
		}
		scanned += m
		for i := int64(0); i < m; i += BlockSize {
			b := cbuf[i : i+BlockSize]
			if !hasFrameMagic(b) || rawSeq(b) < seq {
				continue
			}
			cand := rawSeq(b)
			_, probe, err := j.readFrame(off+i, cand, 0, fbuf)
			if probe == probeAbsent && err != nil {
				return scanned, 0, 0, err
			}
			if probe == probeValid {
				return scanned, cand, off + i, nil
			}
		}
		n -= m
		off += m
		if off == j.ringEnd {
			off = j.ringStart
		}
	}
	return scanned, 0, 0, nil
}

// Replay calls fn for every durable record with lsn >= max(from,
// checkpoint+1), in lsn order: the records recovered by Open and those made
// durable since, as of the call. rec is valid only during fn. An error from
// fn stops the replay and is returned (wrapped). fn must not call Checkpoint
// or Close (Replay holds the checkpoint lock so that no frame it reads is
// freed and overwritten under it).
func (j *Journal) Replay(from uint64, fn func(lsn uint64, rec []byte) error) error {
	j.ckptMu.Lock()
	defer j.ckptMu.Unlock()
	j.mu.Lock()
	if j.mu.closed {
		j.mu.Unlock()
		return ErrClosed
	}
	start := max(from, j.mu.ckpt.lsn+1)
	var frames []frameMeta
	for _, m := range j.mu.frames {
		if m.durable && m.lastLSN >= start {
			frames = append(frames, m)
		}
	}
	j.mu.Unlock()

	var buf, scratch []byte
	for _, m := range frames {
		h, probe, err := j.readFrame(m.off, m.seq, 0, &buf)
		if probe == probeAbsent && err != nil { // the device failed the read
			return fmt.Errorf("journal: replay frame seq=%d off=%d: %w", m.seq, m.off, err)
		}
		if probe != probeValid {
			if err == nil {
				err = errors.New("frame no longer there")
			}
			return fmt.Errorf("journal: replay frame seq=%d off=%d: %w: %w", m.seq, m.off, ErrCorrupt, err)
		}
		raw, err := framePayload(buf, &h, &scratch)
		var fnErr error
		var fnLSN uint64
		if err == nil {
			// forEachRecord checks the whole payload before the first call.
			err = forEachRecord(raw, h.count, func(i int, rec []byte) error {
				lsn := h.firstLSN + uint64(i)
				if lsn < start {
					return nil
				}
				fnErr, fnLSN = fn(lsn, rec), lsn
				return fnErr
			})
		}
		if fnErr != nil {
			return fmt.Errorf("journal: replay lsn=%d: %w", fnLSN, fnErr)
		}
		if err != nil {
			return fmt.Errorf("journal: replay frame seq=%d off=%d: %w: %w", m.seq, m.off, ErrCorrupt, err)
		}
	}
	return nil
}
