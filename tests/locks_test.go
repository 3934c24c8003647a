package tests

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Locks on lsmfs: flock(2), POSIX record locks (F_SETLK, F_SETLKW,
// F_GETLK) and open file description locks (F_OFD_*), between the test
// process and a helper process on the same mount. lsmfs leaves locking to
// the kernel (it does not ask for FUSE_POSIX_LOCKS or FUSE_FLOCK_LOCKS), so
// these are the kernel's local locks on the FUSE inode: this test shows that
// they do what they do on a local filesystem across processes — conflicts,
// F_GETLK reporting the holder, blocking waits woken by unlock, deadlock
// detection, POSIX locks dropped when the process closes any descriptor of
// the file, OFD locks not, and every lock dropped when the holder dies.
// The second process is a syscall helper (helperproc_test.go).

func TestLocks(t *testing.T) {
	f := newFS(t, fsOptions{})
	path := f.path("locked")
	fd := openRW(t, path)
	me := os.Getpid()

	t.Run("flock", func(t *testing.T) {
		h := startHelper(t, nil)
		hfd := h.openFile(path)
		h.do("flock "+hfd+" ex nb", "ok")
		localCommand(t, fmt.Sprintf("flock %d ex nb", fd), "EAGAIN")
		localCommand(t, fmt.Sprintf("flock %d sh nb", fd), "EAGAIN")
		h.do("flock "+hfd+" sh nb", "ok") // downgrade
		localCommand(t, fmt.Sprintf("flock %d sh nb", fd), "ok")
		h.do("flock "+hfd+" ex nb", "EAGAIN")
		// A blocked exclusive lock is granted when the shared one goes.
		h.send("flock " + hfd + " ex wait")
		h.noReplyYet("flock ex wait")
		localCommand(t, fmt.Sprintf("flock %d un nb", fd), "ok")
		if r := h.reply("flock ex wait"); r != "ok" {
			t.Fatalf("blocked flock: %s", r)
		}
		localCommand(t, fmt.Sprintf("flock %d sh nb", fd), "EAGAIN")
		// The holder's death releases its lock.
		h.kill()
		localCommand(t, fmt.Sprintf("flock %d ex nb", fd), "ok")
		localCommand(t, fmt.Sprintf("flock %d un nb", fd), "ok")
	})

	t.Run("posix", func(t *testing.T) {
		h := startHelper(t, nil)
		hfd := h.openFile(path)
		hpid := h.cmd.Process.Pid
		h.do("posix "+hfd+" set w 0 100", "ok")
		localCommand(t, fmt.Sprintf("posix %d get r 50 10", fd), fmt.Sprintf("w 0 100 %d", hpid))
		localCommand(t, fmt.Sprintf("posix %d set r 50 10", fd), "EAGAIN")
		localCommand(t, fmt.Sprintf("posix %d set r 100 100", fd), "ok")
		h.do("posix "+hfd+" get w 150 10", fmt.Sprintf("r 100 100 %d", me))
		h.do("posix "+hfd+" set w 150 10", "EAGAIN")
		h.do("posix "+hfd+" set r 150 10", "ok") // read locks share
		localCommand(t, fmt.Sprintf("posix %d set u 100 100", fd), "ok")

		// A blocked F_SETLKW is granted at unlock.
		localCommand(t, fmt.Sprintf("posix %d set w 1000 10", fd), "ok")
		h.send("posix " + hfd + " wait w 1000 10")
		h.noReplyYet("F_SETLKW")
		localCommand(t, fmt.Sprintf("posix %d set u 1000 10", fd), "ok")
		if r := h.reply("F_SETLKW"); r != "ok" {
			t.Fatalf("blocked F_SETLKW: %s", r)
		}

		// Deadlock: the helper holds [0,100) and waits for [2000,2010),
		// which the test holds; the test's wait for [0,100) would close
		// the cycle.
		localCommand(t, fmt.Sprintf("posix %d set w 2000 10", fd), "ok")
		h.send("posix " + hfd + " wait w 2000 10")
		h.waitBlocked("F_SETLKW") // else the test's own wait could be the one to block
		localCommand(t, fmt.Sprintf("posix %d wait w 0 10", fd), "EDEADLK")
		localCommand(t, fmt.Sprintf("posix %d set u 2000 10", fd), "ok")
		if r := h.reply("F_SETLKW"); r != "ok" {
			t.Fatalf("blocked F_SETLKW after the deadlock: %s", r)
		}

		// Closing any descriptor of the file drops the process's locks.
		other := h.openFile(path)
		h.do("close "+other, "ok")
		localCommand(t, fmt.Sprintf("posix %d get w 0 3000", fd), "none")
		h.do("posix "+hfd+" set w 0 100", "ok")
		h.kill()
		localCommand(t, fmt.Sprintf("posix %d set w 0 100", fd), "ok")
		localCommand(t, fmt.Sprintf("posix %d set u 0 0", fd), "ok")
	})

	t.Run("ofd", func(t *testing.T) {
		// Two open file descriptions of one process conflict.
		fd2 := openRW(t, path)
		localCommand(t, fmt.Sprintf("ofd %d set w 0 10", fd), "ok")
		localCommand(t, fmt.Sprintf("ofd %d set w 5 10", fd2), "EAGAIN")
		localCommand(t, fmt.Sprintf("ofd %d get w 5 10", fd2), "w 0 10 -1")
		// ...and with a process-associated lock of the same process.
		localCommand(t, fmt.Sprintf("posix %d set r 0 10", fd2), "EAGAIN")

		h := startHelper(t, nil)
		hfd := h.openFile(path)
		h.do("ofd "+hfd+" set r 0 10", "EAGAIN")
		h.do("posix "+hfd+" get w 0 10", "w 0 10 -1")
		h.send("ofd " + hfd + " wait w 0 10")
		h.noReplyYet("F_OFD_SETLKW")
		localCommand(t, fmt.Sprintf("ofd %d set u 0 10", fd), "ok")
		if r := h.reply("F_OFD_SETLKW"); r != "ok" {
			t.Fatalf("blocked F_OFD_SETLKW: %s", r)
		}
		// Closing another descriptor keeps an OFD lock (unlike POSIX).
		other := h.openFile(path)
		h.do("close "+other, "ok")
		localCommand(t, fmt.Sprintf("ofd %d set r 0 10", fd), "EAGAIN")
		// Closing its own description drops it.
		h.do("close "+hfd, "ok")
		localCommand(t, fmt.Sprintf("ofd %d set w 0 10", fd), "ok")
		localCommand(t, fmt.Sprintf("ofd %d set u 0 10", fd), "ok")
	})
}

// openRW opens (creating) path read-write and closes it in cleanup.
func openRW(t *testing.T, path string) int {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}
