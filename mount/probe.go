package mount

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/lsmfs/lsmfs/journal"
)

// ErrHoldsData is returned by Format for a journal path that holds a
// filesystem, a journal or other data: mkfs formats it only when forced.
var ErrHoldsData = errors.New("formatting it would destroy existing data")

// probeLen is how much of a journal target Format reads to recognise what it
// holds: enough for the signatures below (btrfs's is at 64 KiB).
const probeLen = 128 << 10

// signature is a magic string at a fixed offset that names what a device
// holds, as blkid(8) would.
type signature struct {
	off   int
	magic string
	what  string
}

// signatures are the common filesystems, volume formats and partition tables
// (offsets and magics as in their on-disk formats and util-linux's libblkid).
var signatures = []signature{
	{0x438, "\x53\xef", "an ext2/ext3/ext4 filesystem"},
	{0, "XFSB", "an XFS filesystem"},
	{0x10040, "_BHRfS_M", "a btrfs filesystem"},
	{0x400, "\x10\x20\xf5\xf2", "an F2FS filesystem"},
	{4086, "SWAPSPACE2", "swap space"},
	{4086, "SWAP-SPACE", "swap space"},
	{0, "LUKS\xba\xbe", "a LUKS encrypted volume"},
	{0, "SKUL\xba\xbe", "a LUKS encrypted volume"},
	{0x218, "LVM2 001", "an LVM physical volume"},
	{0x200, "EFI PART", "a GPT partition table"},
	{0, "hsqs", "a squashfs image"},
	{0x8001, "CD001", "an ISO 9660 image"},
	{3, "NTFS    ", "an NTFS filesystem"},
	{0x1fe, "\x55\xaa", "a DOS partition table or boot sector"},
}

// probeJournalTarget tells what the journal file or device at path holds
// that formatting would destroy, or "" if nothing: it is missing, an empty
// or all-zero file, or a device with no recognised signature. Unknown bytes
// on a device are not data (a new disk may hold anything); in a regular
// file they are.
func probeJournalTarget(path string) (string, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	device := fi.Mode()&os.ModeDevice != 0
	if !device && (!fi.Mode().IsRegular() || fi.Size() == 0) {
		return "", nil // not a file or device: opening it will say so
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b := make([]byte, probeLen)
	n, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return identify(b[:n], device), nil
}

// identify names what b, the first bytes of a device (or a regular file),
// holds, or returns "".
func identify(b []byte, device bool) string {
	if uuid, ok := journal.ProbeUUID(b); ok {
		return "the journal of lsmfs " + FormatUUID(uuid)
	}
	for _, s := range signatures {
		if s.off+len(s.magic) <= len(b) && string(b[s.off:s.off+len(s.magic)]) == s.magic {
			return s.what
		}
	}
	if !device {
		for i, c := range b {
			if c != 0 {
				return fmt.Sprintf("data (a non-zero byte at offset %d)", i)
			}
		}
	}
	return ""
}

// checkJournalTarget refuses a journal path holding data (ErrHoldsData).
func checkJournalTarget(path string) error {
	what, err := probeJournalTarget(path)
	if err != nil {
		return fmt.Errorf("journal %s: %w", path, err)
	}
	if what != "" {
		return fmt.Errorf("journal %s holds %s; %w (lsmfs mkfs --force formats it anyway)", path, what, ErrHoldsData)
	}
	return nil
}
