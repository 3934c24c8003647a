package journal

import (
	"fmt"
	"time"
)

// The committer is the one goroutine that writes frames. Its loop:
//
//  1. take the pending frame when it must be committed (a sync request, the
//     frame is full, the commit interval elapsed, or Close), and install a
//     fresh pending frame so that writers keep enqueueing meanwhile (group
//     commit);
//  2. encode it (LZ4 when that saves space) and place it in the ring,
//     waiting for a Checkpoint if the ring lacks space;
//  3. write it with one WriteAt and force it with one Sync;
//  4. ack every waiter of the frame (or hand them the error).
//
// Invariants: frames are written in seq order, and a frame is written only
// after the previous one was forced, so at most one unforced frame exists
// and a crash can only tear the last frame of the log. A waiter is acked only
// after the force of its frame returned. After a failed write or force no
// further frame is written (the error is sticky).
func (j *Journal) committer() {
	defer close(j.committerDone)
	var enc *frameEncoder // allocated at the first frame: its LZ4 table is large
	var buf []byte
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		j.mu.Lock()
		f, wait, exit := j.takeLocked(time.Now())
		j.mu.Unlock()
		if exit {
			return
		}
		if f != nil {
			if enc == nil {
				enc = &frameEncoder{seed: j.seed, compress: !j.opts.DisableCompression}
			}
			buf = j.commit(f, enc, buf)
			continue
		}
		if wait > 0 {
			timer.Reset(wait)
		}
		select {
		case <-j.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// takeLocked returns the pending frame if it is due, installing a new one;
// otherwise how long until it is due (0: until woken), or exit when the
// journal is closing and nothing is pending.
func (j *Journal) takeLocked(now time.Time) (f *frame, wait time.Duration, exit bool) {
	p := j.mu.pending
	if p.count == 0 {
		return nil, 0, j.mu.closing
	}
	due := p.firstAt.Add(j.opts.CommitInterval)
	if !p.force && !p.full && !j.mu.closing && j.mu.err == nil && now.Before(due) {
		return nil, due.Sub(now), false
	}
	p.seq = j.mu.takeSeq
	j.mu.takeSeq++
	j.mu.pending = j.newFrameLocked()
	j.mu.inflight = p
	j.mu.unplaced = frameLen(p.size())
	j.mu.cond.Broadcast() // writers waiting for a fresh frame
	return p, 0, false
}

// commit writes and forces f, then acks its waiters. buf is the committer's
// aligned frame buffer, returned (possibly grown) for reuse.
func (j *Journal) commit(f *frame, enc *frameEncoder, buf []byte) []byte {
	j.mu.Lock()
	err := j.mu.err
	j.mu.Unlock()
	var meta frameMeta
	if err == nil && j.opts.BeforeForce != nil {
		// Ordered mode: what the frame's records point to is made durable
		// before the frame can be.
		if err = j.opts.BeforeForce(); err != nil {
			err = fmt.Errorf("journal: frame seq=%d: before force: %w: %w", f.seq, ErrFailed, err)
		}
	}
	if err == nil {
		if need := int(frameLen(f.size())); len(buf) < need {
			buf = alignedBuf(max(need, 2*len(buf)))
		}
		h, flen := enc.encode(buf, f.seq, f.firstLSN, f.count, f.payload)
		meta = frameMeta{seq: f.seq, len: flen, firstLSN: f.firstLSN, lastLSN: h.lastLSN()}
		if meta.off, err = j.placeFrame(&meta); err == nil {
			err = j.writeFrame(buf[:flen], &meta)
		}
		if err == nil {
			j.stats.frames.Add(1)
			j.stats.records.Add(uint64(f.count))
			j.stats.rawBytes.Add(uint64(h.rawLen))
			j.stats.storedBytes.Add(uint64(h.storedLen))
			j.stats.deviceBytes.Add(uint64(flen))
			if h.flags&flagLZ4 != 0 {
				j.stats.compressedFrames.Add(1)
			}
			updateMax(&j.stats.maxRecordsPerFrame, uint64(f.count))
		}
	}
	j.mu.Lock()
	j.mu.inflight = nil
	j.mu.unplaced = 0
	if err != nil {
		j.failLocked(err)
	} else {
		// The placed frame is the last in the list unless a Checkpoint freed
		// it meanwhile (a checkpoint beyond it).
		if n := len(j.mu.frames); n > 0 && j.mu.frames[n-1].seq == meta.seq {
			j.mu.frames[n-1].durable = true
		}
		j.mu.durableLSN = max(j.mu.durableLSN, meta.lastLSN)
	}
	// Recycle the record buffers unless they grew huge.
	if cap(f.payload) <= 2*j.maxPending && j.mu.spare == nil {
		j.mu.spare = f.payload[:0]
	}
	f.payload = nil
	j.mu.cond.Broadcast()
	j.mu.Unlock()
	f.err = err
	close(f.done)
	return buf
}

// placeFrame gives the frame described by m a place in the ring, waiting for
// a Checkpoint while the ring lacks space, and returns its device offset.
func (j *Journal) placeFrame(m *frameMeta) (int64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var waitStart time.Time
	for {
		if j.mu.err != nil {
			return 0, j.mu.err
		}
		_, _, used := j.place(j.mu.head, j.mu.used, m.len)
		if used <= j.ringSize {
			break
		}
		if j.mu.closing {
			// Nobody will checkpoint any more: the frame cannot be written.
			// Fail the journal so that no later frame is written after the
			// gap this one leaves in the sequence.
			err := fmt.Errorf("journal: frame seq=%d: %w while waiting for ring space", m.seq, ErrClosed)
			j.failLocked(err)
			return 0, err
		}
		if waitStart.IsZero() {
			waitStart = time.Now()
			j.stats.spaceWaits.Add(1)
			j.signalPressure()
		}
		j.mu.cond.Wait()
	}
	if !waitStart.IsZero() {
		j.stats.spaceWaitNanos.Add(uint64(time.Since(waitStart)))
	}
	off, head, used := j.place(j.mu.head, j.mu.used, m.len)
	j.mu.head, j.mu.used = head, used
	j.mu.unplaced = 0
	j.mu.placedSeq = m.seq
	m.off = off
	j.mu.frames = append(j.mu.frames, *m)
	if j.mu.used > j.ringSize/2 && j.mu.pressureArmed {
		j.mu.pressureArmed = false
		j.signalPressure()
	}
	j.checkInvariantsLocked()
	return off, nil
}

// writeFrame writes the frame bytes at m.off and forces them. A failure is
// returned wrapped in ErrFailed.
func (j *Journal) writeFrame(b []byte, m *frameMeta) error {
	j.ioMu.Lock()
	defer j.ioMu.Unlock()
	if err := writeFull(j.dev, b, m.off); err != nil {
		return fmt.Errorf("journal: frame seq=%d off=%d: %w: %w", m.seq, m.off, ErrFailed, err)
	}
	start := time.Now()
	err := j.dev.Sync()
	d := time.Since(start)
	j.stats.forces.Add(1)
	j.stats.forceNanos.Add(uint64(d))
	updateMax(&j.stats.forceMaxNanos, uint64(d))
	if err != nil {
		return fmt.Errorf("journal: force frame seq=%d off=%d: %w: %w", m.seq, m.off, ErrFailed, err)
	}
	return nil
}
