package journal_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lsmfs/lsmfs/journal"
)

// attachLoop creates a file of size bytes in a temporary directory, attaches
// it to a free loop device, and detaches it at cleanup. It skips the test
// when that is not possible (not root, no losetup, no free loop device).
func attachLoop(t *testing.T, size int64, args ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping the block device test: attaching a loop device (losetup) needs root")
	}
	losetup, err := exec.LookPath("losetup")
	if err != nil {
		t.Skip("skipping the block device test: losetup not found in PATH")
	}
	img := filepath.Join(t.TempDir(), "loop.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(losetup, append(append([]string{"-f", "--show"}, args...), img)...).CombinedOutput()
	if err != nil {
		t.Skipf("skipping the block device test: losetup -f --show %s: %v: %s", img, err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command(losetup, "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", dev, err, out)
		}
	})
	t.Logf("attached %s to %s", img, dev)
	return dev
}

// TestBlockDevice runs the journal on a real loop device opened O_DIRECT:
// format, concurrent appends, close, reopen, replay, wrap the ring with
// checkpoints, reopen again.
func TestBlockDevice(t *testing.T) {
	const size = 4 << 20
	path := attachLoop(t, size)
	dev, got, err := journal.OpenBlockDevice(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != size {
		t.Fatalf("OpenBlockDevice size %d, want %d", got, size)
	}
	if _, _, err := journal.OpenBlockDevice(path); err == nil {
		t.Fatal("a second OpenBlockDevice of a device in use succeeded (want EBUSY from O_EXCL)")
	}
	// O_DIRECT rules: unaligned writes are refused, unaligned reads bounce.
	if _, err := dev.WriteAt(make([]byte, 100), 8192); !errors.Is(err, journal.ErrUnaligned) {
		t.Fatalf("unaligned write: %v, want ErrUnaligned", err)
	}
	if err := journal.Format(dev, journal.FormatOptions{UUID: uuidA}); err != nil {
		t.Fatal(err)
	}
	small := make([]byte, 10)
	if n, err := dev.ReadAt(small, 3); err != nil || n != 10 || string(small[:5]) != "FSJNL" {
		t.Fatalf("unaligned read: n=%d err=%v %q", n, err, small)
	}

	j, err := journal.Open(dev, journal.Options{UUID: uuidA, Size: got})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	want := map[uint64]string{}
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				r := fmt.Sprintf("w%d-%d-%s", w, i, strings.Repeat("x", (w*131+i*17)%3000))
				lsn, err := j.Append(recs(r), i%2 == 0)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				want[lsn] = r
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if len(want) != 800 {
		t.Fatalf("%d records acknowledged", len(want))
	}

	reopen := func() *journal.Journal {
		t.Helper()
		dev, size, err := journal.OpenBlockDevice(path)
		if err != nil {
			t.Fatal(err)
		}
		j, err := journal.Open(dev, journal.Options{UUID: uuidA, Size: size})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	j = reopen()
	n := 0
	if err := j.Replay(0, func(lsn uint64, rec []byte) error {
		n++
		if lsn != uint64(n) || want[lsn] != string(rec) {
			return fmt.Errorf("lsn %d: %.20q, want %.20q", lsn, rec, want[lsn])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != 800 {
		t.Fatalf("replayed %d records, want 800", n)
	}

	// Several times the ring through the device, with checkpoints.
	rec := make([]byte, 20000)
	rng := rand.New(rand.NewPCG(1, 2))
	var lsn uint64
	for i := 0; i < 700; i++ {
		for k := range rec {
			rec[k] = byte(rng.Uint32()) // incompressible
		}
		if lsn, err = j.Append([][]byte{rec}, true); err != nil {
			t.Fatal(err)
		}
		if i%50 == 49 {
			if err := j.Checkpoint(lsn - 10); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := j.Stats()
	t.Logf("%v", s)
	if int64(s.DeviceBytes) < 3*s.Capacity {
		t.Fatalf("wrote %d bytes through a %d-byte ring", s.DeviceBytes, s.Capacity)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = reopen()
	defer j.Close()
	r := j.Recovery()
	if r.CheckpointLSN != lsn-10 || r.LastLSN != lsn || r.TailErr != nil {
		t.Fatalf("recovery after wrapping: %+v (last lsn %d)", r, lsn)
	}
	n = 0
	if err := j.Replay(0, func(l uint64, got []byte) error {
		n++
		if len(got) != len(rec) {
			return fmt.Errorf("lsn %d: %d bytes", l, len(got))
		}
		return nil
	}); err != nil || n != 10 {
		t.Fatalf("replay after wrapping: %d records, err %v", n, err)
	}
}

func TestOpenBlockDeviceRefusesFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, make([]byte, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := journal.OpenBlockDevice(path); err == nil || !strings.Contains(err.Error(), "not a block device") {
		t.Fatalf("OpenBlockDevice of a regular file: %v", err)
	}
}
