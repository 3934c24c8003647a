package tests

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSecurity: the data directory is private to its owner; the kernel's
// permission checks (default_permissions) hold for an unprivileged user
// (a real uid, through setpriv and the syscall helper); trusted.* xattrs
// need CAP_SYS_ADMIN; names longer than 255 bytes are refused; and other
// users cannot enter the mount at all unless allow_other was asked for.
func TestSecurity(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("skipped: setpriv (util-linux) not found; it runs commands as another uid")
	}

	t.Run("private-data-directory", func(t *testing.T) {
		f := newFS(t, fsOptions{})
		sh(t, f.mnt, "mkdir -p a/b; for i in $(seq 20); do head -c 20000 /dev/urandom > a/b/f$i; done; sync")
		// Mounted: the control socket is there too.
		checkPrivate(t, f.dataDir)
		f.unmount()
		checkPrivate(t, f.dataDir)
		f.mount()
	})

	t.Run("default-permissions", func(t *testing.T) {
		f := newFS(t, fsOptions{mountOpts: "allow_other"})
		openUp(t, f.mnt)
		secret, public, closed := f.path("secret"), f.path("public"), f.path("closed")
		if err := os.WriteFile(secret, []byte("root only"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(public, []byte("anyone"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(closed, 0o755); err != nil { // no w for others
			t.Fatal(err)
		}
		open := f.path("open")
		if err := os.Mkdir(open, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(open, 0o777); err != nil { // past the umask
			t.Fatal(err)
		}
		h := startHelper(t, &syscall.Credential{Uid: nobody, Gid: nobody})
		h.do("read "+public, "ok") // the mount is reachable: allow_other works
		h.do("read "+secret, "EACCES")
		h.do("write "+secret, "EACCES")
		h.do("write "+public, "EACCES")
		// Creating in a directory without w, as a real unprivileged uid.
		asNobody(t, "touch "+closed+"/x", "Permission denied")
		asNobody(t, "mkdir "+closed+"/d", "Permission denied")
		asNobody(t, "mv "+public+" "+closed+"/moved", "Permission denied")
		asNobody(t, "rm -f "+secret, "Permission denied") // root's directory
		asNobody(t, "touch "+open+"/mine", "")            // the positive control
		if fi, err := os.Stat(filepath.Join(open, "mine")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != nobody {
			t.Fatalf("a file nobody created: %v", err)
		}
		// trusted.* needs CAP_SYS_ADMIN: root may, nobody may not, even on
		// its own file.
		if err := unix.Setxattr(public, "trusted.t", []byte("v"), 0); err != nil {
			t.Fatalf("root sets trusted.t: %v", err)
		}
		mine := filepath.Join(open, "mine")
		h.do("setxattr "+mine+" trusted.t 76", "EPERM")
		h.do("setxattr "+mine+" user.u 76", "ok") // user.* on its own file is fine
		buf := make([]byte, 16)
		if n, err := unix.Getxattr(public, "trusted.t", buf); err != nil || string(buf[:n]) != "v" {
			t.Fatalf("root reads trusted.t: %q, %v", buf[:n], err)
		}
		asNobody(t, "cat "+secret, "Permission denied")
		// The owner's own 0600 file is readable to it.
		asNobody(t, "sh -c 'echo hi > "+open+"/own; chmod 600 "+open+"/own; cat "+open+"/own'", "")
	})

	// With CAP_HANDLE_KILLPRIV_V2 the kernel leaves these to lsmfs: a write
	// or truncation by an unprivileged process clears setuid, and setgid
	// when group execute is set; any write removes file capabilities, a
	// privileged one keeps the mode bits.
	t.Run("kill-privileges", func(t *testing.T) {
		f := newFS(t, fsOptions{mountOpts: "allow_other"})
		openUp(t, f.mnt)
		// A valid VFS_CAP_REVISION_2 value: magic, then permitted and
		// inheritable words (CAP_NET_RAW permitted).
		capValue := binary.LittleEndian.AppendUint32(nil, 0x02000000)
		capValue = binary.LittleEndian.AppendUint32(capValue, 1<<13)
		capValue = append(capValue, make([]byte, 12)...)
		mk := func(name string, mode uint32) string {
			p := f.path(name)
			if err := os.WriteFile(p, []byte("data"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := unix.Setxattr(p, "security.capability", capValue, 0); err != nil {
				t.Fatalf("set security.capability: %v", err)
			}
			if err := unix.Chmod(p, mode); err != nil { // after setxattr: it may clear bits
				t.Fatal(err)
			}
			return p
		}
		check := func(what, p string, wantMode uint32) {
			t.Helper()
			var st unix.Stat_t
			if err := unix.Stat(p, &st); err != nil {
				t.Fatal(err)
			}
			if got := st.Mode & 0o7777; got != wantMode {
				t.Errorf("%s: mode %04o, want %04o", what, got, wantMode)
			}
			if _, err := unix.Getxattr(p, "security.capability", make([]byte, 64)); !errors.Is(err, unix.ENODATA) {
				t.Errorf("%s: security.capability still there (%v)", what, err)
			}
		}
		p := mk("suid-sgid", 0o6777)
		asNobody(t, "printf x >> "+p, "")
		check("write by nobody", p, 0o0777)
		p = mk("sgid-no-gx", 0o2767) // setgid without group execute: a locking mark, kept
		asNobody(t, "printf x >> "+p, "")
		check("write by nobody, no group execute", p, 0o2767)
		p = mk("truncated", 0o6777)
		asNobody(t, "truncate -s 1 "+p, "")
		check("truncate by nobody", p, 0o0777)
		p = mk("root-writes", 0o6777)
		fd, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fd.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		fd.Close()
		check("write by root", p, 0o6777)
	})

	t.Run("name-too-long", func(t *testing.T) {
		f := newFS(t, fsOptions{})
		ok := strings.Repeat("n", 255)
		long := strings.Repeat("n", 256)
		if err := os.WriteFile(f.path(ok), nil, 0o644); err != nil {
			t.Fatalf("a 255-byte name: %v", err)
		}
		for what, err := range map[string]error{
			"create":  os.WriteFile(f.path(long), nil, 0o644),
			"mkdir":   os.Mkdir(f.path(long), 0o755),
			"symlink": os.Symlink("target", f.path(long)),
			"link":    os.Link(f.path(ok), f.path(long)),
			"rename":  os.Rename(f.path(ok), f.path(long)),
			"mknod":   unix.Mknod(f.path(long), unix.S_IFIFO|0o644, 0),
		} {
			if !errors.Is(err, syscall.ENAMETOOLONG) {
				t.Errorf("%s with a 256-byte name: %v, want ENAMETOOLONG", what, err)
			}
		}
		if _, err := os.Stat(f.path(long)); !errors.Is(err, syscall.ENAMETOOLONG) && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("stat of a 256-byte name: %v", err)
		}
	})

	t.Run("allow-other-off-by-default", func(t *testing.T) {
		f := newFS(t, fsOptions{})
		openUp(t, f.mnt)
		if opts := superOptions(f.mnt); strings.Contains(opts, "allow_other") {
			t.Fatalf("mounted without allow_other, but the mount says %q", opts)
		}
		if err := os.WriteFile(f.path("public"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		h := startHelper(t, &syscall.Credential{Uid: nobody, Gid: nobody})
		h.do("read "+f.path("public"), "EACCES")
		asNobody(t, "ls "+f.mnt, "Permission denied")
		f.unmount()
		if err := f.tryMount("allow_other"); err != nil {
			t.Fatal(err)
		}
		if opts := superOptions(f.mnt); !strings.Contains(opts, "allow_other") {
			t.Fatalf("mounted with allow_other, but the mount says %q", opts)
		}
		h.do("read "+f.path("public"), "ok")
	})
}

// checkPrivate checks that everything under dir is its owner's alone:
// files 0600 (or less), directories 0700 (or less), dir itself included.
func checkPrivate(t *testing.T, dir string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		n++
		perm := fi.Mode().Perm()
		if perm&0o077 != 0 {
			t.Errorf("%s has mode %v: others may reach it", p, fi.Mode())
		}
		if fi.IsDir() && perm != 0o700 || !fi.IsDir() && perm&^0o600 != 0 {
			t.Errorf("%s has mode %v, want 0700 for directories, 0600 for files", p, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d entries under %s, all private", n, dir)
}

// asNobody runs a shell command as uid/gid nobody (setpriv, no
// supplementary groups) and checks that it fails with wantErr in its output,
// or succeeds if wantErr is "".
func asNobody(t *testing.T, cmd, wantErr string) {
	t.Helper()
	out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", cmd).CombinedOutput()
	switch {
	case wantErr == "" && err != nil:
		t.Errorf("as nobody, %q: %v: %s", cmd, err, out)
	case wantErr != "" && err == nil:
		t.Errorf("as nobody, %q succeeded; want %q", cmd, wantErr)
	case wantErr != "" && !strings.Contains(string(out), wantErr):
		t.Errorf("as nobody, %q: %s; want %q", cmd, out, wantErr)
	}
}

// superOptions returns the super options of the mount at mnt (from
// /proc/self/mountinfo: the field after the source).
func superOptions(mnt string) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	opts := ""
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 10 || unescapeMountinfo(fields[4]) != mnt {
			continue
		}
		for i, fld := range fields {
			if fld == "-" && i+3 < len(fields) {
				opts = fields[i+3]
			}
		}
	}
	return opts
}
