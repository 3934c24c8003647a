package mount_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lsmfs/lsmfs/mount"
)

// The control socket works in a data directory whose path is too long for
// sun_path (108 bytes), has mode 0600, and a missing or stale socket is
// ErrNotServing.
func TestControlSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("long-directory-name-", 6))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if len(filepath.Join(dir, mount.ControlSocketName)) <= 108 {
		t.Fatalf("path not long enough: %s", dir)
	}
	ctl := mount.NewControl(dir)
	if _, err := ctl.Stats(context.Background()); !errors.Is(err, mount.ErrNotServing) {
		t.Errorf("Stats without a socket: %v; want ErrNotServing", err)
	}
	h := http.NewServeMux()
	h.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(mount.Stats{Source: "daemon", PID: 42})
	})
	stop, err := mount.ServeControl(dir, h)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, mount.ControlSocketName))
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket: %v, %v; want a socket with mode 0600", fi.Mode(), err)
	}
	s, err := ctl.Stats(context.Background())
	if err != nil || s.PID != 42 {
		t.Errorf("Stats = %+v, %v; want pid 42", s, err)
	}
	stop() // leaves the socket file: a stale socket
	if _, err := ctl.Stats(context.Background()); !errors.Is(err, mount.ErrNotServing) {
		t.Errorf("Stats on a stale socket: %v; want ErrNotServing", err)
	}
	// A new server replaces the stale socket.
	stop, err = mount.ServeControl(dir, h)
	if err != nil {
		t.Fatalf("replacing a stale socket: %v", err)
	}
	defer stop()
	if _, err := ctl.Stats(context.Background()); err != nil {
		t.Errorf("Stats after replacing the stale socket: %v", err)
	}
}

// LiveDaemon: no daemon, or one whose mount point is no longer a FUSE mount
// (closing after umount), is not live; one serving a mount point that is
// mounted, or not naming one, is.
func TestLiveDaemon(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if _, live := mount.LiveDaemon(ctx, dir); live {
		t.Error("LiveDaemon without a daemon: live")
	}
	var mnt string
	h := http.NewServeMux()
	h.HandleFunc("GET /v1/stats", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(mount.Stats{Source: "daemon", PID: 42, Mountpoint: mnt})
	})
	stop, err := mount.ServeControl(dir, h)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	mnt = t.TempDir() // a plain directory: the mount is gone
	if s, live := mount.LiveDaemon(ctx, dir); live || s.PID != 42 {
		t.Errorf("LiveDaemon of a daemon whose mount is gone: live %v, %+v", live, s)
	}
	mnt = ""
	if _, live := mount.LiveDaemon(ctx, dir); !live {
		t.Error("LiveDaemon of a daemon naming no mount point: not live")
	}
	// /proc/self/mountinfo lists a FUSE mount where one exists: the
	// mounted case is covered by the tests package (fsck of a mounted
	// filesystem is refused at once, naming the mount point).
}
