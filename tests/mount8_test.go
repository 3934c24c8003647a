package tests

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMount8 mounts through mount(8) and mount.fuse3, as `mount -t
// fuse.lsmfs` and an /etc/fstab line do, and unmounts with umount(8).
//
// mount(8) runs its helpers without PATH, so mount.fuse3 finds `lsmfs` only
// in the shell's default path (/usr/local/sbin:/usr/local/bin:...). To test
// `-t fuse.lsmfs` without installing anything, the script runs in a private
// mount namespace (unshare -m) where a temporary directory holding the
// binary under test is bind-mounted over /usr/local/sbin. The `-t fuse` form
// with "PROGRAM#SOURCE" names the binary by path and runs in this namespace.
func TestMount8(t *testing.T) {
	requireMount(t)
	for _, tool := range []string{"mount", "umount", "unshare", "mount.fuse3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (packages util-linux, mount, fuse3): %v", tool, err)
		}
	}
	bin := filepath.Join(t.TempDir(), "bin")
	must(t, os.Mkdir(bin, 0o755))
	exe, err := os.ReadFile(lsmfsBin)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(bin, "lsmfs"), exe, 0o755))

	t.Run("type-fuse.lsmfs-and-fstab", func(t *testing.T) {
		f := newFS(t, fsOptions{noMount: true})
		fstab := filepath.Join(t.TempDir(), "fstab")
		must(t, os.WriteFile(fstab, []byte(fmt.Sprintf(
			"# lsmfs test\n%s %s fuse.lsmfs noauto,nofail,x-systemd.automount,ro,log=%s 0 0\n", f.dataDir, f.mnt, f.logFile)), 0o644))
		script := fmt.Sprintf(`
			mount --bind %[1]s /usr/local/sbin
			# a bad option fails with the reason
			if mount -t fuse.lsmfs %[2]s %[3]s -o bogus_option 2>%[6]s; then echo "bad option mounted"; exit 1; fi
			grep -q 'unknown mount option "bogus_option"' %[6]s || { echo "bad option: $(cat %[6]s)"; exit 1; }
			mount -t fuse.lsmfs %[2]s %[3]s -o noauto,_netdev,nofail,x-systemd.requires=foo,cache_size=64M,log=%[5]s
			grep -q "^%[2]s %[3]s fuse.lsmfs rw," /proc/self/mounts || { echo "not in /proc/mounts:"; grep %[3]s /proc/self/mounts; exit 1; }
			echo hello > %[3]s/file
			echo MOUNTED
			read ignored
			umount %[3]s
			# the fstab line: read-only
			mount -T %[4]s %[3]s
			grep -q "^%[2]s %[3]s fuse.lsmfs ro," /proc/self/mounts || { echo "fstab mount not ro:"; grep %[3]s /proc/self/mounts; exit 1; }
			test "$(cat %[3]s/file)" = hello || { echo "file lost across mounts"; exit 1; }
			if echo x 2>/dev/null > %[3]s/new; then echo "wrote to a read-only mount"; exit 1; fi
			echo MOUNTED
			read ignored
			umount %[3]s
			echo DONE
		`, bin, f.dataDir, f.mnt, fstab, f.logFile, filepath.Join(t.TempDir(), "stderr"))
		runStepped(t, f, []string{"unshare", "--mount", "--propagation", "private", "sh", "-ec", script})
	})

	t.Run("type-fuse-program-path", func(t *testing.T) {
		f := newFS(t, fsOptions{noMount: true})
		source := filepath.Join(bin, "lsmfs") + "#" + f.dataDir
		out, err := exec.Command("mount", "-t", "fuse", source, f.mnt, "-o", "bogus_option").CombinedOutput()
		if err == nil || !strings.Contains(string(out), `unknown mount option "bogus_option"`) {
			t.Errorf("mount -o bogus_option: %v, %q; want a failure naming the option", err, out)
			exec.Command("umount", f.mnt).Run()
		}
		out, err = exec.Command("mount", "-t", "fuse", source, f.mnt, "-o", "nofail,log="+f.logFile).CombinedOutput()
		if err != nil {
			t.Fatalf("mount -t fuse %s: %v: %s%s", source, err, out, f.logTail())
		}
		f.pid = findDaemon(f.mnt)
		if typ := mountType(f.mnt); typ != "fuse.lsmfs" {
			t.Errorf("mounted as %q, want fuse.lsmfs", typ)
		}
		must(t, os.WriteFile(f.path("x"), []byte("x"), 0o644))
		if out, err := exec.Command("umount", f.mnt).CombinedOutput(); err != nil {
			t.Fatalf("umount: %v: %s", err, out)
		}
		if err := waitExit(f.pid, exitTimeout); err != nil {
			t.Errorf("after umount: %v", err)
		}
		f.pid = 0
		if typ := mountType(f.mnt); typ != "" {
			t.Errorf("still mounted after umount: %s", typ)
		}
	})
}

// runStepped runs a script that prints MOUNTED each time it has mounted f
// and then waits for a line on stdin: the test checks the daemon is there,
// lets the script unmount, and checks that the daemon exits.
func runStepped(t *testing.T, f *testFS, argv []string) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = filepath.Dir(f.mnt)
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	must(t, cmd.Start())
	var log []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		log = append(log, line)
		if line != "MOUNTED" {
			continue
		}
		pid := findDaemon(f.mnt)
		if pid == 0 {
			t.Errorf("mounted, but no lsmfs daemon serves %s", f.mnt)
		}
		io.WriteString(stdin, "go on\n")
		if pid != 0 {
			// The script unmounts now; the daemon must flush and exit.
			if err := waitExit(pid, exitTimeout); err != nil {
				t.Errorf("after umount: %v", err)
			}
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil || len(log) == 0 || log[len(log)-1] != "DONE" {
		t.Errorf("script: %v\nstdout:\n%s\nstderr:\n%s%s", err, strings.Join(log, "\n"), stderr.String(), f.logTail())
	}
	// A daemon left in the private namespace (the script failed before its
	// umount) is alone there: SIGTERM makes it unmount and exit.
	if pid := findDaemon(f.mnt); pid != 0 {
		t.Errorf("an lsmfs daemon (%d) is left serving %s in the private namespace", pid, f.mnt)
		syscall.Kill(pid, syscall.SIGTERM)
		if err := waitExit(pid, exitTimeout); err != nil {
			t.Errorf("after SIGTERM: %v", err)
			syscall.Kill(pid, syscall.SIGKILL)
			waitExit(pid, exitTimeout)
		}
	}
}
