package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/mount"
)

func runArgs(args ...string) (stdout, stderr string, err error) {
	var o, e bytes.Buffer
	err = run(context.Background(), append([]string{"lsmfs"}, args...), &o, &e)
	return o.String(), e.String(), err
}

// The help texts list every -o option with its default, and every flag.
func TestHelp(t *testing.T) {
	out, _, err := runArgs("mount", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range mount.Options() {
		if !strings.Contains(out, "  "+d.Name) {
			t.Errorf("lsmfs mount --help does not list -o %s", d.Name)
		}
		if d.Default != "" && !strings.Contains(out, "(default: "+d.Default+")") {
			t.Errorf("lsmfs mount --help does not show the default of -o %s (%s)", d.Name, d.Default)
		}
	}
	for _, want := range []string{"-o OPTIONS", "--foreground", "DATADIR MOUNTPOINT", "Examples:"} {
		if !strings.Contains(out, want) {
			t.Errorf("lsmfs mount --help lacks %q", want)
		}
	}
	if strings.Contains(out, "ready-fd") {
		t.Errorf("lsmfs mount --help shows the internal --ready-fd")
	}
	out, _, _ = runArgs("mkfs", "--help")
	for _, want := range []string{"--journal DEV|FILE", "DATADIR/journal", "--journal-size SIZE", `(default: "256M")`, "--block-size N", fmt.Sprintf("(default: %d)", fs.DefaultBlockSize), "Examples:"} {
		if !strings.Contains(out, want) {
			t.Errorf("lsmfs mkfs --help lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = runArgs("fsck", "--help")
	for _, want := range []string{"Exit status", "4 problems", "8 operational"} {
		if !strings.Contains(out, want) {
			t.Errorf("lsmfs fsck --help lacks %q", want)
		}
	}
	out, _, _ = runArgs("--help")
	for _, want := range []string{"mkfs", "mount", "fsck", "lsmfs DATADIR MOUNTPOINT [-o OPTIONS]", "fuse.lsmfs"} {
		if !strings.Contains(out, want) {
			t.Errorf("lsmfs --help lacks %q", want)
		}
	}
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"mount", "-o", "bogus", "d", "m"}, exitUsage, `unknown mount option "bogus"`},
		{[]string{"mount", "d"}, exitUsage, "want DATADIR MOUNTPOINT"},
		{[]string{"mount", "--nope", "d", "m"}, exitUsage, "nope"},
		{[]string{"mount", "d", "m", "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"d", "m", "-o", "cache_size=1X"}, exitUsage, "cache_size=1X"},
		{[]string{"d", "m", "-t", "ext4"}, exitUsage, "fuse.lsmfs"},
		{[]string{"mkfs"}, exitUsage, "want DATADIR"},
		{[]string{"mkfs", "--block-size", "-1", "d"}, exitUsage, "block-size"},
		{[]string{"mkfs", "--journal-size", "big", "d"}, exitUsage, "journal-size"},
		{[]string{"fsck", "a", "b"}, exitUsage, "want DATADIR"},
		{[]string{"fsck", "/nonexistent/lsmfs/data"}, exitFsckOperational, "/nonexistent/lsmfs/data"},
		// mount(8) -f: check the options, do not mount.
		{[]string{"d", "m", "-f", "-o", "rw,noauto,cache_size=1G"}, exitOK, ""},
		{[]string{"mount", "d", "m", "-f", "-o", "ro"}, exitOK, ""},
	} {
		_, _, err := runArgs(tc.args...)
		if got := exitCode(err); got != tc.code {
			t.Errorf("lsmfs %q: exit %d (%v), want %d", tc.args, got, err, tc.code)
		}
		if err != nil && (!strings.Contains(err.Error(), tc.msg) || strings.Contains(oneLine(err), "\n")) {
			t.Errorf("lsmfs %q: error %q does not mention %q", tc.args, err, tc.msg)
		}
	}
}

func TestParseTrailingMountArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want mountRequest
		err  bool
	}{
		{nil, mountRequest{}, false},
		{[]string{"-o", "rw,dev"}, mountRequest{optLists: []string{"rw,dev"}}, false},
		{[]string{"-oro", "-o", "x-a", "--options=debug"}, mountRequest{optLists: []string{"ro", "x-a", "debug"}}, false},
		{[]string{"-n", "-s", "-v", "-t", "fuse.lsmfs", "-o", "a"}, mountRequest{optLists: []string{"a"}}, false},
		{[]string{"-f", "--foreground"}, mountRequest{fake: true, foreground: true}, false},
		{[]string{"-o"}, mountRequest{}, true},
		{[]string{"-t", "nfs"}, mountRequest{}, true},
		{[]string{"-x"}, mountRequest{}, true},
	} {
		var got mountRequest
		err := parseTrailingMountArgs(tc.args, &got)
		if (err != nil) != tc.err || err == nil && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseTrailingMountArgs(%q) = %+v, %v; want %+v, error %v", tc.args, got, err, tc.want, tc.err)
		}
	}
}

func TestOneLine(t *testing.T) {
	err := errors.Join(errors.New("mount failed"), errors.New("close engine: x\n"))
	if got := oneLine(err); got != "mount failed; close engine: x" {
		t.Errorf("oneLine = %q", got)
	}
}
