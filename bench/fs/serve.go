package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	rpprof "runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	lsmfs "github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/mount"
)

// The FUSE servers other than the lsmfs binary run in child processes of
// this command, never in the measuring process: the command re-executes
// itself as
//
//	fs __serve passthrough SRCDIR MNT SOCK default|nopt
//	fs __serve ceiling MNT SOCK LEVERS   (LEVERS: "none" or a+b+..., see levers)
//	fs __serve lsmfs DATADIR MNT      (the profiling variant)
//
// with fd 3 the write end of a pipe, on which the child writes one line once
// the kernel serves the mount: "ok" (the lsmfs variant: "ok ADDR", its pprof
// address), or "error: REASON". The child serves until the mount goes away
// (fusermount3 -u by the parent). SOCK is a unix socket serving the request
// counts (counting.go).

const serveCmd = "__serve"

func serveMain(args []string) {
	ready := os.NewFile(3, "ready")
	syscall.CloseOnExec(3)
	fail := func(err error) {
		fmt.Fprintf(ready, "error: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		ready.Close()
		os.Exit(1)
	}
	if len(args) < 1 {
		fail(fmt.Errorf("usage: %s passthrough|ceiling|lsmfs ...", serveCmd))
	}
	var err error
	switch args[0] {
	case "passthrough":
		if len(args) != 5 {
			fail(fmt.Errorf("usage: passthrough SRC MNT SOCK nopt|default"))
		}
		err = servePassthrough(args[1], args[2], args[3], args[4] == "nopt", ready)
	case "ceiling":
		if len(args) != 4 {
			fail(fmt.Errorf("usage: ceiling MNT SOCK LEVERS"))
		}
		err = serveCeiling(args[1], args[2], args[3], ready)
	case "lsmfs":
		if len(args) != 3 {
			fail(fmt.Errorf("usage: lsmfs DATADIR MNT"))
		}
		err = serveLsmfsProfiled(args[1], args[2], ready)
	default:
		err = fmt.Errorf("unknown server %q", args[0])
	}
	if err != nil {
		fail(err)
	}
	os.Exit(0)
}

// serveRaw mounts raw on mnt with opts, counting its requests on sock, and
// serves until unmounted.
func serveRaw(raw fuse.RawFileSystem, mnt, sock string, opts *fuse.MountOptions, ready *os.File) error {
	return serveRawAfter(raw, mnt, sock, opts, ready, nil)
}

// serveRawAfter is serveRaw, calling after (if set) once mounted.
func serveRawAfter(raw fuse.RawFileSystem, mnt, sock string, opts *fuse.MountOptions, ready *os.File, after func() error) error {
	c := &counters{}
	os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	serveCounts(ln, c)
	srv, err := fuse.NewServer(&countingFS{RawFileSystem: raw, c: c}, mnt, opts)
	if err != nil {
		return err
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		return err
	}
	if after != nil {
		if err := after(); err != nil {
			srv.Unmount()
			return err
		}
	}
	fmt.Fprintln(ready, "ok")
	ready.Close()
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
		srv.Unmount()
	}()
	srv.Wait()
	return nil
}

// servePassthrough serves go-fuse's loopback node over src with the defaults
// fs.Mount(mnt, root, nil) would use (NewNodeFS with nil options: 1 s entry
// and attribute timeouts; NewServer with nil options). On kernels with FUSE
// passthrough (6.9+) and as root, the loopback node then hands its open
// files to the kernel (FOPEN_PASSTHROUGH): reads and writes go to the backing
// file without reaching the daemon. noPT turns that off (CAP_PASSTHROUGH
// disabled), so that data goes through the daemon as in older kernels.
func servePassthrough(src, mnt, sock string, noPT bool, ready *os.File) error {
	root, err := gofs.NewLoopbackRoot(src)
	if err != nil {
		return err
	}
	var mo *fuse.MountOptions
	if noPT {
		mo = &fuse.MountOptions{MaxBackground: 12, DisabledCapabilities: fuse.CAP_PASSTHROUGH}
	}
	return serveRaw(gofs.NewNodeFS(root, nil), mnt, sock, mo, ready)
}

// lsmfsKernelOptions returns the FUSE mount options and the entry, attribute
// and negative timeouts a default lsmfs mount uses: fs.FS.MountOptions of a
// real (scratch) filesystem, merged by mount.Config.FUSEOptions as the
// daemon does, and fs.Options defaults.
func lsmfsKernelOptions() (*fuse.MountOptions, lsmfs.Options, error) {
	cfg, err := mount.ParseOptions()
	if err != nil {
		return nil, lsmfs.Options{}, err
	}
	cfg.EnsureDefaults()
	fo := cfg.FSOptions(nil)
	fo.EnsureDefaults()
	scratch, err := os.MkdirTemp("", "fsbench-scratch-")
	if err != nil {
		return nil, fo, err
	}
	defer os.RemoveAll(scratch)
	if _, err := mount.Format(scratch, mount.FormatOptions{JournalSize: 4 << 20}); err != nil {
		return nil, fo, fmt.Errorf("scratch lsmfs: %w", err)
	}
	db, err := lsm.Open(scratch, cfg.EngineOptions(nil))
	if err != nil {
		return nil, fo, fmt.Errorf("scratch lsmfs: %w", err)
	}
	defer db.Close()
	fsys, err := lsmfs.New(db, fo)
	if err != nil {
		return nil, fo, fmt.Errorf("scratch lsmfs: %w", err)
	}
	defer fsys.Close()
	mo := cfg.FUSEOptions(fsys.MountOptions(), "ramfs", nil)
	mo.FsName, mo.Name = "ramfs", "ramfs"
	return mo, fo, nil
}

// levers are the changes a ceiling variant ("ceiling+killpriv+noflush")
// makes to the ceiling, to measure what each is worth in requests and time
// on a filesystem whose own work costs next to nothing.
var levers = map[string]string{
	"killpriv":  "CAP_HANDLE_KILLPRIV_V2 (the filesystem clears suid/sgid on write, truncate and chown)",
	"noflush":   "FLUSH answered ENOSYS (the kernel stops sending it)",
	"noopen":    "OPEN answered ENOSYS (CAP_NO_OPEN_SUPPORT: no OPEN/RELEASE for files)",
	"noopendir": "OPENDIR answered ENOSYS (CAP_NO_OPENDIR_SUPPORT)",
	"noflushro": "FOPEN_NOFLUSH on read-only opens (no FLUSH at their close)",
	"cachedir":  "FOPEN_CACHE_DIR|FOPEN_KEEP_CACHE on OPENDIR (the kernel caches listings)",
	"rdpauto":   "CAP_READDIRPLUS_AUTO",
	"nordp":     "no READDIRPLUS (DisableReadDirPlus)",
	"wb":        "CAP_WRITEBACK_CACHE",
	"noperm":    "no default_permissions (the filesystem would check permissions itself; the kernel keeps it while POSIX ACLs are on: use with noacl)",
	"noacl":     "no POSIX ACLs (EnableAcl off)",
}

// serveCeiling serves the RAM-only filesystem with lsmfs's kernel options
// and readahead, changed by the given levers.
func serveCeiling(mnt, sock, leverList string, ready *os.File) error {
	mo, fo, err := lsmfsKernelOptions()
	if err != nil {
		return err
	}
	mo.Logger = log.New(io.Discard, "", 0)
	raw := newRAMFS(fo.EntryTimeout, fo.AttrTimeout, fo.NegativeTimeout)
	if leverList != "none" {
		for _, l := range strings.Split(leverList, "+") {
			switch l {
			case "killpriv":
				mo.ExtraCapabilities |= fuse.CAP_HANDLE_KILLPRIV_V2
				raw.killpriv = true
			case "noflush":
				raw.noFlush = true
			case "noopen":
				raw.noOpen = true
			case "noopendir":
				mo.ExtraCapabilities |= fuse.CAP_NO_OPENDIR_SUPPORT
				raw.noOpendir = true
			case "noflushro":
				raw.noFlushRO = true
			case "cachedir":
				raw.cacheDir = true
			case "rdpauto":
				mo.ExtraCapabilities |= fuse.CAP_READDIRPLUS_AUTO
			case "nordp":
				mo.DisableReadDirPlus = true
			case "wb":
				mo.ExtraCapabilities |= fuse.CAP_WRITEBACK_CACHE
			case "noperm":
				mo.Options = slices.DeleteFunc(mo.Options, func(o string) bool { return o == "default_permissions" })
			case "noacl":
				mo.EnableAcl = false
			default:
				return fmt.Errorf("unknown lever %q", l)
			}
		}
	}
	// lsmfs sets its mount's readahead after mounting (mount.DefaultReadahead).
	after := func() error { return setReadahead(mnt, mount.DefaultReadahead>>10) }
	return serveRawAfter(raw, mnt, sock, mo, ready, after)
}

// setReadahead sets the readahead of the FUSE mount on mnt (its bdi) to kb.
func setReadahead(mnt string, kb int) error {
	var st syscall.Stat_t
	if err := syscall.Stat(mnt, &st); err != nil {
		return err
	}
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	return os.WriteFile(p, []byte(fmt.Sprint(kb)), 0)
}

// serveLsmfsProfiled is lsmfs's `mount --foreground` (cmd/lsmfs serve) with
// the default options, plus a loopback HTTP server with net/http/pprof and
// two endpoints that bracket a workload:
//
//	POST /prof/start?dir=D&name=N   start a CPU profile into D/N.cpu.pprof and
//	                                write the allocations so far to D/N.allocs0.pprof
//	POST /prof/stop                 stop it and write D/N.allocs1.pprof
//
// (allocations of the workload: go tool pprof -base N.allocs0.pprof N.allocs1.pprof).
func serveLsmfsProfiled(dataDir, mnt string, ready *os.File) error {
	cfg, err := mount.ParseOptions()
	if err != nil {
		return err
	}
	if err := cfg.Abs(); err != nil {
		return err
	}
	cfg.Format = true // as lsmfs mount does
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	m, err := mount.Mount(ctx, dataDir, mnt, cfg, nil)
	if err != nil {
		return err
	}
	var prof struct {
		sync.Mutex
		cpu  *os.File
		path string
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("POST /prof/start", func(w http.ResponseWriter, r *http.Request) {
		prof.Lock()
		defer prof.Unlock()
		if prof.cpu != nil {
			http.Error(w, "already profiling", http.StatusConflict)
			return
		}
		p := filepath.Join(r.URL.Query().Get("dir"), r.URL.Query().Get("name"))
		if err := writeProfile("allocs", p+".allocs0.pprof"); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		f, err := os.Create(p + ".cpu.pprof")
		if err == nil {
			err = rpprof.StartCPUProfile(f)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		prof.cpu, prof.path = f, p
	})
	mux.HandleFunc("POST /prof/stop", func(w http.ResponseWriter, r *http.Request) {
		prof.Lock()
		defer prof.Unlock()
		if prof.cpu == nil {
			http.Error(w, "not profiling", http.StatusConflict)
			return
		}
		rpprof.StopCPUProfile()
		prof.cpu.Close()
		prof.cpu = nil
		if err := writeProfile("allocs", prof.path+".allocs1.pprof"); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	go http.Serve(ln, mux)
	fmt.Fprintf(ready, "ok %s\n", ln.Addr())
	ready.Close()
	return m.Wait()
}

func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rpprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
