package journal

import (
	"fmt"
	"sort"
)

// Checkpoint declares that records with lsn <= lsn are no longer needed (the
// engine flushed them into tables). It writes the new checkpoint to the
// older superblock copy, forces it, and only then frees the ring space of
// the frames before the one holding lsn+1, waking writers that wait for
// space. A checkpoint at or below the current one is a no-op. lsn may be
// above the last durable lsn (records still pending are then simply not
// replayed after a crash) but not above the last enqueued one
// (ErrCheckpointAhead).
//
// Checkpoint may run concurrently with writers, including writers (and the
// committer) blocked for ring space: it waits at most for the frame write in
// progress (the device is used by one writer at a time), never for space.
func (j *Journal) Checkpoint(lsn uint64) error {
	if j.opts.ReadOnly {
		return ErrReadOnly
	}
	j.ckptMu.Lock()
	defer j.ckptMu.Unlock()
	j.mu.Lock()
	if err := j.errLocked(); err != nil {
		j.mu.Unlock()
		return err
	}
	if lsn <= j.mu.ckpt.lsn {
		j.mu.Unlock()
		return nil
	}
	if lsn >= j.mu.nextLSN {
		last := j.mu.nextLSN - 1
		j.mu.Unlock()
		return fmt.Errorf("journal: checkpoint lsn=%d: %w (last enqueued lsn=%d)", lsn, ErrCheckpointAhead, last)
	}
	pos := j.checkpointPosLocked(lsn)
	j.mu.Unlock()

	if err := j.writeSuperblock(pos, false); err != nil {
		err = fmt.Errorf("journal: checkpoint lsn=%d: %w", lsn, err)
		j.mu.Lock()
		j.failLocked(err)
		j.mu.Unlock()
		return err
	}
	j.stats.checkpoints.Add(1)

	j.mu.Lock()
	j.freeLocked(pos)
	j.mu.pressureArmed = true
	if j.mu.used > j.ringSize/2 {
		// Still more than half full (the engine checkpointed less than it
		// could): ask again.
		j.mu.pressureArmed = false
		j.signalPressure()
	}
	j.checkInvariantsLocked()
	j.mu.cond.Broadcast()
	j.mu.Unlock()
	return nil
}

// writeSuperblock writes the next superblock generation (to the older copy)
// with checkpoint pos and the clean flag, and forces it. j.ckptMu is held
// (or the journal is not shared yet). A failure wraps ErrFailed: the write
// may have torn the older copy (the newer one still holds the previous
// checkpoint, whose frames are intact), but a failed force leaves the device
// state unknown, so the caller fails stop.
func (j *Journal) writeSuperblock(pos checkpointPos, clean bool) error {
	sb := superblock{
		uuid: j.uuid, nonce: j.nonce, generation: j.sbGen + 1,
		ringStart: j.ringStart, ringSize: j.ringSize, ckpt: pos, clean: clean,
	}
	sb.encode(j.sbBuf)
	off := int64(sb.copyIndex()) * BlockSize
	j.ioMu.Lock()
	err := writeFull(j.dev, j.sbBuf, off)
	if err == nil {
		if err = j.dev.Sync(); err != nil {
			err = fmt.Errorf("force superblock: %w", err)
		}
	}
	j.ioMu.Unlock()
	if err != nil {
		return fmt.Errorf("superblock gen=%d: %w: %w", sb.generation, ErrFailed, err)
	}
	j.sbGen = sb.generation
	return nil
}

// checkpointPosLocked is where replay must start once records <= lsn are no
// longer needed: the first placed frame holding a record above lsn, or, if
// there is none, the place of the next frame (head, or ringStart when that
// frame will not fit before the ring end; replay tries both).
func (j *Journal) checkpointPosLocked(lsn uint64) checkpointPos {
	fs := j.mu.frames
	i := sort.Search(len(fs), func(i int) bool { return fs[i].lastLSN > lsn })
	if i < len(fs) {
		return checkpointPos{lsn: lsn, off: fs[i].off, seq: fs[i].seq}
	}
	return checkpointPos{lsn: lsn, off: j.mu.head, seq: j.mu.placedSeq + 1}
}

// freeLocked moves the checkpoint to pos (durable in the superblock) and
// releases the ring space before it.
func (j *Journal) freeLocked(pos checkpointPos) {
	fs := j.mu.frames
	i := sort.Search(len(fs), func(i int) bool { return fs[i].seq >= pos.seq })
	if i == len(fs) {
		fs = nil // fresh slice: let the old array go
	} else {
		fs = fs[i:]
	}
	j.mu.frames = fs
	j.mu.ckpt = pos
	j.mu.used = j.liveBytes(pos.off, j.mu.head, len(fs) > 0)
}

// liveBytes is the ring distance from the checkpoint offset tail to head;
// nonEmpty tells a full ring (tail == head) from an empty one.
func (j *Journal) liveBytes(tail, head int64, nonEmpty bool) int64 {
	d := head - tail
	if d < 0 {
		d += j.ringSize
	}
	if d == 0 && nonEmpty {
		d = j.ringSize
	}
	return d
}
