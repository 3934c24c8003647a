package journal

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Journal is an open write-ahead journal. All methods are safe for
// concurrent use. See doc.go for the model.
type Journal struct {
	dev  Device
	opts Options
	log  *slog.Logger

	// Geometry and identity, fixed at Format.
	uuid      [16]byte
	nonce     uint64
	seed      uint32 // frameSeed(uuid, nonce)
	ringStart int64
	ringEnd   int64
	ringSize  int64
	// maxFrameLen bounds the device length of a frame the writer builds:
	// a quarter of the ring, rounded down to whole blocks (frames are
	// whole blocks). readFrameLen is the reader's bound: the quarter
	// rounded up, since writers before that rounding let frames gathered
	// from several appends round up past the quarter. maxPending is the
	// payload size at which the pending frame is committed at once
	// (Options.MaxFrameBytes, clamped).
	maxFrameLen  int64
	readFrameLen int64
	maxPending   int

	recovery Recovery // what Open found; immutable

	// ckptMu serializes Checkpoint, Replay and the end of Close: a replay
	// must not see frames freed (and overwritten) under it. It also guards
	// sbGen and sbBuf. Lock order: ckptMu, then ioMu, then mu.
	ckptMu sync.Mutex
	sbGen  uint64 // generation of the newest durable superblock copy
	sbBuf  []byte // aligned block for superblock writes

	// ioMu serializes writes and forces of the device, so that the frame
	// written by the committer and a superblock written by Checkpoint never
	// interleave with each other's Sync (a Device needs ordered writers).
	// Lock order: after ckptMu, before mu.
	ioMu sync.Mutex

	// mu guards the group-commit state. Lock order: last.
	mu struct {
		sync.Mutex
		// cond is broadcast when the pending frame is taken, ring space is
		// freed, a frame completes, the journal fails or is closing.
		cond sync.Cond
		// pending accumulates records until the committer takes it.
		pending *frame
		// inflight is the frame the committer took and has not finished.
		inflight *frame
		// unplaced is the worst-case device length of inflight while it has
		// no place in the ring yet (0 once placed or when idle).
		unplaced int64
		// spare is the payload buffer of a finished frame, reused by the
		// next pending frame.
		spare []byte

		nextLSN   uint64 // lsn the next enqueued record gets
		takeSeq   uint64 // seq the next frame taken by the committer gets
		placedSeq uint64 // seq of the last frame given a place in the ring
		// head is the device offset after the last placed frame, where the
		// next frame goes if it fits before the ring end (else at ringStart).
		head int64
		// used is the ring bytes from the checkpoint position to head,
		// including space skipped at the ring end.
		used int64
		// frames are the placed frames after the checkpoint, in seq order.
		frames []frameMeta
		ckpt   checkpointPos

		durableLSN uint64 // every record <= durableLSN is durable (or checkpointed)
		err        error  // sticky: the first device failure (wraps ErrFailed)
		closing    bool   // Close has begun: no new records
		closed     bool   // Close has finished
		// pressureArmed: OnPressure fires when used crosses half the ring;
		// re-armed by every Checkpoint.
		pressureArmed bool
	}

	wake          chan struct{} // cap 1: wakes the committer
	committerDone chan struct{}
	pressure      chan struct{} // cap 1: pending OnPressure call
	pressureStop  chan struct{}
	pressureDone  chan struct{}

	stats statsCounters
}

// frame is a group of records written with one device write and one force.
// The committer owns it once taken; done is closed (after err is set) when
// it is durable or failed.
type frame struct {
	payload  []byte // each record as uvarint length + bytes
	count    int
	firstLSN uint64
	firstAt  time.Time // when the first record arrived (commit interval)
	seq      uint64    // assigned when the committer takes it
	force    bool      // a sync=true Enqueue or a Sync waits on it
	full     bool      // reached maxPending, or a writer needs a new frame
	done     chan struct{}
	err      error
}

func (f *frame) size() int { return len(f.payload) }

// frameMeta describes a frame placed in the ring after the checkpoint.
type frameMeta struct {
	seq      uint64
	off      int64
	len      int64
	firstLSN uint64
	lastLSN  uint64
	durable  bool
}

// Commit is the handle of one Enqueue call.
type Commit struct {
	f   *frame
	lsn uint64
}

// LSN is the lsn of the last record of the Enqueue call.
func (c *Commit) LSN() uint64 { return c.lsn }

// Wait returns when the frame holding the records is durable, or with the
// error that prevented it. For records enqueued with sync=false, Wait forces
// nothing: it waits until the frame is committed for another reason (a sync
// request, a full frame, or the commit interval), so it may take up to
// Options.CommitInterval. Use Journal.Sync to force.
func (c *Commit) Wait() error {
	<-c.f.done
	return c.f.err
}

// Done is closed when Wait would return.
func (c *Commit) Done() <-chan struct{} { return c.f.done }

// Format writes a fresh superblock on dev: an empty log owned by opts.UUID
// whose first record will get lsn 1. Records of an earlier format become
// unreadable. Format is the mkfs step; Open never formats.
//
// Format writes only the superblock. A regular file should be preallocated
// with written blocks (CreateFile, or the vfs's Preallocate) so that frame
// writes are overwrites and a force need not commit filesystem metadata; a
// file that is shorter than the ring still works (it grows as frames are
// written, and unwritten parts read as zeros).
func Format(dev Device, opts FormatOptions) error {
	size := opts.Size
	if size == 0 {
		var err error
		if size, err = deviceSize(dev); err != nil {
			return fmt.Errorf("journal: format: %w", err)
		}
	}
	size = size / BlockSize * BlockSize
	ringSize := size - ringStartDefault
	if ringSize < minRingSize {
		return fmt.Errorf("journal: format: %w: %d bytes, need at least %d", ErrGeometry, size, ringStartDefault+minRingSize)
	}
	nonce := opts.Nonce
	for nonce == 0 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("journal: format: nonce: %w", err)
		}
		nonce = binary.LittleEndian.Uint64(b[:])
	}
	buf := alignedBuf(superblockCopies * BlockSize)
	// Erase both copies first, so that an interrupted Format never leaves a
	// copy of the previous format that outranks the new one.
	if err := writeFull(dev, buf, 0); err != nil {
		return fmt.Errorf("journal: format: %w", err)
	}
	if err := dev.Sync(); err != nil {
		return fmt.Errorf("journal: format: sync: %w", err)
	}
	for gen := uint64(0); gen < superblockCopies; gen++ {
		sb := superblock{
			uuid: opts.UUID, nonce: nonce, generation: gen,
			ringStart: ringStartDefault, ringSize: ringSize,
			ckpt: checkpointPos{lsn: 0, off: ringStartDefault, seq: 1},
		}
		sb.encode(buf[gen*BlockSize:])
	}
	if err := writeFull(dev, buf, 0); err != nil {
		return fmt.Errorf("journal: format: %w", err)
	}
	if err := dev.Sync(); err != nil {
		return fmt.Errorf("journal: format: sync: %w", err)
	}
	return nil
}

// Open opens the journal on dev: it reads the superblock, checks the owner,
// and scans the log from the checkpoint to find its end. A torn last frame
// ends the log (see Recovery); a damaged frame followed by valid ones fails
// with ErrCorrupt. Call Replay to read the recovered records. The journal
// owns dev once Open succeeds (Close closes it); on error the caller still
// owns it.
func Open(dev Device, opts Options) (*Journal, error) {
	o := opts
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	sb, err := readSuperblock(dev, o.Logger)
	if err != nil {
		return nil, fmt.Errorf("journal: open: %w", err)
	}
	if o.UUID != ([16]byte{}) && o.UUID != sb.uuid {
		return nil, &UUIDMismatchError{Want: o.UUID, Found: sb.uuid}
	}
	if o.Size > 0 && sb.ringStart+sb.ringSize > o.Size {
		return nil, fmt.Errorf("journal: open: %w: ring [%d, %d) beyond the device end %d",
			ErrGeometry, sb.ringStart, sb.ringStart+sb.ringSize, o.Size)
	}
	j := &Journal{
		dev: dev, opts: o, log: o.Logger,
		uuid: sb.uuid, nonce: sb.nonce, seed: frameSeed(sb.uuid, sb.nonce),
		ringStart: sb.ringStart, ringEnd: sb.ringStart + sb.ringSize, ringSize: sb.ringSize,
		maxFrameLen:   sb.ringSize / 4 / BlockSize * BlockSize,
		readFrameLen:  readFrameLen(sb.ringSize),
		sbGen:         sb.generation,
		sbBuf:         alignedBuf(BlockSize),
		wake:          make(chan struct{}, 1),
		committerDone: make(chan struct{}),
		pressure:      make(chan struct{}, 1),
		pressureStop:  make(chan struct{}),
		pressureDone:  make(chan struct{}),
	}
	j.maxPending = min(o.MaxFrameBytes, int(j.maxFrameLen)-frameHeaderSize)
	j.mu.cond.L = &j.mu.Mutex
	if err := j.recover(sb); err != nil {
		return nil, err
	}
	if sb.clean && !o.ReadOnly {
		// From now on frames may follow the checkpoint.
		if err := j.writeSuperblock(j.mu.ckpt, false); err != nil {
			return nil, fmt.Errorf("journal: open: %w", err)
		}
	}
	j.mu.pending = j.newFrameLocked()
	j.mu.pressureArmed = true
	go j.committer()
	go j.pressureLoop()
	if j.mu.used > j.ringSize/2 {
		// The recovered log already fills more than half of the ring.
		j.mu.pressureArmed = false
		j.signalPressure()
	}
	j.log.Info("journal: opened", "uuid", FormatUUID(j.uuid), "ring", j.ringSize,
		"checkpoint_lsn", j.recovery.CheckpointLSN, "frames", j.recovery.Frames,
		"last_lsn", j.recovery.LastLSN, "torn_tail", j.recovery.TailErr != nil)
	return j, nil
}

// readSuperblock reads both copies and returns the valid one with the
// highest generation.
func readSuperblock(dev Device, log *slog.Logger) (superblock, error) {
	buf := alignedBuf(superblockCopies * BlockSize)
	if err := readFull(dev, buf, 0); err != nil {
		return superblock{}, fmt.Errorf("superblock: %w", err)
	}
	var best superblock
	found := false
	var errs []error
	magic := false
	for i := 0; i < superblockCopies; i++ {
		b := buf[i*BlockSize : (i+1)*BlockSize]
		magic = magic || hasSuperblockMagic(b)
		sb, err := decodeSuperblock(b, i)
		if errors.Is(err, ErrUnsupportedVersion) {
			return superblock{}, fmt.Errorf("superblock copy %d: %w", i, err)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("superblock copy %d at off=%d: %w", i, i*BlockSize, err))
			continue
		}
		if !found || sb.generation > best.generation {
			best, found = sb, true
		}
	}
	switch {
	case !found && !magic:
		return superblock{}, ErrNotFormatted
	case !found:
		return superblock{}, fmt.Errorf("%w: no valid superblock copy: %w", ErrCorrupt, errors.Join(errs...))
	case len(errs) > 0:
		log.Warn("journal: superblock copy invalid; using the other", "error", errors.Join(errs...), "generation", best.generation)
	}
	return best, nil
}

// UUID is the filesystem the journal belongs to.
func (j *Journal) UUID() [16]byte { return j.uuid }

// Recovery reports what Open found.
func (j *Journal) Recovery() Recovery { return j.recovery }

// MaxRecordBytes is the most bytes one record enqueued alone can hold: the
// payload of the longest frame, less the record's length prefix.
func (j *Journal) MaxRecordBytes() int {
	return int(j.maxFrameLen) - frameHeaderSize - binary.MaxVarintLen64
}

// Append enqueues recs and, if sync, waits until they are durable. It
// returns the lsn of the last record. See Enqueue.
func (j *Journal) Append(recs [][]byte, sync bool) (uint64, error) {
	c, err := j.Enqueue(recs, sync)
	if err != nil {
		return 0, err
	}
	if sync {
		if err := c.Wait(); err != nil {
			return c.lsn, err
		}
	}
	return c.lsn, nil
}

// Enqueue copies recs into the pending frame and returns at once, unless the
// ring lacks space for the pending frame (then it waits for a Checkpoint) or
// the pending frame is full (then it waits for the committer to take it).
// The records get consecutive lsns, in the order of Enqueue calls, and all of
// them land in the same frame: after a crash, either all of them are
// replayed or none. With sync, the frame is committed as soon as the
// committer is free; otherwise within Options.CommitInterval. The caller may
// reuse recs as soon as Enqueue returns.
func (j *Journal) Enqueue(recs [][]byte, sync bool) (*Commit, error) {
	return j.EnqueueOrStop(recs, sync, 0, nil)
}

// EnqueueOrStop is Enqueue, except that the records wait for room unless
// keep bytes of the ring stay free after them (room kept for other
// callers' records: the engine keeps some for batches that delete), and
// that while they wait it calls stop (when not nil) before each wait, and
// after each Wake: a non-nil error from stop ends the wait, with nothing
// enqueued, and is returned. stop runs with the journal's lock held: it must
// not call the journal, and should only read state (an atomic flag).
func (j *Journal) EnqueueOrStop(recs [][]byte, sync bool, keep int64, stop func() error) (*Commit, error) {
	if j.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("journal: enqueue: no records")
	}
	n := 0
	for _, r := range recs {
		n += encodedLen(len(r))
	}
	if fl := frameLen(n); fl > j.maxFrameLen {
		return nil, fmt.Errorf("journal: enqueue %d records: %w: frame of %d bytes, limit %d (a quarter of the ring)",
			len(recs), ErrRecordTooLarge, fl, j.maxFrameLen)
	}
	j.mu.Lock()
	var waitStart time.Time
	for {
		if err := j.errLocked(); err != nil {
			j.mu.Unlock()
			return nil, err
		}
		p := j.mu.pending
		if p.count > 0 && p.size()+n > j.maxPending {
			// The records of one call go into one frame: hand the pending
			// frame to the committer and wait for a fresh one.
			p.full = true
			j.kick()
			j.mu.cond.Wait()
			continue
		}
		if !j.fitsKeepingLocked(p.size()+n, keep) {
			if stop != nil {
				if err := stop(); err != nil {
					j.mu.Unlock()
					return nil, err
				}
			}
			if waitStart.IsZero() {
				waitStart = time.Now()
				j.stats.spaceWaits.Add(1)
				j.signalPressure()
				j.log.Debug("journal: ring full; writer waits for a checkpoint", "live", j.mu.used, "ring", j.ringSize)
			}
			j.mu.cond.Wait()
			continue
		}
		break
	}
	if !waitStart.IsZero() {
		j.stats.spaceWaitNanos.Add(uint64(time.Since(waitStart)))
	}
	p := j.mu.pending
	wasEmpty := p.count == 0
	if wasEmpty {
		p.firstLSN = j.mu.nextLSN
		p.firstAt = time.Now()
	}
	for _, r := range recs {
		p.payload = binary.AppendUvarint(p.payload, uint64(len(r)))
		p.payload = append(p.payload, r...)
	}
	p.count += len(recs)
	j.mu.nextLSN += uint64(len(recs))
	c := &Commit{f: p, lsn: j.mu.nextLSN - 1}
	if sync {
		p.force = true
	}
	if p.size() >= j.maxPending {
		p.full = true
	}
	wake := wasEmpty || sync || p.full
	j.mu.Unlock()
	if wake {
		j.kick()
	}
	return c, nil
}

// Sync forces every record enqueued so far and returns when they are
// durable (or with the error that prevented it).
func (j *Journal) Sync() error {
	if j.opts.ReadOnly {
		return ErrReadOnly
	}
	j.mu.Lock()
	if err := j.errLocked(); err != nil {
		j.mu.Unlock()
		return err
	}
	var f *frame
	if p := j.mu.pending; p.count > 0 {
		p.force = true
		f = p
	} else if j.mu.inflight != nil {
		f = j.mu.inflight
	}
	j.mu.Unlock()
	if f == nil {
		return nil
	}
	j.kick()
	<-f.done
	return f.err
}

// Close commits and forces the pending records, stops the committer and
// closes the device. Writers still waiting for ring space when Close begins
// get ErrClosed. It returns the journal's sticky error, if any, including
// ErrClosed when pending records could not be written because the ring was
// full and nobody checkpointed. OnPressure must not call Close.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.mu.closing {
		j.mu.Unlock()
		return ErrClosed
	}
	j.mu.closing = true
	j.mu.cond.Broadcast()
	j.mu.Unlock()
	j.kick()
	<-j.committerDone
	close(j.pressureStop)
	<-j.pressureDone

	j.ckptMu.Lock()
	defer j.ckptMu.Unlock()
	j.mu.Lock()
	stickyErr := j.mu.err
	allCheckpointed := j.mu.ckpt.lsn >= j.mu.durableLSN && j.mu.ckpt.lsn+1 >= j.mu.nextLSN
	ckpt := j.mu.ckpt
	j.mu.Unlock()
	if stickyErr == nil && allCheckpointed && !j.opts.ReadOnly {
		// Mark the journal clean so that the next Open skips the scan.
		if err := j.writeSuperblock(ckpt, true); err != nil {
			j.log.Warn("journal: could not mark the journal clean at close", "error", err)
		}
	}
	j.ioMu.Lock()
	defer j.ioMu.Unlock()
	j.mu.Lock()
	j.mu.closed = true
	j.mu.Unlock()
	cerr := j.dev.Close()
	if stickyErr != nil {
		// A device failure, or records Close could not write because the
		// ring stayed full.
		return stickyErr
	}
	if cerr != nil {
		return fmt.Errorf("journal: close device: %w", cerr)
	}
	return nil
}

// errLocked is the error a new request gets: the sticky failure, or
// ErrClosed once Close has begun.
func (j *Journal) errLocked() error {
	if j.mu.err != nil {
		return j.mu.err
	}
	if j.mu.closing {
		return ErrClosed
	}
	return nil
}

// failLocked makes err the sticky error (the first one wins) and wakes
// everyone.
func (j *Journal) failLocked(err error) {
	if j.mu.err == nil {
		j.mu.err = err
		if !errors.Is(err, ErrClosed) {
			j.log.Error("journal: failed; refusing appends until reopened", "error", err)
		}
	}
	j.mu.cond.Broadcast()
}

// Capacity is the size of the ring in bytes.
func (j *Journal) Capacity() int64 { return j.ringSize }

// Wake makes writers waiting for room in the ring call their stop function
// again (EnqueueOrStop): the caller changed what it answers.
func (j *Journal) Wake() {
	j.mu.Lock()
	j.mu.cond.Broadcast()
	j.mu.Unlock()
}

// kick wakes the committer.
func (j *Journal) kick() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// newFrameLocked returns an empty pending frame, reusing spare buffers.
func (j *Journal) newFrameLocked() *frame {
	f := &frame{payload: j.mu.spare[:0], done: make(chan struct{})}
	j.mu.spare = nil
	return f
}

// place returns where a frame of flen bytes goes when the ring head is at
// head with used live bytes: at head, or at ringStart when it would cross the
// ring end (the skipped bytes count as used). It also returns the new head
// and used.
func (j *Journal) place(head, used, flen int64) (off, newHead, newUsed int64) {
	off = head
	if off+flen > j.ringEnd {
		used += j.ringEnd - off
		off = j.ringStart
	}
	newHead = off + flen
	if newHead == j.ringEnd {
		newHead = j.ringStart
	}
	return off, newHead, used + flen
}

// fitsLocked reports whether a frame with a payload of raw bytes (stored
// uncompressed, the worst case) fits in the ring after the frame the
// committer is working on, without overwriting live records.
func (j *Journal) fitsLocked(raw int) bool { return j.fitsKeepingLocked(raw, 0) }

// fitsKeepingLocked is fitsLocked with keep bytes of the ring left free
// after the frame.
func (j *Journal) fitsKeepingLocked(raw int, keep int64) bool {
	head, used := j.mu.head, j.mu.used
	if j.mu.unplaced > 0 {
		_, head, used = j.place(head, used, j.mu.unplaced)
	}
	_, _, used = j.place(head, used, frameLen(raw))
	return used+keep <= j.ringSize
}

// signalPressure asks the pressure goroutine to call OnPressure.
func (j *Journal) signalPressure() {
	if j.opts.OnPressure == nil {
		return
	}
	select {
	case j.pressure <- struct{}{}:
	default:
	}
}

func (j *Journal) pressureLoop() {
	defer close(j.pressureDone)
	for {
		select {
		case <-j.pressure:
			j.opts.OnPressure()
		case <-j.pressureStop:
			return
		}
	}
}
