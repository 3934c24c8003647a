package mount

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The control socket
//
// A mounted daemon listens on a unix socket in its data directory,
// DATADIR/lsmfs.sock (ControlSocketName), mode 0600, and serves HTTP on it:
//
//	GET  /v1/stats    Stats as JSON
//	POST /v1/compact  compaction and value-log cleaning now: a stream of JSON
//	                  lines, {"progress":CompactProgress} while it runs, then
//	                  {"result":CompactResult} or {"error":"..."}
//	GET  /metrics     the Prometheus exposition (as on metrics=ADDR)
//
// Why a socket in DATADIR rather than a control file in the mount: no FUSE
// round trips or kernel attribute and page caching between the client and the
// figures; nothing added to the filesystem's namespace (find, du, rsync and
// readdir-counting tests see only the user's files); a request/response
// channel, which compact needs; and access limited to the daemon's user by
// the socket's mode and by the peer's credentials (SO_PEERCRED: the daemon's
// uid or root), whatever allow_other says. Anyone can inspect it with
// `curl --unix-socket DATADIR/lsmfs.sock http://lsmfs/v1/stats`.
//
// The socket exists while the daemon serves: it is created once the kernel
// serves the mount and removed first when the mount goes away, before the
// filesystem and the engine are closed. A socket left by a killed daemon
// refuses connections (ErrNotServing) and the next mount replaces it (the
// engine's directory lock makes that safe).

// ControlSocketName is the name of the control socket in the data directory.
const ControlSocketName = "lsmfs.sock"

// ErrNotServing is returned by the control client when no daemon serves the
// data directory (no socket, or a stale one).
var ErrNotServing = errors.New("no lsmfs daemon serves this data directory")

// maxSocketPath is the longest path bind(2) and connect(2) take for a unix
// socket (sun_path holds 108 bytes with the terminating NUL).
const maxSocketPath = 107

// socketPath returns a path for the socket dir/name short enough for
// sun_path: the path itself, or /proc/self/fd/N/name through a descriptor
// of dir that release closes.
func socketPath(dir, name string) (path string, release func(), err error) {
	p := filepath.Join(dir, name)
	if len(p) <= maxSocketPath {
		return p, func() {}, nil
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", fd, name), func() { unix.Close(fd) }, nil
}

// listenControl creates the control socket in dataDir, replacing a stale
// one, with mode 0600.
func listenControl(dataDir string) (net.Listener, error) {
	path, release, err := socketPath(dataDir, ControlSocketName)
	if err != nil {
		return nil, err
	}
	defer release()
	full := filepath.Join(dataDir, ControlSocketName)
	if fi, err := os.Lstat(full); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", full)
		}
		// Stale: this process holds the engine's lock, so no other daemon
		// serves dataDir.
		os.Remove(full)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", full, err)
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(false) // removed by the daemon by its real name
	if err := os.Chmod(full, 0o600); err != nil {
		ln.Close()
		os.Remove(full)
		return nil, fmt.Errorf("control socket %s: %w", full, err)
	}
	return &peerCheckListener{UnixListener: ul, uid: uint32(os.Geteuid())}, nil
}

// peerCheckListener accepts connections only from root and from the
// daemon's own user.
type peerCheckListener struct {
	*net.UnixListener
	uid uint32
}

func (l *peerCheckListener) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		if l.allowed(c) {
			return c, nil
		}
		c.Close()
	}
}

func (l *peerCheckListener) allowed(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var cred *unix.Ucred
	var cerr error
	err = raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err != nil || cerr != nil {
		return false
	}
	return cred.Uid == 0 || cred.Uid == l.uid
}

// controlHandler serves the control socket's requests for m.
func (m *Mounted) controlHandler(metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(m.Stats())
	})
	mux.HandleFunc("POST /v1/compact", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		flusher, _ := w.(http.Flusher)
		enc := json.NewEncoder(w)
		progress := make(chan CompactProgress, 1)
		type outcome struct {
			res CompactResult
			err error
		}
		done := make(chan outcome, 1)
		go func() {
			res, err := m.Compact(func(p CompactProgress) {
				select { // keep the latest; never block the compaction
				case progress <- p:
				default:
					select {
					case <-progress:
					default:
					}
					progress <- p
				}
			})
			done <- outcome{res, err}
		}()
		for {
			select {
			case p := <-progress:
				enc.Encode(map[string]any{"progress": p})
				if flusher != nil {
					flusher.Flush()
				}
			case o := <-done:
				if o.err != nil {
					enc.Encode(map[string]any{"error": o.err.Error()})
				} else {
					enc.Encode(map[string]any{"result": o.res})
				}
				return
			}
		}
	})
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	return mux
}

// serveHTTP serves h on ln until the returned function is called.
func serveHTTP(ln net.Listener, h http.Handler, logger *slog.Logger) (stop func()) {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("serve", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return func() {
		// Let requests in flight (a stats call, a scrape) finish; a
		// compaction stream is cut after a moment (Mounted waits for the
		// compaction itself before closing the engine).
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		srv.Close()
		<-done
	}
}

// Control is a client of a daemon's control socket.
type Control struct {
	dataDir string
	client  *http.Client
}

// NewControl returns a client for the daemon serving dataDir. It does not
// connect: the calls return ErrNotServing when no daemon answers.
func NewControl(dataDir string) *Control {
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		path, release, err := socketPath(dataDir, ControlSocketName)
		if err != nil {
			return nil, err
		}
		defer release()
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}
	return &Control{
		dataDir: dataDir,
		client:  &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}},
	}
}

func (c *Control) do(ctx context.Context, method, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://lsmfs"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if isNotServing(err) {
			return nil, fmt.Errorf("%s: %w", c.dataDir, ErrNotServing)
		}
		return nil, fmt.Errorf("control socket of %s: %w", c.dataDir, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("control socket of %s: %s %s: %s: %s", c.dataDir, method, path, resp.Status, b)
	}
	return resp, nil
}

func isNotServing(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, os.ErrNotExist)
}

// Stats asks the daemon for its figures.
func (c *Control) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	resp, err := c.do(ctx, http.MethodGet, "/v1/stats")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return s, fmt.Errorf("control socket of %s: stats: %w", c.dataDir, err)
	}
	return s, nil
}

// Compact asks the daemon to compact now (see Compact) and calls progress,
// if not nil, with its reports. Cancelling ctx stops waiting, not the
// compaction.
func (c *Control) Compact(ctx context.Context, progress func(CompactProgress)) (CompactResult, error) {
	resp, err := c.do(ctx, http.MethodPost, "/v1/compact")
	if err != nil {
		return CompactResult{}, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var msg struct {
			Progress *CompactProgress `json:"progress"`
			Result   *CompactResult   `json:"result"`
			Error    *string          `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil {
			return CompactResult{}, fmt.Errorf("control socket of %s: compact: %w", c.dataDir, err)
		}
		switch {
		case msg.Error != nil:
			return CompactResult{}, errors.New(*msg.Error)
		case msg.Result != nil:
			return *msg.Result, nil
		case msg.Progress != nil && progress != nil:
			progress(*msg.Progress)
		}
	}
	if err := sc.Err(); err != nil {
		return CompactResult{}, fmt.Errorf("control socket of %s: compact: %w", c.dataDir, err)
	}
	return CompactResult{}, fmt.Errorf("control socket of %s: compact: the daemon closed the connection without a result (unmounted?)", c.dataDir)
}

// Metrics fetches the daemon's Prometheus exposition in the text format.
func (c *Control) Metrics(ctx context.Context) ([]byte, error) {
	resp, err := c.do(ctx, http.MethodGet, "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}
