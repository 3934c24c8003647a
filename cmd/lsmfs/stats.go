package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/urfave/cli/v2"

	"github.com/lsmfs/lsmfs/mount"
)

func statsCommand() *cli.Command {
	return &cli.Command{
		Name:      "stats",
		Usage:     "show live figures of a mounted lsmfs, or what an unmounted DATADIR holds",
		ArgsUsage: "MOUNTPOINT|DATADIR",
		Description: `Shows what the daemon serving MOUNTPOINT (or DATADIR) is doing, from its control
socket (DATADIR/lsmfs.sock): FUSE operations by type with latency percentiles;
the journal's records, frames, forces, records per force (group commit) and
compression ratio; the memtable policy, segments and in-memory compactions;
the tables per level, flushes, compactions and write amplification; the value
log's size and live ratio; the block cache's hit ratio; and the effective
options (the -o list, the FUSE options and every engine option with its
default filled in).

For an unmounted DATADIR it opens the engine read-only and shows what is
there (levels, value log, journal ring, options); operation counters need a
mounted filesystem.

--json prints one JSON object (the fields of mount.Stats; with --watch, one
object per line). --watch refreshes every --interval until interrupted, with
per-second rates on a terminal.

Examples:
   lsmfs stats /mnt/lsmfs
   lsmfs stats --json /mnt/lsmfs | jq .journal.records_per_force
   lsmfs stats --watch --interval 1s /mnt/lsmfs
   lsmfs stats /srv/lsmfs                     # unmounted: read-only look`,
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print JSON instead of tables"},
			&cli.BoolFlag{Name: "watch", Usage: "refresh until interrupted (mounted filesystems only)"},
			&cli.DurationFlag{Name: "interval", Usage: "refresh every `DURATION` with --watch", Value: 2 * time.Second},
		}, engineFlags()...),
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef(c, "want MOUNTPOINT or DATADIR, got %d arguments", c.NArg())
			}
			if c.Duration("interval") <= 0 {
				return usagef(c, "--interval must be positive")
			}
			return stats(c, c.Args().First())
		},
	}
}

func stats(c *cli.Context, path string) error {
	t, err := mount.Resolve(path)
	if err != nil {
		return err
	}
	ctl := mount.NewControl(t.DataDir)
	s, err := ctl.Stats(c.Context)
	switch {
	case err == nil:
	case errors.Is(err, mount.ErrNotServing) && t.Mountpoint == "":
		if c.Bool("watch") {
			return fmt.Errorf("%s is not mounted: --watch needs a mounted filesystem", t.DataDir)
		}
		if s, err = offlineStats(c, t.DataDir); err != nil {
			return err
		}
	case errors.Is(err, mount.ErrNotServing):
		return mount.DeadMountError(t)
	default:
		return err
	}
	if !c.Bool("watch") {
		return printStats(c.App.Writer, s, nil, c.Bool("json"))
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	clear := isTerminal(c.App.Writer) && !c.Bool("json")
	var prev *mount.Stats
	tick := time.NewTicker(c.Duration("interval"))
	defer tick.Stop()
	for {
		if clear {
			io.WriteString(c.App.Writer, "\033[H\033[2J")
		}
		if err := printStats(c.App.Writer, s, prev, c.Bool("json")); err != nil {
			return err
		}
		p := s
		prev = &p
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if s, err = ctl.Stats(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, mount.ErrNotServing) {
				return fmt.Errorf("%s is no longer mounted", t.DataDir)
			}
			return err
		}
	}
}

// offlineStats opens an unmounted data directory read-only.
func offlineStats(c *cli.Context, dataDir string) (mount.Stats, error) {
	db, _, err := openEngine(c, dataDir, true)
	if err != nil {
		return mount.Stats{}, err
	}
	defer db.Close()
	s := mount.EngineStats(db, dataDir)
	s.Source = "datadir"
	s.ReadOnly = true
	return s, nil
}

// printStats prints s as JSON (one line) or as tables; with prev, operation
// rates since prev are shown.
func printStats(w io.Writer, s mount.Stats, prev *mount.Stats, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	b := humanize.IBytes
	if s.Source == "daemon" {
		fmt.Fprintf(tw, "lsmfs %s on %s (pid %d, up %s%s)\n", s.DataDir, s.Mountpoint, s.PID,
			(time.Duration(s.UptimeSeconds) * time.Second).String(), map[bool]string{true: ", read-only"}[s.ReadOnly])
	} else {
		fmt.Fprintf(tw, "lsmfs %s (not mounted; opened read-only)\n", s.DataDir)
	}
	if s.BackgroundError != "" {
		fmt.Fprintf(tw, "ENGINE ERROR: %s (writes are refused)\n", s.BackgroundError)
	}

	if s.Source == "daemon" {
		fmt.Fprintf(tw, "\noperations\tcount\terrors\t/s\tmean\tp50\tp90\tp99\tmax\n")
		ops := slices.Clone(s.Ops)
		slices.SortStableFunc(ops, func(a, b mount.OpStats) int { return cmp.Compare(b.Count, a.Count) })
		for _, o := range ops {
			rate := "-"
			if prev != nil {
				secs := s.Time.Sub(prev.Time).Seconds()
				var before uint64
				for _, p := range prev.Ops {
					if p.Op == o.Op {
						before = p.Count
					}
				}
				if secs > 0 {
					rate = fmt.Sprintf("%.0f", float64(o.Count-before)/secs)
				}
			}
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", o.Op, o.Count, o.Errors, rate,
				dur(o.Mean), dur(o.P50), dur(o.P90), dur(o.P99), dur(o.Max))
		}
		if len(ops) == 0 {
			fmt.Fprintf(tw, "  (none yet)\n")
		}
	}

	j := s.Journal
	fmt.Fprintf(tw, "\njournal\t%s\n", s.EngineOptions["journal"])
	fmt.Fprintf(tw, "  records %d, frames %d (%d compressed), forces %d\t%.1f records/force, %.1f records/frame (max %d)\n",
		j.Records, j.Frames, j.CompressedFrames, j.Forces, j.RecordsPerForce, j.MeanRecordsPerFrame, j.MaxRecordsPerFrame)
	fmt.Fprintf(tw, "  bytes raw %s, stored %s, on device %s\tcompression ratio %.2f\n", b(j.RawBytes), b(j.StoredBytes), b(j.DeviceBytes), j.CompressionRatio)
	fmt.Fprintf(tw, "  force time %s (max %s), checkpoints %d, space waits %d (%s)\tring %s live of %s\n",
		dur(j.ForceSeconds), dur(j.ForceSecondsMax), j.Checkpoints, j.SpaceWaits, dur(j.SpaceWaitSeconds), b(uint64(j.LiveBytes)), b(uint64(j.Capacity)))

	m := s.Memtable
	fmt.Fprintf(tw, "\nmemtable\tpolicy %s\n", m.Policy)
	fmt.Fprintf(tw, "  %d segments, %s (peak %s)\tin-memory compactions %d, merges %d, dropped %d, duplicate share %.2f\n",
		m.Segments, b(m.Bytes), b(m.PeakBytes), m.InMemoryCompactions, m.InMemoryMerges, m.InMemoryDropped, m.DuplicateShare)

	cs := s.Compaction
	fmt.Fprintf(tw, "\ntree\t%s compaction\n", s.EngineOptions["compaction"])
	for _, l := range s.Levels {
		fmt.Fprintf(tw, "  L%d\t%d tables, %s\n", l.Level, l.Tables, b(l.Bytes))
	}
	if len(s.Levels) == 0 {
		fmt.Fprintf(tw, "  (no tables)\n")
	}
	fmt.Fprintf(tw, "  flushes %d (%s), compactions %d (read %s, wrote %s), moves %d, stalls %d\twrite amplification %.2f\n",
		cs.Flushes, b(cs.FlushBytes), cs.Compactions, b(cs.ReadBytes), b(cs.WrittenBytes), cs.Moves, cs.WriteStalls, cs.WriteAmplification)

	v := s.ValueLog
	fmt.Fprintf(tw, "\nvalue log\t%d segments, %s sealed, %s live\tlive ratio %.2f\n", v.Segments, b(v.Bytes), b(v.LiveBytes), v.LiveRatio)
	fmt.Fprintf(tw, "  cleaned %d segments, rewrote %s, %d disk reads; flushes moved %s of synchronous writes here\n", v.Cleaned, b(v.RewrittenBytes), v.DiskReads, b(v.FlushMovedBytes))

	ca := s.Cache
	fmt.Fprintf(tw, "\ncache\t%s of %s\thit ratio %.2f (%d hits, %d misses)\n", b(uint64(max(ca.Used, 0))), b(uint64(max(ca.Capacity, 0))), ca.HitRatio, ca.Hits, ca.Misses)
	fmt.Fprintf(tw, "  bloom filters: %d useful, %d useless; %d table blocks read (%s)\n", s.Reads.BloomUseful, s.Reads.BloomUseless, s.Reads.BlocksRead, b(s.Reads.BytesRead))

	fmt.Fprintf(tw, "\noptions\n")
	if s.Source == "daemon" {
		fmt.Fprintf(tw, "  mount (-o)\t%s\n", orNone(s.MountOptions, "(defaults)"))
		fmt.Fprintf(tw, "  FUSE\t%s\n", strings.Join(s.FUSEOptions, ","))
		if s.MetricsAddress != "" {
			fmt.Fprintf(tw, "  metrics\thttp://%s/metrics\n", s.MetricsAddress)
		}
	}
	keys := make([]string, 0, len(s.EngineOptions))
	for k := range s.EngineOptions {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var eo []string
	for _, k := range keys {
		eo = append(eo, k+"="+s.EngineOptions[k])
	}
	for _, line := range wrapList(eo, 100) {
		fmt.Fprintf(tw, "  engine\t%s\n", line)
	}
	return nil
}

// dur renders seconds compactly (1.2µs, 350ms, 2.5s).
func dur(secs float64) string {
	if secs == 0 {
		return "0"
	}
	d := time.Duration(secs * 1e9)
	switch {
	case d < time.Microsecond:
		return d.String()
	case d < time.Millisecond:
		return d.Round(100 * time.Nanosecond).String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

// wrapList joins items with spaces into lines of at most width bytes.
func wrapList(items []string, width int) []string {
	var lines []string
	line := ""
	for _, it := range items {
		if line != "" && len(line)+1+len(it) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += it
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
