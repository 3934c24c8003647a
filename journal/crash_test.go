package journal_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lsmfs/lsmfs/journal"
)

// The crash test: a child process (this test binary, re-executed with
// -test.run=^TestCrashChild$) appends with sync=true from several goroutines
// to a journal file and prints every acknowledged record's lsn and digest;
// the parent kills it with SIGKILL at a random moment, reopens the journal,
// and checks that every acknowledged record above the checkpoint is
// replayed, in order, byte-identical, with no lsn gaps. The journal file is
// kept across iterations, so each child also recovers what the previous one
// left (including its checkpoints and ring wraps).
//
// LSMFS_LONG=1 runs 300 iterations instead of 30; LSMFS_CRASH_SEED=<n>
// replays a seed.

const (
	envCrashChild = "LSMFS_CRASH_CHILD" // journal path, set for the child
	envCrashSeed  = "LSMFS_CRASH_SEED"
	crashRing     = 1 << 20
	crashWorkers  = 8
)

// crashRecord is the deterministic content of the n-th record of a worker
// in the child run with the given seed: partly text, partly random bytes.
func crashRecord(seed uint64, worker, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, uint64(worker)<<32|uint64(n)))
	size := 20 + rng.IntN(1500)
	b := make([]byte, 0, size)
	b = fmt.Appendf(b, "seed=%d w=%d n=%d ", seed, worker, n)
	for len(b) < size {
		if rng.IntN(2) == 0 {
			b = append(b, "inode 1234 mode 0644 uid 1000 "...)
		} else {
			b = append(b, byte(rng.Uint32()))
		}
	}
	return b
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:12])
}

// TestCrashChild is the child side; it does nothing unless run by
// TestCrash.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(envCrashChild)
	if path == "" {
		t.Skip("run by TestCrash as a child process")
	}
	seed, _ := strconv.ParseUint(os.Getenv(envCrashSeed), 10, 64)
	dev, _, err := journal.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var j *journal.Journal
	ready := make(chan struct{})
	j, err = journal.Open(dev, journal.Options{
		UUID: uuidA,
		// The engine's role: on pressure, checkpoint all but the last 64
		// durable records.
		OnPressure: func() {
			<-ready
			if d := j.Stats().DurableLSN; d > 64 {
				if err := j.Checkpoint(d - 64); err != nil {
					fmt.Fprintf(os.Stderr, "checkpoint: %v\n", err)
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	close(ready)
	os.Stdout.WriteString("ready\n")
	var out sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < crashWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for n := 0; ; {
				batch := make([][]byte, 1+rng.IntN(3))
				for i := range batch {
					batch[i] = crashRecord(seed, w, n+i)
				}
				last, err := j.Append(batch, true)
				if err != nil {
					fmt.Fprintf(os.Stderr, "append: %v\n", err)
					os.Exit(3)
				}
				var lines strings.Builder
				for i, r := range batch {
					fmt.Fprintf(&lines, "ack %d %d %d %s\n", last-uint64(len(batch)-1-i), w, n+i, digest(r))
				}
				out.Lock()
				os.Stdout.WriteString(lines.String()) // one write per batch: whole lines
				out.Unlock()
				n += len(batch)
			}
		}()
	}
	wg.Wait()
}

type ack struct {
	worker, n int
	digest    string
}

func TestCrash(t *testing.T) {
	if os.Getenv(envCrashChild) != "" {
		t.Skip("in the child")
	}
	iters := 30
	if os.Getenv("LSMFS_LONG") != "" {
		iters = 300
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(envCrashSeed); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (replay with %s=%d), %d iterations", seed, envCrashSeed, seed, iters)
	rng := rand.New(rand.NewPCG(seed, 0))

	path := filepath.Join(t.TempDir(), "journal")
	dev, err := journal.CreateFile(path, crashRing)
	if err != nil {
		t.Fatal(err)
	}
	if err := journal.Format(dev, journal.FormatOptions{UUID: uuidA}); err != nil {
		t.Fatal(err)
	}
	dev.Close()

	var lastLSN uint64 // last lsn recovered so far
	var totalAcked, totalChecked, torn int
	for it := 0; it < iters; it++ {
		childSeed := seed + uint64(it)*1000003
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), envCrashChild+"="+path, fmt.Sprintf("%s=%d", envCrashSeed, childSeed))
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // it appends forever
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acked := map[uint64]ack{}
		readyc := make(chan struct{})
		readDone := make(chan error, 1)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				switch {
				case len(f) == 1 && f[0] == "ready":
					close(readyc)
				case len(f) == 5 && f[0] == "ack":
					lsn, _ := strconv.ParseUint(f[1], 10, 64)
					w, _ := strconv.Atoi(f[2])
					n, _ := strconv.Atoi(f[3])
					if _, dup := acked[lsn]; dup {
						readDone <- fmt.Errorf("lsn %d acknowledged twice", lsn)
						return
					}
					acked[lsn] = ack{w, n, f[4]}
				}
			}
			readDone <- sc.Err()
		}()
		// Kill at a random moment: mostly while appending, sometimes during
		// startup and recovery.
		var delay time.Duration
		if rng.IntN(6) == 0 {
			delay = time.Duration(rng.IntN(20)) * time.Millisecond
		} else {
			select {
			case <-readyc:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("iteration %d: child not ready: %s", it, stderr.String())
			}
			delay = time.Duration(1+rng.IntN(150)) * time.Millisecond
		}
		time.Sleep(delay)
		cmd.Process.Signal(syscall.SIGKILL)
		if err := <-readDone; err != nil {
			t.Fatalf("iteration %d: %v", it, err)
		}
		werr := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("iteration %d: child did not die by SIGKILL (%v): %s", it, werr, stderr.String())
		}

		// Recover and check.
		dev, _, err := journal.OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		j, err := journal.Open(dev, journal.Options{UUID: uuidA})
		if err != nil {
			t.Fatalf("iteration %d (seed %d): open after kill: %v", it, childSeed, err)
		}
		rec := j.Recovery()
		if rec.TailErr != nil {
			torn++
		}
		ckpt := rec.CheckpointLSN
		replayed := map[uint64]string{}
		next := ckpt + 1
		lastN := map[int]int{}
		err = j.Replay(0, func(lsn uint64, r []byte) error {
			if lsn != next {
				return fmt.Errorf("lsn %d replayed, want %d (gap)", lsn, next)
			}
			next++
			replayed[lsn] = digest(r)
			// Records of one worker appear in the order it appended them.
			var s uint64
			var w, n int
			if _, err := fmt.Sscanf(string(r), "seed=%d w=%d n=%d ", &s, &w, &n); err == nil && s == childSeed {
				if prev, ok := lastN[w]; ok && n <= prev {
					return fmt.Errorf("lsn %d: worker %d record %d after record %d", lsn, w, n, prev)
				}
				lastN[w] = n
			}
			return nil
		})
		if err != nil {
			t.Fatalf("iteration %d (seed %d): replay: %v", it, childSeed, err)
		}
		for lsn, a := range acked {
			if lsn <= lastLSN {
				t.Fatalf("iteration %d: acked lsn %d not above the previous run's last lsn %d", it, lsn, lastLSN)
			}
			if lsn <= ckpt {
				continue // checkpointed: no longer the journal's to keep
			}
			got, ok := replayed[lsn]
			if !ok {
				t.Fatalf("iteration %d (seed %d): acknowledged lsn %d (worker %d record %d) lost; checkpoint %d, replayed up to %d",
					it, childSeed, lsn, a.worker, a.n, ckpt, next-1)
			}
			if got != a.digest {
				t.Fatalf("iteration %d (seed %d): lsn %d replayed with digest %s, acknowledged %s", it, childSeed, lsn, got, a.digest)
			}
			totalChecked++
		}
		totalAcked += len(acked)
		lastLSN = max(lastLSN, next-1, ckpt)
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d iterations: %d records acknowledged, %d checked in replay (the rest checkpointed), %d torn tails, last lsn %d",
		iters, totalAcked, totalChecked, torn, lastLSN)
	if totalChecked == 0 {
		t.Fatal("no acknowledged record was checked")
	}
}

// TestCrashTornMem is the in-process crash test with torn writes: writers
// append concurrently (some sync, some not) on a memDevice, with
// checkpoints; at random moments the test takes a crash image in which every
// sector of every unforced write may or may not have landed, reopens it, and
// checks the acknowledged records.
func TestCrashTornMem(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	crashes := 150
	if os.Getenv("LSMFS_LONG") != "" {
		crashes = 2000
	}
	d := formatMem(t, 512<<10)
	d.syncDelay = 100 * time.Microsecond // slow forces: crashes often catch a frame in flight
	var j *journal.Journal
	ready := make(chan struct{})
	j = mustOpen(t, d, journal.Options{
		MaxFrameBytes:  16 << 10,
		CommitInterval: time.Millisecond,
		OnPressure: func() {
			<-ready
			if dl := j.Stats().DurableLSN; dl > 20 {
				j.Checkpoint(dl - 20)
			}
		},
	})
	close(ready)
	var mu sync.Mutex
	acked := map[uint64][]byte{} // durable acknowledgements: sync appends and Syncs
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				r := crashRecord(seed, w, n)
				sync := n%3 != 0
				lsn, err := j.Append([][]byte{r}, sync)
				if err != nil {
					t.Error(err)
					return
				}
				if sync {
					mu.Lock()
					acked[lsn] = r
					mu.Unlock()
				}
			}
		}()
	}
	// A Fatal in the crash loop must not leave the writers appending for
	// the rest of the package.
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			close(stop)
			wg.Wait()
			j.Close()
		}
	})
	var torn int
	for c := 0; c < crashes; c++ {
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		// Copy the acknowledgements first: all of them were forced before
		// the image is taken.
		mu.Lock()
		snap := make(map[uint64][]byte, len(acked))
		for k, v := range acked {
			snap[k] = v
		}
		mu.Unlock()
		img := d.CrashCloneTorn(rng)
		cj, err := journal.Open(img, journal.Options{UUID: uuidA})
		if err != nil {
			t.Fatalf("crash %d: open: %v", c, err)
		}
		rec := cj.Recovery()
		if rec.TailErr != nil {
			torn++
		}
		replayed := map[uint64][]byte{}
		next := rec.CheckpointLSN + 1
		if err := cj.Replay(0, func(lsn uint64, r []byte) error {
			if lsn != next {
				return fmt.Errorf("lsn %d, want %d", lsn, next)
			}
			next++
			replayed[lsn] = append([]byte(nil), r...)
			return nil
		}); err != nil {
			t.Fatalf("crash %d: replay: %v", c, err)
		}
		for lsn, r := range snap {
			if lsn <= rec.CheckpointLSN {
				continue
			}
			if string(replayed[lsn]) != string(r) {
				t.Fatalf("crash %d: acknowledged lsn %d lost or changed (checkpoint %d, replayed to %d)", c, lsn, rec.CheckpointLSN, next-1)
			}
		}
		cj.Close()
		// Forget acknowledgements below the live checkpoint.
		ck := j.Stats().CheckpointLSN
		mu.Lock()
		for k := range acked {
			if k <= ck {
				delete(acked, k)
			}
		}
		mu.Unlock()
	}
	close(stop)
	stopped = true
	wg.Wait()
	s := j.Stats()
	t.Logf("%d crash images (%d with a torn tail); %v", crashes, torn, s)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointAheadOfUnplacedFrame: Checkpoint(L) runs while the committer
// holds frame P (lsn 1) taken but not yet placed (inside BeforeForce, the
// engine's value-log sync) and L=3 is in the pending frame Q, so the
// checkpoint names P's slot with lsn 3. A crash after P is forced and before
// Q is written leaves P on disk, and the next run hands out lsn 4: its
// acknowledged frame R follows P. A second crash must recover R (recovery
// rejected "first lsn 4 does not follow lsn 1" as corruption).
func TestCheckpointAheadOfUnplacedFrame(t *testing.T) {
	d := formatMem(t, 1<<20)
	var calls atomic.Int32
	entered := make(chan struct{}, 8)
	gate1, gate2 := make(chan struct{}), make(chan struct{})
	j := mustOpen(t, d, journal.Options{
		CommitInterval: time.Hour,
		BeforeForce: func() error {
			n := calls.Add(1)
			entered <- struct{}{}
			if n == 1 {
				<-gate1
			} else {
				<-gate2
			}
			return nil
		},
	})
	c1, err := j.Enqueue(recs("p1"), true) // frame P, lsn 1
	if err != nil {
		t.Fatal(err)
	}
	<-entered // P taken, not placed
	// Frame Q, lsns 2-3.
	if _, err := j.Enqueue(recs("q2", "q3"), false); err != nil {
		t.Fatal(err)
	}
	if err := j.Checkpoint(3); err != nil { // lsns <= 3 are in tables
		t.Fatal(err)
	}
	close(gate1)
	if err := c1.Wait(); err != nil {
		t.Fatal(err)
	}
	img := d.CrashClone() // P durable, Q never written
	close(gate2)
	j.Close()

	j2 := mustOpen(t, img, journal.Options{})
	lsn, err := j2.Append(recs("r4"), true) // acknowledged
	if err != nil {
		t.Fatal(err)
	}
	img2 := img.CrashClone()
	j2.Close()

	j3, err := journal.Open(img2, journal.Options{UUID: uuidA})
	if err != nil {
		t.Fatalf("open after the second crash: %v", err)
	}
	defer j3.Close()
	if got := replayAll(t, j3, 0); len(got) != 1 || got[0].lsn != lsn {
		t.Fatalf("replayed %v, want only the acknowledged lsn %d", got, lsn)
	}
}
