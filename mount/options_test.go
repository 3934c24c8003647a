package mount_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/lsmfs/lsmfs/fs"
	"github.com/lsmfs/lsmfs/mount"
)

func TestParseOptions(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want mount.Config
	}{
		{nil, mount.Config{}},
		{[]string{""}, mount.Config{}},
		{[]string{"journal=/dev/sdb1,cache_size=512M"}, mount.Config{Journal: "/dev/sdb1", CacheSize: 512 << 20}},
		{[]string{"cache_size=0"}, mount.Config{CacheSize: -1}},
		{[]string{"memtable_size=1G", "commit_interval=250ms"}, mount.Config{MemtableSize: 1 << 30, CommitInterval: 250 * time.Millisecond}},
		{[]string{"commit_interval=3"}, mount.Config{CommitInterval: 3 * time.Second}},
		{[]string{"memtable_policy=eager,compaction=tiered,tier_ratio=1.5,inmemory_flush_size=4M"},
			mount.Config{MemtablePolicy: "eager", Compaction: "tiered", TierRatio: 1.5, InMemoryFlushSize: 4 << 20}},
		{[]string{"memtable_policy=adaptive,compaction=leveled"}, mount.Config{MemtablePolicy: "adaptive", Compaction: "leveled"}},
		{[]string{"value_threshold=8K"}, mount.Config{ValueThreshold: 8 << 10}},
		{[]string{"value_threshold=0"}, mount.Config{ValueThreshold: -1}},
		{[]string{"compression=none,l0_trigger=8,level_ratio=4,compaction_concurrency=2"},
			mount.Config{Compression: "none", L0Trigger: 8, LevelRatio: 4, CompactionConcurrency: 2}},
		{[]string{"ro,allow_other,debug,log=/var/log/lsmfs.log,writeback_cache"},
			mount.Config{ReadOnly: true, AllowOther: true, Debug: true, LogFile: "/var/log/lsmfs.log", WritebackCache: true}},
		{[]string{"metrics=127.0.0.1:9567"}, mount.Config{Metrics: "127.0.0.1:9567"}},
		{[]string{"readahead=4M"}, mount.Config{Readahead: 4 << 20}},
		{[]string{"readahead=0"}, mount.Config{Readahead: -1}},
		{[]string{"metrics=[::1]:0"}, mount.Config{Metrics: "[::1]:0"}},
		{[]string{"ro", "rw"}, mount.Config{}},
		{[]string{"default_permissions"}, mount.Config{}},
		{[]string{`journal=/j\,k`}, mount.Config{Journal: "/j,k"}},
		{[]string{"fsname=disk0,subtype=lsmfs2"}, mount.Config{FsName: "disk0", Subtype: "lsmfs2"}},
		{[]string{"nosuid,suid,nodev,noexec,exec,noatime,sync,dirsync"},
			mount.Config{KernelFlags: []string{"suid", "nodev", "exec", "noatime", "sync", "dirsync"}}},
		// What mount(8) and mount.fuse3 pass, and fstab/systemd options.
		{[]string{"rw,noatime,nodev,relatime,nosuid,_netdev,nofail,users,exec,dev,suid"},
			mount.Config{KernelFlags: []string{"noatime", "exec", "dev", "suid"},
				Ignored: []string{"_netdev", "nofail", "users"}}},
		{[]string{"strictatime,nodiratime"}, mount.Config{StrictAtime: true, NoDirAtime: true}},
		{[]string{"strictatime,relatime,nodiratime,diratime,norelatime,lazytime"}, mount.Config{StrictAtime: true, Ignored: []string{"norelatime", "lazytime"}}},
		{[]string{"strictatime,nostrictatime,relatime"}, mount.Config{}},
		{[]string{"defaults,noauto,auto,user,nouser,x-systemd.automount,x-gvfs-show,comment=systemd.foo"},
			mount.Config{Ignored: []string{"defaults", "noauto", "auto", "user", "nouser",
				"x-systemd.automount", "x-gvfs-show", "comment=systemd.foo"}}},
	} {
		got, err := mount.ParseOptions(tc.in...)
		if err != nil {
			t.Errorf("ParseOptions(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseOptions(%q)\n got %+v\nwant %+v", tc.in, got, tc.want)
		}
		// String renders options that parse back to the same Config
		// (ignored options are dropped).
		back, err := mount.ParseOptions(got.String())
		want := got
		want.Ignored = nil
		if err != nil || !reflect.DeepEqual(back, want) {
			t.Errorf("ParseOptions(%q.String() = %q) = %+v, %v; want %+v", tc.in, got.String(), back, err, want)
		}
	}
}

func TestParseOptionsErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // substring of the error, which must name the option
	}{
		{"bogus", `unknown mount option "bogus"`},
		{"cache_size=12X", `"cache_size=12X"`},
		{"cache_size", `"cache_size"`},
		{"memtable_size=1K", `"memtable_size=1K"`}, // below the engine's minimum
		{"memtable_size=0", `"memtable_size=0"`},
		{"commit_interval=fast", `"commit_interval=fast"`},
		{"readahead", `"readahead"`},
		{"readahead=2G", `"readahead=2G"`},
		{"commit_interval=-1s", `"commit_interval=-1s"`},
		{"compression=zstd", `"compression=zstd"`},
		{"memtable_policy=lazy", `"memtable_policy=lazy"`},
		{"compaction=universal", `"compaction=universal"`},
		{"tier_ratio=0.5", `"tier_ratio=0.5"`},
		{"tier_ratio=x", `"tier_ratio=x"`},
		{"inmemory_flush_size=0", `"inmemory_flush_size=0"`},
		{"l0_trigger=0", `"l0_trigger=0"`},
		{"inmemory_flush_size=128M,memtable_size=64M", `"inmemory_flush_size=128M"`}, // above the memtable size
		{"level_ratio=1", `"level_ratio=1"`},
		{"compaction_concurrency=x", `"compaction_concurrency=x"`},
		{"journal=", `"journal="`},
		{"log", `"log"`},
		{"ro=1", `"ro=1"`},
		{"allow_other=yes", `"allow_other=yes"`},
		{"block_size=4096", "mkfs"},
		{"journal_size=1G", "mkfs"},
		{"nodefault_permissions", "default_permissions cannot be turned off"},
		{"subtype=a b", `"subtype=a b"`},
		{"rw,,bogus2", `"bogus2"`},
		{"metrics", `"metrics"`},
		{"metrics=9567", `"metrics=9567"`},
		{"metrics=127.0.0.1:http", `"metrics=127.0.0.1:http"`},
	} {
		_, err := mount.ParseOptions(tc.in)
		if err == nil {
			t.Errorf("ParseOptions(%q): no error", tc.in)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseOptions(%q) = %q; want one line containing %q", tc.in, err, tc.want)
		}
	}
}

func TestSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "4096": 4096, "4k": 4 << 10, "4K": 4 << 10, "4KiB": 4 << 10, "4KB": 4 << 10,
		"64M": 64 << 20, "1G": 1 << 30, "2T": 2 << 40,
	} {
		got, err := mount.ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "K", "-1", "1.5G", "12X", "1P", "99999999999T"} {
		if _, err := mount.ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q): no error", in)
		}
	}
	for in, want := range map[int64]string{0: "0", 1000: "1000", 4096: "4K", 3 << 20: "3M", 1 << 30: "1G", 1<<30 + 1<<20: "1025M"} {
		if got := mount.FormatSize(in); got != want {
			t.Errorf("FormatSize(%d) = %q; want %q", in, got, want)
		}
	}
}

// Every documented option parses (with a sample value), and the help text
// lists every one with its default.
func TestOptionsDocumented(t *testing.T) {
	samples := map[string]string{
		"PATH": "/x", "SIZE": "4M", "DURATION": "1s", "lz4|none": "none", "N": "3", "NAME": "n",
		"none|basic|eager|adaptive": "eager", "leveled|tiered": "tiered", "R": "3",
		"HOST:PORT": "127.0.0.1:0",
	}
	help := mount.OptionsHelp()
	for _, d := range mount.Options() {
		if d.Usage == "" || d.Group == "" {
			t.Errorf("option %s: no usage or group", d.Name)
		}
		opt := strings.TrimSuffix(d.Name, "*")
		if strings.HasSuffix(d.Name, "*") {
			opt += "example"
		}
		if d.Arg != "" {
			opt += "=" + samples[d.Arg]
		}
		if _, err := mount.ParseOptions(opt); err != nil {
			t.Errorf("documented option %q does not parse: %v", opt, err)
		}
		if !strings.Contains(help, "  "+d.Name) {
			t.Errorf("help does not list %s", d.Name)
		}
		if d.Default != "" && !strings.Contains(help, "(default: "+d.Default+")") {
			t.Errorf("help does not show the default of %s", d.Name)
		}
	}
	for _, name := range []string{"journal", "cache_size", "memtable_size", "commit_interval", "compression",
		"memtable_policy", "compaction", "tier_ratio", "inmemory_flush_size",
		"allow_other", "default_permissions", "ro", "rw", "debug", "noauto", "nofail", "_netdev", "x-*"} {
		if !slices.ContainsFunc(mount.Options(), func(d mount.OptionDoc) bool { return d.Name == name }) {
			t.Errorf("option %s is not documented", name)
		}
	}
}

func TestFUSEOptions(t *testing.T) {
	cfg, err := mount.ParseOptions("ro,allow_other,suid,noatime")
	if err != nil {
		t.Fatal(err)
	}
	cfg.EnsureDefaults()
	mo := cfg.FUSEOptions(fuse.MountOptions{MaxWrite: 1 << 20, Options: []string{"nosuid", "rw", "fsname=x"}}, "/data", nil)
	if mo.FsName != "/data" || mo.Name != "lsmfs" || !mo.AllowOther || mo.MaxWrite != 1<<20 {
		t.Errorf("FUSEOptions: %+v", mo)
	}
	want := []string{"fsname=x", "default_permissions", "ro", "suid", "noatime"}
	if !reflect.DeepEqual(mo.Options, want) {
		t.Errorf("FUSEOptions().Options = %q; want %q", mo.Options, want)
	}
	eo := cfg.EngineOptions(nil)
	if !eo.ReadOnly {
		t.Errorf("EngineOptions: not read-only")
	}
	// strictatime clears noatime for the kernel too (mount(2)).
	cfg, err = mount.ParseOptions("noatime,strictatime")
	if err != nil {
		t.Fatal(err)
	}
	mo = cfg.FUSEOptions(fuse.MountOptions{}, "/data", nil)
	if slices.Contains(mo.Options, "noatime") {
		t.Errorf("strictatime,noatime: kernel options %q", mo.Options)
	}
}

// TestOptionOrder: options whose limits depend on each other are accepted in
// any order (fstab users write them in any order): inmemory_flush_size above
// the default memtable size was refused before a later memtable_size raised
// it. l0_trigger has no bound from the stop-writes trigger, which no option
// sets (compaction review).
func TestOptionOrder(t *testing.T) {
	for _, opts := range []string{
		"inmemory_flush_size=128M,memtable_size=256M",
		"memtable_size=256M,inmemory_flush_size=128M",
		"l0_trigger=20",
		"compaction=tiered,l0_trigger=64",
	} {
		if _, err := mount.ParseOptions(opts); err != nil {
			t.Errorf("ParseOptions(%q): %v", opts, err)
		}
	}
}

// TestAtimePolicy: the access-time options reach the filesystem, and
// strictatime overrides noatime and relatime in any order, as mount(2)
// says.
func TestAtimePolicy(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  fs.AtimePolicy
		nodir bool
	}{
		{"", fs.AtimeRelative, false},
		{"relatime", fs.AtimeRelative, false},
		{"strictatime", fs.AtimeStrict, false},
		{"strictatime,nostrictatime", fs.AtimeRelative, false},
		{"noatime", fs.AtimeNever, false},
		{"strictatime,noatime", fs.AtimeStrict, false},
		{"noatime,strictatime", fs.AtimeStrict, false},
		{"strictatime,relatime", fs.AtimeStrict, false},
		{"noatime,atime,strictatime", fs.AtimeStrict, false},
		{"nodiratime", fs.AtimeRelative, true},
	} {
		c, err := mount.ParseOptions(tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		o := c.FSOptions(nil)
		if o.Atime != tc.want || o.NoDirAtime != tc.nodir {
			t.Errorf("%q: atime %v nodiratime %v, want %v %v", tc.in, o.Atime, o.NoDirAtime, tc.want, tc.nodir)
		}
	}
}
