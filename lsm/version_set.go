package lsm

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"

	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/manifest"
	"github.com/lsmfs/lsmfs/lsm/internal/vlog"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// versionSet owns the current version, the manifest and the counters the
// manifest persists. All methods are called with DB.mu held (or before the
// DB is shared).
type versionSet struct {
	fs      vfs.FS
	dirname string
	logger  *slog.Logger

	uuid        [16]byte
	journalPath string

	current *version
	files   map[uint64]*tableMeta // tables of the current version

	manifestNum     uint64
	manifest        *manifest.Writer
	loadedLen       int64 // where the valid records of the manifest load read end
	maxManifestSize int64

	nextFileNum uint64
	// lastSeq: entries above it are only in the journal (and memtables).
	lastSeq base.SeqNum
	// journalLSN: journal records up to it are in tables.
	journalLSN uint64

	// vlog holds the sealed value-log segments and their discarded bytes.
	vlog map[uint64]*vlogSegment
	// vlogDeleted holds segments the cleaner deleted whose file removal is
	// not known to be durable: a file left behind by a crash must be
	// removed at open, not taken for a live segment.
	vlogDeleted map[uint64]bool
}

// vlogSegment is what the manifest knows of a sealed value-log segment.
type vlogSegment struct {
	size    uint64
	discard uint64
	// keys bounds the keys of the segment's records, when known: for
	// segments sealed since open (not persisted; zero otherwise).
	keys vlog.KeyRange
}

func newVersionSet(fs vfs.FS, dirname string, logger *slog.Logger, maxManifestSize int64) *versionSet {
	vs := &versionSet{fs: fs, dirname: dirname, logger: logger, maxManifestSize: maxManifestSize, files: map[uint64]*tableMeta{}, vlog: map[uint64]*vlogSegment{}, vlogDeleted: map[uint64]bool{}}
	vs.current = &version{}
	vs.current.refs.Store(1)
	return vs
}

func (vs *versionSet) path(name string) string { return vfs.Join(vs.dirname, name) }

// load reads CURRENT and replays the manifest it names.
func (vs *versionSet) load() error {
	data, err := manifest.ReadFile(vs.fs, vs.path("CURRENT"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("open %s: no CURRENT file: %w", vs.dirname, ErrNotFormatted)
		}
		return fmt.Errorf("read CURRENT: %w", err)
	}
	num, err := manifest.DecodeCurrent(data)
	if err != nil {
		return err
	}
	name := manifest.FileName(num)
	data, err = manifest.ReadFile(vs.fs, vs.path(name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return base.Corruptf(name, -1, "named by CURRENT but missing")
		}
		return fmt.Errorf("read %s: %w", name, err)
	}
	edits, valid, err := manifest.ReadAllLen(name, data)
	if err != nil {
		return err
	}
	vs.loadedLen = valid
	if len(edits) == 0 || edits[0].FormatVersion == 0 {
		return base.Corruptf(name, -1, "manifest does not start with a snapshot")
	}
	if edits[0].FormatVersion != manifest.FormatVersion {
		return fmt.Errorf("%s: engine format version %d is not supported (this build reads %d)", name, edits[0].FormatVersion, manifest.FormatVersion)
	}
	for i, e := range edits {
		if e.FormatVersion != 0 && e.FormatVersion != manifest.FormatVersion {
			return base.Corruptf(name, -1, "edit %d: engine format version %d in a manifest of version %d", i, e.FormatVersion, manifest.FormatVersion)
		}
		if err := vs.applyLocked(e); err != nil {
			return base.Corruptf(name, -1, "edit %d: %v", i, err)
		}
	}
	// Entries above lastSeq would be invisible (reads see up to it), and
	// new writes would reuse their sequence numbers.
	for l, files := range vs.current.levels {
		for _, f := range files {
			if f.LargestSeq > vs.lastSeq {
				return base.Corruptf(name, -1, "table %06d (L%d) holds sequence numbers up to %d, past the manifest's last, %d",
					f.FileNum, l, f.LargestSeq, vs.lastSeq)
			}
		}
	}
	vs.manifestNum = num
	if vs.nextFileNum <= num {
		vs.nextFileNum = num + 1
	}
	return nil
}

// applyLocked installs the edit's version and counters, without writing it.
func (vs *versionSet) applyLocked(e *manifest.Edit) error {
	nv, err := vs.current.apply(e, vs.files)
	if err != nil {
		return err
	}
	vs.installLocked(e, nv)
	return nil
}

// installLocked makes nv (the current version with e applied) current and
// applies e's counters.
func (vs *versionSet) installLocked(e *manifest.Edit, nv *version) {
	if e.UUID != nil {
		vs.uuid = *e.UUID
	}
	if e.JournalPath != nil {
		vs.journalPath = *e.JournalPath
	}
	if e.NextFileNum > vs.nextFileNum {
		vs.nextFileNum = e.NextFileNum
	}
	if e.LastSeq > vs.lastSeq {
		vs.lastSeq = e.LastSeq
	}
	if e.JournalLSN > vs.journalLSN {
		vs.journalLSN = e.JournalLSN
	}
	for _, v := range e.VlogSealed {
		if s := vs.vlog[v.Num]; s != nil {
			s.size = v.Bytes
		} else {
			vs.vlog[v.Num] = &vlogSegment{size: v.Bytes}
		}
	}
	for _, v := range e.VlogDiscard {
		if s := vs.vlog[v.Num]; s != nil {
			s.discard = min(s.size, s.discard+v.Bytes)
		}
	}
	for _, n := range e.VlogDeleted {
		delete(vs.vlog, n)
		vs.vlogDeleted[n] = true
	}
	files := map[uint64]*tableMeta{}
	for _, level := range nv.levels {
		for _, f := range level {
			files[f.FileNum] = f
		}
	}
	vs.files = files
	old := vs.current
	vs.current = nv
	old.unref()
}

// newFileNum allocates a file number.
func (vs *versionSet) newFileNum() uint64 {
	n := vs.nextFileNum
	vs.nextFileNum++
	return n
}

// logAndApply writes the edit to the manifest (synced) and installs it.
func (vs *versionSet) logAndApply(e *manifest.Edit) error {
	if vs.manifest == nil {
		return fmt.Errorf("lsm: manifest not writable")
	}
	if vs.manifest.Size() > vs.maxManifestSize {
		if err := vs.rotate(); err != nil {
			return err
		}
	}
	if e.NextFileNum < vs.nextFileNum {
		e.NextFileNum = vs.nextFileNum
	}
	// Check the new version (level invariants) before the edit becomes
	// durable: a bad edit in the manifest would fail every later open.
	nv, err := vs.current.apply(e, vs.files)
	if err != nil {
		return fmt.Errorf("version edit refused: %w", err)
	}
	if err := vs.manifest.Append(e); err != nil {
		nv.discard()
		return err
	}
	vs.installLocked(e, nv)
	return nil
}

// snapshotEdit describes the whole current state.
func (vs *versionSet) snapshotEdit() *manifest.Edit {
	id := vs.uuid
	jp := vs.journalPath
	e := &manifest.Edit{
		FormatVersion: manifest.FormatVersion,
		UUID:          &id,
		JournalPath:   &jp,
		NextFileNum:   vs.nextFileNum,
		LastSeq:       vs.lastSeq,
		JournalLSN:    vs.journalLSN,
	}
	for l, files := range vs.current.levels {
		for _, f := range files {
			e.Added = append(e.Added, manifest.NewFile{Level: l, Meta: f.FileMetadata})
		}
	}
	for n, s := range vs.vlog {
		e.VlogSealed = append(e.VlogSealed, manifest.VlogSegment{Num: n, Bytes: s.size})
		if s.discard > 0 {
			e.VlogDiscard = append(e.VlogDiscard, manifest.VlogSegment{Num: n, Bytes: s.discard})
		}
	}
	for n := range vs.vlogDeleted {
		e.VlogDeleted = append(e.VlogDeleted, n)
	}
	slices.SortFunc(e.VlogSealed, func(a, b manifest.VlogSegment) int { return cmp.Compare(a.Num, b.Num) })
	slices.SortFunc(e.VlogDiscard, func(a, b manifest.VlogSegment) int { return cmp.Compare(a.Num, b.Num) })
	slices.Sort(e.VlogDeleted)
	return e
}

// rotate starts a new manifest holding a snapshot of the current state and
// points CURRENT at it.
func (vs *versionSet) rotate() error {
	num := vs.newFileNum()
	name := manifest.FileName(num)
	f, err := vs.fs.Create(vs.path(name))
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	w, err := manifest.NewWriter(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	snap := vs.snapshotEdit()
	snap.NextFileNum = vs.nextFileNum
	if err := w.Append(snap); err != nil {
		w.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := vs.writeCurrent(num); err != nil {
		w.Close()
		return err
	}
	old, oldNum := vs.manifest, vs.manifestNum
	vs.manifest, vs.manifestNum = w, num
	if old != nil {
		old.Close()
	}
	if oldNum != 0 && oldNum != num {
		if err := vs.fs.Remove(vs.path(manifest.FileName(oldNum))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			vs.logger.Warn("remove old manifest", "file", manifest.FileName(oldNum), "err", err)
		}
	}
	return nil
}

// resume goes on appending to the manifest load read, cut after its last
// valid record, for an open that has no room for a new one (rotate): a
// full disk must not keep the engine from opening, or the files that
// would free it from being deleted. Cutting needs no space, and an edit
// usually fits in the file's last block.
func (vs *versionSet) resume() error {
	name := manifest.FileName(vs.manifestNum)
	// Only if the failed rotation did not switch CURRENT already.
	data, err := manifest.ReadFile(vs.fs, vs.path("CURRENT"))
	if err != nil {
		return fmt.Errorf("read CURRENT: %w", err)
	}
	if num, err := manifest.DecodeCurrent(data); err != nil || num != vs.manifestNum {
		return fmt.Errorf("CURRENT no longer names %s (%d, %v)", name, num, err)
	}
	f, err := vs.fs.OpenReadWrite(vs.path(name))
	if err != nil {
		return fmt.Errorf("open %s: %w", name, err)
	}
	w, err := manifest.ResumeWriter(f, vs.loadedLen)
	if err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	vs.manifest = w
	return nil
}

// writeCurrent atomically points CURRENT at manifest num.
func (vs *versionSet) writeCurrent(num uint64) error {
	tmp := vs.path("CURRENT.tmp")
	f, err := vs.fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("create CURRENT.tmp: %w", err)
	}
	if _, err := f.Write(manifest.EncodeCurrent(num)); err != nil {
		f.Close()
		return fmt.Errorf("write CURRENT.tmp: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync CURRENT.tmp: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close CURRENT.tmp: %w", err)
	}
	if err := vs.fs.Rename(tmp, vs.path("CURRENT")); err != nil {
		return fmt.Errorf("rename CURRENT.tmp: %w", err)
	}
	if err := vs.fs.SyncDir(vs.dirname); err != nil {
		return fmt.Errorf("sync %s: %w", vs.dirname, err)
	}
	return nil
}

func (vs *versionSet) close() error {
	if vs.manifest != nil {
		err := vs.manifest.Close()
		vs.manifest = nil
		return err
	}
	return nil
}
