// Package mount turns a data directory into a mounted lsmfs: it parses the
// -o option list into one typed Config (the only place options are parsed),
// formats a data directory (Format), opens the engine and the filesystem,
// mounts them through FUSE, serves, and on unmount or cancellation flushes and
// closes everything in order.
//
// # Model
//
//	-o k=v,...  --ParseOptions-->  Config  --+--> lsm.Options   (engine, journal, cache)
//	                                          +--> fs.Options    (FUSE operations)
//	                                          +--> fuse.MountOptions (kernel mount)
//
// Every option is described once, in the table behind Options(); the parser,
// Config.String and the help text of `lsmfs mount` all come from that table,
// so the documentation cannot drift from what is accepted. Options are of three
// kinds: lsmfs options (journal=, cache_size=, ...), FUSE/kernel options
// (allow_other, ro, nosuid, ...), and options that mount(8), fstab and systemd
// pass along which only matter to them (noauto, nofail, _netdev, x-*, ...):
// those are accepted and ignored. Unknown or malformed options are refused
// with an error naming the option.
//
// default_permissions is always on: the kernel checks modes and ownership, and
// lsmfs does no permission checks of its own, so there is no option to turn it
// off (nodefault_permissions is refused).
//
// Mount(ctx, dataDir, mountpoint, cfg, logger) opens the engine (lsm.Open),
// the filesystem (fs.New) and the FUSE server, and returns once the kernel
// serves the mount. The returned *Mounted is torn down by an external
// `umount`/`fusermount3 -u`, by Mounted.Unmount, or by cancelling ctx; in every
// case Mounted.Wait returns after fs.Close (dirty buffers flushed) and
// lsm.DB.Close (journal forced). Nothing in this package calls os.Exit or
// installs signal handlers: cmd/lsmfs maps signals to ctx cancellation.
//
// # Operating a mount
//
// Mount wraps the filesystem's fuse.RawFileSystem in a thin counting layer
// (opstats.go: per-operation counts, errors and latency histograms) and,
// once the kernel serves the mount, listens on the control socket
// DATADIR/lsmfs.sock (control.go: HTTP over a unix socket, mode 0600, peers
// checked with SO_PEERCRED) for `lsmfs stats` (Stats, stats.go), `lsmfs
// compact` (Compact, compact.go) and the Prometheus exposition, which
// metrics=HOST:PORT also serves on TCP (metrics.go). Control (the client) and
// Resolve (mount point or data directory to data directory) are what
// cmd/lsmfs uses. At unmount the socket goes first, then the filesystem and
// the engine are closed.
//
// # Concurrency
//
// ParseOptions, Format and Mount are safe to call concurrently on different
// directories. A Mounted's methods are safe for concurrent use.
package mount
