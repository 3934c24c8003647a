package tests

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWorkload uses the mount as people do: untar the Go source tree and
// compare it with the original, run git, find, du, cp -a and rm -rf on it,
// make hard links, symlinks, xattrs, modes and owners, sparse files and a
// big file; then unmount, remount, and check that everything is as it was.
func TestWorkload(t *testing.T) {
	f := newFS(t, fsOptions{})
	goroot := goRoot(t)
	src := filepath.Join(goroot, "src")

	t.Run("untar", func(t *testing.T) {
		sh(t, f.mnt, fmt.Sprintf("tar -C %s -cf - src | tar -xf -", goroot))
		compareTrees(t, src, f.path("src"))
	})
	t.Run("git", func(t *testing.T) {
		dir := f.path("src")
		sh(t, dir, "git init -q . && git add -A && git commit -q -m import")
		if out := sh(t, dir, "git status --porcelain"); out != "" {
			t.Errorf("git status after commit:\n%s", out)
		}
		sh(t, dir, "git fsck --no-progress --strict")
		if out := sh(t, dir, "git ls-files | wc -l"); strings.TrimSpace(out) != strconv.Itoa(countFiles(t, src, false)) {
			t.Errorf("git ls-files lists %s files, the tree has %d", strings.TrimSpace(out), countFiles(t, src, false))
		}
	})
	t.Run("find-du", func(t *testing.T) {
		found := sh(t, f.mnt, "find src -path src/.git -prune -o -type f -print | wc -l")
		if n, _ := strconv.Atoi(strings.TrimSpace(found)); n != countFiles(t, src, false) {
			t.Errorf("find counts %d files, want %d", n, countFiles(t, src, false))
		}
		found = sh(t, f.mnt, "find src -path src/.git -prune -o -type d -print | wc -l")
		if n, _ := strconv.Atoi(strings.TrimSpace(found)); n != countFiles(t, src, true) {
			t.Errorf("find counts %d directories, want %d", n, countFiles(t, src, true))
		}
		apparent := atoi(t, strings.Fields(sh(t, f.mnt, "du -s --apparent-size -B1 src/crypto"))[0])
		if files := treeBytes(t, filepath.Join(src, "crypto")); apparent < files {
			t.Errorf("du --apparent-size src/crypto = %d, less than its %d file bytes", apparent, files)
		}
		if kb := atoi(t, strings.Fields(sh(t, f.mnt, "du -sk src"))[0]); kb == 0 {
			t.Errorf("du -sk src = 0: st_blocks not reported")
		}
	})
	t.Run("cp-rm", func(t *testing.T) {
		sh(t, f.mnt, "cp -a src/crypto crypto-copy")
		compareTrees(t, filepath.Join(src, "crypto"), f.path("crypto-copy"))
		sh(t, f.mnt, "rm -rf crypto-copy")
		if _, err := os.Lstat(f.path("crypto-copy")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after rm -rf: %v", err)
		}
	})
	t.Run("hardlinks", func(t *testing.T) { testHardLinks(t, f.path("links")) })
	t.Run("symlinks", func(t *testing.T) { testSymlinks(t, f.path("symlinks")) })
	t.Run("xattrs", func(t *testing.T) { testXattrs(t, f.path("xattrs")) })
	t.Run("chmod-chown", func(t *testing.T) {
		host := filepath.Join(t.TempDir(), "modes")
		runModeScript(t, host)
		runModeScript(t, f.path("modes"))
		strip := func(m map[string]entry) map[string]entry {
			for p, e := range m {
				if p != "dated" {
					e.Mtime = 0 // the two runs happen at different times
				}
				m[p] = e
			}
			return m
		}
		compareSnapshots(t, "modes and owners on the mount vs on "+hostFSType(t, host),
			strip(snapshot(t, host, true)), strip(snapshot(t, f.path("modes"), true)))
	})
	t.Run("sparse", func(t *testing.T) { testSparse(t, f.path("sparse")) })
	const bigSize = 1 << 30 // a 1 GiB file, written and read back with checksums
	var bigSum string
	t.Run("bigfile", func(t *testing.T) { bigSum = testBigFile(t, f.path("big"), bigSize) })

	before := snapshot(t, f.mnt, true)
	f.remount()
	t.Run("after-remount", func(t *testing.T) {
		compareSnapshots(t, "after remount", before, snapshot(t, f.mnt, true))
		if sum := fileSum(t, f.path("big")); sum != bigSum {
			t.Errorf("big file after remount: sha256 %s, want %s", sum, bigSum)
		}
		if out := sh(t, f.path("src"), "git status --porcelain"); out != "" {
			t.Errorf("git status after remount:\n%s", out)
		}
	})
	t.Run("rm-rf-all", func(t *testing.T) {
		sh(t, f.mnt, "rm -rf src links symlinks xattrs modes sparse big")
		names, err := os.ReadDir(f.mnt)
		if err != nil || len(names) != 0 {
			t.Errorf("after rm -rf of everything: %d entries left (%v)", len(names), err)
		}
	})
}

// hostFSType names the filesystem holding p, for messages.
func hostFSType(t *testing.T, p string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return "the host"
	}
	return fmt.Sprintf("the host filesystem (magic %#x)", st.Type)
}

func goRoot(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func atoi(t *testing.T, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

// countFiles counts the regular files (or the directories) under root.
func countFiles(t *testing.T, root string, dirs bool) int {
	n := 0
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if dirs && d.IsDir() || !dirs && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// treeBytes sums the sizes of the regular files under root.
func treeBytes(t *testing.T, root string) int64 {
	var n int64
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				t.Fatal(err)
			}
			n += fi.Size()
		}
		return nil
	})
	return n
}

// compareTrees checks that copy has the same names, types, permission bits,
// bytes and symlink targets as orig.
func compareTrees(t *testing.T, orig, copy string) {
	t.Helper()
	a, b := snapshot(t, orig, false), snapshot(t, copy, false)
	for _, m := range []map[string]entry{a, b} {
		for p, e := range m {
			// Only what tar and cp -a promise: type, mode, content.
			m[p] = entry{Mode: e.Mode, Size: e.Size, Sum: e.Sum, Target: e.Target}
			if e.Mode&syscall.S_IFMT == syscall.S_IFDIR {
				m[p] = entry{Mode: e.Mode}
			}
		}
	}
	compareSnapshots(t, "copy of "+orig, a, b)
}

// entry is what snapshot records about one file.
type entry struct {
	Mode       uint32
	UID, GID   uint32
	Size       int64
	Nlink      uint64
	Rdev       uint64
	Mtime      int64
	Sum        string            // sha256 of a regular file
	Target     string            // of a symlink
	Xattrs     map[string]string // user.*
	SameInode  string            // the first path (in walk order) with the same inode
	DirEntries string            // sorted names, for directories
}

func (e entry) String() string {
	return fmt.Sprintf("{mode %o uid %d gid %d size %d nlink %d rdev %#x mtime %d sum %.12s target %q xattrs %v inode-of %q entries %.60q}",
		e.Mode, e.UID, e.GID, e.Size, e.Nlink, e.Rdev, e.Mtime, e.Sum, e.Target, e.Xattrs, e.SameInode, e.DirEntries)
}

// snapshot records every file under root (not root itself). With full, it
// also records owners, link counts, mtimes and inode sharing.
func snapshot(t *testing.T, root string, full bool) map[string]entry {
	t.Helper()
	m := map[string]entry{}
	inodes := map[uint64]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		e := entry{Mode: st.Mode, Size: st.Size, Rdev: st.Rdev}
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			e.Sum = fileSum(t, p)
		case syscall.S_IFLNK:
			if e.Target, err = os.Readlink(p); err != nil {
				return err
			}
		case syscall.S_IFDIR:
			e.Size = 0 // directory sizes are the filesystem's business
			names, err := os.ReadDir(p)
			if err != nil {
				return err
			}
			var ns []string
			for _, n := range names {
				ns = append(ns, n.Name())
			}
			e.DirEntries = strings.Join(ns, "/")
		}
		if full {
			e.UID, e.GID, e.Nlink = st.Uid, st.Gid, st.Nlink
			e.Mtime = st.Mtim.Nano()
			if first, ok := inodes[st.Ino]; ok {
				e.SameInode = first
			} else {
				inodes[st.Ino] = rel
			}
		}
		e.Xattrs = userXattrs(t, p)
		m[rel] = e
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", root, err)
	}
	return m
}

// compareSnapshots reports the differences between want and got.
func compareSnapshots(t *testing.T, what string, want, got map[string]entry) {
	t.Helper()
	var paths []string
	for p := range want {
		paths = append(paths, p)
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	diffs := 0
	for _, p := range paths {
		w, wok := want[p]
		g, gok := got[p]
		var msg string
		switch {
		case !gok:
			msg = "missing"
		case !wok:
			msg = "unexpected"
		case fmt.Sprint(w) != fmt.Sprint(g):
			msg = fmt.Sprintf("\n  got  %v\n  want %v", g, w)
		default:
			continue
		}
		if diffs++; diffs <= 20 {
			t.Errorf("%s: %s: %s", what, p, msg)
		}
	}
	if diffs > 20 {
		t.Errorf("%s: %d more differences", what, diffs-20)
	}
}

// userXattrs returns the user.* extended attributes of p (not following
// symlinks).
func userXattrs(t *testing.T, p string) map[string]string {
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(p, buf)
	if err != nil {
		if errors.Is(err, unix.ENOTSUP) {
			return nil
		}
		t.Errorf("llistxattr %s: %v", p, err)
		return nil
	}
	var m map[string]string
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if !strings.HasPrefix(name, "user.") {
			continue
		}
		v := make([]byte, 64<<10)
		vn, err := unix.Lgetxattr(p, name, v)
		if err != nil {
			t.Errorf("lgetxattr %s %s: %v", p, name, err)
			continue
		}
		if m == nil {
			m = map[string]string{}
		}
		m[name] = string(v[:vn])
	}
	return m
}

func fileSum(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Errorf("%v", err)
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Errorf("read %s: %v", p, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func mustStat(t *testing.T, p string) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatalf("lstat %s: %v", p, err)
	}
	return st
}

func testHardLinks(t *testing.T, dir string) {
	must(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "sub", "c")
	data := content(1, 100<<10)
	must(t, os.WriteFile(a, data, 0o644))
	must(t, os.Link(a, b))
	must(t, os.Link(b, c))
	sa, sb, sc := mustStat(t, a), mustStat(t, b), mustStat(t, c)
	if sa.Ino != sb.Ino || sa.Ino != sc.Ino || sa.Nlink != 3 || sc.Nlink != 3 {
		t.Errorf("after 2 links: inodes %d %d %d, nlink %d %d %d; want one inode, nlink 3", sa.Ino, sb.Ino, sc.Ino, sa.Nlink, sb.Nlink, sc.Nlink)
	}
	// A write through one name is seen through the others.
	fc, err := os.OpenFile(c, os.O_WRONLY, 0)
	must(t, err)
	_, err = fc.WriteAt([]byte("through c"), 5000)
	must(t, err)
	must(t, fc.Close())
	copy(data[5000:], "through c")
	if got, err := os.ReadFile(a); err != nil || !bytes.Equal(got, data) {
		t.Errorf("read through a after a write through c: %d bytes, %v; want the write", len(got), err)
	}
	must(t, os.Remove(a))
	if st := mustStat(t, b); st.Nlink != 2 {
		t.Errorf("after unlink: nlink %d, want 2", st.Nlink)
	}
	must(t, os.Rename(b, filepath.Join(dir, "b2")))
	if st := mustStat(t, c); st.Nlink != 2 {
		t.Errorf("after rename: nlink %d, want 2", st.Nlink)
	}
	// A link to a directory is refused.
	if err := os.Link(filepath.Join(dir, "sub"), filepath.Join(dir, "sublink")); !errors.Is(err, syscall.EPERM) {
		t.Errorf("link to a directory: %v, want EPERM", err)
	}
	// Many links.
	for i := range 50 {
		must(t, os.Link(c, filepath.Join(dir, "sub", fmt.Sprintf("l%d", i))))
	}
	if st := mustStat(t, c); st.Nlink != 52 {
		t.Errorf("after 50 more links: nlink %d, want 52", st.Nlink)
	}
}

func testSymlinks(t *testing.T, dir string) {
	must(t, os.MkdirAll(filepath.Join(dir, "d"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "d", "file"), []byte("hello"), 0o644))
	long := strings.Repeat("x/", 2000) + "end" // 4003 bytes, under PATH_MAX
	links := map[string]string{
		"rel":      "d/file",
		"abs":      "/nonexistent/absolute/target",
		"dangling": "missing",
		"dir":      "d",
		"chain":    "rel",
		"long":     long,
		"dotdot":   "../symlinks/d/file",
	}
	for name, target := range links {
		must(t, os.Symlink(target, filepath.Join(dir, name)))
	}
	for name, target := range links {
		p := filepath.Join(dir, name)
		if got, err := os.Readlink(p); err != nil || got != target {
			t.Errorf("readlink %s = %.40q, %v; want %.40q", name, got, err, target)
		}
		if st := mustStat(t, p); st.Mode&syscall.S_IFMT != syscall.S_IFLNK || st.Size != int64(len(target)) {
			t.Errorf("lstat %s: mode %o size %d; want a symlink of size %d", name, st.Mode, st.Size, len(target))
		}
	}
	for _, name := range []string{"rel", "chain", "dotdot"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != "hello" {
			t.Errorf("read through %s: %q, %v", name, b, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "dir", "file")); err != nil || string(b) != "hello" {
		t.Errorf("read through the directory symlink: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "dangling")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat through a dangling symlink: %v, want ENOENT", err)
	}
	must(t, os.Lchown(filepath.Join(dir, "rel"), 42, 43))
	if st := mustStat(t, filepath.Join(dir, "rel")); st.Uid != 42 || st.Gid != 43 {
		t.Errorf("lchown: %d:%d, want 42:43", st.Uid, st.Gid)
	}
	if st := mustStat(t, filepath.Join(dir, "d", "file")); st.Uid != 0 {
		t.Errorf("lchown followed the symlink: target uid %d", st.Uid)
	}
}

func testXattrs(t *testing.T, dir string) {
	must(t, os.MkdirAll(dir, 0o755))
	file := filepath.Join(dir, "file")
	must(t, os.WriteFile(file, nil, 0o644))
	big := string(content(7, 16<<10))
	for _, p := range []string{file, dir} {
		must(t, unix.Setxattr(p, "user.small", []byte("v"), 0))
		must(t, unix.Setxattr(p, "user.empty", nil, 0))
		must(t, unix.Setxattr(p, "user.big", []byte(big), 0))
		must(t, unix.Setxattr(p, "user.gone", []byte("x"), 0))
		if err := unix.Setxattr(p, "user.small", []byte("w"), unix.XATTR_CREATE); !errors.Is(err, unix.EEXIST) {
			t.Errorf("setxattr XATTR_CREATE of an existing name: %v, want EEXIST", err)
		}
		if err := unix.Setxattr(p, "user.none", []byte("w"), unix.XATTR_REPLACE); !errors.Is(err, unix.ENODATA) {
			t.Errorf("setxattr XATTR_REPLACE of a missing name: %v, want ENODATA", err)
		}
		must(t, unix.Setxattr(p, "user.small", []byte("replaced"), unix.XATTR_REPLACE))
		must(t, unix.Removexattr(p, "user.gone"))
		if err := unix.Removexattr(p, "user.gone"); !errors.Is(err, unix.ENODATA) {
			t.Errorf("removexattr of a removed name: %v, want ENODATA", err)
		}
		if _, err := unix.Getxattr(p, "user.gone", make([]byte, 10)); !errors.Is(err, unix.ENODATA) {
			t.Errorf("getxattr of a removed name: %v, want ENODATA", err)
		}
		if n, err := unix.Getxattr(p, "user.big", nil); err != nil || n != len(big) {
			t.Errorf("getxattr size probe: %d, %v; want %d", n, err, len(big))
		}
		if _, err := unix.Getxattr(p, "user.big", make([]byte, 10)); !errors.Is(err, unix.ERANGE) {
			t.Errorf("getxattr into a short buffer: %v, want ERANGE", err)
		}
		want := map[string]string{"user.small": "replaced", "user.empty": "", "user.big": big}
		if got := userXattrs(t, p); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("xattrs of %s: %.200v, want %.200v", p, got, want)
		}
	}
	// Many attributes on one file.
	for i := range 200 {
		must(t, unix.Setxattr(file, fmt.Sprintf("user.n%03d", i), []byte(strconv.Itoa(i)), 0))
	}
	if got := userXattrs(t, file); len(got) != 203 {
		t.Errorf("after 200 more: %d xattrs, want 203", len(got))
	}
}

// runModeScript changes modes and owners under dir, the same on the mount and
// on ext4; the two results are compared.
func runModeScript(t *testing.T, dir string) {
	sh(t, filepath.Dir(dir), fmt.Sprintf(`
		mkdir %[1]s && cd %[1]s
		umask 022
		echo x > f600 && chmod 600 f600
		echo x > f755 && chmod 755 f755
		echo x > suid && chmod 4755 suid
		echo x > sgid && chmod 2755 sgid
		echo x > suid-chowned && chmod 4755 suid-chowned && chown 1234:5678 suid-chowned
		mkdir sticky && chmod 1777 sticky
		echo x > owned && chown 1234:5678 owned
		mkdir sgdir && chown 0:5678 sgdir && chmod 2775 sgdir
		echo x > sgdir/inherits-gid
		mkdir sgdir/inherits-setgid
		ln -s f600 link && chown -h 99:98 link
		mkfifo fifo && chmod 640 fifo
		mknod chr c 1 3 && mknod blk b 7 200
		touch -d '2001-02-03 04:05:06.123456789' dated
		chmod 0 f600 && chmod u+r,g+w f600
	`, filepath.Base(dir)))
}

func testSparse(t *testing.T, dir string) {
	must(t, os.MkdirAll(dir, 0o755))
	p := filepath.Join(dir, "sparse")
	f, err := os.Create(p)
	must(t, err)
	defer f.Close()
	const far = 1 << 30
	head, tail := content(11, 4096), content(12, 4096)
	_, err = f.WriteAt(head, 0)
	must(t, err)
	_, err = f.WriteAt(tail, far)
	must(t, err)
	must(t, f.Sync())
	st := mustStat(t, p)
	if st.Size != far+4096 {
		t.Errorf("size %d, want %d", st.Size, far+4096)
	}
	if st.Blocks*512 > 4<<20 {
		t.Errorf("a 1 GiB sparse file with 8 KiB of data uses %d bytes: holes are stored", st.Blocks*512)
	}
	hole := make([]byte, 1<<20)
	if _, err := f.ReadAt(hole, far/2); err != nil || !bytes.Equal(hole, make([]byte, len(hole))) {
		t.Errorf("reading a hole: %v, or not zeros", err)
	}
	got := make([]byte, 4096)
	if _, err := f.ReadAt(got, far); err != nil || !bytes.Equal(got, tail) {
		t.Errorf("reading past the hole: %v or wrong bytes", err)
	}
	// Holes are found at the filesystem's block granularity (at most 1 MiB):
	// look for data from 2 MiB on. Through a read-only descriptor with no
	// writer left: while a file is open for writing, lsmfs reports all of
	// it as data (a shared mapping may hold dirty pages it has not seen).
	must(t, f.Close())
	r, err := os.Open(p)
	must(t, err)
	if off, err := unix.Seek(int(r.Fd()), 2<<20, unix.SEEK_DATA); err != nil || off > far || off < far-(1<<20) {
		t.Errorf("SEEK_DATA from the hole = %d, %v; want the block of %d", off, err, far)
	}
	if off, err := unix.Seek(int(r.Fd()), 0, unix.SEEK_HOLE); err != nil || off < 4096 || off > far {
		t.Errorf("SEEK_HOLE from 0 = %d, %v; want in [4096, %d]", off, err, far)
	}
	must(t, r.Close())
	f, err = os.OpenFile(p, os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	// Extending truncate makes a hole at the end; shrinking drops data.
	must(t, f.Truncate(2*far))
	if _, err := f.ReadAt(got, 2*far-4096); err != nil || !bytes.Equal(got, make([]byte, 4096)) {
		t.Errorf("reading the extended tail: %v, or not zeros", err)
	}
	must(t, f.Truncate(100))
	must(t, f.Truncate(far))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got[:100], head[:100]) || !bytes.Equal(got[100:], make([]byte, 4096-100)) {
		t.Errorf("after truncate to 100 and back: %v, or stale bytes past 100", err)
	}
	must(t, f.Close())
}

// testBigFile writes size bytes in 1 MiB writes, fsyncs, drops the pages
// from the kernel cache, reads them back, and returns the sha256.
func testBigFile(t *testing.T, p string, size int64) string {
	f, err := os.Create(p)
	must(t, err)
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		fillContent(99, off, buf)
		h.Write(buf)
		if _, err := f.Write(buf); err != nil {
			t.Fatalf("write at %d: %v", off, err)
		}
	}
	must(t, f.Sync())
	must(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
	must(t, f.Close())
	want := hex.EncodeToString(h.Sum(nil))
	if st := mustStat(t, p); st.Size != size {
		t.Errorf("size %d, want %d", st.Size, size)
	}
	if got := fileSum(t, p); got != want {
		t.Errorf("read back: sha256 %s, want %s", got, want)
	}
	return want
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
