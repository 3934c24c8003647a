package lsm

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/lsmfs/lsmfs/blockcache"
	"github.com/lsmfs/lsmfs/journal"
	"github.com/lsmfs/lsmfs/lsm/internal/base"
	"github.com/lsmfs/lsmfs/lsm/internal/manifest"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

const defaultJournalName = "journal"

// Format creates a new, empty engine in dir (creating dir) and formats its
// journal: a file DIR/journal of opts.Journal.Size bytes, or the block
// device (or file) named by opts.Journal.Path. It refuses a directory that
// already holds an engine, and one locked by an open engine or another
// Format (vfs.ErrLocked).
func Format(dir string, opts *Options) error {
	lock, err := format(dir, opts)
	if lock != nil {
		lock.Close()
	}
	return err
}

// Create formats dir as Format does and opens the new engine without letting
// go of the directory lock in between: no other process can open (or
// format) the engine before the caller has written its first contents.
func Create(dir string, opts *Options) (*DB, error) {
	lock, err := format(dir, opts)
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		return nil, err
	}
	return open(dir, opts, lock)
}

// format is Format; it returns the directory lock, held.
func format(dir string, opts *Options) (lock io.Closer, err error) {
	if opts == nil {
		opts = &Options{}
	}
	o := *opts
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := o.FS.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("format %s: %w", dir, err)
	}
	// The directory lock keeps two formats (two first mounts, or mkfs and a
	// first mount) from interleaving their files: the second fails with
	// vfs.ErrLocked or finds CURRENT.
	lock, err = o.FS.Lock(vfs.Join(dir, "LOCK"))
	if err != nil {
		return nil, fmt.Errorf("format %s: %w", dir, err)
	}
	return lock, formatLocked(dir, &o)
}

// formatLocked writes the new engine's journal, manifest and CURRENT into
// dir, whose lock the caller holds; o has its defaults.
func formatLocked(dir string, o *Options) error {
	if _, err := o.FS.Stat(vfs.Join(dir, "CURRENT")); err == nil {
		return fmt.Errorf("format %s: already holds an lsmfs engine", dir)
	}
	if o.UUID == ([16]byte{}) {
		return fmt.Errorf("format %s: no UUID given", dir)
	}
	jpath := o.Journal.Path
	if jpath == "" || jpath == vfs.Join(dir, defaultJournalName) {
		jpath = ""
		if err := formatFileJournal(o.FS, vfs.Join(dir, defaultJournalName), o.UUID, o.Journal.Size); err != nil {
			return err
		}
	} else {
		dev, size, err := openExternalJournal(jpath, true, o.Journal.Size)
		if err != nil {
			return fmt.Errorf("format journal %s: %w", jpath, err)
		}
		err = journal.Format(dev, journal.FormatOptions{UUID: o.UUID, Size: size})
		if cerr := dev.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("format journal %s: %w", jpath, err)
		}
	}
	vs := newVersionSet(o.FS, dir, o.Logger, o.MaxManifestSize)
	vs.uuid = o.UUID
	vs.journalPath = jpath
	vs.nextFileNum = 1
	if err := vs.rotate(); err != nil {
		return fmt.Errorf("format %s: %w", dir, err)
	}
	return vs.close()
}

func formatFileJournal(fsys vfs.FS, path string, uuid [16]byte, size int64) error {
	f, err := fsys.Create(path)
	if err != nil {
		return fmt.Errorf("create journal %s: %w", path, err)
	}
	if err := f.Preallocate(size); err != nil {
		f.Close()
		return fmt.Errorf("allocate journal %s: %w", path, err)
	}
	if err := journal.Format(f, journal.FormatOptions{UUID: uuid, Size: size}); err != nil {
		f.Close()
		return fmt.Errorf("format journal %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync journal %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(path))
}

// openExternalJournal opens a journal outside the engine's directory: a
// block device, or a regular file (created with size bytes when create is
// set).
func openExternalJournal(path string, create bool, size int64) (journal.Device, int64, error) {
	fi, err := os.Stat(path)
	if err == nil && fi.Mode()&os.ModeDevice != 0 {
		return journal.OpenBlockDevice(path)
	}
	if create && errors.Is(err, fs.ErrNotExist) {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, 0, err
		}
		f.Close()
		// Written zeros, not a sparse or fallocated file: a frame's first
		// write into a hole or an unwritten extent would make its
		// fdatasync commit filesystem metadata too.
		vf, err := vfs.Default.OpenReadWrite(path)
		if err == nil {
			err = vf.Preallocate(size)
			if err == nil {
				err = vf.Sync()
			}
			if cerr := vf.Close(); err == nil {
				err = cerr
			}
		}
		if err == nil {
			err = vfs.Default.SyncDir(filepath.Dir(path))
		}
		if err != nil {
			// Not left half made: a second mkfs would find it and take it
			// for a journal file of the size it has.
			os.Remove(path)
			return nil, 0, fmt.Errorf("allocate %s: %w", path, err)
		}
	} else if err != nil {
		return nil, 0, err
	}
	return journal.OpenFile(path)
}

// cacheNamespaces numbers the engines that share a block cache.
var cacheNamespaces atomic.Uint64

// Open opens the engine in dir.
func Open(dir string, opts *Options) (*DB, error) {
	return open(dir, opts, nil)
}

// open opens the engine in dir, taking the directory lock unless lock (held)
// is given; it owns lock from then on.
func open(dir string, opts *Options, lock io.Closer) (*DB, error) {
	if lock != nil {
		defer func() {
			if lock != nil {
				lock.Close()
			}
		}()
	}
	if opts == nil {
		opts = &Options{}
	}
	o := *opts
	autoSegment := o.VlogSegmentSize == 0
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	d := &DB{dirname: dir, opts: &o}
	d.mu.cond.L = &d.mu.Mutex
	d.mu.snapshots.init()
	d.mu.pendingDiscard = map[uint64]uint64{}
	d.mu.zombies = map[uint64]base.SeqNum{}
	d.mu.unreadable = map[uint64]bool{}
	d.mu.iterSeqs = map[base.SeqNum]int{}
	d.vlogGone.m = map[uint64]bool{}
	ok := false
	defer func() {
		if !ok {
			d.abandon()
		}
	}()

	// Nothing is written until the engine's files are known good: a failed
	// Open leaves the directory as it found it.
	if _, err := o.FS.Stat(dir); err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	if _, err := o.FS.Stat(vfs.Join(dir, "CURRENT")); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open %s: no CURRENT file: %w", dir, ErrNotFormatted)
	}
	if lock == nil {
		l, err := o.FS.Lock(vfs.Join(dir, "LOCK"))
		if errors.Is(err, vfs.ErrLocked) {
			return nil, fmt.Errorf("open %s: in use by another process: %w", dir, err)
		} else if err != nil {
			return nil, fmt.Errorf("open %s: %w", dir, err)
		}
		d.dirLock = l
	} else {
		d.dirLock, lock = lock, nil // d.abandon closes it on failure
	}

	vs := newVersionSet(o.FS, dir, o.Logger, o.MaxManifestSize)
	if err := vs.load(); err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	if o.UUID != ([16]byte{}) && o.UUID != vs.uuid {
		return nil, fmt.Errorf("open %s: engine belongs to %s, not %s", dir, fmtUUID(vs.uuid), fmtUUID(o.UUID))
	}
	d.mu.versions = vs
	if !o.ReadOnly {
		d.initSpace(autoSegment)
	}
	for _, f := range vs.files {
		if _, err := o.FS.Stat(d.tablePath(f.FileNum)); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("open %s: %w", dir, base.Corruptf(tableFileName(f.FileNum), -1, "table named by the manifest is missing"))
			}
			return nil, fmt.Errorf("open %s: %w", dir, err)
		}
	}

	if o.Cache != nil {
		// A cache shared with other engines: keys are (file number,
		// offset), and file numbers are per engine, so this engine's file
		// numbers get high bits of their own (file numbers stay far below
		// 2^40). A counter, not random bits: no two engines of the
		// process share a namespace (the cache's blocks are not checked
		// again).
		d.cache = o.Cache
		d.cacheNS = cacheNamespaces.Add(1) << 40
	} else if o.CacheSize > 0 {
		var err error
		if d.cache, err = blockcache.New(o.CacheSize); err != nil {
			return nil, fmt.Errorf("open %s: block cache: %w", dir, err)
		}
		d.ownCache = true
	}
	d.tableCache = newTableCache(o.FS, dir, d.cache, d.cacheNS, &d.readStats, 10000)
	// Check every table's footer, index, filter, tombstones and properties
	// (their checksums) before anything is written.
	for _, f := range vs.files {
		_, release, err := d.tableCache.get(f.FileNum)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", dir, err)
		}
		release()
	}

	if err := d.openValueLog(); err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	if err := d.openJournal(); err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	d.mu.mem.mutable = d.newMemTable(0)
	if err := d.replay(); err != nil {
		return nil, fmt.Errorf("open %s: replay journal: %w", dir, err)
	}
	tables := make([]uint64, 0, len(vs.files))
	for _, f := range vs.files {
		tables = append(tables, f.FileNum)
	}
	if err := d.checkVlogTails(d.vlogTails, tables); err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}

	if !o.ReadOnly {
		if err := d.startValueLogWriter(); err != nil {
			return nil, fmt.Errorf("open %s: %w", dir, err)
		}
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	if !o.ReadOnly {
		// A fresh manifest: appends never follow a torn tail.
		if err := vs.rotate(); err != nil {
			if !isNoSpace(err) {
				return nil, fmt.Errorf("open %s: %w", dir, err)
			}
			if rerr := vs.resume(); rerr != nil {
				return nil, fmt.Errorf("open %s: %w", dir, errors.Join(err, rerr))
			}
			o.Logger.Warn("no space for a new manifest: appending to the current one", "err", err)
		}
		vs.current.onObsolete = d.deleteObsolete
		d.removeGarbageLocked()
		if d.inTablesLSN > 0 {
			if err := d.wal.Checkpoint(d.inTablesLSN); err != nil {
				return nil, fmt.Errorf("open %s: checkpoint records already in tables: %w", dir, journalError(err))
			}
		}
	}
	d.updateReadStateLocked()
	if !o.ReadOnly {
		d.maybeScheduleFlushLocked()
		d.maybeScheduleCompactionLocked()
	}
	ok = true
	d.opened.Store(true)
	return d, nil
}

func fmtUUID(u [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

func (d *DB) openJournal() error {
	o := d.opts
	vs := d.mu.versions
	path := o.Journal.Path
	if path == "" {
		path = vs.journalPath
	}
	var dev journal.Device
	var size int64
	if path == "" || path == vfs.Join(d.dirname, defaultJournalName) {
		path = vfs.Join(d.dirname, defaultJournalName)
		var f vfs.File
		var err error
		if o.ReadOnly {
			f, err = o.FS.Open(path)
		} else {
			f, err = o.FS.OpenReadWrite(path)
		}
		if err != nil {
			return fmt.Errorf("open journal %s: %w", path, err)
		}
		if size, err = f.Size(); err != nil {
			f.Close()
			return fmt.Errorf("open journal %s: %w", path, err)
		}
		dev = f
	} else {
		var err error
		if dev, size, err = openExternalJournal(path, false, 0); err != nil {
			return fmt.Errorf("open journal %s: %w", path, err)
		}
	}
	j, err := journal.Open(dev, journal.Options{
		UUID:               vs.uuid,
		Size:               size,
		CommitInterval:     o.Journal.CommitInterval,
		MaxFrameBytes:      o.Journal.MaxFrameBytes,
		DisableCompression: o.Journal.DisableCompression,
		OnPressure:         d.onJournalPressure,
		Logger:             o.Logger,
		ReadOnly:           o.ReadOnly,
		BeforeForce:        d.beforeJournalForce,
	})
	if err != nil {
		dev.Close()
		return fmt.Errorf("open journal %s: %w", path, journalError(err))
	}
	d.wal = j
	return nil
}

// journalError makes a damaged journal an ErrCorrupt of the engine too, so
// that callers (fsck) tell corruption from operational failures by one
// error.
func journalError(err error) error {
	if errors.Is(err, journal.ErrCorrupt) && !errors.Is(err, ErrCorrupt) {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return err
}

// replay applies the journal's records that the tables do not hold.
func (d *DB) replay() error {
	vs := d.mu.versions
	lastSeq := vs.lastSeq
	var replayed int
	var seenLSN uint64 // the last record's, replayed or not
	// Replay from the journal's own checkpoint and skip, by sequence
	// number, what the tables hold. Not from the manifest's journal LSN: a
	// flush can make batches durable whose journal frames never were, and
	// the journal then hands out their LSNs again after a crash.
	err := d.wal.Replay(0, func(lsn uint64, rec []byte) error {
		seenLSN = lsn
		r, err := newBatchReader(rec)
		if err != nil {
			return fmt.Errorf("record lsn=%d: %w", lsn, err)
		}
		last := r.seq + base.SeqNum(r.count) - 1
		if r.count == 0 || last <= vs.lastSeq {
			return nil // already in tables
		}
		if r.seq != lastSeq+1 {
			return fmt.Errorf("record lsn=%d: batch seq %d does not follow %d: %w", lsn, r.seq, lastSeq, ErrCorrupt)
		}
		need := uint64(len(rec)) + uint64(r.count)*memEntryOverhead
		if d.mu.mem.mutable.Available() < need {
			d.mu.mem.queue = append(d.mu.mem.queue, d.mu.mem.mutable)
			d.mu.mem.mutable = d.newMemTable(need)
		}
		m := d.mu.mem.mutable
		if err := applyBatchToMemtable(m, rec, d.inlineThreshold()); err != nil {
			return fmt.Errorf("record lsn=%d: %w", lsn, err)
		}
		m.lsn, m.maxSeq = lsn, last
		lastSeq = last
		replayed++
		return nil
	})
	if err != nil {
		return journalError(err)
	}
	d.commit.lastSeq = lastSeq
	d.visibleSeq.Store(lastSeq)
	if replayed == 0 && seenLSN > 0 && !d.opts.ReadOnly {
		// Every record is in the tables (a crash between a flush's
		// manifest edit and its checkpoint): the ring is freed at the end
		// of Open (nothing is written before the files are known good).
		// No flush would, with nothing in memory, and a journal left full
		// would keep the first write waiting for room for good.
		d.inTablesLSN = seenLSN
	}
	if replayed > 0 {
		d.opts.Logger.Info("replayed journal", "batches", replayed, "last_seq", lastSeq)
		if !d.opts.ReadOnly {
			// Make replayed data flushable so the journal can be checkpointed.
			d.mu.mem.queue = append(d.mu.mem.queue, d.mu.mem.mutable)
			d.mu.mem.mutable = d.newMemTable(0)
			d.mu.flushRequested = true
		}
	}
	return nil
}

// beforeJournalForce forces the value log before the journal forces a
// frame whose records may point into it (ordered mode).
func (d *DB) beforeJournalForce() error {
	if d.vlogW == nil {
		return nil
	}
	return d.vlogW.SyncWritten()
}

// onJournalPressure runs when the journal is half full: rotate so a flush
// can free ring space. Never blocks the journal.
func (d *DB) onJournalPressure() {
	if d.opened.Load() {
		d.relieveJournalPressure()
	}
}

// removeGarbageLocked deletes files the manifest does not name.
func (d *DB) removeGarbageLocked() {
	vs := d.mu.versions
	names, err := d.opts.FS.List(d.dirname)
	if err != nil {
		d.opts.Logger.Warn("list data directory", "err", err)
		return
	}
	for _, name := range names {
		var garbage bool
		switch {
		case strings.HasSuffix(name, ".sst"):
			n, err := strconv.ParseUint(strings.TrimSuffix(name, ".sst"), 10, 64)
			garbage = err == nil && vs.files[n] == nil
		case strings.HasPrefix(name, "MANIFEST-"):
			garbage = name != manifest.FileName(vs.manifestNum)
		case name == "CURRENT.tmp":
			garbage = true
		case strings.HasSuffix(name, ".vlog"):
			// A segment neither sealed nor active: its header never
			// reached the disk (openValueLog).
			n, ok := fileNum(name, ".vlog")
			garbage = ok && vs.vlog[n] == nil && n != d.vlogActive.Load()
		}
		if garbage {
			if err := d.opts.FS.Remove(vfs.Join(d.dirname, name)); err != nil {
				d.opts.Logger.Warn("remove garbage", "file", name, "err", err)
			} else {
				d.opts.Logger.Debug("removed garbage", "file", name)
			}
		}
	}
}

// deleteObsolete queues tables no version references for removal. It may be
// called with d.mu held (and from readers), so it only queues.
func (d *DB) deleteObsolete(files []*tableMeta) {
	d.obsolete.Lock()
	for _, f := range files {
		d.obsolete.files = append(d.obsolete.files, f.FileNum)
	}
	d.obsolete.Unlock()
}

// purgeObsolete removes the queued tables. Called without d.mu.
func (d *DB) purgeObsolete() {
	d.obsolete.Lock()
	files := d.obsolete.files
	d.obsolete.files = nil
	d.obsolete.Unlock()
	for _, n := range files {
		d.tableCache.evict(n)
		if err := d.opts.FS.Remove(d.tablePath(n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.opts.Logger.Warn("remove obsolete table", "file", tableFileName(n), "err", err)
		}
	}
}

// Close flushes the memtables (unless read-only or failed), closes the
// journal and releases the directory.
func (d *DB) Close() error {
	d.mu.Lock()
	if d.mu.closed || d.mu.closing {
		d.mu.Unlock()
		return ErrClosed
	}
	d.mu.closing = true
	d.mu.cond.Broadcast()
	// The value-log cleaner takes the commit lock: let it see closing and
	// stop first.
	for d.mu.cleaning {
		d.mu.cond.Wait()
	}
	d.mu.Unlock()

	// No writer is inside the commit section after this.
	d.commit.Lock()
	defer d.commit.Unlock()

	var errs []error
	d.mu.Lock()
	if !d.opts.ReadOnly && d.mu.bgErr == nil {
		if !d.mu.mem.mutable.Empty() {
			d.rotateLocked(0)
		}
		// Out of space, one attempt: what stays in memory is in the
		// journal, replayed at the next open.
		tried := false
		for len(d.mu.mem.queue) > 0 && d.mu.bgErr == nil && d.allowOneAttemptLocked(&tried) {
			d.markFlushLocked()
			d.mu.cond.Wait()
		}
	}
	for d.mu.compacting > 0 || d.mu.flushing || d.mu.memCompacting || d.mu.cleaning {
		d.mu.cond.Wait()
	}
	d.mu.closed = true
	d.stopSpaceTimerLocked()
	d.mu.cond.Broadcast()
	d.mu.Unlock()
	d.bg.Wait()

	if d.vlogW != nil {
		// Seal the active segment, and record it, so the next open need
		// not scan it.
		err := d.vlogW.Close()
		d.mu.Lock()
		if err == nil && d.mu.bgErr == nil && len(d.mu.pendingSeals) > 0 {
			e := &manifest.Edit{}
			d.addVlogEditLocked(e, dropAccount{})
			err = d.mu.versions.logAndApply(e)
		}
		d.mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("close value log: %w", err))
		}
	}
	if d.wal != nil {
		if err := d.wal.Close(); err != nil && !errors.Is(err, journal.ErrClosed) {
			errs = append(errs, fmt.Errorf("close journal: %w", err))
		}
	}
	// Reads in progress end before what they read is closed; later ones
	// fail with ErrClosed.
	d.reads.close()
	d.mu.Lock()
	if err := d.mu.versions.close(); err != nil {
		errs = append(errs, err)
	}
	d.readState.Lock()
	rs := d.readState.val
	d.readState.val = &readState{}
	d.readState.Unlock()
	d.mu.Unlock()
	if rs != nil {
		rs.unref()
	}
	d.purgeObsolete()
	d.tableCache.close()
	if d.vlogR != nil {
		d.vlogR.Close()
	}
	if d.ownCache {
		d.cache.Close()
	}
	if d.dirLock != nil {
		d.dirLock.Close()
	}
	return errors.Join(errs...)
}

// abandon releases what a failed Open acquired.
func (d *DB) abandon() {
	if d.wal != nil {
		d.wal.Close()
	}
	if d.mu.versions != nil {
		d.mu.versions.close()
	}
	if d.tableCache != nil {
		d.tableCache.close()
	}
	if d.vlogW != nil {
		d.vlogW.Close()
	}
	if d.vlogR != nil {
		d.vlogR.Close()
	}
	if d.ownCache && d.cache != nil {
		d.cache.Close()
	}
	if d.dirLock != nil {
		d.dirLock.Close()
	}
}
