package tests

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A syscall helper: this test binary, started again with helperEnv set,
// runs system calls on command, so that a test can act as a second process
// (locks belong to processes) or as another user (ACL enforcement).

// helperEnv makes the test binary a syscall helper (see helperMain).
const helperEnv = "LSMFS_SYSCALL_HELPER"

// The helper is dispatched from init rather than from TestMain (which
// belongs to main_test.go and dispatches its own helper) so that it starts
// without TestMain's build of the lsmfs binary.
func init() {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
}

// helper is a running syscall helper.
type helper struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	// replies delivers the helper's answers, one per command, so that a
	// command that blocks can be waited for with a timeout.
	replies chan string
}

// startHelper starts a helper, acting as cred's user and group if cred is
// not nil (supplementary groups are dropped); cleanup kills it.
func startHelper(t *testing.T, cred *syscall.Credential) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{t: t, cmd: cmd, in: in, replies: make(chan string, 16)}
	go func() {
		defer close(h.replies)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			h.replies <- strings.TrimSpace(line)
		}
	}()
	t.Cleanup(h.kill)
	if cred != nil {
		// The helper changes identity itself: started as another user
		// it could not execute the test binary, which lives in a
		// directory only root may enter.
		h.do(fmt.Sprintf("become %d %d", cred.Uid, cred.Gid), "ok")
	}
	return h
}

// kill ends the helper (dropping its locks and descriptors) and waits.
func (h *helper) kill() {
	h.in.Close()
	h.cmd.Process.Kill()
	h.cmd.Wait()
}

// send sends a command without waiting for its answer.
func (h *helper) send(cmd string) {
	h.t.Helper()
	if _, err := fmt.Fprintln(h.in, cmd); err != nil {
		h.t.Fatalf("helper: send %q: %v", cmd, err)
	}
}

// reply waits for the answer to an earlier command.
func (h *helper) reply(cmd string) string {
	h.t.Helper()
	select {
	case r, ok := <-h.replies:
		if !ok {
			h.t.Fatalf("helper: exited before answering %q", cmd)
		}
		return r
	case <-time.After(time.Minute):
		h.t.Fatalf("helper: no answer to %q within a minute", cmd)
	}
	return ""
}

// noReplyYet checks that a blocking command is still blocked. (A lock
// granted late would only make this pass wrongly, never fail wrongly.)
func (h *helper) noReplyYet(cmd string) {
	h.t.Helper()
	select {
	case r := <-h.replies:
		h.t.Fatalf("helper: %q should block, but answered %q", cmd, r)
	case <-time.After(200 * time.Millisecond):
	}
}

// waitBlocked waits until the helper is blocked in a POSIX or OFD lock wait
// (a "->" line of /proc/locks names its pid), so that the test's next step
// does not race the helper's request: a deadlock check whose other half is
// not blocked yet would block the test itself for good.
func (h *helper) waitBlocked(cmd string) {
	h.t.Helper()
	pid := strconv.Itoa(h.cmd.Process.Pid)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case r := <-h.replies:
			h.t.Fatalf("helper: %q should block, but answered %q", cmd, r)
		default:
		}
		locks, err := os.ReadFile("/proc/locks")
		if err != nil {
			h.t.Fatal(err)
		}
		for _, line := range strings.Split(string(locks), "\n") {
			f := strings.Fields(line)
			if len(f) > 5 && f[1] == "->" && f[5] == pid {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.t.Fatalf("helper: %q is not blocked in a lock wait after a minute", cmd)
}

// run runs a command and returns its answer.
func (h *helper) run(cmd string) string {
	h.t.Helper()
	h.send(cmd)
	return h.reply(cmd)
}

// do runs a command and checks its answer.
func (h *helper) do(cmd, want string) {
	h.t.Helper()
	if got := h.run(cmd); got != want {
		h.t.Fatalf("helper: %q answered %q, want %q", cmd, got, want)
	}
}

// openFile opens path read-write in the helper and returns the fd number.
func (h *helper) openFile(path string) string {
	h.t.Helper()
	r := h.run("open " + path)
	if _, err := strconv.Atoi(r); err != nil {
		h.t.Fatalf("helper: open %s: %s", path, r)
	}
	return r
}

// helperMain serves commands on stdin, one per line (paths without
// spaces), answering each on stdout:
//
//	become UID GID                (no supplementary groups)
//	open PATH                     -> fd number (read-write)
//	close FD
//	read PATH                     -> "ok" if PATH can be opened and read
//	write PATH                    -> "ok" if PATH can be opened for writing
//	setxattr PATH NAME HEX        (value in hex; "-" for empty)
//	flock FD ex|sh|un nb|wait
//	posix|ofd FD set|wait r|w|u START LEN   (F_SETLK / F_SETLKW, or the OFD ones)
//	posix|ofd FD get r|w START LEN          -> "none" or "TYPE START LEN PID"
//
// Other answers are "ok" or the errno's name.
func helperMain() int {
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		fmt.Println(helperCommand(strings.Fields(sc.Text())))
	}
	return 0
}

func helperCommand(args []string) string {
	if len(args) < 2 {
		return "EINVAL"
	}
	switch args[0] {
	case "become":
		if len(args) != 3 {
			return "EINVAL"
		}
		uid, err1 := strconv.Atoi(args[1])
		gid, err2 := strconv.Atoi(args[2])
		if err1 != nil || err2 != nil {
			return "EINVAL"
		}
		if err := unix.Setgroups(nil); err != nil {
			return errName(err)
		}
		if err := unix.Setgid(gid); err != nil {
			return errName(err)
		}
		return errName(unix.Setuid(uid))
	case "open":
		fd, err := unix.Open(args[1], unix.O_RDWR, 0)
		if err != nil {
			return errName(err)
		}
		return strconv.Itoa(fd)
	case "read":
		_, err := os.ReadFile(args[1])
		return errName(err)
	case "write":
		fd, err := unix.Open(args[1], unix.O_WRONLY, 0)
		if err == nil {
			unix.Close(fd)
		}
		return errName(err)
	case "setxattr":
		if len(args) != 4 {
			return "EINVAL"
		}
		v, err := hex.DecodeString(strings.TrimPrefix(args[3], "-"))
		if err != nil {
			return "EINVAL"
		}
		return errName(unix.Setxattr(args[1], args[2], v, 0))
	}
	fd, err := strconv.Atoi(args[1])
	if err != nil {
		return "EINVAL"
	}
	switch {
	case args[0] == "close":
		return errName(unix.Close(fd))
	case args[0] == "flock" && len(args) == 4:
		how := map[string]int{"ex": unix.LOCK_EX, "sh": unix.LOCK_SH, "un": unix.LOCK_UN}[args[2]]
		if args[3] == "nb" {
			how |= unix.LOCK_NB
		}
		return errName(unix.Flock(fd, how))
	case (args[0] == "posix" || args[0] == "ofd") && len(args) == 6:
		return recordLock(fd, args[0] == "ofd", args[2], args[3], args[4], args[5])
	}
	return "EINVAL"
}

// recordLock performs one fcntl record-lock command.
func recordLock(fd int, ofd bool, op, typ, start, length string) string {
	var lk unix.Flock_t
	lk.Type = map[string]int16{"r": unix.F_RDLCK, "w": unix.F_WRLCK, "u": unix.F_UNLCK}[typ]
	lk.Whence = io.SeekStart
	var err error
	if lk.Start, err = strconv.ParseInt(start, 10, 64); err != nil {
		return "EINVAL"
	}
	if lk.Len, err = strconv.ParseInt(length, 10, 64); err != nil {
		return "EINVAL"
	}
	cmds := map[string][2]int{
		"set":  {unix.F_SETLK, unix.F_OFD_SETLK},
		"wait": {unix.F_SETLKW, unix.F_OFD_SETLKW},
		"get":  {unix.F_GETLK, unix.F_OFD_GETLK},
	}
	c, ok := cmds[op]
	if !ok {
		return "EINVAL"
	}
	cmd := c[0]
	if ofd {
		cmd = c[1]
	}
	if err := fcntlLock(fd, cmd, &lk); err != nil {
		return errName(err)
	}
	if op != "get" {
		return "ok"
	}
	if lk.Type == unix.F_UNLCK {
		return "none"
	}
	t := map[int16]string{unix.F_RDLCK: "r", unix.F_WRLCK: "w"}[lk.Type]
	return fmt.Sprintf("%s %d %d %d", t, lk.Start, lk.Len, lk.Pid)
}

// fcntlLock is unix.FcntlFlock retried on EINTR (Go's runtime signals can
// interrupt a blocking F_SETLKW).
func fcntlLock(fd, cmd int, lk *unix.Flock_t) error {
	for {
		err := unix.FcntlFlock(uintptr(fd), cmd, lk)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// errName is "ok" for nil, else the errno's name.
func errName(err error) string {
	if err == nil {
		return "ok"
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		if name := unix.ErrnoName(e); name != "" {
			return name
		}
	}
	return err.Error()
}

// localCommand runs a helper command in the test process itself and
// checks its answer.
func localCommand(t *testing.T, cmd, want string) {
	t.Helper()
	if got := helperCommand(strings.Fields(cmd)); got != want {
		t.Fatalf("%q answered %q, want %q", cmd, got, want)
	}
}
