package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"
	"golang.org/x/sys/unix"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/lsm"
	"github.com/lsmfs/lsmfs/mount"
)

// The operator's side of lsmfs: stats, metrics, compact, umount, fsck exit
// codes, and mount(8) failures and fstab options.

// lsmfsOut runs the binary under test and returns stdout, stderr and the
// exit code (-1 if it could not run).
func lsmfsOut(args ...string) (stdout, stderr string, code int) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, lsmfsBin, args...)
	var ob, eb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &ob, &eb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return ob.String(), eb.String(), 0
	case errors.As(err, &ee):
		return ob.String(), eb.String(), ee.ExitCode()
	}
	return ob.String(), err.Error(), -1
}

// statsJSON runs lsmfs stats --json on path and decodes it.
func statsJSON(t *testing.T, path string) mount.Stats {
	t.Helper()
	out, stderr, code := lsmfsOut("stats", "--json", path)
	if code != 0 {
		t.Fatalf("lsmfs stats --json %s: exit %d: %s", path, code, stderr)
	}
	var s mount.Stats
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("lsmfs stats --json %s: %v\n%s", path, err, out)
	}
	return s
}

func opCount(s mount.Stats, op string) uint64 {
	for _, o := range s.Ops {
		if o.Op == op {
			return o.Count
		}
	}
	return 0
}

// TestStats reads live figures from a mounted daemon, as JSON, as text and
// as a Prometheus exposition, and checks that they move with a workload.
func TestStats(t *testing.T) {
	f := newFS(t, fsOptions{mountOpts: "metrics=127.0.0.1:0,memtable_policy=eager"})

	before := statsJSON(t, f.mnt)
	if before.Source != "daemon" || before.PID != f.pid || before.Mountpoint != f.mnt || before.DataDir != f.dataDir {
		t.Errorf("stats: source %q pid %d mountpoint %q datadir %q; want daemon, %d, %s, %s",
			before.Source, before.PID, before.Mountpoint, before.DataDir, f.pid, f.mnt, f.dataDir)
	}
	if before.Memtable.Policy != "eager" || before.EngineOptions["memtable_policy"] != "eager" ||
		!strings.Contains(before.MountOptions, "memtable_policy=eager") {
		t.Errorf("stats do not show memtable_policy=eager: %q, %q, %q", before.Memtable.Policy, before.EngineOptions["memtable_policy"], before.MountOptions)
	}
	if !strings.Contains(strings.Join(before.FUSEOptions, ","), "default_permissions") {
		t.Errorf("FUSE options %q lack default_permissions", before.FUSEOptions)
	}
	if before.MetricsAddress == "" {
		t.Fatalf("no metrics address in the stats")
	}
	sock := filepath.Join(f.dataDir, mount.ControlSocketName)
	if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("control socket %s: %v, %v; want a socket with mode 0600", sock, fi.Mode(), err)
	}

	// A workload: small files, fsyncs, reads, a directory listing.
	shTimeout(t, f.mnt, `mkdir d; for i in $(seq 100); do echo "file $i" > d/f$i; done
		dd if=/dev/urandom of=big bs=64k count=64 conv=fsync status=none
		cat d/* > /dev/null; ls -l d > /dev/null; sync`, 2*time.Minute)
	after := statsJSON(t, f.dataDir) // by data directory this time
	if after.PID != f.pid {
		t.Errorf("stats by data directory: pid %d, want %d", after.PID, f.pid)
	}
	for _, op := range []string{"create", "write", "lookup", "mkdir", "fsync"} {
		if opCount(after, op) <= opCount(before, op) {
			t.Errorf("%s count did not grow: %d -> %d", op, opCount(before, op), opCount(after, op))
		}
	}
	for _, o := range after.Ops {
		if o.Count > 0 && (o.P50 > o.P99 || o.P99 > o.Max || o.Max <= 0) {
			t.Errorf("%s latencies out of order: %+v", o.Op, o)
		}
	}
	if after.Journal.Records <= before.Journal.Records || after.Journal.Forces <= before.Journal.Forces ||
		after.Journal.RecordsPerForce <= 0 || after.Journal.CompressionRatio <= 0 {
		t.Errorf("journal figures did not move: %+v -> %+v", before.Journal, after.Journal)
	}
	if after.Compaction.UserBytes <= before.Compaction.UserBytes {
		t.Errorf("user bytes did not grow: %d -> %d", before.Compaction.UserBytes, after.Compaction.UserBytes)
	}
	t.Logf("after the workload: %d ops types, journal %+v", len(after.Ops), after.Journal)

	out, stderr, code := lsmfsOut("stats", f.mnt)
	if code != 0 {
		t.Fatalf("lsmfs stats: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"operations", "create", "p99", "records/force", "compression ratio", "policy eager",
		"write amplification", "live ratio", "hit ratio", "memtable_policy=eager", "default_permissions"} {
		if !strings.Contains(out, want) {
			t.Errorf("lsmfs stats lacks %q:\n%s", want, out)
		}
	}

	// The Prometheus endpoint: a valid exposition with every lsmfs metric.
	// A daemon that stopped answering fails the test here, not at the
	// suite's -timeout.
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get("http://" + after.MetricsAddress + "/metrics")
	must(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	must(t, err)
	parser := expfmt.NewTextParser(pmodel.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("metrics do not parse: %v\n%.2000s", err, body)
	}
	for _, name := range mount.MetricNames() {
		if _, ok := families[name]; !ok {
			t.Errorf("metric %s missing", name)
		}
	}
	h := families["lsmfs_fuse_operation_duration_seconds"]
	if h == nil || h.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("lsmfs_fuse_operation_duration_seconds: %v, want a histogram", h)
	}
	var creates uint64
	for _, m := range h.Metric {
		for _, l := range m.Label {
			if l.GetName() == "op" && l.GetValue() == "create" {
				creates = m.GetHistogram().GetSampleCount()
			}
		}
	}
	if creates < 100 {
		t.Errorf("histogram count of create = %d, want >= 100", creates)
	}
	if rec := families["lsmfs_journal_records_total"]; rec == nil || rec.GetType() != dto.MetricType_COUNTER ||
		rec.Metric[0].GetCounter().GetValue() < float64(after.Journal.Records) {
		t.Errorf("lsmfs_journal_records_total: %v, want a counter >= %d", rec, after.Journal.Records)
	}
	if _, ok := families["go_goroutines"]; !ok {
		t.Errorf("no Go runtime metrics")
	}

	f.unmount()
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("control socket left after unmount: %v", err)
	}
	// Unmounted: the engine opened read-only. The clean unmount flushed
	// the memtables into tables and checkpointed the journal (nothing left
	// to replay).
	off := statsJSON(t, f.dataDir)
	if off.Source != "datadir" || off.PID != 0 || len(off.Ops) != 0 {
		t.Errorf("unmounted stats: source %q pid %d ops %d; want datadir, 0, 0", off.Source, off.PID, len(off.Ops))
	}
	if len(off.Levels) == 0 || off.Journal.LiveBytes != 0 {
		t.Errorf("after a clean unmount: levels %+v, journal %d live bytes; want tables and a checkpointed journal",
			off.Levels, off.Journal.LiveBytes)
	}
	if _, stderr, code := lsmfsOut("stats", "--watch", f.dataDir); code == 0 || !strings.Contains(stderr, "not mounted") {
		t.Errorf("lsmfs stats --watch of an unmounted data directory: exit %d, %q; want a failure saying it is not mounted", code, stderr)
	}
}

// TestStatsWatch reads two refreshes of --watch --json and stops it; the
// mount has -o debug, whose log traces the FUSE operations, each line with
// the mount point.
func TestStatsWatch(t *testing.T) {
	f := newFS(t, fsOptions{mountOpts: "debug"})
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, lsmfsBin, "stats", "--watch", "--json", "--interval", "100ms", f.mnt)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	var times []time.Time
	for len(times) < 2 && sc.Scan() {
		var s mount.Stats
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("--watch --json line: %v: %s", err, sc.Text())
		}
		times = append(times, s.Time)
		must(t, os.WriteFile(f.path(fmt.Sprintf("w%d", len(times))), []byte("x"), 0o644))
	}
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Errorf("lsmfs stats --watch after SIGINT: %v", err)
	}
	if len(times) != 2 || !times[1].After(times[0]) {
		t.Errorf("--watch printed %d refreshes at %v; want 2, in order", len(times), times)
	}
	log, _ := os.ReadFile(f.logFile)
	var traced bool
	for _, line := range strings.Split(string(log), "\n") {
		if line != "" && !strings.Contains(line, "mountpoint="+f.mnt) {
			t.Errorf("log line without the mount point: %s", line)
		}
		traced = traced || strings.Contains(line, "CREATE") && strings.Contains(line, "level=DEBUG")
	}
	if !traced {
		t.Errorf("-o debug: no trace of the CREATE operations in the log:%s", f.logTail())
	}
}

// duBytes is du -s of dir in bytes.
func duBytes(t *testing.T, dir string) int64 {
	t.Helper()
	out, err := runTimeout("du", "-s", "-B1", dir)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.Fields(out)[0], 10, 64)
	must(t, err)
	return n
}

// TestCompact deletes data and shows that lsmfs compact gives its space
// back, on a mounted filesystem (through the daemon) and then on the
// unmounted data directory.
func TestCompact(t *testing.T) {
	f := newFS(t, fsOptions{})
	// 96 MiB of file data: past the 64 MiB value-log segment, so a sealed
	// segment holds deleted data the cleaner can remove.
	shTimeout(t, f.mnt, `for i in 1 2 3; do head -c 33554432 /dev/urandom > f$i; done; sync`, 3*time.Minute)
	full := duBytes(t, f.dataDir)
	must(t, os.Remove(f.path("f1")))
	must(t, os.Remove(f.path("f2")))
	must(t, os.Remove(f.path("f3")))
	deleted := duBytes(t, f.dataDir)

	out, stderr, code := lsmfsOut("compact", f.mnt)
	if code != 0 {
		t.Fatalf("lsmfs compact %s: exit %d: %s%s", f.mnt, code, stderr, f.logTail())
	}
	if stderr != "" {
		t.Errorf("lsmfs compact wrote to a stderr that is not a terminal: %q", stderr)
	}
	compacted := duBytes(t, f.dataDir)
	t.Logf("du of DATADIR: %d MiB written, %d MiB after deletes, %d MiB after compact; %s",
		full>>20, deleted>>20, compacted>>20, strings.TrimSpace(out))
	if deleted-compacted < 48<<20 {
		t.Errorf("compact gave back %d MiB of the 96 MiB deleted (du %d -> %d MiB); want at least 48 MiB",
			(deleted-compacted)>>20, deleted>>20, compacted>>20)
	}
	if !strings.Contains(out, "compacted "+f.dataDir) {
		t.Errorf("lsmfs compact printed %q", out)
	}
	s := statsJSON(t, f.mnt)
	if s.ValueLog.Cleaned == 0 || s.Compaction.Compactions == 0 {
		t.Errorf("after compact: value log %+v, compaction %+v; want cleaned segments and compactions", s.ValueLog, s.Compaction)
	}
	must(t, os.WriteFile(f.path("after"), []byte("still usable"), 0o644))

	f.unmount()
	out, stderr, code = lsmfsOut("compact", f.dataDir)
	if code != 0 || !strings.Contains(out, "compacted") {
		t.Errorf("lsmfs compact of the unmounted data directory: exit %d: %s%s", code, out, stderr)
	}

	// Read-only: refused with the reason.
	f.mountOpts = "ro"
	f.mount()
	if _, stderr, code := lsmfsOut("compact", f.mnt); code == 0 || !strings.Contains(stderr, "read-only") {
		t.Errorf("lsmfs compact of a read-only mount: exit %d, %q; want a failure saying read-only", code, stderr)
	}
	if b, err := os.ReadFile(f.path("after")); err != nil || string(b) != "still usable" {
		t.Errorf("after compactions: %q, %v", b, err)
	}
}

// TestFsckExitCodes checks fsck's e2fsck-like exit codes: clean, mounted,
// locked by a closing daemon, damaged, usage.
func TestFsckExitCodes(t *testing.T) {
	f := newFS(t, fsOptions{})
	must(t, os.WriteFile(f.path("victim"), []byte("data"), 0o644))
	must(t, os.Mkdir(f.path("dir"), 0o755))
	var st syscall.Stat_t
	must(t, syscall.Stat(f.path("victim"), &st))

	if _, stderr, code := lsmfsOut("fsck", f.dataDir); code != 8 || !strings.Contains(stderr, "mounted on "+f.mnt) {
		t.Errorf("fsck of a mounted filesystem: exit %d, %q; want 8, naming the mount point", code, stderr)
	}
	if _, stderr, code := lsmfsOut("fsck", f.mnt); code != 8 || !strings.Contains(stderr, "mounted") {
		t.Errorf("fsck of a mount point: exit %d, %q; want 8", code, stderr)
	}
	if _, _, code := lsmfsOut("fsck", "a", "b"); code != 16 {
		t.Errorf("fsck with two arguments: exit %d, want 16", code)
	}

	// umount(8) returns before the daemon has closed the engine: fsck
	// right after it waits for the lock instead of failing.
	if out, err := exec.Command("umount", f.mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v: %s", err, out)
	}
	out, stderr, code := lsmfsOut("fsck", f.dataDir)
	if code != 0 || !strings.Contains(out, "orphans=0") {
		t.Errorf("fsck right after umount: exit %d: %s%s", code, out, stderr)
	}
	if err := waitExit(f.pid, exitTimeout); err != nil {
		t.Fatal(err)
	}
	f.pid = 0

	// A lock held by someone else: fsck says it waits, and goes on as soon
	// as the lock is free; with --wait 0 it fails at once.
	lock, err := os.OpenFile(filepath.Join(f.dataDir, "LOCK"), os.O_RDWR, 0)
	must(t, err)
	defer lock.Close()
	must(t, unix.Flock(int(lock.Fd()), unix.LOCK_EX))
	if _, stderr, code := lsmfsOut("fsck", "--wait", "0s", f.dataDir); code != 8 || !strings.Contains(stderr, "in use") {
		t.Errorf("fsck --wait 0 of a locked data directory: exit %d, %q; want 8, in use", code, stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, lsmfsBin, "fsck", "--wait", "5m", f.dataDir)
	var fsckOut bytes.Buffer
	cmd.Stdout = &fsckOut
	errPipe, err := cmd.StderrPipe()
	must(t, err)
	must(t, cmd.Start())
	line, err := bufio.NewReader(errPipe).ReadString('\n')
	if err != nil || !strings.Contains(line, "waiting") {
		t.Errorf("fsck of a locked data directory said %q (%v); want a line saying it waits", line, err)
	}
	must(t, unix.Flock(int(lock.Fd()), unix.LOCK_UN))
	go io.Copy(io.Discard, errPipe)
	if err := cmd.Wait(); err != nil || !strings.Contains(fsckOut.String(), "orphans=0") {
		t.Errorf("fsck after the lock was released: %v: %s", err, fsckOut.String())
	}

	// Damage: remove the inode of a file that a directory entry names.
	db, err := lsm.Open(f.dataDir, nil)
	must(t, err)
	it := db.NewIter(nil)
	var victim []byte
	for ok := it.First(); ok; ok = it.Next() {
		if k, err := fs.DecodeKey(it.Key()); err == nil && k.Family == 'I' && k.Ino == st.Ino {
			victim = append([]byte(nil), it.Key()...)
		}
	}
	must(t, it.Close())
	if victim == nil {
		db.Close()
		t.Fatalf("no inode key for ino %d", st.Ino)
	}
	b := lsm.NewBatch()
	b.Delete(victim)
	must(t, db.Apply(b, true))
	must(t, db.Close())
	out, stderr, code = lsmfsOut("fsck", f.dataDir)
	if code != 4 || !strings.Contains(out, strconv.FormatUint(st.Ino, 10)) {
		t.Errorf("fsck of a damaged filesystem: exit %d: %s%s; want 4 and a problem naming inode %d", code, out, stderr, st.Ino)
	}
	t.Logf("fsck of the damaged filesystem: %s", strings.TrimSpace(out))
	f.noFsck = true // damaged on purpose
}

// TestUmountWaits: lsmfs umount returns after the daemon has exited, so
// the data directory is free at once.
func TestUmountWaits(t *testing.T) {
	f := newFS(t, fsOptions{})
	for i := range 50 {
		must(t, os.WriteFile(f.path(fmt.Sprintf("f%d", i)), content(int64(i), 100000), 0o644))
	}
	pid := f.pid
	if _, stderr, code := lsmfsOut("umount", f.mnt); code != 0 {
		t.Fatalf("lsmfs umount: exit %d: %s", code, stderr)
	}
	if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) && !isZombie(pid) {
		t.Errorf("lsmfs umount returned while the daemon %d still runs (%v)", pid, err)
	}
	waitExit(pid, exitTimeout) // reap
	f.pid = 0
	if typ := mountType(f.mnt); typ != "" {
		t.Errorf("still mounted after lsmfs umount: %s", typ)
	}
	if _, stderr, code := lsmfsOut("fsck", "--wait", "0s", f.dataDir); code != 0 {
		t.Errorf("fsck --wait 0 right after lsmfs umount: exit %d: %s", code, stderr)
	}
	if log, _ := os.ReadFile(f.logFile); !strings.Contains(string(log), "unmounted and closed") {
		t.Errorf("no clean close in the daemon log:%s", f.logTail())
	}
	if _, stderr, code := lsmfsOut("umount", f.mnt); code == 0 || !strings.Contains(stderr, "not") {
		t.Errorf("lsmfs umount of a directory that is not mounted: exit %d, %q", code, stderr)
	}

	// A busy mount is refused, and --lazy detaches it.
	f.mount()
	fh, err := os.Create(f.path("open"))
	must(t, err)
	t.Cleanup(func() { fh.Close() }) // a Fatal below must not leave the mount busy
	if _, stderr, code := lsmfsOut("umount", f.mnt); code == 0 || !strings.Contains(stderr, "busy") {
		t.Errorf("lsmfs umount of a busy mount: exit %d, %q; want a failure saying busy", code, stderr)
	}
	pid = f.pid
	done := make(chan int, 1)
	go func() {
		_, _, code := lsmfsOut("umount", "--lazy", f.mnt)
		done <- code
	}()
	if err := waitUnmounted(f.mnt, exitTimeout); err != nil {
		t.Fatal(err)
	}
	must(t, fh.Close())
	if code := <-done; code != 0 {
		t.Errorf("lsmfs umount --lazy: exit %d", code)
	}
	waitExit(pid, exitTimeout)
	f.pid = 0
}

// TestMountFailures: mount(8) reports a failing lsmfs mount with a non-zero
// exit and the reason; fstab's noauto keeps mount -a away.
func TestMountFailures(t *testing.T) {
	requireMount(t)
	a := newFS(t, fsOptions{noMount: true})
	b := newFS(t, fsOptions{journal: filepath.Join(t.TempDir(), "other-journal"), noMount: true})
	source := lsmfsBin + "#" + a.dataDir
	taken, err := net.Listen("tcp", "127.0.0.1:0") // a metrics address in use
	must(t, err)
	defer taken.Close()
	for opts, want := range map[string]string{
		"journal=" + b.journal:             "uuid",
		"cache_size=huge":                  `"cache_size=huge"`,
		"metrics=" + taken.Addr().String(): "address already in use",
	} {
		out, err := exec.Command("mount", "-t", "fuse", source, a.mnt, "-o", opts).CombinedOutput()
		if err == nil {
			a.pid = findDaemon(a.mnt)
			a.unmount()
			t.Errorf("mount -o %s succeeded", opts)
			continue
		}
		if !strings.Contains(strings.ToLower(string(out)), strings.ToLower(want)) {
			t.Errorf("mount -o %s: %v: %q; want the reason (%s)", opts, err, out, want)
		}
		if typ := mountType(a.mnt); typ != "" || findDaemon(a.mnt) != 0 {
			t.Errorf("mount -o %s: left a mount (%q) or a daemon", opts, typ)
		}
	}

	// mount(8) never formats: an empty data directory (a data disk that
	// failed to mount under it) or a missing one fails the mount and is left
	// as it was. lsmfs mount formats (README's first command).
	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "missing")} {
		out, err := exec.Command("mount", "-t", "fuse", lsmfsBin+"#"+dir, a.mnt, "-o", "log="+a.logFile).CombinedOutput()
		if err == nil {
			a.pid = findDaemon(a.mnt)
			a.unmount()
			t.Errorf("mount(8) of the unformatted %s succeeded", dir)
		} else if !strings.Contains(string(out), "lsmfs mkfs "+dir) {
			t.Errorf("mount(8) of the unformatted %s: %v: %q; want it to say lsmfs mkfs", dir, err, out)
		}
		if empty, err := mount.IsEmptyDir(dir); err != nil || !empty {
			t.Errorf("mount(8) of the unformatted %s wrote to it (empty %v, %v)", dir, empty, err)
		}
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if out, err := lsmfs("mount", "-o", "log="+a.logFile, empty, a.mnt); err != nil {
		t.Errorf("lsmfs mount of the missing %s: %v: %s", empty, err, out)
	} else {
		a.pid = findDaemon(a.mnt)
		a.unmount()
	}

	// mount -a over an fstab: the noauto line is left alone, the other one
	// is mounted.
	fstab := filepath.Join(t.TempDir(), "fstab")
	must(t, os.WriteFile(fstab, []byte(fmt.Sprintf("%s %s fuse.lsmfs noauto 0 0\n%s %s fuse defaults,log=%s 0 0\n",
		a.dataDir, a.mnt, lsmfsBin+"#"+b.dataDir, b.mnt, b.logFile)), 0o644))
	if out, err := exec.Command("mount", "-a", "-T", fstab).CombinedOutput(); err != nil {
		t.Fatalf("mount -a -T %s: %v: %s", fstab, err, out)
	}
	b.pid = findDaemon(b.mnt)
	if typ := mountType(a.mnt); typ != "" {
		t.Errorf("mount -a mounted the noauto line (%s)", typ)
	}
	if typ := mountType(b.mnt); typ != "fuse.lsmfs" {
		t.Errorf("mount -a did not mount the auto line (%q)", typ)
	}
}

// TestReopenRightAfterUmount: umount(8) returns once the kernel has
// detached the mount, a moment before the daemon notices and closes; its
// control socket may still answer. fsck and mount right after it must take
// that daemon for a closing one and wait for its lock, not report the data
// directory as mounted. Repeated, since the window is short.
func TestReopenRightAfterUmount(t *testing.T) {
	f := newFS(t, fsOptions{})
	must(t, os.WriteFile(f.path("a"), []byte("data"), 0o644))
	const rounds = 15
	for i := 0; i < rounds; i++ {
		if out, err := exec.Command("umount", f.mnt).CombinedOutput(); err != nil {
			t.Fatalf("round %d: umount: %v: %s", i, err, out)
		}
		pid := f.pid
		f.pid = 0
		if i%2 == 0 {
			out, stderr, code := lsmfsOut("fsck", f.dataDir)
			if code != 0 || !strings.Contains(out, "orphans=0") {
				t.Fatalf("round %d: fsck right after umount: exit %d: %s%s", i, code, out, stderr)
			}
			if err := waitExit(pid, exitTimeout); err != nil {
				t.Fatal(err)
			}
			f.mount()
		} else if err := f.tryMount(""); err != nil {
			t.Fatalf("round %d: mount right after umount: %v%s", i, err, f.logTail())
		}
		if b, err := os.ReadFile(f.path("a")); err != nil || string(b) != "data" {
			t.Fatalf("round %d: read back: %q, %v", i, b, err)
		}
	}
}
