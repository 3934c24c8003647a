package mount

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/lsmfs/lsmfs/lsm"
)

// Option groups, in the order the help text lists them.
const (
	// GroupLsmfs holds the options of lsmfs itself (engine, journal, daemon).
	GroupLsmfs = "lsmfs"
	// GroupFUSE holds the FUSE and generic kernel mount options.
	GroupFUSE = "FUSE and kernel"
	// GroupIgnored holds the options that mount(8), fstab and systemd use
	// themselves and pass along; lsmfs accepts and ignores them.
	GroupIgnored = "accepted and ignored (for mount(8), fstab, systemd)"
)

// OptionDoc describes one -o option, for help texts and documentation.
type OptionDoc struct {
	// Name is the option name; a trailing "*" marks a prefix ("x-*").
	Name string
	// Arg names the value ("SIZE", "PATH"); empty for a flag.
	Arg string
	// Default is the effective default, as a user would write it.
	Default string
	// Usage is one sentence.
	Usage string
	// Group is one of GroupLsmfs, GroupFUSE, GroupIgnored.
	Group string
}

// option is one row of the option table: its documentation and how it sets a
// Config. apply gets the value after "=" and whether there was an "=".
type option struct {
	OptionDoc
	prefix bool // Name (without "*") is a prefix
	hidden bool // refused with a pointed message, not documented
	apply  func(c *Config, val string, hasVal bool) error
}

// Options returns the documentation of every accepted -o option, grouped in
// help order. It is built from the same table the parser uses.
func Options() []OptionDoc {
	var docs []OptionDoc
	for _, o := range optionTable() {
		if !o.hidden {
			docs = append(docs, o.OptionDoc)
		}
	}
	return docs
}

// OptionsHelp renders Options() for `lsmfs mount --help`: a heading per
// group, then each option with its default, and its usage wrapped below.
func OptionsHelp() string {
	var b strings.Builder
	group := ""
	for _, d := range Options() {
		if d.Group != group {
			if group != "" {
				b.WriteString("\n")
			}
			group = d.Group
			fmt.Fprintf(&b, "%s options:\n", group)
		}
		name := d.Name
		if d.Arg != "" {
			name += "=" + d.Arg
		}
		if d.Default != "" {
			name += "  (default: " + d.Default + ")"
		}
		fmt.Fprintf(&b, "  %s\n", name)
		for _, line := range wrap(d.Usage, 72) {
			fmt.Fprintf(&b, "      %s\n", line)
		}
	}
	return b.String()
}

// wrap breaks s into lines of at most width bytes at spaces.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// optionTable is the single table of -o options. It is built on each call
// from the engine's defaults, so the documented defaults are the real ones.
func optionTable() []option {
	def := (&lsm.Options{}).EnsureDefaults()
	flag := func(name, usage, group, deflt string, apply func(c *Config)) option {
		return option{
			OptionDoc: OptionDoc{Name: name, Usage: usage, Group: group, Default: deflt},
			apply: func(c *Config, val string, hasVal bool) error {
				if hasVal {
					return fmt.Errorf("takes no value")
				}
				apply(c)
				return nil
			},
		}
	}
	kernelFlag := func(name, usage string) option {
		return flag(name, usage, GroupFUSE, "", func(c *Config) { c.addKernelFlag(name) })
	}
	ignored := func(name, usage string) option {
		o := option{
			OptionDoc: OptionDoc{Name: name, Usage: usage, Group: GroupIgnored},
			apply:     func(c *Config, val string, hasVal bool) error { return nil },
		}
		if strings.HasSuffix(name, "*") {
			o.prefix = true
		}
		return o
	}
	return []option{
		// lsmfs options.
		{
			OptionDoc: OptionDoc{Name: "journal", Arg: "PATH", Group: GroupLsmfs,
				Default: "the journal recorded at mkfs (DATADIR/journal)",
				Usage:   "journal file or block device; must belong to this filesystem"},
			apply: func(c *Config, val string, hasVal bool) error {
				if !hasVal || val == "" {
					return fmt.Errorf("needs a path")
				}
				c.Journal = val
				return nil
			},
		},
		{
			OptionDoc: OptionDoc{Name: "cache_size", Arg: "SIZE", Group: GroupLsmfs,
				Default: FormatSize(def.CacheSize),
				Usage:   "block cache size (K, M, G, T suffixes: powers of 1024); 0 disables the cache"},
			apply: engineOption(func(c *Config, val string) error {
				n, err := ParseSize(val)
				if err != nil {
					return err
				}
				if n == 0 {
					n = -1 // lsm: negative means no cache
				}
				c.CacheSize = n
				return nil
			}),
		},
		{
			OptionDoc: OptionDoc{Name: "memtable_size", Arg: "SIZE", Group: GroupLsmfs,
				Default: FormatSize(def.MemtableSize),
				Usage:   "size of one in-memory table before it is flushed to disk"},
			apply: engineOption(func(c *Config, val string) error {
				n, err := ParseSize(val)
				if err != nil {
					return err
				}
				if n == 0 {
					return fmt.Errorf("must be positive")
				}
				c.MemtableSize = n
				return nil
			}),
		},
		{
			OptionDoc: OptionDoc{Name: "memtable_policy", Arg: "none|basic|eager|adaptive", Group: GroupLsmfs,
				Default: string(def.MemtablePolicy),
				Usage: "in-memory compaction of the memtable pipeline: none (segments flushed as they are), basic (indexes flattened), " +
					"eager (segments merged, superseded versions dropped), adaptive (basic or eager from the measured share of duplicate keys)"},
			apply: engineOption(func(c *Config, val string) error {
				c.MemtablePolicy = val
				return nil
			}),
		},
		{
			OptionDoc: OptionDoc{Name: "inmemory_flush_size", Arg: "SIZE", Group: GroupLsmfs,
				Default: "memtable_size/8 (" + FormatSize(def.InMemoryFlushSize) + ")",
				Usage:   "size of the active memtable segment; when full it joins the pipeline where memtable_policy works on it"},
			apply: engineOption(func(c *Config, val string) error {
				n, err := ParseSize(val)
				if err != nil {
					return err
				}
				if n == 0 {
					return fmt.Errorf("must be positive")
				}
				c.InMemoryFlushSize = n
				return nil
			}),
		},
		{
			OptionDoc: OptionDoc{Name: "compaction", Arg: "leveled|tiered", Group: GroupLsmfs,
				Default: string(def.Compaction),
				Usage:   "on-disk compaction style: leveled (levels of disjoint tables) or tiered (size-tiered sorted runs)"},
			apply: engineOption(func(c *Config, val string) error {
				c.Compaction = val
				return nil
			}),
		},
		{
			OptionDoc: OptionDoc{Name: "value_threshold", Arg: "SIZE", Group: GroupLsmfs,
				Default: FormatSize(int64(def.ValueThreshold)),
				Usage:   "values (file data blocks) of at least SIZE go to the value log and the tree keeps a pointer; synchronous writes (fsync, O_SYNC) of at most 64 KiB keep theirs in the journal and the memtable, and the next flush moves them to the value log (when it holds at least 1 MiB of them; less stays in the tree); 0 keeps all data in the tree"},
			apply: engineOption(func(c *Config, val string) error {
				n, err := ParseSize(val)
				if err != nil {
					return err
				}
				switch {
				case n == 0:
					c.ValueThreshold = -1
				case n < 16 || n > 64<<20:
					return fmt.Errorf("bad size %q: want 0 or 16 bytes to 64M", val)
				default:
					c.ValueThreshold = int(n)
				}
				return nil
			}),
		},
		{
			OptionDoc: OptionDoc{Name: "tier_ratio", Arg: "R", Group: GroupLsmfs,
				Default: strconv.FormatFloat(def.TierRatio, 'g', -1, 64),
				Usage:   "tiered compaction: a sorted run joins a merge while its size is at most R times the runs before it (R >= 1)"},
			apply: engineOption(func(c *Config, val string) error {
				r, err := strconv.ParseFloat(val, 64)
				if err != nil || r <= 0 {
					return fmt.Errorf("bad ratio %q: want a number >= 1", val)
				}
				c.TierRatio = r
				return nil
			}),
		},
		{
			OptionDoc: OptionDoc{Name: "commit_interval", Arg: "DURATION", Group: GroupLsmfs,
				Default: def.Journal.CommitInterval.String(),
				Usage:   "longest time an unsynced write stays in memory before the journal forces it (like ext4 commit=); a Go duration (500ms, 5s) or seconds"},
			apply: engineOption(func(c *Config, val string) error {
				d, err := parseDuration(val)
				if err != nil {
					return err
				}
				if d <= 0 {
					return fmt.Errorf("must be positive")
				}
				c.CommitInterval = d
				return nil
			}),
		},
		{
			OptionDoc: OptionDoc{Name: "compression", Arg: "lz4|none", Group: GroupLsmfs,
				Default: "lz4",
				Usage:   "compression of journal frames and table blocks (applied only where it pays)"},
			apply: engineOption(func(c *Config, val string) error {
				switch val {
				case "lz4", "none":
					c.Compression = val
					return nil
				}
				return fmt.Errorf("want lz4 or none")
			}),
		},
		{
			OptionDoc: OptionDoc{Name: "l0_trigger", Arg: "N", Group: GroupLsmfs,
				Default: strconv.Itoa(def.L0CompactionTrigger),
				Usage:   "number of level-0 tables that starts a level-0 compaction; writes stall at max(20, 2N+4)"},
			apply: engineOption(func(c *Config, val string) error {
				n, err := parsePositive(val)
				c.L0Trigger = n
				return err
			}),
		},
		{
			OptionDoc: OptionDoc{Name: "level_ratio", Arg: "N", Group: GroupLsmfs,
				Default: strconv.Itoa(def.LevelMultiplier),
				Usage:   "size ratio between adjacent levels"},
			apply: engineOption(func(c *Config, val string) error {
				n, err := parsePositive(val)
				c.LevelRatio = n
				return err
			}),
		},
		{
			OptionDoc: OptionDoc{Name: "compaction_concurrency", Arg: "N", Group: GroupLsmfs,
				Default: strconv.Itoa(def.MaxConcurrentCompactions),
				Usage:   "most background compactions running at once"},
			apply: engineOption(func(c *Config, val string) error {
				n, err := parsePositive(val)
				c.CompactionConcurrency = n
				return err
			}),
		},
		{
			OptionDoc: OptionDoc{Name: "log", Arg: "PATH", Group: GroupLsmfs,
				Default: "syslog when daemonized (discarded without /dev/log), stderr with --foreground",
				Usage:   "append the daemon's log lines (and its stderr) to PATH"},
			apply: func(c *Config, val string, hasVal bool) error {
				if !hasVal || val == "" {
					return fmt.Errorf("needs a path")
				}
				c.LogFile = val
				return nil
			},
		},
		{
			OptionDoc: OptionDoc{Name: "metrics", Arg: "HOST:PORT", Group: GroupLsmfs,
				Default: "off",
				Usage: "serve Prometheus metrics at http://HOST:PORT/metrics (port 0 picks a free port, shown by lsmfs stats); " +
					"no authentication: use a loopback or monitoring address"},
			apply: func(c *Config, val string, hasVal bool) error {
				if !hasVal || val == "" {
					return fmt.Errorf("needs HOST:PORT")
				}
				_, port, err := net.SplitHostPort(val)
				if err != nil {
					return fmt.Errorf("want HOST:PORT: %v", err)
				}
				if _, err := strconv.ParseUint(port, 10, 16); err != nil {
					return fmt.Errorf("bad port %q", port)
				}
				c.Metrics = val
				return nil
			},
		},
		flag("debug", "trace every FUSE operation and log at debug level", GroupLsmfs, "off",
			func(c *Config) { c.Debug = true }),
		{
			OptionDoc: OptionDoc{Name: "block_size", Group: GroupLsmfs},
			hidden:    true,
			apply: func(c *Config, val string, hasVal bool) error {
				return fmt.Errorf("the block size is chosen at mkfs (lsmfs mkfs --block-size) and cannot change at mount")
			},
		},
		{
			OptionDoc: OptionDoc{Name: "journal_size", Group: GroupLsmfs},
			hidden:    true,
			apply: func(c *Config, val string, hasVal bool) error {
				return fmt.Errorf("the journal size is chosen at mkfs (lsmfs mkfs --journal-size) and cannot change at mount")
			},
		},

		// FUSE and kernel options.
		flag("allow_other", "let users other than the mounting one access the filesystem (permissions are still checked by the kernel)",
			GroupFUSE, "off", func(c *Config) { c.AllowOther = true }),
		flag("default_permissions", "the kernel checks modes and ownership; always on (lsmfs does no permission checks of its own)",
			GroupFUSE, "on", func(c *Config) {}),
		flag("writeback_cache", "let the kernel gather writes in its page cache and send them in large chunks (FUSE writeback cache); data still reaches the journal at fsync, flush and close",
			GroupFUSE, "off", func(c *Config) { c.WritebackCache = true }),
		{
			OptionDoc: OptionDoc{Name: "readahead", Arg: "SIZE", Group: GroupFUSE,
				Default: FormatSize(DefaultReadahead),
				Usage: "how far ahead the kernel reads a file read in sequence (the mount's read_ahead_kb in /sys/class/bdi, " +
					"set by the daemon after mounting; needs root); 0 turns readahead off"},
			apply: func(c *Config, val string, hasVal bool) error {
				if !hasVal || val == "" {
					return fmt.Errorf("needs a size")
				}
				n, err := ParseSize(val)
				if err != nil {
					return err
				}
				if n > MaxReadahead {
					return fmt.Errorf("at most %s", FormatSize(MaxReadahead))
				}
				if n == 0 {
					n = -1
				}
				c.Readahead = n
				return nil
			},
		},
		flag("ro", "mount read-only: the engine is opened read-only and every write fails with EROFS",
			GroupFUSE, "", func(c *Config) { c.ReadOnly = true }),
		flag("rw", "mount read-write", GroupFUSE, "rw", func(c *Config) { c.ReadOnly = false }),
		{
			OptionDoc: OptionDoc{Name: "fsname", Arg: "NAME", Group: GroupFUSE,
				Default: "DATADIR", Usage: "source shown in /proc/mounts and df"},
			apply: func(c *Config, val string, hasVal bool) error {
				if !hasVal || val == "" {
					return fmt.Errorf("needs a name")
				}
				c.FsName = val
				return nil
			},
		},
		{
			OptionDoc: OptionDoc{Name: "subtype", Arg: "NAME", Group: GroupFUSE,
				Default: "lsmfs", Usage: "type shown as fuse.NAME in /proc/mounts and df -T"},
			apply: func(c *Config, val string, hasVal bool) error {
				if !hasVal || val == "" || strings.ContainsAny(val, " \t\n") {
					return fmt.Errorf("needs a name without spaces")
				}
				c.Subtype = val
				return nil
			},
		},
		{
			OptionDoc: OptionDoc{Name: "nodefault_permissions", Group: GroupFUSE},
			hidden:    true,
			apply: func(c *Config, val string, hasVal bool) error {
				return fmt.Errorf("lsmfs relies on the kernel for permission checks; default_permissions cannot be turned off")
			},
		},
		kernelFlag("suid", "honour set-user-id and set-group-id bits (mount(8) passes it for root)"),
		kernelFlag("nosuid", "ignore set-user-id and set-group-id bits (the FUSE default)"),
		kernelFlag("dev", "allow opening device nodes (mount(8) passes it for root)"),
		kernelFlag("nodev", "refuse opening device nodes (the FUSE default)"),
		kernelFlag("exec", "allow executing programs (the default)"),
		kernelFlag("noexec", "refuse executing programs"),
		kernelFlag("atime", "reads update access times as relatime or strictatime say (the default; undoes noatime)"),
		kernelFlag("noatime", "reads never update access times (lsmfs keeps FUSE inodes' access times itself)"),
		flag("relatime", "a read updates the access time only when it is not after the last change (mtime, ctime) or is a day old (the default, as on Linux)",
			GroupFUSE, "on", func(c *Config) {}),
		flag("strictatime", "every read that reaches lsmfs updates the access time (reads the kernel serves from its cache do not); overrides noatime and relatime, as in mount(2)",
			GroupFUSE, "off", func(c *Config) { c.StrictAtime = true }),
		flag("nostrictatime", "undoes strictatime", GroupFUSE, "", func(c *Config) { c.StrictAtime = false }),
		flag("nodiratime", "listing a directory does not update its access time", GroupFUSE, "off", func(c *Config) { c.NoDirAtime = true }),
		flag("diratime", "undoes nodiratime", GroupFUSE, "", func(c *Config) { c.NoDirAtime = false }),
		kernelFlag("sync", "kernel mount flag sync"),
		kernelFlag("async", "kernel mount flag async (the default)"),
		kernelFlag("dirsync", "kernel mount flag dirsync"),

		// Options for mount(8), fstab and systemd.
		ignored("defaults", "fstab placeholder for the default options"),
		ignored("auto", "mount with mount -a"),
		ignored("noauto", "do not mount with mount -a"),
		ignored("nofail", "do not report errors for a missing device at boot"),
		ignored("_netdev", "the filesystem needs the network (lsmfs does not; accepted for compatibility)"),
		ignored("user", "users may mount (fstab)"),
		ignored("nouser", "only root may mount (fstab)"),
		ignored("users", "any user may mount and unmount (fstab)"),
		ignored("owner", "the device owner may mount (fstab)"),
		ignored("group", "members of the device group may mount (fstab)"),
		ignored("norelatime", "Linux keeps relatime unless strictatime or noatime is given; so does lsmfs"),
		ignored("lazytime", "access times are written lazily anyway: not forced, so a crash may lose the last ones"),
		ignored("nolazytime", "see lazytime"),
		ignored("x-*", "options for userspace tools (x-systemd.*, x-gvfs-*)"),
		ignored("comment=*", "fstab comment for userspace tools"),
	}
}

// engineOption wraps a setter of an engine option: it needs a value, and the
// resulting engine options must validate, so a value the engine would refuse
// is reported against the option that set it.
func engineOption(set func(c *Config, val string) error) func(c *Config, val string, hasVal bool) error {
	return func(c *Config, val string, hasVal bool) error {
		if !hasVal || val == "" {
			return fmt.Errorf("needs a value")
		}
		if err := set(c, val); err != nil {
			return err
		}
		o := c.EngineOptions(nil)
		o.EnsureDefaults()
		if err := o.Validate(); err != nil {
			return invalidEngineOptions{err}
		}
		return nil
	}
}

// invalidEngineOptions is an engine option whose value the engine refuses
// with the options parsed so far. ParseOptions reports it only if the whole
// list is refused too: a later option may lift the limit (memtable_size
// after inmemory_flush_size), and fstab users write options in any order.
type invalidEngineOptions struct{ error }

func (e invalidEngineOptions) Unwrap() error { return e.error }

// ParseOptions parses one or more comma-separated option lists (the values
// of -o flags, in order) into a Config. A later option overrides an earlier
// one. A comma inside a value is written "\,". The first unknown or malformed
// option is reported by name.
func ParseOptions(lists ...string) (Config, error) {
	var c Config
	var deferred error // the first invalidEngineOptions
	table := optionTable()
	for _, list := range lists {
		for _, item := range splitOptions(list) {
			if item == "" {
				continue
			}
			err := c.apply(table, item)
			var invalid invalidEngineOptions
			switch {
			case errors.As(err, &invalid):
				if deferred == nil {
					deferred = err
				}
			case err != nil:
				return Config{}, err
			}
		}
	}
	if deferred != nil {
		o := c.EngineOptions(nil)
		o.EnsureDefaults()
		if err := o.Validate(); err != nil {
			return Config{}, deferred
		}
	}
	return c, nil
}

func (c *Config) apply(table []option, item string) error {
	name, val, hasVal := strings.Cut(item, "=")
	for _, o := range table {
		var match bool
		if o.prefix {
			match = strings.HasPrefix(item, strings.TrimSuffix(o.Name, "*"))
		} else {
			match = name == o.Name
		}
		if !match {
			continue
		}
		if err := o.apply(c, val, hasVal); err != nil {
			return fmt.Errorf("mount option %q: %w", item, err)
		}
		if o.Group == GroupIgnored {
			c.Ignored = append(c.Ignored, item)
		}
		return nil
	}
	return fmt.Errorf("unknown mount option %q (see lsmfs mount --help)", item)
}

// splitOptions splits an option list at commas that are not escaped by a
// backslash, and unescapes "\," and "\\".
func splitOptions(list string) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(list); i++ {
		switch ch := list[i]; {
		case ch == '\\' && i+1 < len(list) && (list[i+1] == ',' || list[i+1] == '\\'):
			cur.WriteByte(list[i+1])
			i++
		case ch == ',':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(ch)
		}
	}
	return append(out, cur.String())
}

func escapeOption(s string) string {
	return strings.NewReplacer(`\`, `\\`, `,`, `\,`).Replace(s)
}

// ParseSize parses a byte count: digits with an optional K, M, G or T suffix
// (powers of 1024, case-insensitive, optionally followed by "iB" or "B").
func ParseSize(s string) (int64, error) {
	num := strings.TrimRight(s, "KkMmGgTtiIbB")
	unit := strings.ToUpper(s[len(num):])
	unit = strings.TrimSuffix(strings.TrimSuffix(unit, "B"), "I")
	shift := 0
	switch unit {
	case "":
	case "K":
		shift = 10
	case "M":
		shift = 20
	case "G":
		shift = 30
	case "T":
		shift = 40
	default:
		return 0, fmt.Errorf("bad size %q: want a number with an optional K, M, G or T suffix", s)
	}
	n, err := strconv.ParseUint(num, 10, 63)
	if err != nil || n > (1<<63-1)>>shift {
		return 0, fmt.Errorf("bad size %q: want a number with an optional K, M, G or T suffix", s)
	}
	return int64(n << shift), nil
}

// FormatSize renders n with the largest K, M, G or T suffix that divides it.
func FormatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"T", 40}, {"G", 30}, {"M", 20}, {"K", 10}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// parseDuration accepts a Go duration ("500ms", "5s") or a number of seconds.
func parseDuration(s string) (time.Duration, error) {
	if n, err := strconv.ParseUint(s, 10, 31); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad duration %q: want e.g. 500ms, 5s or a number of seconds", s)
	}
	return d, nil
}

func parsePositive(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("bad number %q: want a positive integer", s)
	}
	return n, nil
}
