package mount

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/lsm/vfs"
)

// Mounted is a served lsmfs mount. Its methods are safe for concurrent use.
type Mounted struct {
	dataDir    string
	mountpoint string
	logger     *slog.Logger
	db         *lsm.DB
	fsys       *fs.FS
	srv        *fuse.Server
	cfg        Config
	engineOpts *lsm.Options
	fuseOpts   []string
	ops        *opCounters
	started    time.Time

	// metricsAddr is where metrics= listens ("" without it).
	metricsAddr string
	// metrics serves the Prometheus exposition (on metrics= and the
	// control socket).
	metrics http.Handler

	// servers holds the stop functions of the control socket and metrics
	// servers; once closing is set (the mount is gone), a server added
	// late is stopped at once.
	servers struct {
		sync.Mutex
		stops   []func()
		closing bool
	}
	compactMu sync.Mutex // one Compact at a time

	// served is closed when the FUSE serve loop has returned (the kernel
	// connection is gone).
	served chan struct{}
	// closed is closed once the filesystem and engine are closed; closeErr
	// is set before.
	closed   chan struct{}
	closeErr error

	unmountMu sync.Mutex // serializes Unmount
}

// Mount opens the lsmfs in dataDir and mounts it on mountpoint. With
// cfg.Format, an empty or missing dataDir is formatted first with the
// defaults (not with a journal= option, which might name a device holding
// another filesystem's journal, and not read-only); without it, such a
// dataDir fails the mount with lsm.ErrNotFormatted. Mount returns once the kernel serves the mount; cancelling
// ctx then unmounts (lazily if the mount is busy, see Unmount). Every log line
// carries the mount point. Errors are one line, name the directory, and match
// lsm.ErrNotFormatted, lsm.ErrCorrupt or the journal's errors with errors.Is.
func Mount(ctx context.Context, dataDir, mountpoint string, cfg Config, logger *slog.Logger) (*Mounted, error) {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := cfg.Abs(); err != nil {
		return nil, err
	}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dataDir, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	mountpoint, err = filepath.Abs(mountpoint)
	if err != nil {
		return nil, err
	}
	logger = logger.With("mountpoint", mountpoint)
	fi, err := os.Stat(mountpoint)
	if err == nil {
		// A stat may come from the kernel's attribute cache; statfs asks
		// the filesystem, so a dead FUSE mount answers ENOTCONN.
		var st unix.Statfs_t
		err = unix.Statfs(mountpoint, &st)
	}
	switch {
	case errors.Is(err, unix.ENOTCONN):
		// Mounting on it would hide it, and umount would then detach the
		// new mount, not the dead one.
		return nil, fmt.Errorf("mount point %s is a dead FUSE mount (its daemon is gone): detach it first with umount %s",
			mountpoint, mountpoint)
	case err != nil:
		return nil, fmt.Errorf("mount point: %w", err)
	case !fi.IsDir():
		return nil, fmt.Errorf("mount point %s is not a directory", mountpoint)
	}
	for what, p := range map[string]string{"data directory": dataDir, "journal": cfg.Journal} {
		if p != "" && within(p, mountpoint) {
			// The daemon would reach its own files through its own
			// mount and wait on itself.
			return nil, fmt.Errorf("%s %s is inside the mount point %s", what, p, mountpoint)
		}
	}

	// Listen for metrics first: a taken address fails the mount before
	// anything is opened.
	var metricsLn net.Listener
	if cfg.Metrics != "" {
		if metricsLn, err = net.Listen("tcp", cfg.Metrics); err != nil {
			return nil, fmt.Errorf("mount option metrics=%s: %w", cfg.Metrics, err)
		}
	}
	closeMetricsLn := func() {
		if metricsLn != nil {
			metricsLn.Close()
		}
	}
	db, err := openOrFormat(dataDir, cfg, logger)
	if err != nil {
		closeMetricsLn()
		return nil, err
	}
	fsys, err := fs.New(db, cfg.FSOptions(logger.With("component", "fs")))
	if err != nil {
		closeMetricsLn()
		db.Close()
		return nil, openError(dataDir, err)
	}
	m := &Mounted{
		dataDir:    dataDir,
		mountpoint: mountpoint,
		logger:     logger,
		db:         db,
		fsys:       fsys,
		cfg:        cfg,
		engineOpts: cfg.EngineOptions(nil),
		ops:        &opCounters{},
		started:    time.Now(),
		served:     make(chan struct{}),
		closed:     make(chan struct{}),
	}
	m.metrics = metricsHandler(m.Stats)
	mo := cfg.FUSEOptions(fsys.MountOptions(), dataDir, logger.With("component", "fuse"))
	m.fuseOpts = mo.Options
	srv, err := fuse.NewServer(&countingFS{RawFileSystem: fsys.Raw(), c: m.ops}, mountpoint, mo)
	if err != nil {
		closeMetricsLn()
		err = fmt.Errorf("mount %s on %s: %w", dataDir, mountpoint, err)
		return nil, errors.Join(err, fsys.Close(), db.Close())
	}
	m.srv = srv
	go func() {
		srv.Serve()
		close(m.served)
	}()
	go m.closeWhenServed()
	if err := srv.WaitMount(); err != nil {
		closeMetricsLn()
		m.Unmount()
		<-m.closed
		return nil, fmt.Errorf("mount %s on %s: %w", dataDir, mountpoint, err)
	}
	if err := setReadahead(mountpoint, cfg.readaheadKB()); err != nil {
		// Not root (a user mount through fusermount3), or no sysfs: the
		// kernel's 128 KiB stays, and sequential reads are slower.
		logger.Warn("kernel readahead left at its default", "want", FormatSize(cfg.readaheadKB()<<10), "err", err)
	}
	if metricsLn != nil {
		m.metricsAddr = metricsLn.Addr().String()
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", m.metrics)
		m.addServer(serveHTTP(metricsLn, mux, logger.With("component", "metrics")))
	}
	if ln, err := listenControl(dataDir); err != nil {
		logger.Warn("no control socket: lsmfs stats and compact will not reach this mount", "err", err)
	} else {
		stop := serveHTTP(ln, m.controlHandler(m.metrics), logger.With("component", "control"))
		m.addServer(func() {
			// Gone first, so that a client never reaches a closing engine.
			os.Remove(filepath.Join(dataDir, ControlSocketName))
			stop()
		})
	}
	logger.Info("mounted", "datadir", dataDir, "options", cfg.String(), "ignored", cfg.Ignored, "metrics", m.metricsAddr)
	go func() {
		select {
		case <-ctx.Done():
			logger.Info("unmounting", "reason", context.Cause(ctx))
			if err := m.Unmount(); err != nil {
				logger.Error("unmount", "err", err)
			}
		case <-m.served:
		}
	}()
	return m, nil
}

// within reports whether path p is dir or below it, after resolving the
// symbolic links of the part of p that exists.
func within(p, dir string) bool {
	resolve := func(p string) string {
		p, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		// Resolve the longest existing prefix; keep the rest as it is.
		var rest []string
		for {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				return filepath.Join(append([]string{r}, rest...)...)
			}
			parent := filepath.Dir(p)
			if parent == p {
				return filepath.Join(append([]string{p}, rest...)...)
			}
			rest = append([]string{filepath.Base(p)}, rest...)
			p = parent
		}
	}
	rel, err := filepath.Rel(resolve(dir), resolve(p))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// openOrFormat opens the engine in dataDir, formatting an empty or missing
// dataDir with the defaults first if cfg.Format allows it.
func openOrFormat(dataDir string, cfg Config, logger *slog.Logger) (*lsm.DB, error) {
	engineOpts := cfg.EngineOptions(logger.With("component", "lsm"))
	empty, err := IsEmptyDir(dataDir)
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if !empty {
		// (An empty one is made private by the format below.)
		if warning, err := CheckDataDir(dataDir); err != nil {
			return nil, err
		} else if warning != "" {
			logger.Warn(warning)
		}
		db, err := lsm.Open(dataDir, engineOpts)
		if errors.Is(err, vfs.ErrLocked) {
			db, err = openAfterClose(dataDir, engineOpts, closeWait)
		}
		if err != nil {
			return nil, openError(dataDir, err)
		}
		return db, nil
	}
	switch {
	case !cfg.Format:
		what := "empty"
		if _, err := os.Stat(dataDir); errors.Is(err, os.ErrNotExist) {
			what = "missing"
		}
		return nil, fmt.Errorf("data directory %s is %s, no lsmfs filesystem (%w): make one with lsmfs mkfs %s (mount(8) and fstab never format; lsmfs mount formats an empty directory)",
			dataDir, what, lsm.ErrNotFormatted, dataDir)
	case cfg.ReadOnly:
		return nil, fmt.Errorf("%s is empty and the mount is read-only: run lsmfs mkfs %s first", dataDir, dataDir)
	case cfg.Journal != "":
		return nil, fmt.Errorf("%s is empty: run lsmfs mkfs --journal %s %s first (a first mount formats only with the default journal)",
			dataDir, cfg.Journal, dataDir)
	}
	db, uuid, err := format(dataDir, FormatOptions{
		RootUID: uint32(os.Getuid()),
		RootGID: uint32(os.Getgid()),
	}, engineOpts)
	if err != nil {
		return nil, err
	}
	logger.Info("formatted empty data directory", "datadir", dataDir, "uuid", FormatUUID(uuid))
	return db, nil
}

// closeWait is how long a mount waits for the daemon of an earlier mount of
// the same data directory to finish closing: umount(8) returns when the
// kernel let go of the mount, while that daemon may still be writing its
// last tables (`umount M && mount M` in a script must work).
const closeWait = 10 * time.Second

// openAfterClose opens the engine in dataDir, whose lock another process
// holds, once that process lets go, for up to wait. A data directory that a
// live daemon serves (LiveDaemon) fails at once.
func openAfterClose(dataDir string, o *lsm.Options, wait time.Duration) (*lsm.DB, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, live := LiveDaemon(ctx, dataDir)
	cancel()
	if live {
		return nil, fmt.Errorf("open %s: %w", dataDir, vfs.ErrLocked)
	}
	return OpenWhenUnlocked(context.Background(), wait, func() (*lsm.DB, error) { return lsm.Open(dataDir, o) })
}

// LiveDaemon asks the daemon serving dataDir for its stats and reports
// whether it still serves a mount: it answers on the control socket and its
// mount point is still a FUSE mount in /proc/self/mountinfo. A daemon that
// answers after its mount is gone is closing: umount(8) returns as soon as
// the kernel has detached the mount, a moment before the daemon notices.
func LiveDaemon(ctx context.Context, dataDir string) (Stats, bool) {
	s, err := NewControl(dataDir).Stats(ctx)
	if err != nil {
		return s, false
	}
	if s.Mountpoint == "" {
		return s, true
	}
	mnt := s.Mountpoint
	if real, err := filepath.EvalSymlinks(mnt); err == nil {
		mnt = real
	}
	_, fstype, ok := mountAt(mnt)
	return s, ok && (fstype == "fuse" || strings.HasPrefix(fstype, "fuse."))
}

// OpenWhenUnlocked calls open until it fails with something other than
// vfs.ErrLocked, polling for up to wait (or until ctx ends): for a data
// directory whose daemon is still closing after an unmount. It returns the
// last result.
func OpenWhenUnlocked(ctx context.Context, wait time.Duration, open func() (*lsm.DB, error)) (*lsm.DB, error) {
	deadline := time.Now().Add(wait)
	for {
		db, err := open()
		if !errors.Is(err, vfs.ErrLocked) || time.Now().After(deadline) || ctx.Err() != nil {
			return db, err
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// openError turns an error from lsm.Open or fs.New into one line naming the
// problem and the directory, keeping it matchable with errors.Is.
func openError(dataDir string, err error) error {
	switch {
	case errors.Is(err, lsm.ErrNotFormatted), errors.Is(err, fs.ErrNotFormatted):
		return &pointedError{fmt.Sprintf("%s is not an lsmfs data directory (format it with lsmfs mkfs)", dataDir), err}
	case errors.Is(err, vfs.ErrLocked):
		return &pointedError{fmt.Sprintf("%s is in use: mounted, or its daemon is still closing after an unmount", dataDir), err}
	case errors.Is(err, lsm.ErrCorrupt), errors.Is(err, fs.ErrCorrupt):
		return fmt.Errorf("%s is corrupt (lsmfs fsck checks it): %w", dataDir, err)
	case strings.Contains(err.Error(), dataDir):
		return err // the engine named the directory already
	}
	return fmt.Errorf("open %s: %w", dataDir, err)
}

// pointedError replaces a long error chain's message with a pointed one and
// keeps the chain for errors.Is and errors.As.
type pointedError struct {
	msg string
	err error
}

func (e *pointedError) Error() string { return e.msg }
func (e *pointedError) Unwrap() error { return e.err }

// atimePolicy is the access-time rule of c. As mount(2) says, strictatime
// overrides noatime and relatime, whatever their order.
func (c *Config) atimePolicy() fs.AtimePolicy {
	switch {
	case c.StrictAtime:
		return fs.AtimeStrict
	case slices.Contains(c.KernelFlags, "noatime"):
		return fs.AtimeNever
	}
	return fs.AtimeRelative
}

// FSOptions returns the fs.Options c asks for.
func (c *Config) FSOptions(logger *slog.Logger) fs.Options {
	// Buffered writes of files kept open wait at most half the commit
	// interval in their write buffer, and the flusher forces them: every
	// write is durable within the commit interval.
	o := fs.Options{Logger: logger, ReadOnly: c.ReadOnly, WritebackCache: c.WritebackCache, FlushAge: c.CommitInterval / 2,
		Atime: c.atimePolicy(), NoDirAtime: c.NoDirAtime}
	if c.WritebackCache {
		// The kernel then stamps mtime and ctime itself, from its coarse
		// clock (a tick of 1-4 ms): lsmfs's own times come from the same
		// clock, or a file created and written within one tick would
		// show an mtime before its atime, and relatime would not count
		// its first read.
		o.Clock = coarseNow
	}
	return o
}

// coarseNow is the kernel's clock for file times (current_time):
// CLOCK_REALTIME_COARSE.
func coarseNow() time.Time {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts); err != nil {
		return time.Now()
	}
	return time.Unix(ts.Unix())
}

// closeWhenServed closes the filesystem (flushing dirty buffers) and then the
// engine once the kernel connection is gone.
func (m *Mounted) closeWhenServed() {
	<-m.served
	m.servers.Lock()
	m.servers.closing = true
	stops := m.servers.stops
	m.servers.stops = nil
	m.servers.Unlock()
	for _, stop := range stops {
		stop()
	}
	// A compaction requested through the control socket finishes before
	// the engine closes.
	m.compactMu.Lock()
	defer m.compactMu.Unlock()
	err := m.fsys.Close()
	if err != nil {
		err = fmt.Errorf("close filesystem: %w", err)
	}
	if cerr := m.db.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close engine: %w", cerr))
	}
	if err != nil {
		m.logger.Error("closed with errors", "err", err)
	} else {
		m.logger.Info("unmounted and closed")
	}
	m.closeErr = err
	close(m.closed)
}

// Mountpoint returns the absolute mount point.
func (m *Mounted) Mountpoint() string { return m.mountpoint }

// DataDir returns the absolute data directory.
func (m *Mounted) DataDir() string { return m.dataDir }

// Wait blocks until the mount is gone (external umount, Unmount, or ctx
// cancellation) and the filesystem and engine are closed, and returns the
// error of closing them.
func (m *Mounted) Wait() error {
	<-m.closed
	return m.closeErr
}

// Done is closed when Wait would return.
func (m *Mounted) Done() <-chan struct{} { return m.closed }

// Unmount unmounts the filesystem. If the mount point is busy it detaches it
// lazily instead (fusermount3 -u -z): it disappears from the namespace at
// once, and the daemon finishes, flushes and closes when the last open file
// is closed. Unmount does not wait for that; use Wait.
func (m *Mounted) Unmount() error {
	m.unmountMu.Lock()
	defer m.unmountMu.Unlock()
	select {
	case <-m.served:
		return nil
	default:
	}
	err := m.srv.Unmount()
	if err == nil {
		return nil
	}
	m.logger.Warn("unmount failed; detaching lazily", "err", err)
	if lerr := lazyUnmount(m.mountpoint); lerr != nil {
		return fmt.Errorf("unmount %s: %w; lazy unmount: %w", m.mountpoint, err, lerr)
	}
	return nil
}

// addServer registers the stop function of a server that lives as long as
// the mount (it is called at once if the mount is already gone).
func (m *Mounted) addServer(stop func()) {
	m.servers.Lock()
	if m.servers.closing {
		m.servers.Unlock()
		stop()
		return
	}
	m.servers.stops = append(m.servers.stops, stop)
	m.servers.Unlock()
}

// Stats returns the live figures of the mount.
func (m *Mounted) Stats() Stats {
	s := EngineStats(m.db, m.dataDir)
	s.Source = "daemon"
	s.Mountpoint = m.mountpoint
	s.PID = os.Getpid()
	s.UptimeSeconds = time.Since(m.started).Seconds()
	s.ReadOnly = m.cfg.ReadOnly
	s.MetricsAddress = m.metricsAddr
	s.MountOptions = m.cfg.String()
	s.FUSEOptions = m.fuseOpts
	s.Ops = m.ops.snapshot()
	if s.Ops == nil {
		s.Ops = []OpStats{}
	}
	return s
}

// MemtableBytes is the memory the engine's memtables hold now.
func (m *Mounted) MemtableBytes() uint64 { return m.db.Metrics().MemtableBytes }

// MetricsAddress returns the address the metrics= endpoint listens on, ""
// without metrics=.
func (m *Mounted) MetricsAddress() string { return m.metricsAddr }

// Compact compacts the mounted filesystem's engine and cleans its value log
// now (see Compact), one call at a time; the filesystem stays in use.
func (m *Mounted) Compact(progress func(CompactProgress)) (CompactResult, error) {
	if m.cfg.ReadOnly {
		return CompactResult{}, fmt.Errorf("%s is mounted read-only: nothing to compact", m.mountpoint)
	}
	m.compactMu.Lock()
	defer m.compactMu.Unlock()
	m.logger.Info("compacting on request")
	res, err := Compact(m.db, m.dataDir, progress)
	if err != nil {
		m.logger.Error("compact", "err", err)
		return res, err
	}
	m.logger.Info("compacted", "tables_before", res.TablesBefore, "tables_after", res.TablesAfter,
		"vlog_segments_cleaned", res.SegmentsCleaned, "disk_bytes_before", res.DiskBytesBefore,
		"disk_bytes_after", res.DiskBytesAfter, "seconds", res.Seconds)
	return res, nil
}
