package mount

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm"
)

// FormatOptions configure Format (lsmfs mkfs).
type FormatOptions struct {
	// Journal is the journal file or block device. Default: DATADIR/journal.
	// A block device is formatted whole.
	Journal string
	// JournalSize is the ring size of a file journal. Default: the engine's
	// (256 MiB).
	JournalSize int64
	// BlockSize is the filesystem's data block size. Default: fs's default.
	BlockSize int
	// UUID identifies the filesystem. Default: a random (version 4) UUID.
	UUID [16]byte
	// RootUID and RootGID own the root directory. Default 0 (root).
	RootUID, RootGID uint32
	// RootMode holds the permission bits of the root directory. Default 0755.
	RootMode uint32
	// Logger receives the engine's logs. Default: discard.
	Logger *slog.Logger
	// Force formats a Journal that holds a filesystem, another lsmfs
	// journal or (a regular file) any data; without it Format refuses with
	// ErrHoldsData.
	Force bool
}

// Format makes a new, empty lsmfs in dataDir (created if missing), which must
// be empty apart from a lost+found directory: it formats the engine and its
// journal (lsm.Format), then writes the filesystem's superblock and root
// directory (fs.Format). It returns the filesystem's UUID.
func Format(dataDir string, opts FormatOptions) ([16]byte, error) {
	db, uuid, err := format(dataDir, opts, &lsm.Options{Logger: opts.Logger})
	if err != nil {
		return uuid, err
	}
	if err := db.Close(); err != nil {
		return uuid, fmt.Errorf("format filesystem in %s: %w", dataDir, err)
	}
	return uuid, nil
}

// format formats dataDir as Format does and returns the engine, opened with
// openOpts (plus the UUID and journal), and the UUID.
func format(dataDir string, opts FormatOptions, openOpts *lsm.Options) (*lsm.DB, [16]byte, error) {
	empty, err := IsEmptyDir(dataDir)
	if err != nil {
		return nil, [16]byte{}, err
	}
	if !empty {
		if _, err := os.Stat(filepath.Join(dataDir, "CURRENT")); err == nil {
			return nil, [16]byte{}, fmt.Errorf("%s already holds an lsmfs filesystem", dataDir)
		}
		return nil, [16]byte{}, fmt.Errorf("%s is not empty; lsmfs formats only a new or empty directory", dataDir)
	}
	// Private, as a new one is made (CheckDataDir): an empty directory
	// made by hand may be open to everyone.
	if err := os.Chmod(dataDir, 0o700); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, [16]byte{}, fmt.Errorf("format %s: %w", dataDir, err)
	}
	if opts.Journal != "" && !opts.Force {
		if err := checkJournalTarget(opts.Journal); err != nil {
			return nil, [16]byte{}, err
		}
	}
	if opts.UUID == ([16]byte{}) {
		if opts.UUID, err = NewUUID(); err != nil {
			return nil, [16]byte{}, err
		}
	}
	if opts.RootMode == 0 {
		opts.RootMode = 0o755
	}
	lo := *openOpts
	lo.UUID = opts.UUID
	lo.Journal.Path = opts.Journal
	lo.Journal.Size = opts.JournalSize
	// Create holds the directory lock from the format to the close: a
	// concurrent mount or mkfs of dataDir fails instead of opening an
	// engine with no filesystem in it yet.
	db, err := lsm.Create(dataDir, &lo)
	if err != nil {
		return nil, opts.UUID, fmt.Errorf("format engine in %s: %w", dataDir, err)
	}
	err = fs.Format(db, fs.FormatOptions{
		BlockSize: opts.BlockSize,
		UUID:      opts.UUID,
		RootUID:   opts.RootUID,
		RootGID:   opts.RootGID,
		RootMode:  opts.RootMode,
	})
	if err == nil {
		err = db.SyncJournal()
	}
	if err != nil {
		db.Close()
		return nil, opts.UUID, fmt.Errorf("format filesystem in %s: %w", dataDir, err)
	}
	return db, opts.UUID, nil
}

// IsEmptyDir reports whether dir is missing or holds nothing but an empty
// lost+found directory (what mkfs of the partition holding dir leaves).
func IsEmptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("%s is not a directory", dir)
	}
	names, err := f.Readdirnames(-1)
	if err != nil && err != io.EOF {
		return false, err
	}
	for _, n := range names {
		if n == "lost+found" {
			if sub, err := IsEmptyDir(dir + "/lost+found"); err == nil && sub {
				continue
			}
		}
		return false, nil
	}
	return true, nil
}

// NewUUID returns a random (version 4) UUID.
func NewUUID() ([16]byte, error) {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return u, fmt.Errorf("generate uuid: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u, nil
}

// FormatUUID renders u in the canonical 8-4-4-4-12 form.
func FormatUUID(u [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
