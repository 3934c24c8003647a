package tests

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// POSIX ACLs on lsmfs: the same sequence of ACL and mode changes runs on
// the mount and on a host directory (ext4 or tmpfs with ACLs), and the
// modes and ACL xattrs they leave must agree: setting an access ACL sets
// the mode, a minimal ACL is folded into the mode, chmod rewrites the mask,
// default ACLs are inherited (replacing the umask) by files, directories
// and fifos, and setting an ACL as an owner outside the file's group clears
// setgid. Then the kernel's enforcement is checked with a helper process
// running as another user, and everything again after a remount.

const (
	aclAccess  = "system.posix_acl_access"
	aclDefault = "system.posix_acl_default"

	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclGroup    = 0x08
	aclMask     = 0x10
	aclOther    = 0x20
)

// acl encodes entries given as tag, perm, id triples (id -1: none) in the
// kernel's posix_acl_xattr format.
func acl(entries ...int) []byte {
	v := binary.LittleEndian.AppendUint32(nil, 2)
	for i := 0; i+2 < len(entries); i += 3 {
		v = binary.LittleEndian.AppendUint16(v, uint16(entries[i]))
		v = binary.LittleEndian.AppendUint16(v, uint16(entries[i+1]))
		v = binary.LittleEndian.AppendUint32(v, uint32(entries[i+2]))
	}
	return v
}

const nobody = 65534

// aclScenario runs the ACL sequence in dir and returns what it observed,
// one line per step.
func aclScenario(t *testing.T, dir string) []string {
	var log []string
	state := func(rel string) {
		p := filepath.Join(dir, rel)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		log = append(log, fmt.Sprintf("%s mode=%#o access=%s default=%s",
			rel, st.Mode&0o7777, getACL(p, aclAccess), getACL(p, aclDefault)))
	}
	set := func(rel, name string, v []byte) {
		err := unix.Setxattr(filepath.Join(dir, rel), name, v, 0)
		log = append(log, fmt.Sprintf("setxattr %s %s: %s", rel, name, errName(err)))
	}
	chmod := func(rel string, mode uint32) {
		if err := unix.Chmod(filepath.Join(dir, rel), mode); err != nil {
			t.Fatal(err)
		}
	}

	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("data"), 0o640); err != nil {
		t.Fatal(err)
	}
	chmod("f", 0o640)
	set("f", aclAccess, acl(aclUserObj, 6, -1, aclUser, 4, nobody, aclGroupObj, 4, -1, aclMask, 4, -1, aclOther, 0, -1))
	state("f")
	chmod("f", 0o604)
	state("f")
	chmod("f", 0o750)
	state("f")
	set("f", aclDefault, acl(aclUserObj, 7, -1, aclGroupObj, 5, -1, aclOther, 5, -1))
	set("f", aclAccess, acl(aclUserObj, 7, -1, aclGroupObj, 0, -1, aclOther, 4, -1)) // minimal
	state("f")
	set("f", aclAccess, acl(aclUserObj, 7, -1, aclUser, 4, 1, aclGroupObj, 4, -1, aclOther, 4, -1)) // no mask
	state("f")

	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	chmod("d", 0o755)
	set("d", aclDefault, acl(aclUserObj, 7, -1, aclUser, 7, nobody, aclGroupObj, 5, -1,
		aclGroup, 5, 65533, aclMask, 7, -1, aclOther, 0, -1))
	state("d")
	sh(t, dir, "umask 077; echo x > d/file; mkdir d/sub; mkfifo d/fifo; ln -s file d/link; mkdir d/sub/deeper")
	for _, rel := range []string{"d/file", "d/sub", "d/fifo", "d/sub/deeper"} {
		state(rel)
	}
	sh(t, dir, "umask 022; mkdir -m 0700 d/private; echo y > d/plain")
	state("d/private")
	state("d/plain")
	if err := unix.Removexattr(filepath.Join(dir, "d"), aclDefault); err != nil {
		t.Fatal(err)
	}
	sh(t, dir, "umask 027; echo z > d/after")
	state("d/after")

	// An owner outside the file's group setting an ACL loses setgid.
	g := filepath.Join(dir, "g")
	if err := os.WriteFile(g, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(g, nobody, 0); err != nil {
		t.Fatal(err)
	}
	chmod("g", 0o2770)
	state("g")
	h := startHelper(t, &syscall.Credential{Uid: nobody, Gid: nobody})
	v := acl(aclUserObj, 7, -1, aclUser, 5, 1000, aclGroupObj, 7, -1, aclMask, 7, -1, aclOther, 0, -1)
	log = append(log, "setxattr as nobody: "+h.run("setxattr "+g+" "+aclAccess+" "+hex.EncodeToString(v)))
	h.kill()
	state("g")
	return log
}

// getACL returns the ACL xattr in hex, or the errno's name.
func getACL(path, name string) string {
	buf := make([]byte, 4096)
	n, err := unix.Lgetxattr(path, name, buf)
	if err != nil {
		return errName(err)
	}
	return hex.EncodeToString(buf[:n])
}

// openUp lets every user through the directories from os.TempDir() down
// to dir (t.TempDir makes them 0700), so that a helper running as another
// user reaches the mount.
func openUp(t *testing.T, dir string) {
	t.Helper()
	root := filepath.Clean(os.TempDir())
	for d := filepath.Clean(dir); strings.HasPrefix(d, root+"/"); d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, fi.Mode().Perm()|0o055); err != nil {
			t.Fatal(err)
		}
	}
}

func TestACL(t *testing.T) {
	f := newFS(t, fsOptions{mountOpts: "allow_other"})
	openUp(t, f.mnt)
	got := aclScenario(t, f.mnt)
	t.Logf("on lsmfs:\n%s", strings.Join(got, "\n"))

	host := t.TempDir()
	openUp(t, host)
	probe := filepath.Join(host, "probe")
	if err := os.WriteFile(probe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := unix.Setxattr(probe, aclAccess, acl(aclUserObj, 6, -1, aclUser, 4, 1, aclGroupObj, 4, -1, aclMask, 4, -1, aclOther, 4, -1), 0)
	os.Remove(probe)
	if errors.Is(err, unix.EOPNOTSUPP) {
		t.Logf("the host directory %s has no ACL support: lsmfs's results are not compared with it", host)
	} else {
		want := aclScenario(t, host)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			var diff []string
			for i := range max(len(got), len(want)) {
				g, w := "", ""
				if i < len(got) {
					g = got[i]
				}
				if i < len(want) {
					w = want[i]
				}
				mark := "  "
				if g != w {
					mark = "! "
				}
				diff = append(diff, fmt.Sprintf("%slsmfs: %s\n  host:  %s", mark, g, w))
			}
			t.Fatalf("ACL results differ between lsmfs and the host directory:\n%s", strings.Join(diff, "\n"))
		}
	}

	// The kernel enforces the ACLs lsmfs stores.
	p := f.path("private")
	if err := os.WriteFile(p, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startHelper(t, &syscall.Credential{Uid: nobody, Gid: nobody})
	h.do("read "+p, "EACCES")
	if err := unix.Setxattr(p, aclAccess, acl(aclUserObj, 6, -1, aclUser, 6, nobody, aclGroupObj, 0, -1,
		aclMask, 4, -1, aclOther, 0, -1), 0); err != nil {
		t.Fatal(err)
	}
	h.do("read "+p, "ok")
	h.do("write "+p, "EACCES") // the mask limits the named user to read
	if err := os.Chmod(p, 0o660); err != nil {
		t.Fatal(err)
	}
	h.do("write "+p, "ok") // chmod set the mask to rw
	h.kill()

	before := aclStates(t, f.mnt)
	f.remount()
	if after := aclStates(t, f.mnt); after != before {
		t.Fatalf("ACLs changed across a remount:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	h = startHelper(t, &syscall.Credential{Uid: nobody, Gid: nobody})
	h.do("write "+p, "ok")
}

// aclStates lists every file's mode and ACLs under dir.
func aclStates(t *testing.T, dir string) string {
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v %s %s\n", p, fi.Mode(), getACL(p, aclAccess), getACL(p, aclDefault))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
