package tests

import (
	"os"
	"sort"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"
)

// posixSkips lists the posixtest.All entries not run on lsmfs, each with its
// reason. Keep it short: only tests that are wrong everywhere belong here.
var posixSkips = map[string]string{
	// Upstream's own runner skips it too ("TODO - fix this test",
	// go-fuse posixtest/posixtest_test.go).
	"FcntlFlockLocksFile": "posixtest bug: fcntl record locks belong to the process, so a second F_SETLK " +
		"from the same process never conflicts; the test fails the same way on ext4",
}

// TestPosix runs every go-fuse posixtest on lsmfs, each on a fresh empty
// directory of the mount, with the journal on a file and, separately, on a
// loop device.
func TestPosix(t *testing.T) {
	for _, journal := range []struct{ name, journal string }{
		{"journal=file", ""},
		{"journal=device", "loop"},
	} {
		t.Run(journal.name, func(t *testing.T) {
			f := newFS(t, fsOptions{journal: journal.journal})
			names := make([]string, 0, len(posixtest.All))
			for name := range posixtest.All {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				t.Run(name, func(t *testing.T) {
					if reason, ok := posixSkips[name]; ok {
						t.Skip(reason)
					}
					dir := f.path("posix-" + name)
					if err := os.Mkdir(dir, 0o755); err != nil {
						t.Fatal(err)
					}
					posixtest.All[name](t, dir)
				})
			}
		})
	}
}
