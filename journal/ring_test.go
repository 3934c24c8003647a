package journal_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lsmfs/lsmfs/journal"
)

// recordFor is the deterministic content of the record with lsn in the ring
// tests: its size varies so that frames end at odd places in the ring.
func recordFor(lsn uint64) []byte {
	rng := rand.New(rand.NewPCG(lsn, 7))
	n := rng.IntN(3000)
	if rng.IntN(10) == 0 {
		n = 5000 + rng.IntN(20000)
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(lsn) + byte(i%7)
	}
	if n >= 8 {
		b[0], b[1], b[2], b[3] = byte(lsn>>24), byte(lsn>>16), byte(lsn>>8), byte(lsn)
	}
	return b
}

// checkReplay verifies that j replays exactly the records (from, last].
func checkReplay(t testing.TB, j *journal.Journal, from, last uint64) {
	t.Helper()
	next := from + 1
	if err := j.Replay(0, func(lsn uint64, rec []byte) error {
		if lsn != next {
			return fmt.Errorf("lsn %d, want %d", lsn, next)
		}
		if string(rec) != string(recordFor(lsn)) {
			return fmt.Errorf("lsn %d: record differs", lsn)
		}
		next++
		return nil
	}); err != nil {
		t.Fatalf("replay (want %d..%d): %v", from+1, last, err)
	}
	if next != last+1 {
		t.Fatalf("replay ended before lsn %d, want through %d", next, last)
	}
}

// TestRingWraparound appends many times the ring size with checkpoints in
// between, reopening (cleanly and after simulated crashes) along the way.
func TestRingWraparound(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("LSMFS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LSMFS_SEED: %v", err)
		}
		seed = n
	}
	t.Logf("seed %d (replay with LSMFS_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	const ringDevice = 256 << 10
	d := formatMem(t, ringDevice)
	opts := journal.Options{MaxFrameBytes: 16 << 10}
	j := mustOpen(t, d, opts)
	var lsn, ckpt uint64
	var total int64
	for round := 0; total < 40*ringDevice; round++ {
		// Append a few batches, some synced.
		for k := rng.IntN(8); k >= 0; k-- {
			n := 1 + rng.IntN(3)
			batch := make([][]byte, n)
			for i := range batch {
				batch[i] = recordFor(lsn + 1 + uint64(i))
				total += int64(len(batch[i]))
			}
			got, err := j.Append(batch, rng.IntN(3) == 0)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if got != lsn+uint64(n) {
				t.Fatalf("round %d: lsn %d, want %d", round, got, lsn+uint64(n))
			}
			lsn = got
		}
		if err := j.Sync(); err != nil {
			t.Fatal(err)
		}
		// Keep a random tail of the log live.
		if keep := uint64(rng.IntN(6)); lsn > ckpt+keep {
			ckpt = lsn - keep
			if err := j.Checkpoint(ckpt); err != nil {
				t.Fatal(err)
			}
		}
		switch rng.IntN(10) {
		case 0: // clean reopen
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			j = mustOpen(t, d.reopen(), opts)
			checkReplay(t, j, ckpt, lsn)
		case 1: // crash (everything was synced) and reopen
			crash := d.CrashClone()
			j.Close()
			d = crash
			j = mustOpen(t, d, opts)
			checkReplay(t, j, ckpt, lsn)
		}
	}
	s := j.Stats()
	t.Logf("%d bytes through a %d-byte ring: %v", total, ringDevice, s)
	checkReplay(t, j, ckpt, lsn)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFullRingBlocksUntilCheckpoint fills the ring: the next Enqueue blocks
// (and OnPressure fires) until another goroutine checkpoints.
func TestFullRingBlocksUntilCheckpoint(t *testing.T) {
	var pressure atomic.Int64
	d := formatMem(t, 128<<10) // 30 blocks of ring
	j := mustOpen(t, d, journal.Options{OnPressure: func() { pressure.Add(1) }})
	defer j.Close()
	rec := make([]byte, 3000) // one frame per record (synced), one block each
	var lsn uint64
	for i := 0; i < 30; i++ {
		var err error
		if lsn, err = j.Append([][]byte{rec}, true); err != nil {
			t.Fatal(err)
		}
	}
	if s := j.Stats(); s.LiveBytes != s.Capacity || s.SpaceWaits != 0 {
		t.Fatalf("ring should be exactly full: %v", s)
	}
	done := make(chan error, 1)
	go func() {
		_, err := j.Append([][]byte{rec}, true)
		done <- err
	}()
	waitFor(t, "the writer to wait for space", func() bool { return j.Stats().SpaceWaits > 0 })
	waitFor(t, "OnPressure", func() bool { return pressure.Load() > 0 })
	select {
	case err := <-done:
		t.Fatalf("append into a full ring returned (%v) before a checkpoint", err)
	default:
	}
	if err := j.Checkpoint(lsn - 10); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("writer still blocked after the checkpoint freed space")
	}
	s := j.Stats()
	t.Logf("%v", s)
	if s.SpaceWaitTime <= 0 || s.LastLSN != lsn+1 {
		t.Fatalf("stats: %v", s)
	}
}

// TestCloseWhileWaitingForSpace: a writer blocked on a full ring gets
// ErrClosed from Close instead of hanging.
func TestCloseWhileWaitingForSpace(t *testing.T) {
	d := formatMem(t, 128<<10)
	j := mustOpen(t, d, journal.Options{})
	rec := make([]byte, 3000)
	for i := 0; i < 30; i++ {
		if _, err := j.Append([][]byte{rec}, true); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := j.Append([][]byte{rec}, true)
		done <- err
	}()
	waitFor(t, "the writer to wait for space", func() bool { return j.Stats().SpaceWaits > 0 })
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("blocked writer got %v, want ErrClosed", err)
	}
	j = mustOpen(t, d.reopen(), journal.Options{})
	checkReplayCount(t, j, 30)
	j.Close()
}

// TestStopWhileWaitingForSpace: a writer blocked on a full ring through
// EnqueueOrStop keeps waiting while stop says nothing, and returns stop's
// error, with nothing enqueued, once stop has one and Wake is called (the
// engine does this when the flush that would free the ring fails for lack
// of space).
func TestStopWhileWaitingForSpace(t *testing.T) {
	d := formatMem(t, 128<<10)
	j := mustOpen(t, d, journal.Options{})
	defer j.Close()
	rec := make([]byte, 3000)
	for i := 0; i < 30; i++ {
		if _, err := j.Append([][]byte{rec}, true); err != nil {
			t.Fatal(err)
		}
	}
	errStop := errors.New("stop")
	var stopping atomic.Bool
	var calls atomic.Int64
	stop := func() error {
		calls.Add(1)
		if stopping.Load() {
			return errStop
		}
		return nil
	}
	done := make(chan error, 1)
	go func() {
		_, err := j.EnqueueOrStop([][]byte{rec}, true, 0, stop)
		done <- err
	}()
	waitFor(t, "the writer to wait for space", func() bool { return j.Stats().SpaceWaits > 0 })
	j.Wake() // stop still says nothing: the writer waits on
	waitFor(t, "stop to be asked again", func() bool { return calls.Load() >= 2 })
	select {
	case err := <-done:
		t.Fatalf("writer returned (%v) while stop said nothing", err)
	default:
	}
	stopping.Store(true)
	j.Wake()
	select {
	case err := <-done:
		if !errors.Is(err, errStop) {
			t.Fatalf("stopped writer got %v, want the stop error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("writer still waiting after stop said stop and Wake")
	}
	if s := j.Stats(); s.LastLSN != 30 {
		t.Fatalf("last lsn %d after a stopped enqueue, want 30: %v", s.LastLSN, s)
	}
}

func checkReplayCount(t *testing.T, j *journal.Journal, n int) {
	t.Helper()
	got := 0
	if err := j.Replay(0, func(uint64, []byte) error { got++; return nil }); err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Fatalf("replayed %d records, want %d", got, n)
	}
}

// TestPressureCheckpointer runs concurrent writers through a small ring with
// an engine-like OnPressure that checkpoints what is durable: no deadlock,
// and the surviving log replays in order.
func TestPressureCheckpointer(t *testing.T) {
	d := formatMem(t, 512<<10)
	var j *journal.Journal
	var pressure atomic.Int64
	ready := make(chan struct{})
	opts := journal.Options{
		MaxFrameBytes:  32 << 10,
		CommitInterval: 2 * time.Millisecond,
		OnPressure: func() {
			<-ready
			pressure.Add(1)
			if err := j.Checkpoint(j.Stats().DurableLSN); err != nil && !errors.Is(err, journal.ErrClosed) {
				t.Error(err)
			}
		},
	}
	j = mustOpen(t, d, opts)
	close(ready)
	const workers, per = 8, 400
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[uint64]string{}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 0))
			for i := 0; i < per; i++ {
				// Incompressible, so that the bytes written do not depend on
				// how records happen to group into frames.
				pad := make([]byte, 100+(i*37)%900)
				for k := range pad {
					pad[k] = byte(rng.Uint32())
				}
				r := fmt.Sprintf("w%d-%d-%s", w, i, pad)
				sync := i%4 == 0
				lsn, err := j.Append(recs(r), sync)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked[lsn] = r
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	s := j.Stats()
	t.Logf("%v; OnPressure calls %d", s, pressure.Load())
	if pressure.Load() == 0 || s.Checkpoints == 0 {
		t.Fatalf("no pressure checkpoints: %v", s)
	}
	if int64(s.DeviceBytes) < 2*s.Capacity {
		t.Fatalf("wrote only %d bytes through a %d-byte ring", s.DeviceBytes, s.Capacity)
	}
	ckpt := s.CheckpointLSN
	j.Close()
	j = mustOpen(t, d.reopen(), journal.Options{})
	defer j.Close()
	// OnPressure runs on its own goroutine: a checkpoint it started before
	// Close may land after the Stats above. Start from the recovered one.
	rc := j.Recovery().CheckpointLSN
	if rc < ckpt {
		t.Fatalf("recovered checkpoint %d is below the live one %d", rc, ckpt)
	}
	next := rc + 1
	if err := j.Replay(0, func(lsn uint64, rec []byte) error {
		if lsn != next || string(rec) != acked[lsn] {
			return fmt.Errorf("lsn %d (want %d): %q, acked %q", lsn, next, rec, acked[lsn])
		}
		next++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if next != workers*per+1 {
		t.Fatalf("replay ended at %d, want %d", next, workers*per+1)
	}
}
