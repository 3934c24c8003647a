package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/cpuguy83/go-md2man/v2/md2man"
	"github.com/urfave/cli/v2"

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
		{[]string{"fsck", "a", "b"}, exitFsckUsage, "want DATADIR"},
		{[]string{"fsck", "--bogus", "d"}, exitFsckUsage, "bogus"},
		{[]string{"stats"}, exitUsage, "want MOUNTPOINT or DATADIR"},
		{[]string{"stats", "--interval", "0s", "d"}, exitUsage, "interval"},
		{[]string{"compact", "a", "b"}, exitUsage, "want MOUNTPOINT or DATADIR"},
		{[]string{"umount"}, exitUsage, "want MOUNTPOINT"},
		{[]string{"stats", "/nonexistent/lsmfs/data"}, exitFailure, "/nonexistent/lsmfs/data"},
		{[]string{"mount", "-o", "metrics=localhost", "d", "m"}, exitUsage, "metrics=localhost"},
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

// Every command's help lists each of its visible flags, with its default
// where it has one, and lsmfs --help lists every command.
func TestHelpListsAllFlags(t *testing.T) {
	app := newApp(nil, nil)
	top, _, err := runArgs("--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range app.Commands {
		if cmd.Hidden {
			continue
		}
		if !strings.Contains(top, "   "+cmd.Name) {
			t.Errorf("lsmfs --help does not list %s", cmd.Name)
		}
		out, _, err := runArgs(cmd.Name, "--help")
		if err != nil {
			t.Errorf("lsmfs %s --help: %v", cmd.Name, err)
			continue
		}
		if !strings.Contains(out, "Examples:") {
			t.Errorf("lsmfs %s --help has no examples", cmd.Name)
		}
		for _, f := range cmd.Flags {
			if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
				continue
			}
			name := f.Names()[0]
			dash := "--"
			if len(name) == 1 {
				dash = "-"
			}
			if !strings.Contains(out, dash+name) {
				t.Errorf("lsmfs %s --help does not list %s%s", cmd.Name, dash, name)
			}
			df, ok := f.(cli.DocGenerationFlag)
			if !ok || !df.TakesValue() {
				continue
			}
			def := df.GetDefaultText()
			if def == "" {
				def = df.GetValue()
			}
			if def != "" && def != `""` && !strings.Contains(out, "(default: "+def+")") {
				t.Errorf("lsmfs %s --help does not show the default of --%s (%s)", cmd.Name, name, def)
			}
		}
	}
}

// docs/lsmfs.md is what `lsmfs docs` generates from the CLI definitions:
// regenerate it with go generate ./cmd/lsmfs (or go test -run TestDocs
// -update ./cmd/lsmfs).
func TestDocs(t *testing.T) {
	want := referenceMarkdown(newApp(nil, nil))
	if *update {
		if err := os.WriteFile(docsFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatalf("%v (generate it: go generate ./cmd/lsmfs)", err)
	}
	if string(got) != want {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(want, "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs from the CLI definitions at line %d:\n have %q\n want %q\nregenerate it: go generate ./cmd/lsmfs", docsFile, i+1, g, w)
			}
		}
	}
	// Everything a user can type is in it.
	for _, d := range mount.Options() {
		if !strings.Contains(want, "`"+d.Name) {
			t.Errorf("the reference lacks -o %s", d.Name)
		}
	}
	for _, name := range mount.MetricNames() {
		if !strings.Contains(want, name) {
			t.Errorf("the reference lacks metric %s", name)
		}
	}
	for _, cmd := range newApp(nil, nil).Commands {
		if !cmd.Hidden && !strings.Contains(want, "## lsmfs "+cmd.Name+"\n") {
			t.Errorf("the reference lacks lsmfs %s", cmd.Name)
		}
	}
	if man := md2man.Render([]byte(want)); !bytes.Contains(man, []byte(".SH COMMANDS")) {
		t.Errorf("the man page rendering lacks its sections:\n%.500s", man)
	}
}

var update = flag.Bool("update", false, "rewrite docs/lsmfs.md")
