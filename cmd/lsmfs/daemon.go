package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"log/syslog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lsmfs/lsmfs/mount"
)

// Daemonization and readiness
//
// `lsmfs mount` (the parent) re-executes itself as
//
//	lsmfs mount --foreground --ready-fd=3 -o CANONICAL-OPTIONS DATADIR MOUNTPOINT
//
// in a new session (setsid), with its working directory at /, stdin and
// stdout on /dev/null, stderr on the log file (log=) or on an in-memory file
// the parent reads if the daemon fails, and fd 3 the write end of a pipe. The
// daemon mounts and then writes one line on fd 3 and closes it:
//
//	ok                  the kernel serves the mount
//	error: <reason>     the mount failed; the daemon exits non-zero
//
// The parent reads the pipe to EOF, so it also notices a daemon that dies
// without a word (EOF, then it reaps the daemon and reports its status and the
// last line it wrote to stderr). No polling, no sleeping.

const (
	readyOK    = "ok"
	readyError = "error: "
)

// defaultPATH is what the daemon runs with when it inherits no PATH (mount(8)
// clears it for its helpers); the daemon runs fusermount3 from it.
const defaultPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// daemonize starts the daemon and waits until it reports readiness.
func daemonize(req mountRequest, cfg mount.Config) error {
	failed := func(err error) error { return withCode(exitMountFailed, err) }
	exe, err := os.Executable()
	if err != nil {
		return failed(fmt.Errorf("find own executable: %w", err))
	}
	dataDir, err := filepath.Abs(req.dataDir)
	if err != nil {
		return failed(err)
	}
	mountpoint, err := filepath.Abs(req.mountpoint)
	if err != nil {
		return failed(err)
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return failed(err)
	}
	defer devnull.Close()
	var stderr *os.File
	if cfg.LogFile != "" {
		stderr, err = os.OpenFile(cfg.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	} else {
		stderr, err = memFile("lsmfs-daemon-stderr")
	}
	if err != nil {
		return failed(fmt.Errorf("daemon log: %w", err))
	}
	defer stderr.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return failed(err)
	}
	defer pr.Close()

	env := os.Environ()
	if os.Getenv("PATH") == "" {
		env = append(env, "PATH="+defaultPATH)
	}
	args := []string{exe, "mount", "--foreground", "--ready-fd=3"}
	if !cfg.Format {
		args = append(args, "--no-format")
	}
	args = append(args, "-o", cfg.String(), dataDir, mountpoint)
	cmd := &exec.Cmd{
		Path:        exe,
		Args:        args,
		Env:         env,
		Dir:         "/",
		Stdin:       devnull,
		Stdout:      devnull,
		Stderr:      stderr,
		ExtraFiles:  []*os.File{pw}, // fd 3
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	err = cmd.Start()
	pw.Close() // the daemon holds the only write end now
	if err != nil {
		return failed(fmt.Errorf("start daemon: %w", err))
	}
	msg, _ := io.ReadAll(pr)
	line := strings.TrimSpace(string(msg))
	if line == readyOK {
		return cmd.Process.Release()
	}
	werr := cmd.Wait()
	if reason, ok := strings.CutPrefix(line, readyError); ok {
		if strings.Contains(reason, "fusermount") && cfg.LogFile == "" {
			// fusermount3 said why on the daemon's stderr.
			reason += lastLine(stderr)
		}
		return failed(errors.New(reason))
	}
	return failed(fmt.Errorf("daemon exited before the mount was ready (%v)%s", werr, lastLine(stderr)))
}

// memFile returns an anonymous in-memory file.
func memFile(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// lastLine returns ": " and the last non-empty line of f (from its start), or
// "" if there is none or f is not readable.
func lastLine(f *os.File) string {
	var last string
	sc := bufio.NewScanner(io.NewSectionReader(f, 0, 1<<20))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			last = l
		}
	}
	if last == "" {
		return ""
	}
	return ": " + last
}

// serve mounts in this process and serves until the mount goes away. With
// req.readyFD >= 0 it is the daemon started by daemonize: it reports
// readiness on that fd and then stops writing to the stderr the parent gave
// it (unless that is the log file).
func serve(ctx context.Context, req mountRequest, cfg mount.Config) error {
	var ready *os.File
	if req.readyFD >= 0 {
		unix.CloseOnExec(req.readyFD) // fusermount3 and friends must not hold it
		ready = os.NewFile(uintptr(req.readyFD), "ready")
		signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	} else {
		signal.Ignore(syscall.SIGPIPE) // a closed terminal must not kill it
	}
	logger, closeLog, err := newLogger(cfg, ready == nil)
	if err != nil {
		err = withCode(exitMountFailed, fmt.Errorf("log: %w", err))
		reportReady(ready, err)
		return err
	}
	defer closeLog()
	// SIGINT, SIGTERM and, in the foreground, SIGHUP (its terminal went
	// away) unmount cleanly; before, SIGHUP killed a foreground daemon
	// without writing its buffers.
	sigs := []os.Signal{syscall.SIGINT, syscall.SIGTERM}
	if ready == nil {
		sigs = append(sigs, syscall.SIGHUP)
	}
	ctx, stop := signal.NotifyContext(ctx, sigs...)
	defer stop()
	mnt, _ := filepath.Abs(req.mountpoint)
	updateLimit := setMemoryLimit(cfg, logger.With("mountpoint", mnt))

	m, err := mount.Mount(ctx, req.dataDir, req.mountpoint, cfg, logger)
	if err != nil {
		logger.Error("mount failed", "mountpoint", req.mountpoint, "err", err)
		reportReady(ready, err)
		return withCode(exitMountFailed, err)
	}
	reportReady(ready, nil)
	if updateLimit != nil {
		go followMemtables(m, updateLimit)
	}
	if ready != nil && cfg.LogFile == "" {
		// The parent's in-memory stderr is of no use any more.
		keepStderr(req.dataDir, logger.With("mountpoint", mnt))
	}
	if err := m.Wait(); err != nil {
		return withCode(exitFailure, err)
	}
	return nil
}

// stderrName is the file in DATADIR that takes a daemon's standard error
// when it logs to syslog: what the Go runtime writes there on a panic, a
// fatal error or SIGQUIT is all a crash leaves, and syslog cannot take it.
const stderrName = "stderr.log"

// keepStderr points the daemon's standard error at DATADIR/stderr.log (or
// /dev/null if it cannot be opened: a read-only data directory). Output a
// previous daemon left there (it crashed) is moved to stderr.log.old first,
// with a warning in the log.
func keepStderr(dataDir string, logger *slog.Logger) {
	p := filepath.Join(dataDir, stderrName)
	// Lstat and O_NOFOLLOW: a symbolic link planted there must not make
	// a root daemon create or append to another file.
	if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
		old := p + ".old"
		if err := os.Rename(p, old); err == nil {
			logger.Warn("the previous daemon wrote to its standard error: a crash? Its output is in "+old,
				"file", old, "modified", fi.ModTime().UTC().Format(time.RFC3339))
		}
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		f, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	}
	if err == nil {
		unix.Dup2(int(f.Fd()), 2)
		f.Close()
	}
}

// memoryMargin is the soft memory limit's allowance beyond the block cache
// and the memtables: handles, buffers, tables' indexes and filters, garbage
// between collections. With the runtime's own memory outside the Go heap
// (text, stacks' pages, about 16 MiB) the daemon's RSS stays under
// cache_size + memtable_size + 128 MiB while the memtables hold at most
// memtable_size.
const memoryMargin = 112 << 20

// memoryLimit is the soft Go memory limit for a block cache of cache bytes
// and memtables holding mem bytes (at least memtableSize counted: the
// memtables fill between two updates).
func memoryLimit(cache, memtableSize int64, mem uint64) int64 {
	return max(cache, 0) + max(memtableSize, int64(mem)) + memoryMargin
}

// setMemoryLimit gives the Go runtime a soft memory limit of what the daemon
// plans to hold (memoryLimit). The collector then runs when the heap nears
// it instead of letting it double (GOGC=100): the daemon's RSS follows the
// cache and memtable options. The limit is soft: a daemon that needs more
// still gets it, at the price of more collections. It returns a function
// that raises or lowers the limit with the memory the memtables hold (the
// engine lets them reach MaxMemtables x memtable_size while a flush runs),
// or nil when a GOMEMLIMIT in the environment takes precedence.
func setMemoryLimit(cfg mount.Config, logger *slog.Logger) func(memtables uint64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	o := cfg.EngineOptions(nil)
	o.EnsureDefaults()
	limit := memoryLimit(o.CacheSize, o.MemtableSize, 0)
	debug.SetMemoryLimit(limit)
	logger.Debug("memory limit", "bytes", limit)
	return func(memtables uint64) {
		if l := memoryLimit(o.CacheSize, o.MemtableSize, memtables); l != limit {
			limit = l
			debug.SetMemoryLimit(l)
		}
	}
}

// followMemtables updates the memory limit with the memtables' memory
// until the mount ends.
func followMemtables(m *mount.Mounted, update func(uint64)) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-m.Done():
			return
		case <-t.C:
			update(m.MemtableBytes())
		}
	}
}

// reportReady writes the readiness line (see daemonize) and closes ready.
func reportReady(ready *os.File, err error) {
	if ready == nil {
		return
	}
	if err != nil {
		fmt.Fprintf(ready, "%s%s\n", readyError, oneLine(err))
	} else {
		fmt.Fprintln(ready, readyOK)
	}
	ready.Close()
}

// newLogger returns the daemon's logger: to the log= file, else to stderr in
// the foreground, else to syslog when there is one (else nowhere).
func newLogger(cfg mount.Config, foreground bool) (*slog.Logger, func(), error) {
	level := slog.LevelInfo
	if cfg.Debug {
		level = slog.LevelDebug
	}
	hopts := &slog.HandlerOptions{Level: level}
	switch {
	case cfg.LogFile != "":
		f, err := os.OpenFile(cfg.LogFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
		if err != nil {
			return nil, nil, err
		}
		return slog.New(slog.NewTextHandler(f, hopts)), func() { f.Close() }, nil
	case foreground:
		return slog.New(slog.NewTextHandler(os.Stderr, hopts)), func() {}, nil
	}
	if w, err := syslog.New(syslog.LOG_DAEMON|syslog.LOG_INFO, "lsmfs"); err == nil {
		return slog.New(newSyslogHandler(w, hopts)), func() { w.Close() }, nil
	}
	return slog.New(slog.NewTextHandler(io.Discard, hopts)), func() {}, nil
}

// syslogHandler writes each record as one text line at the syslog priority
// of its level (errors at LOG_ERR, so that journalctl -p err shows them),
// instead of every line at the writer's LOG_INFO. The text handler formats
// into the shared line, one record at a time.
type syslogHandler struct {
	inner slog.Handler
	out   *syslogLine
}

type syslogLine struct {
	mu  sync.Mutex
	buf bytes.Buffer
	w   *syslog.Writer
}

func (l *syslogLine) Write(p []byte) (int, error) { return l.buf.Write(p) }

func newSyslogHandler(w *syslog.Writer, opts *slog.HandlerOptions) *syslogHandler {
	out := &syslogLine{w: w}
	return &syslogHandler{inner: slog.NewTextHandler(out, opts), out: out}
}

func (h *syslogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *syslogHandler) Handle(ctx context.Context, r slog.Record) error {
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	h.out.buf.Reset()
	if err := h.inner.Handle(ctx, r); err != nil {
		return err
	}
	line := strings.TrimSuffix(h.out.buf.String(), "\n")
	switch {
	case r.Level >= slog.LevelError:
		return h.out.w.Err(line)
	case r.Level >= slog.LevelWarn:
		return h.out.w.Warning(line)
	case r.Level >= slog.LevelInfo:
		return h.out.w.Info(line)
	default:
		return h.out.w.Debug(line)
	}
}

func (h *syslogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &syslogHandler{inner: h.inner.WithAttrs(as), out: h.out}
}

func (h *syslogHandler) WithGroup(name string) slog.Handler {
	return &syslogHandler{inner: h.inner.WithGroup(name), out: h.out}
}
