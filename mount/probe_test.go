package mount

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lsmfs/lsmfs/journal"
)

// TestIdentify: each signature is recognised; unknown bytes are data in a
// file and nothing on a device; zeros are nothing.
func TestIdentify(t *testing.T) {
	for _, s := range signatures {
		b := make([]byte, probeLen)
		copy(b[s.off:], s.magic)
		for _, device := range []bool{false, true} {
			if got := identify(b, device); got != s.what {
				t.Errorf("%q at %#x (device %v): %q, want %q", s.magic, s.off, device, got, s.what)
			}
		}
	}
	zero := make([]byte, probeLen)
	if got := identify(zero, false); got != "" {
		t.Errorf("zeros: %q", got)
	}
	junk := make([]byte, probeLen)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range junk {
		junk[i] = byte(r.Uint32())
	}
	junk[0x1fe] = 0 // not a DOS boot sector
	if got := identify(junk, true); got != "" {
		t.Errorf("random bytes on a device: %q, want nothing", got)
	}
	if got := identify(junk, false); !strings.HasPrefix(got, "data") {
		t.Errorf("random bytes in a file: %q, want data", got)
	}
}

// TestFormatRefusesJournalHoldingData: mkfs --journal over a file holding
// data or another filesystem's journal is refused and leaves it alone;
// Force formats it; a new, empty or all-zero file is taken.
func TestFormatRefusesJournalHoldingData(t *testing.T) {
	dir := t.TempDir()
	j := filepath.Join(dir, "journal")
	uuid, err := Format(filepath.Join(dir, "a"), FormatOptions{Journal: j, JournalSize: 4 << 20})
	if err != nil {
		t.Fatalf("format with a new journal file: %v", err)
	}
	before, err := os.ReadFile(j)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Format(filepath.Join(dir, "b"), FormatOptions{Journal: j, JournalSize: 4 << 20})
	if !errors.Is(err, ErrHoldsData) || !strings.Contains(err.Error(), FormatUUID(uuid)) {
		t.Errorf("format over the journal of %s: %v, want ErrHoldsData naming it", FormatUUID(uuid), err)
	}
	if after, _ := os.ReadFile(j); string(after) != string(before) {
		t.Errorf("the refused format changed the journal")
	}
	if empty, _ := IsEmptyDir(filepath.Join(dir, "b")); !empty {
		t.Errorf("the refused format left files in its data directory")
	}

	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Format(filepath.Join(dir, "c"), FormatOptions{Journal: text, JournalSize: 4 << 20}); !errors.Is(err, ErrHoldsData) {
		t.Errorf("format over a text file: %v, want ErrHoldsData", err)
	}
	if b, _ := os.ReadFile(text); string(b) != "precious" {
		t.Errorf("the refused format changed the file: %q", b)
	}

	uuid2, err := Format(filepath.Join(dir, "d"), FormatOptions{Journal: j, JournalSize: 4 << 20, Force: true})
	if err != nil {
		t.Fatalf("forced format over a journal: %v", err)
	}
	head := make([]byte, 2*journal.BlockSize)
	f, err := os.Open(j)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadAt(head, 0); err != nil {
		t.Fatal(err)
	}
	if got, ok := journal.ProbeUUID(head); !ok || got != uuid2 {
		t.Errorf("after the forced format the journal belongs to %s (%v), want %s", FormatUUID(got), ok, FormatUUID(uuid2))
	}

	zeros := filepath.Join(dir, "zeros")
	if err := os.WriteFile(zeros, make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Format(filepath.Join(dir, "e"), FormatOptions{Journal: zeros}); err != nil {
		t.Errorf("format over an all-zero file: %v", err)
	}
}
