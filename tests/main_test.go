package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// lsmfsBin is the lsmfs binary TestMain builds for this run.
var lsmfsBin string

func TestMain(m *testing.M) {
	// The crash test runs this binary as its writer process.
	if os.Getenv(crashWriterEnv) != "" {
		os.Exit(crashWriterMain())
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "lsmfs-tests-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	lsmfsBin = filepath.Join(dir, "lsmfs")
	args := []string{"build", "-o", lsmfsBin}
	if os.Getenv("LSMFS_RACE") != "" {
		// Opt-in: a daemon built with the race detector (set GORACE,
		// e.g. log_path=/tmp/lsmfs-race, to collect its reports).
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "github.com/lsmfs/lsmfs/cmd/lsmfs")...)
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "tests: building lsmfs: %v\n%s", err, out)
		return 1
	}
	// Daemons outlive the `lsmfs mount` that starts them; as a subreaper
	// this process inherits them, so it can reap them and wait for them.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "tests: PR_SET_CHILD_SUBREAPER: %v\n", err)
		return 1
	}
	code := m.Run()
	// Every test waits for its daemons; one left now is a bug.
	if pids := leftoverDaemons(); len(pids) > 0 {
		fmt.Fprintf(os.Stderr, "tests: lsmfs daemons still running after the tests: %v (killed)\n", pids)
		for _, pid := range pids {
			unix.Kill(pid, unix.SIGKILL)
		}
		code = 1
	}
	return code
}

// leftoverDaemons returns the pids of running processes of lsmfsBin.
func leftoverDaemons() []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, p := range procs {
		if exe, err := os.Readlink(p); err == nil && exe == lsmfsBin {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil && !isZombie(pid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
