package tests

// From a security review of the daemon's data directory and attribute
// caching; each failed on the code before its fix.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// revsecBase makes a root-owned directory 0755 under /tmp that other users
// can traverse (t.TempDir() is 0700, so nobody could not reach anything in it).
func revsecBase(t *testing.T) string {
	t.Helper()
	base, err := os.MkdirTemp("/tmp", "lsmfs-revsec-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	return base
}

// TestDataDirPrivate: lsmfs mkfs, and the first mount that formats, make an
// empty data directory made by hand (mode 0777: an admin's umask 0, a
// provisioning tool) private; they kept its mode, so other users could add
// or replace the files a root daemon writes. A filesystem whose directory
// was opened to others later is refused by mount and fsck.
func TestDataDirPrivate(t *testing.T) {
	requireMount(t)
	base := revsecBase(t)
	for _, cmd := range []string{"mkfs", "mount"} {
		t.Run(cmd, func(t *testing.T) {
			data := filepath.Join(base, cmd+"-data")
			if err := os.Mkdir(data, 0o777); err != nil {
				t.Fatal(err)
			}
			os.Chmod(data, 0o777)
			mnt := filepath.Join(base, "mnt")
			os.Mkdir(mnt, 0o755)
			unmount := func() {
				pid := findDaemon(mnt)
				exec.Command("fusermount3", "-u", mnt).Run()
				if pid != 0 {
					waitExit(pid, exitTimeout)
				}
			}
			if cmd == "mkfs" {
				if _, err := lsmfs("mkfs", data); err != nil {
					t.Fatal(err)
				}
			} else {
				if _, err := lsmfs("mount", "-o", "log="+filepath.Join(base, "log"), data, mnt); err != nil {
					t.Fatal(err)
				}
				unmount()
			}
			fi, err := os.Stat(data)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o700 {
				t.Errorf("lsmfs %s of an empty %v directory left it %v; want 0700", cmd, os.FileMode(0o777), fi.Mode().Perm())
			}
			os.Chmod(data, 0o777)
			for _, args := range [][]string{{"mount", data, mnt}, {"fsck", data}} {
				out, err := lsmfs(args...)
				if err == nil || !strings.Contains(out+err.Error(), "other users may write to it") {
					t.Errorf("lsmfs %s with a 0777 data directory: %v %s; want a refusal naming the mode", args[0], err, out)
				}
				if args[0] == "mount" && err == nil {
					unmount()
				}
			}
		})
	}
}

// TestDataDirLinksNotFollowed: the daemon followed symbolic links in its data
// directory: new tables were created with open(O_CREAT|O_TRUNC) through a
// NNNNNN.sst link, truncating and overwriting any file on the system, and
// stderr.log was opened O_CREAT through a link, creating a root-owned file
// anywhere (/etc/nologin, ...). A private data directory keeps other users
// from planting them (TestDataDirPrivate); whoever plants one, the engine's
// opens and stderr.log's now refuse to follow it.
func TestDataDirLinksNotFollowed(t *testing.T) {
	requireMount(t)
	base := revsecBase(t)
	secret := filepath.Join(base, "secret")
	if err := os.Mkdir(secret, 0o700); err != nil { // root only
		t.Fatal(err)
	}
	victim := filepath.Join(secret, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	created := filepath.Join(secret, "created-by-root")

	data, mnt := filepath.Join(base, "data"), filepath.Join(base, "mnt")
	os.Mkdir(mnt, 0o755)
	if _, err := lsmfs("mkfs", data); err != nil {
		t.Fatal(err)
	}
	// Before the mount: stderr.log -> a path of the planter's choice.
	if err := os.Symlink(created, filepath.Join(data, "stderr.log")); err != nil {
		t.Fatal(err)
	}
	// No log=: the daemon logs to syslog and keeps its stderr in DATADIR.
	if _, err := lsmfs("mount", data, mnt); err != nil {
		t.Fatal(err)
	}
	pid := findDaemon(mnt)
	t.Cleanup(func() {
		exec.Command("fusermount3", "-u", mnt).Run()
		if pid != 0 {
			waitExit(pid, exitTimeout)
		}
	})
	// After the mount: every table name the engine may use next.
	sh(t, data, `for i in $(seq 1 400); do f=$(printf %06d.sst $i); [ -e $f ] || ln -s `+victim+` $f 2>/dev/null || true; done`)
	// Root uses the filesystem as usual: a write, then lsmfs compact (a
	// flush writes a new table).
	sh(t, mnt, "for i in $(seq 50); do echo hello$i > f$i; done; sync")
	if out, err := lsmfs("compact", mnt); err != nil {
		t.Logf("compact: %v %s", err, out)
	}
	time.Sleep(200 * time.Millisecond)
	exec.Command("fusermount3", "-u", mnt).Run()
	if pid != 0 {
		waitExit(pid, exitTimeout)
		pid = 0
	}

	if _, err := os.Lstat(created); err == nil {
		t.Errorf("the daemon created %s through a DATADIR/stderr.log symlink", created)
	}
	b, _ := os.ReadFile(victim)
	if string(b) != "precious\n" {
		t.Errorf("the daemon overwrote %s through a DATADIR/NNNNNN.sst symlink: now %d bytes, starting %q",
			victim, len(b), strings.ToValidUTF8(string(b[:min(len(b), 16)]), "?"))
	}
}

// TestKillSuidNotCachedAfterWrite: an unprivileged non-owner's write to a
// writable setuid/setgid file. The kernel first sends an empty SETATTR (its
// remove-privileges step); lsmfs answered it with the unchanged mode and a
// 3600 s attribute timeout (it cleared the bits there for the owner only),
// then cleared them on the WRITE (KILL_SUIDGID), which does not refresh
// the mode in the kernel's cache: stat(2) kept showing 6777 (ext4 and tmpfs
// show 0777 at once). exec(2) re-fetches attributes, so this was stale
// metadata, not a setuid execution.
func TestKillSuidNotCachedAfterWrite(t *testing.T) {
	f := newFS(t, fsOptions{mountOpts: "allow_other"})
	openUp(t, f.mnt)
	// As in a shell: root creates and chmods, nobody appends, root stats
	// (cwd in the mount, relative names).
	out := sh(t, f.mnt, `echo x > w; chmod 6777 w
		setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "echo y >> $PWD/w"
		stat -c %a w`)
	if got := strings.TrimSpace(out); got != "777" {
		t.Errorf("after a write by nobody, stat says mode %s; want 777 (ext4/tmpfs clear setuid and setgid at once)", got)
	}
	// The same through a truncating open (OPEN_KILL_SUIDGID: the daemon
	// clears the bits and must tell the kernel), with and without a write
	// after it; stat first, so the kernel holds the mode.
	for _, cmd := range []string{`echo y > $PWD/t`, `: > $PWD/t`} {
		out := sh(t, f.mnt, `echo x > t; chmod 6777 t; stat -c %a t >/dev/null
			setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "`+cmd+`"
			stat -c %a t`)
		if got := strings.TrimSpace(out); got != "777" {
			t.Errorf("after %q by nobody, stat says mode %s; want 777", cmd, got)
		}
	}
}
