package journal_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lsmfs/lsmfs/journal"
)

var (
	uuidA = [16]byte{0xa1, 0xa2, 0xa3, 0xa4, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	uuidB = [16]byte{0xb1, 0xb2, 0xb3, 0xb4, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
)

// entry is one replayed record.
type entry struct {
	lsn uint64
	rec string
}

func replayAll(t testing.TB, j *journal.Journal, from uint64) []entry {
	t.Helper()
	var out []entry
	if err := j.Replay(from, func(lsn uint64, rec []byte) error {
		out = append(out, entry{lsn, string(rec)})
		return nil
	}); err != nil {
		t.Fatalf("replay: %v", err)
	}
	return out
}

func formatMem(t testing.TB, size int64) *memDevice {
	t.Helper()
	d := newMemDevice(size)
	if err := journal.Format(d, journal.FormatOptions{UUID: uuidA}); err != nil {
		t.Fatal(err)
	}
	return d
}

func mustOpen(t testing.TB, dev journal.Device, opts journal.Options) *journal.Journal {
	t.Helper()
	if opts.UUID == ([16]byte{}) {
		opts.UUID = uuidA
	}
	j, err := journal.Open(dev, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return j
}

func recs(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// appendReopenReplay exercises a target: append batches, close, reopen,
// replay, and check that lsns continue.
func appendReopenReplay(t *testing.T, open func() journal.Device) {
	j := mustOpen(t, open(), journal.Options{})
	var want []entry
	for i := 0; i < 50; i++ {
		batch := recs(fmt.Sprintf("rec-%d-a", i), strings.Repeat("x", i*37), fmt.Sprintf("rec-%d-c", i))
		lsn, err := j.Append(batch, i%3 == 0)
		if err != nil {
			t.Fatal(err)
		}
		if wantLSN := uint64(3*i + 3); lsn != wantLSN {
			t.Fatalf("append %d: lsn %d, want %d", i, lsn, wantLSN)
		}
		for k, r := range batch {
			want = append(want, entry{lsn - 2 + uint64(k), string(r)})
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = mustOpen(t, open(), journal.Options{})
	if got := replayAll(t, j, 0); !equalEntries(got, want) {
		t.Fatalf("replay: got %d records, want %d\n%v", len(got), len(want), diffEntries(got, want))
	}
	if got := replayAll(t, j, 100); !equalEntries(got, want[99:]) {
		t.Fatalf("replay from 100: got %d records, want %d", len(got), len(want)-99)
	}
	if r := j.Recovery(); r.Frames == 0 || r.LastLSN != 150 || r.TailErr != nil {
		t.Fatalf("recovery: %+v", r)
	}
	lsn, err := j.Append(recs("after reopen"), true)
	if err != nil || lsn != 151 {
		t.Fatalf("append after reopen: lsn=%d err=%v, want lsn 151", lsn, err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

func equalEntries(a, b []entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func diffEntries(got, want []entry) string {
	for i := 0; i < max(len(got), len(want)); i++ {
		switch {
		case i >= len(got):
			return fmt.Sprintf("missing from %d: lsn %d", i, want[i].lsn)
		case i >= len(want):
			return fmt.Sprintf("extra from %d: lsn %d", i, got[i].lsn)
		case got[i] != want[i]:
			return fmt.Sprintf("at %d: got lsn %d %.20q, want lsn %d %.20q", i, got[i].lsn, got[i].rec, want[i].lsn, want[i].rec)
		}
	}
	return "equal"
}

func TestAppendReopenReplayMem(t *testing.T) {
	d := formatMem(t, 1<<20)
	appendReopenReplay(t, func() journal.Device { return d.reopen() })
}

func TestAppendReopenReplayFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	dev, err := journal.CreateFile(path, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := journal.Format(dev, journal.FormatOptions{UUID: uuidA}); err != nil {
		t.Fatal(err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	appendReopenReplay(t, func() journal.Device {
		dev, size, err := journal.OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if size != 4<<20 {
			t.Fatalf("size %d", size)
		}
		return dev
	})
}

func TestUUIDMismatch(t *testing.T) {
	d := formatMem(t, 256<<10)
	_, err := journal.Open(d, journal.Options{UUID: uuidB})
	if !errors.Is(err, journal.ErrUUIDMismatch) {
		t.Fatalf("open with another uuid: %v, want ErrUUIDMismatch", err)
	}
	var me *journal.UUIDMismatchError
	if !errors.As(err, &me) || me.Found != uuidA || me.Want != uuidB {
		t.Fatalf("error %#v does not carry both uuids", err)
	}
	for _, u := range []string{journal.FormatUUID(uuidA), journal.FormatUUID(uuidB)} {
		if !strings.Contains(err.Error(), u) {
			t.Errorf("error %q does not name %s", err, u)
		}
	}
	t.Logf("error: %v", err)
	// A zero UUID accepts any owner, and UUID() reports it.
	j, err := journal.Open(d, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if j.UUID() != uuidA {
		t.Fatalf("UUID() = %x", j.UUID())
	}
	j.Close()
}

func TestNotFormatted(t *testing.T) {
	_, err := journal.Open(newMemDevice(256<<10), journal.Options{})
	if !errors.Is(err, journal.ErrNotFormatted) {
		t.Fatalf("open of a blank device: %v, want ErrNotFormatted", err)
	}
	// Both copies damaged: corruption, not "not formatted".
	d := formatMem(t, 256<<10)
	d.Bytes()[50] ^= 1
	d.Bytes()[4096+50] ^= 1
	if _, err := journal.Open(d, journal.Options{}); !errors.Is(err, journal.ErrCorrupt) {
		t.Fatalf("open with both superblock copies damaged: %v, want ErrCorrupt", err)
	}
}

func TestFormatGeometry(t *testing.T) {
	if err := journal.Format(newMemDevice(32<<10), journal.FormatOptions{}); !errors.Is(err, journal.ErrGeometry) {
		t.Fatalf("format of a tiny device: %v, want ErrGeometry", err)
	}
	d := formatMem(t, 1<<20)
	if _, err := journal.Open(d, journal.Options{Size: 512 << 10}); !errors.Is(err, journal.ErrGeometry) {
		t.Fatalf("open on a device smaller than the ring: %v, want ErrGeometry", err)
	}
}

func TestReformatForgetsOldFrames(t *testing.T) {
	d := formatMem(t, 256<<10)
	j := mustOpen(t, d, journal.Options{})
	for i := 0; i < 10; i++ {
		if _, err := j.Append(recs("old"), true); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	d = d.Clone()
	// Same UUID, new nonce: the old frames must not validate.
	if err := journal.Format(d, journal.FormatOptions{UUID: uuidA}); err != nil {
		t.Fatal(err)
	}
	j = mustOpen(t, d, journal.Options{})
	if got := replayAll(t, j, 0); len(got) != 0 {
		t.Fatalf("replay after reformat: %v", got)
	}
	if lsn, err := j.Append(recs("new"), true); err != nil || lsn != 1 {
		t.Fatalf("first append after reformat: lsn=%d err=%v", lsn, err)
	}
	j.Close()
}

func TestRecordTooLarge(t *testing.T) {
	d := formatMem(t, 256<<10) // ring 248 KiB: frames up to 62 KiB
	j := mustOpen(t, d, journal.Options{})
	defer j.Close()
	if _, err := j.Append([][]byte{make([]byte, 70<<10)}, true); !errors.Is(err, journal.ErrRecordTooLarge) {
		t.Fatalf("append of a 70 KiB record: %v, want ErrRecordTooLarge", err)
	}
	if _, err := j.Append([][]byte{make([]byte, 40<<10), make([]byte, 40<<10)}, true); !errors.Is(err, journal.ErrRecordTooLarge) {
		t.Fatalf("append of 2x40 KiB in one call: %v, want ErrRecordTooLarge", err)
	}
	if _, err := j.Append([][]byte{make([]byte, 56<<10)}, true); err != nil {
		t.Fatalf("append of a 56 KiB record: %v", err)
	}
	if _, err := j.Append(nil, true); err == nil {
		t.Fatal("append of no records succeeded")
	}
}

func TestSyncFalseWaitsForCommitInterval(t *testing.T) {
	d := formatMem(t, 256<<10)
	j := mustOpen(t, d, journal.Options{CommitInterval: time.Hour})
	c, err := j.Enqueue(recs("lazy"), false)
	if err != nil {
		t.Fatal(err)
	}
	if c.LSN() != 1 {
		t.Fatalf("lsn %d", c.LSN())
	}
	select {
	case <-c.Done():
		t.Fatal("a sync=false record was committed without a reason")
	case <-time.After(20 * time.Millisecond):
	}
	if n := countRecords(t, d.CrashClone()); n != 0 {
		t.Fatalf("crash before any force kept %d records", n)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if n := countRecords(t, d.CrashClone()); n != 1 {
		t.Fatalf("crash after Sync kept %d records, want 1", n)
	}
	j.Close()

	// With a short interval the record is forced without any request.
	d = formatMem(t, 256<<10)
	j = mustOpen(t, d, journal.Options{CommitInterval: 10 * time.Millisecond})
	defer j.Close()
	c, err = j.Enqueue(recs("lazy"), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if n := countRecords(t, d.CrashClone()); n != 1 {
		t.Fatalf("crash after the commit interval kept %d records, want 1", n)
	}
}

// countRecords opens a crash image and counts the replayed records.
func countRecords(t testing.TB, d *memDevice) int {
	t.Helper()
	j := mustOpen(t, d, journal.Options{})
	defer j.Close()
	return len(replayAll(t, j, 0))
}

func TestCloseForcesPending(t *testing.T) {
	d := formatMem(t, 256<<10)
	j := mustOpen(t, d, journal.Options{CommitInterval: time.Hour})
	for i := 0; i < 10; i++ {
		if _, err := j.Append(recs(fmt.Sprint(i)), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
	if _, err := j.Append(recs("x"), true); !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if err := j.Sync(); !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("sync after close: %v", err)
	}
	if err := j.Checkpoint(1); !errors.Is(err, journal.ErrClosed) {
		t.Fatalf("checkpoint after close: %v", err)
	}
	if n := countRecords(t, d.CrashClone()); n != 10 {
		t.Fatalf("after close: %d durable records, want 10", n)
	}
}

// TestFailStop injects EIO into a frame write and into a force: every waiter
// of the failing frame gets the error, and so does every later call, until
// reopen.
func TestFailStop(t *testing.T) {
	for _, op := range []string{"write", "sync"} {
		t.Run(op, func(t *testing.T) {
			d := formatMem(t, 1<<20)
			j := mustOpen(t, d, journal.Options{})
			if _, err := j.Append(recs("before"), true); err != nil {
				t.Fatal(err)
			}
			// Hold the committer inside a force, so that the next frame
			// gathers several waiters; then fail that frame.
			release := make(chan struct{})
			entered := make(chan struct{})
			var writes, syncs int // under the device lock
			d.setFault(func(o string, off int64, n int) error {
				switch o {
				case "write":
					writes++
					if op == "write" && writes == 2 {
						return syscall.EIO
					}
				case "sync":
					syncs++
					if syncs == 1 {
						close(entered)
						<-release
						return nil
					}
					if op == "sync" && syncs == 2 {
						return syscall.EIO
					}
				}
				return nil
			})
			first, err := j.Enqueue(recs("first"), true)
			if err != nil {
				t.Fatal(err)
			}
			<-entered
			var cs []*journal.Commit
			for i := 0; i < 5; i++ {
				c, err := j.Enqueue(recs(fmt.Sprint("w", i)), true)
				if err != nil {
					t.Fatal(err)
				}
				cs = append(cs, c)
			}
			close(release)
			if err := first.Wait(); err != nil {
				t.Fatalf("the frame before the failure: %v", err)
			}
			for _, c := range cs {
				if err := c.Wait(); !errors.Is(err, syscall.EIO) || !errors.Is(err, journal.ErrFailed) {
					t.Fatalf("waiter of the failing frame got %v, want ErrFailed wrapping EIO", err)
				}
			}
			d.setFault(nil)
			for name, f := range map[string]func() error{
				"append":     func() error { _, err := j.Append(recs("later"), true); return err },
				"enqueue":    func() error { _, err := j.Enqueue(recs("later"), false); return err },
				"sync":       j.Sync,
				"checkpoint": func() error { return j.Checkpoint(1) },
			} {
				if err := f(); !errors.Is(err, journal.ErrFailed) || !errors.Is(err, syscall.EIO) {
					t.Errorf("%s after the failure: %v, want the sticky EIO", name, err)
				}
			}
			if err := j.Close(); !errors.Is(err, syscall.EIO) {
				t.Errorf("close: %v, want the sticky EIO", err)
			}
			// Reopen: the acknowledged record is there, the failed ones are
			// not (nothing was acked for them).
			j = mustOpen(t, d.CrashClone(), journal.Options{})
			got := replayAll(t, j, 0)
			if len(got) != 2 || got[0].rec != "before" || got[1].rec != "first" {
				t.Fatalf("after reopen: %v", got)
			}
			if _, err := j.Append(recs("after reopen"), true); err != nil {
				t.Fatal(err)
			}
			j.Close()
		})
	}
}

func TestShortWriteFails(t *testing.T) {
	d := formatMem(t, 256<<10)
	j := mustOpen(t, d, journal.Options{})
	d.setFault(func(op string, off int64, n int) error {
		if op == "write" {
			return fmt.Errorf("injected: %w", syscall.ENOSPC)
		}
		return nil
	})
	if _, err := j.Append(recs("x"), true); !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, journal.ErrFailed) {
		t.Fatalf("append on a full device: %v", err)
	}
	if _, err := j.Append(recs("y"), false); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append after failure: %v", err)
	}
	j.Close()
}

func TestCheckpointAhead(t *testing.T) {
	d := formatMem(t, 256<<10)
	j := mustOpen(t, d, journal.Options{})
	defer j.Close()
	if _, err := j.Append(recs("a", "b"), true); err != nil {
		t.Fatal(err)
	}
	if err := j.Checkpoint(3); !errors.Is(err, journal.ErrCheckpointAhead) {
		t.Fatalf("checkpoint beyond the log: %v", err)
	}
	if err := j.Checkpoint(1); err != nil {
		t.Fatal(err)
	}
	if err := j.Checkpoint(1); err != nil { // no-op
		t.Fatal(err)
	}
	if got := replayAll(t, j, 0); len(got) != 1 || got[0].lsn != 2 {
		t.Fatalf("replay after checkpoint 1: %v", got)
	}
}

// TestCheckpointAheadOfDurable checkpoints records that are enqueued but not
// yet durable (the engine flushed them from its memtable): after a crash, lsns
// continue above the checkpoint.
func TestCheckpointAheadOfDurable(t *testing.T) {
	d := formatMem(t, 256<<10)
	j := mustOpen(t, d, journal.Options{CommitInterval: time.Hour})
	if _, err := j.Append(recs("a"), true); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(recs("b", "c"), false); err != nil {
		t.Fatal(err)
	}
	if err := j.Checkpoint(3); err != nil {
		t.Fatal(err)
	}
	crash := d.CrashClone()
	j.Close()
	j = mustOpen(t, crash, journal.Options{})
	defer j.Close()
	if got := replayAll(t, j, 0); len(got) != 0 {
		t.Fatalf("replay: %v", got)
	}
	if lsn, err := j.Append(recs("d"), true); err != nil || lsn != 4 {
		t.Fatalf("append after crash: lsn=%d err=%v, want 4", lsn, err)
	}
}

// TestTornSuperblock damages the newest superblock copy: Open falls back to
// the older checkpoint, whose frames are intact.
func TestTornSuperblock(t *testing.T) {
	d := formatMem(t, 256<<10)
	j := mustOpen(t, d, journal.Options{})
	for i := 1; i <= 6; i++ {
		if _, err := j.Append(recs(fmt.Sprint("r", i)), true); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Checkpoint(2); err != nil { // generation 2, copy 0
		t.Fatal(err)
	}
	if err := j.Checkpoint(4); err != nil { // generation 3, copy 1
		t.Fatal(err)
	}
	j.Close()
	img := d.Clone()
	img.Bytes()[4096+70] ^= 0xff // copy 1 (checkpoint 4) torn
	j = mustOpen(t, img, journal.Options{})
	got := replayAll(t, j, 0)
	j.Close()
	if len(got) != 4 || got[0].lsn != 3 {
		t.Fatalf("replay with the newest superblock torn: %v, want lsns 3..6", got)
	}
	j = mustOpen(t, d.Clone(), journal.Options{})
	got = replayAll(t, j, 0)
	j.Close()
	if len(got) != 2 || got[0].lsn != 5 {
		t.Fatalf("replay with both copies intact: %v, want lsns 5..6", got)
	}
}

func TestStatsAndCompression(t *testing.T) {
	for _, disable := range []bool{false, true} {
		d := formatMem(t, 4<<20)
		j := mustOpen(t, d, journal.Options{DisableCompression: disable})
		rec := bytes.Repeat([]byte("inode 42 mode 0644 uid 1000 gid 1000 "), 20)
		for i := 0; i < 100; i++ {
			if _, err := j.Append([][]byte{rec, rec}, true); err != nil {
				t.Fatal(err)
			}
		}
		s := j.Stats()
		t.Logf("compression disabled=%v: %v", disable, s)
		if s.Records != 200 || s.Frames != 100 || s.Forces != 100 || s.LastLSN != 200 || s.DurableLSN != 200 {
			t.Fatalf("stats: %v", s)
		}
		if s.MeanRecordsPerFrame != 2 || s.MaxRecordsPerFrame != 2 || s.ForceLatencyMax <= 0 || s.Capacity != 4<<20-8192 {
			t.Fatalf("stats: %+v", s)
		}
		if disable && (s.CompressionRatio() != 1 || s.CompressedFrames != 0) {
			t.Fatalf("compression disabled but ratio %.2f", s.CompressionRatio())
		}
		if !disable && (s.CompressionRatio() < 10 || s.CompressedFrames != 100) {
			t.Fatalf("repetitive records compressed only %.2fx", s.CompressionRatio())
		}
		j.Close()
		j = mustOpen(t, d.reopen(), journal.Options{})
		for _, e := range replayAll(t, j, 0) {
			if e.rec != string(rec) {
				t.Fatalf("lsn %d: record differs after compression round trip", e.lsn)
			}
		}
		j.Close()
	}
}

// TestBatchInOneFrame: the records of one Enqueue call share a frame even
// when the pending frame has to be cut early for them.
func TestBatchInOneFrame(t *testing.T) {
	d := formatMem(t, 1<<20)
	j := mustOpen(t, d, journal.Options{MaxFrameBytes: 1000, CommitInterval: time.Hour})
	for i := 0; i < 20; i++ {
		batch := [][]byte{make([]byte, 300), make([]byte, 300), make([]byte, 300)}
		if _, err := j.Append(batch, false); err != nil {
			t.Fatal(err)
		}
	}
	// A call larger than MaxFrameBytes gets a frame of its own.
	if _, err := j.Append([][]byte{make([]byte, 3000)}, true); err != nil {
		t.Fatal(err)
	}
	j.Close()
	var out bytes.Buffer
	if err := journal.Dump(&out, d.reopen(), journal.DumpOptions{}); err != nil {
		t.Fatal(err)
	}
	frames := 0
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(line, "frame ") {
			continue
		}
		frames++
		if !strings.Contains(line, "records=3 ") && !strings.Contains(line, "records=1 ") {
			t.Fatalf("a frame split a batch or merged two: %s", line)
		}
	}
	if frames != 21 {
		t.Fatalf("%d frames, want 21\n%s", frames, out.String())
	}
}

// TestConcurrentAppendersShareFrames: sync appenders from many goroutines get
// unique, gap-free lsns, and fewer forces than records.
func TestConcurrentAppendersShareFrames(t *testing.T) {
	d := formatMem(t, 32<<20) // room for one 4 KiB frame per record
	// Hold the first force until every worker has enqueued a record behind
	// it: the next frame then holds several records whatever the scheduler
	// does (an instant memDevice force left nothing to group on a loaded
	// machine).
	j := mustOpen(t, d, journal.Options{})
	release := make(chan struct{})
	var once sync.Once
	d.setFault(func(op string, off int64, n int) error {
		if op == "sync" {
			once.Do(func() { <-release })
		}
		return nil
	})
	const workers, per = 16, 200
	go func() {
		for j.Stats().LastLSN < workers {
			time.Sleep(time.Millisecond)
		}
		close(release)
	}()
	var mu sync.Mutex
	seen := map[uint64]string{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				r := fmt.Sprintf("w%d-%d", w, i)
				lsn, err := j.Append(recs(r), true)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[lsn] = r
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	s := j.Stats()
	t.Logf("%v", s)
	if s.Forces >= workers*per || s.MaxRecordsPerFrame < 2 {
		t.Errorf("no group commit: %d forces for %d records, at most %d records per frame", s.Forces, workers*per, s.MaxRecordsPerFrame)
	}
	j.Close()
	j = mustOpen(t, d.CrashClone(), journal.Options{})
	defer j.Close()
	got := replayAll(t, j, 0)
	if len(got) != workers*per {
		t.Fatalf("replayed %d records, want %d", len(got), workers*per)
	}
	for i, e := range got {
		if e.lsn != uint64(i+1) || seen[e.lsn] != e.rec {
			t.Fatalf("replay[%d] = %v, acked %q", i, e, seen[e.lsn])
		}
	}
}

func TestOptions(t *testing.T) {
	var o journal.Options
	o.EnsureDefaults()
	if o.CommitInterval != 5*time.Second || o.MaxFrameBytes != 1<<20 || o.Logger == nil {
		t.Fatalf("defaults: %v", o)
	}
	if s := o.String(); !strings.Contains(s, "commit_interval=5s") || !strings.Contains(s, "compression=true") {
		t.Fatalf("String: %s", s)
	}
	for _, bad := range []journal.Options{{Size: -1}, {CommitInterval: -1}, {MaxFrameBytes: -1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%v) = nil", bad)
		}
		if _, err := journal.Open(formatMem(t, 256<<10), bad); err == nil {
			t.Errorf("Open with %v succeeded", bad)
		}
	}
}

func TestReplayCallbackError(t *testing.T) {
	d := formatMem(t, 256<<10)
	j := mustOpen(t, d, journal.Options{})
	defer j.Close()
	if _, err := j.Append(recs("a", "b", "c"), true); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop here")
	err := j.Replay(0, func(lsn uint64, rec []byte) error {
		if lsn == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || errors.Is(err, journal.ErrCorrupt) || !strings.Contains(err.Error(), "lsn=2") {
		t.Fatalf("replay with a failing callback: %v", err)
	}
}

// TestCleanCloseSkipsScan: a journal closed with everything checkpointed
// is marked clean, and Open then reads no free ring; a writable Open clears
// the mark first, so frames written after it are still found (and checked)
// after a crash.
func TestCleanCloseSkipsScan(t *testing.T) {
	d := formatMem(t, 1<<20)
	j, err := journal.Open(d.reopen(), journal.Options{UUID: uuidA})
	if err != nil {
		t.Fatal(err)
	}
	if r := j.Recovery(); r.Clean {
		t.Fatalf("fresh format reported clean")
	}
	lsn, err := j.Append(recs("a", "b"), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Checkpoint(lsn); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	// Read-only open of a clean journal: no scan, no write.
	ro, err := journal.Open(d.reopen(), journal.Options{UUID: uuidA, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := ro.Recovery(); !r.Clean || r.ScannedBytes != 0 {
		t.Fatalf("after a clean close: clean=%v scanned=%d", r.Clean, r.ScannedBytes)
	}
	if _, err := ro.Append(recs("x"), true); !errors.Is(err, journal.ErrReadOnly) {
		t.Fatalf("append to a read-only journal: %v", err)
	}
	ro.Close()
	j, err = journal.Open(d.reopen(), journal.Options{UUID: uuidA})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Append(recs("c"), true); err != nil {
		t.Fatal(err)
	}
	crashed := d.CrashClone() // no Close: the mark must be gone
	j2, err := journal.Open(crashed, journal.Options{UUID: uuidA})
	if err != nil {
		t.Fatal(err)
	}
	if r := j2.Recovery(); r.Clean || r.Records != 1 || r.ScannedBytes == 0 {
		t.Fatalf("after a crash: clean=%v records=%d scanned=%d", r.Clean, r.Records, r.ScannedBytes)
	}
	j2.Close()
	j.Close()
}

// TestBeforeForce: the hook runs before every frame write, and its failure
// fails the journal (fail-stop) instead of writing the frame.
func TestBeforeForce(t *testing.T) {
	d := formatMem(t, 1<<20)
	var calls int
	fail := false
	j, err := journal.Open(d.reopen(), journal.Options{UUID: uuidA, BeforeForce: func() error {
		calls++
		if fail {
			return syscall.EIO
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i := 0; i < 3; i++ {
		if _, err := j.Append(recs("x"), true); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 3 {
		t.Fatalf("hook ran %d times for 3 frames", calls)
	}
	fail = true
	if _, err := j.Append(recs("y"), true); !errors.Is(err, syscall.EIO) || !errors.Is(err, journal.ErrFailed) {
		t.Fatalf("append with a failing hook: %v", err)
	}
	if _, err := j.Append(recs("z"), true); !errors.Is(err, journal.ErrFailed) {
		t.Fatalf("append after the failure: %v", err)
	}
	j2 := mustOpen(t, d.CrashClone(), journal.Options{UUID: uuidA})
	var n int
	if err := j2.Replay(0, func(uint64, []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	j2.Close()
	if n != 3 {
		t.Fatalf("replayed %d records, want the 3 written before the failure", n)
	}
}

// TestReplayReadErrorIsNotCorruption: a device that fails a read during
// Replay gives its error, not ErrCorrupt (fsck tells corruption from an
// operational failure by it).
func TestReplayReadErrorIsNotCorruption(t *testing.T) {
	d := formatMem(t, 256<<10)
	j := mustOpen(t, d, journal.Options{})
	if _, err := j.Append(recs("a", "b"), true); err != nil {
		t.Fatal(err)
	}
	j.Close()
	d = d.reopen()
	j = mustOpen(t, d, journal.Options{})
	defer j.Close()
	d.setFault(func(op string, off int64, n int) error {
		if op == "read" {
			return syscall.EIO
		}
		return nil
	})
	err := j.Replay(0, func(uint64, []byte) error { return nil })
	d.setFault(nil)
	if !errors.Is(err, syscall.EIO) || errors.Is(err, journal.ErrCorrupt) {
		t.Fatalf("replay with a failing read: %v, want EIO and not ErrCorrupt", err)
	}
}
