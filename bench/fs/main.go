// Command fs runs the same filesystem workloads, in one run, on four
// systems and prints one markdown table with ratios:
//
//	ext4         a plain directory of the host filesystem (-dir);
//	passthrough  go-fuse's loopback node (fs.NewLoopbackRoot, default
//	             options) over such a directory, served by a child process;
//	ceiling      a RAM-only FUSE filesystem (ramfs.go) that stores nothing
//	             durable, mounted with lsmfs's kernel options (MountOptions,
//	             timeouts, KEEP_CACHE), served by a child process;
//	lsmfs        the product binary with its defaults (journal file in
//	             DATADIR), via bench/internal/mounted.
//
//	cd bench && go run ./fs            # full size, 5 rounds (about an hour on 2 cores)
//	cd bench && go run ./fs -quick     # smoke run
//	cd bench && go run ./fs -scale     # also 1M empty files in one directory
//	cd bench && go run ./fs -profile /tmp/prof   # pprof of lsmfs per workload
//
// Rounds: in each round every system runs every workload, in turn, on a
// fresh directory and a fresh daemon; the order of the systems rotates from
// round to round, and the table shows the median over rounds. Before a
// step the host is synced (untimed); "caches dropped" means sync and
// echo 3 > /proc/sys/vm/drop_caches, which also makes the kernel forget a
// FUSE mount's dentries and inodes (the stat row's LOOKUP per file shows
// it); daemon-side caches stay. FUSE requests are counted by the daemons
// (lsmfs: its own counters on the control socket; ceiling and passthrough:
// counting.go, at the same RawFileSystem boundary).
//
// Must run as root (drop_caches, FUSE mounts, losetup). See RESULTS.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lsmfs/lsmfs/bench/internal/mounted"
)

var (
	flagDir       = flag.String("dir", "/var/tmp", "parent of the scratch directories (a directory of the host filesystem)")
	flagQuick     = flag.Bool("quick", false, "small sizes, for a smoke run")
	flagRounds    = flag.Int("rounds", 0, "rounds (0: 5, or 2 with -quick)")
	flagSystems   = flag.String("systems", strings.Join(allSystems, ","), "systems to run")
	flagOnly      = flag.String("only", "", "comma-separated workload keys to run (default all)")
	flagMain      = flag.Bool("main", true, "run the main table")
	flagScale     = flag.Bool("scale", false, "run the scale row (1M empty files in one directory; long)")
	flagScaleN    = flag.Int("scale-files", 1000000, "files of the scale row")
	flagJournal   = flag.Bool("journal", true, "run the separate-journal experiment (lsmfs only)")
	flagProfile   = flag.String("profile", "", "instead of measuring, profile lsmfs (CPU, allocations) per workload into this directory")
	flagTree      = flag.String("tree", "", "directory to tar for the untar row (default $GOROOT/src; -quick: $GOROOT/src/go)")
	flagFiles     = flag.Int("files", 0, "override: small files of create/stat/readdir/read/unlink")
	flagSeq       = flag.Int64("seq-mib", 0, "override: MiB of the sequential file")
	flagRandOps   = flag.Int("rand-ops", 0, "override: reads of randread and writes of randwrite")
	flagSeed      = flag.Uint64("seed", 1, "random seed (random read/write offsets)")
	flagBreakdown = flag.Bool("breakdown", true, "print requests per operation by opcode")
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == serveCmd {
		serveMain(os.Args[2:])
		return
	}
	flag.Parse()
	if err := run0(); err != nil {
		fmt.Fprintln(os.Stderr, "fs:", err)
		os.Exit(1)
	}
}

func run0() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("run as root (drop_caches, FUSE mounts, losetup)")
	}
	sz := fullSizes
	rounds := 5
	if *flagQuick {
		sz, rounds = quickSizes, 2
	}
	if *flagRounds > 0 {
		rounds = *flagRounds
	}
	if *flagFiles > 0 {
		sz.files = *flagFiles
	}
	if *flagRandOps > 0 {
		sz.randReads, sz.randWrites = *flagRandOps, *flagRandOps
	}
	if *flagSeq > 0 {
		sz.seqBytes = *flagSeq << 20
	}
	goroot := runtime.GOROOT()
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		goroot = strings.TrimSpace(string(out))
	}
	sz.tree = filepath.Join(goroot, "src")
	if *flagQuick {
		sz.tree = filepath.Join(goroot, "src", "go")
	}
	if *flagTree != "" {
		sz.tree = *flagTree
	}
	systems := strings.Split(*flagSystems, ",")
	for _, s := range systems {
		if !slices.Contains(allSystems, baseName(s)) {
			return fmt.Errorf("unknown system %q (want some of %v, or a variant: ceiling+LEVER..., lsmfs:OPTION+...)", s, allSystems)
		}
	}
	var only map[string]bool
	if *flagOnly != "" {
		only = map[string]bool{}
		for _, k := range strings.Split(*flagOnly, ",") {
			only[k] = true
		}
	}

	tmp, err := os.MkdirTemp("", "fsbench-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintln(os.Stderr, "building lsmfs...")
	bin, err := mounted.Build(tmp)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	st := &starter{dir: *flagDir, lsmfsBin: bin, self: self}

	e := &env{sz: sz, seed: *flagSeed, dev: newHostDevice(*flagDir)}
	if *flagMain || *flagProfile != "" {
		e.tarPath = filepath.Join("/dev/shm", fmt.Sprintf("fsbench-tree-%d.tar", os.Getpid()))
		defer os.Remove(e.tarPath)
		if err := exec.Command("tar", "-cf", e.tarPath, "-C", filepath.Dir(sz.tree), filepath.Base(sz.tree)).Run(); err != nil {
			return fmt.Errorf("tar %s: %w", sz.tree, err)
		}
		if e.tarEntries, err = countLines("tar", "-tf", e.tarPath); err != nil {
			return err
		}
	}

	printHeader(sz, rounds, systems)
	if *flagProfile != "" {
		return profileRun(st, e, *flagProfile, only)
	}
	if *flagMain {
		if err := mainTable(st, e, systems, rounds, only); err != nil {
			return err
		}
	}
	if *flagScale {
		if err := scaleRun(st, systems, *flagScaleN); err != nil {
			return err
		}
	}
	if *flagJournal && slices.Contains(systems, sysLsmfs) {
		jc := journalFull
		if *flagQuick {
			jc = journalQuick
		}
		if err := journalRun(st, jc); err != nil {
			return err
		}
	}
	return nil
}

func printHeader(sz sizes, rounds int, systems []string) {
	host, _ := os.Hostname()
	cpu := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	var uts strings.Builder
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		uts.WriteString(strings.TrimSpace(string(b)))
	}
	memKiB := procField("/proc/meminfo", "MemTotal:")
	fstype := mountFSType(*flagDir)
	fmt.Printf("# lsmfs vs ext4, go-fuse passthrough and a RAM-only FUSE ceiling\n\n")
	fmt.Printf("- date: %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Printf("- machine: %s, %d CPUs (%s), %d MiB RAM, Linux %s, %s, scratch on %s (%s)\n",
		host, runtime.NumCPU(), cpu, memKiB>>10, uts.String(), runtime.Version(), *flagDir, fstype)
	fmt.Printf("- command: `cd bench && go run ./fs %s`\n", strings.Join(os.Args[1:], " "))
	fmt.Printf("- lsmfs: %s\n", productRevision())
	fmt.Printf("- %d rounds, systems in rotating order, median shown; tree for untar: %s\n", rounds, sz.tree)
	fmt.Printf("- systems: %s\n\n", strings.Join(systems, ", "))
}

// mountFSType returns the type of the filesystem holding dir (/proc/mounts).
func mountFSType(dir string) string {
	dir, _ = filepath.Abs(dir)
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return "?"
	}
	best, typ := "", "?"
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 {
			continue
		}
		mp := f[1]
		if (dir == mp || strings.HasPrefix(dir, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
			best, typ = mp, f[2]+" on "+f[0]
		}
	}
	return typ
}

// productRevision names the lsmfs source the binary was built from: its git
// commit (and whether the tree outside bench/ has uncommitted changes), or a
// REVISION file in an exported tree.
func productRevision() string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/lsmfs/lsmfs").Output()
	if err != nil {
		return "?"
	}
	root := strings.TrimSpace(string(out))
	if b, err := os.ReadFile(filepath.Join(root, "REVISION")); err == nil {
		return "commit " + strings.TrimSpace(string(b)) + " (exported tree " + root + ")"
	}
	rev, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		return root
	}
	s := "commit " + strings.TrimSpace(string(rev))
	if st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--", ".", ":!bench").Output(); err == nil && len(st) > 0 {
		s += " + uncommitted changes"
	}
	return s
}

// mainTable runs the rounds and prints the tables.
func mainTable(st *starter, e *env, systems []string, rounds int, only map[string]bool) error {
	// results[system][row] per round
	results := map[string]map[string][]stepResult{}
	rss := map[string][]uint64{}
	last := map[string]map[string]stepResult{}
	for r := range rounds {
		order := append(systems[r%len(systems):], systems[:r%len(systems)]...)
		order = slices.Clone(order)
		fmt.Fprintf(os.Stderr, "round %d/%d: %v\n", r+1, rounds, order)
		for _, name := range order {
			s, err := st.start(name)
			if err != nil {
				return err
			}
			res, err := runRound(s, e, only)
			peak := s.peakRSS()
			if serr := s.stop(); err == nil && serr != nil {
				err = fmt.Errorf("%s: stop: %w", name, serr)
			}
			if err != nil {
				return err
			}
			if results[name] == nil {
				results[name] = map[string][]stepResult{}
			}
			for k, v := range res {
				results[name][k] = append(results[name][k], v)
			}
			rss[name] = append(rss[name], peak)
			last[name] = res
		}
	}
	printMain(e, systems, results, rss)
	printRoundsAhead(e, systems, results)
	printSerialBound(systems, results)
	if *flagBreakdown {
		printRequests(e, systems, results, last)
	}
	return nil
}

func rowLabel(d rowDef, sz sizes, tarEntries int) string {
	switch d.key {
	case "create":
		return fmt.Sprintf(d.label, sz.files, sz.dirs)
	case "fsync16":
		return fmt.Sprintf(d.label, sz.perWriter)
	case "seqwrite", "seqread":
		return fmt.Sprintf(d.label, sizeStr(sz.seqBytes))
	case "untar":
		return fmt.Sprintf(d.label, fmt.Sprintf("%s (%d entries)", sz.tree, tarEntries))
	}
	return d.label
}

func sizeStr(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

// perOp returns the median over rounds of f(r) per operation, and whether
// any round had operations.
func perOp(rs []stepResult, f func(stepResult) float64) (float64, bool) {
	var v []float64
	for _, r := range rs {
		if r.ops > 0 {
			v = append(v, f(r)/float64(r.ops))
		}
	}
	return median(v), len(v) > 0
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// cell returns the median value of a row on a system, or its note.
func cell(rs []stepResult) (float64, string, bool) {
	var vals []float64
	for _, r := range rs {
		if r.note != "" {
			return 0, r.note, false
		}
		vals = append(vals, r.value)
	}
	if len(vals) == 0 {
		return 0, "–", false
	}
	return median(vals), "", true
}

func fmtVal(v float64, seconds bool) string {
	switch {
	case seconds && v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case seconds:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 100:
		return commas(int64(v + 0.5))
	default:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
}

func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func printMain(e *env, systems []string, results map[string]map[string][]stepResult, rss map[string][]uint64) {
	fmt.Printf("## Throughput (median of rounds)\n\n")
	fmt.Printf("Ratios compare speed: lsmfs's rate ÷ the other's (for rows in seconds, the other's time ÷ lsmfs's), so >1 means lsmfs is faster; for peak RSS, lsmfs's ÷ the other's.\n\n")
	fmt.Printf("| workload | unit |")
	for _, s := range systems {
		fmt.Printf(" %s |", s)
	}
	others := []string{sysCeiling, sysPassthrough, sysExt4}
	for _, o := range others {
		if slices.Contains(systems, o) && slices.Contains(systems, sysLsmfs) {
			fmt.Printf(" lsmfs/%s |", o)
		}
	}
	fmt.Printf("\n|---|---|")
	for range systems {
		fmt.Printf("---:|")
	}
	for _, o := range others {
		if slices.Contains(systems, o) && slices.Contains(systems, sysLsmfs) {
			fmt.Printf("---:|")
		}
	}
	fmt.Println()
	for _, d := range rows {
		if _, ok := results[systems[0]][d.key]; !ok {
			continue
		}
		fmt.Printf("| %s | %s |", rowLabel(d, e.sz, e.tarEntries), d.unit)
		vals := map[string]float64{}
		oks := map[string]bool{}
		for _, s := range systems {
			v, note, ok := cell(results[s][d.key])
			vals[s], oks[s] = v, ok
			if ok {
				fmt.Printf(" %s |", fmtVal(v, d.seconds))
			} else {
				fmt.Printf(" %s |", note)
			}
		}
		for _, o := range others {
			if !slices.Contains(systems, o) || !slices.Contains(systems, sysLsmfs) {
				continue
			}
			if !oks[o] || !oks[sysLsmfs] || vals[o] == 0 || vals[sysLsmfs] == 0 {
				fmt.Printf(" – |")
				continue
			}
			ratio := vals[sysLsmfs] / vals[o]
			if d.seconds {
				ratio = vals[o] / vals[sysLsmfs]
			}
			fmt.Printf(" %.2f |", ratio)
		}
		fmt.Println()
	}
	fmt.Printf("| daemon peak RSS (VmHWM) | MiB |")
	med := map[string]float64{}
	for _, s := range systems {
		var v []float64
		for _, x := range rss[s] {
			v = append(v, float64(x)/(1<<20))
		}
		med[s] = median(v)
		if s == sysExt4 {
			fmt.Printf(" – |")
		} else {
			fmt.Printf(" %.0f |", med[s])
		}
	}
	for _, o := range others {
		if !slices.Contains(systems, o) || !slices.Contains(systems, sysLsmfs) {
			continue
		}
		if o == sysExt4 || med[o] == 0 {
			fmt.Printf(" – |")
		} else {
			fmt.Printf(" %.2f |", med[sysLsmfs]/med[o])
		}
	}
	fmt.Printf("\n\n")
}

// printRoundsAhead prints, per row, in how many rounds lsmfs was faster
// than each other system measured in the same round. A median ratio near 1
// can hide a split: this is the evidence for "at or above" claims.
func printRoundsAhead(e *env, systems []string, results map[string]map[string][]stepResult) {
	if !slices.Contains(systems, sysLsmfs) {
		return
	}
	var others []string
	for _, o := range []string{sysCeiling, sysPassthrough, sysExt4} {
		if slices.Contains(systems, o) {
			others = append(others, o)
		}
	}
	if len(others) == 0 {
		return
	}
	fmt.Printf("### Rounds lsmfs led\n\n")
	fmt.Printf("Per row, the rounds in which lsmfs was faster than the other system in the same round, of the rounds both measured.\n\n")
	var names []string
	for _, o := range others {
		names = append(names, "vs "+o)
	}
	printTableHead("| workload |", "|---|", names)
	for _, d := range rows {
		ls, ok := results[sysLsmfs][d.key]
		if !ok {
			continue
		}
		fmt.Printf("| %s |", rowLabel(d, e.sz, e.tarEntries))
		for _, o := range others {
			led, n := roundsAhead(ls, results[o][d.key], d.seconds)
			if n == 0 {
				fmt.Printf(" – |")
				continue
			}
			fmt.Printf(" %d/%d |", led, n)
		}
		fmt.Println()
	}
	fmt.Println()
}

// printTableHead prints a markdown table's header: the fixed columns left and
// their rule, then a right-aligned column per name.
func printTableHead(left, rule string, names []string) {
	fmt.Print(left)
	for _, n := range names {
		fmt.Printf(" %s |", n)
	}
	fmt.Printf("\n%s", rule)
	for range names {
		fmt.Printf("---:|")
	}
	fmt.Println()
}

// roundsAhead counts the rounds (index i of both slices) in which a beat b:
// a higher rate, or a shorter time when seconds. Rounds with a note or no
// value on either side are not counted.
func roundsAhead(a, b []stepResult, seconds bool) (led, n int) {
	for i := range min(len(a), len(b)) {
		x, y := a[i], b[i]
		if x.note != "" || y.note != "" || x.value == 0 || y.value == 0 {
			continue
		}
		n++
		if (!seconds && x.value > y.value) || (seconds && x.value < y.value) {
			led++
		}
	}
	return led, n
}

// printSerialBound prints the most a filesystem that serves its data from
// its daemon can reach on the one-reader O_DIRECT random read row, and lsmfs
// against it. Each read waits for one FUSE round trip (the ceiling's read,
// which touches no device) and then one device read (ext4's O_DIRECT read,
// which costs no round trip), so at best 1 ÷ (1/ceiling + 1/ext4) reads a
// second. A passthrough that sends no READ (the kernel's FUSE passthrough
// reads the backing file itself) is not bound by it.
func printSerialBound(systems []string, results map[string]map[string][]stepResult) {
	const key = "randread"
	for _, s := range []string{sysCeiling, sysExt4, sysLsmfs} {
		if !slices.Contains(systems, s) {
			return
		}
	}
	ceil, _, ok1 := cell(results[sysCeiling][key])
	ext4, _, ok2 := cell(results[sysExt4][key])
	ls, _, ok3 := cell(results[sysLsmfs][key])
	if !ok1 || !ok2 || !ok3 || ceil == 0 || ext4 == 0 {
		return
	}
	bound := 1 / (1/ceil + 1/ext4)
	fmt.Printf("Serial bound of the O_DIRECT random read row: each read of a filesystem whose daemon serves the data waits for a FUSE round trip and then a device read, so it reaches at most 1 ÷ (1/ceiling + 1/ext4) = **%s IOPS**; lsmfs reached %.2f of it.", fmtVal(bound, false), ls/bound)
	if pt, _, ok := cell(results[sysPassthrough][key]); ok && pt > 0 {
		reqs, _ := perOp(results[sysPassthrough][key], func(r stepResult) float64 { return float64(r.reqs.total()) })
		fmt.Printf(" The passthrough (%s IOPS, %.2f FUSE requests per read) is %.2f× that bound", fmtVal(pt, false), reqs, pt/bound)
		if reqs < 0.5 {
			fmt.Printf(": its reads go from the kernel to the backing file (FUSE passthrough) without its daemon")
		}
		fmt.Printf(".")
	}
	fmt.Printf("\n\n")
}

// printRequests prints FUSE requests per operation (median over rounds of
// the total; breakdown by opcode from the last round) and daemon CPU per
// operation.
func printRequests(e *env, systems []string, results map[string]map[string][]stepResult, last map[string]map[string]stepResult) {
	fuseSys := []string{}
	for _, b := range []string{sysLsmfs, sysCeiling, sysPassthrough} {
		for _, s := range systems {
			if baseName(s) == b {
				fuseSys = append(fuseSys, s)
			}
		}
	}
	if len(fuseSys) == 0 {
		return
	}
	fmt.Printf("## FUSE requests per operation\n\n")
	fmt.Printf("Counted by each daemon at its RawFileSystem boundary (median over rounds); daemon CPU is user+system time of the serving process per operation, in µs.\n\n")
	fmt.Printf("| workload | per |")
	for _, s := range fuseSys {
		fmt.Printf(" %s req/op |", s)
	}
	for _, s := range fuseSys {
		fmt.Printf(" %s CPU µs/op |", s)
	}
	fmt.Printf("\n|---|---|")
	for range fuseSys {
		fmt.Printf("---:|---:|")
	}
	fmt.Println()
	for _, d := range rows {
		if _, ok := results[fuseSys[0]][d.key]; !ok {
			continue
		}
		fmt.Printf("| %s | %s |", d.key, d.per)
		for _, s := range fuseSys {
			v, _ := perOp(results[s][d.key], func(r stepResult) float64 { return float64(r.reqs.total()) })
			fmt.Printf(" %.2f |", v)
		}
		for _, s := range fuseSys {
			v, _ := perOp(results[s][d.key], func(r stepResult) float64 { return float64(r.cpu.Microseconds()) })
			fmt.Printf(" %.1f |", v)
		}
		fmt.Println()
	}
	if slices.Contains(fuseSys, sysLsmfs) {
		fmt.Printf("\n### lsmfs engine per operation (median over rounds)\n\n")
		fmt.Printf("Journal forces and records from lsmfs's stats; bytes the daemon made the block layer read and write from /proc/PID/io (read_bytes, write_bytes; background flushes and compactions land in the step where they happen; write_bytes counts each page-cache folio a write dirties whole, so small writes into large folios count far more than the device writes: see the device table below); VmHWM (peak RSS so far) at the end of the step.\n\n")
		fmt.Printf("| workload | per | journal forces/op | records/force | mean force (µs) | daemon bytes read/op | daemon bytes written/op | daemon VmHWM after (MiB) |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
		for _, d := range rows {
			rs := results[sysLsmfs][d.key]
			if len(rs) == 0 {
				continue
			}
			var f, rpf, mf, rb, wb, pk []float64
			for _, r := range rs {
				if r.ops == 0 {
					continue
				}
				fo := r.reqs.extra["journal_forces"]
				f = append(f, fo/float64(r.ops))
				if fo > 0 {
					rpf = append(rpf, r.reqs.extra["journal_records"]/fo)
					mf = append(mf, r.reqs.extra["journal_force_seconds"]/fo*1e6)
				}
				rb = append(rb, float64(r.rbytes)/float64(r.ops))
				wb = append(wb, float64(r.wbytes)/float64(r.ops))
				pk = append(pk, float64(r.peak)/(1<<20))
			}
			fmt.Printf("| %s | %s | %.3f | %.1f | %.0f | %s | %s | %.0f |\n", d.key, d.per, median(f), median(rpf), median(mf),
				commas(int64(median(rb))), commas(int64(median(wb))), median(pk))
		}
	}
	printDeviceWrites(systems, results)
	fmt.Printf("\n### By opcode (last round; requests per operation, ≥ 0.01)\n\n")
	fmt.Printf("| workload |")
	for _, s := range fuseSys {
		fmt.Printf(" %s |", s)
	}
	fmt.Printf("\n|---|")
	for range fuseSys {
		fmt.Printf("---|")
	}
	fmt.Println()
	for _, d := range rows {
		if _, ok := last[fuseSys[0]][d.key]; !ok {
			continue
		}
		fmt.Printf("| %s |", d.key)
		for _, s := range fuseSys {
			fmt.Printf(" %s |", breakdown(last[s][d.key]))
		}
		fmt.Println()
	}
	fmt.Println()
	for _, s := range fuseSys {
		var lines []string
		for _, d := range rows {
			r, ok := last[s][d.key]
			if !ok || len(r.reqs.xattr) == 0 || r.ops == 0 {
				continue
			}
			var parts []string
			for k, v := range r.reqs.xattr {
				parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(v)/float64(r.ops)))
			}
			sort.Strings(parts)
			lines = append(lines, fmt.Sprintf("%s: %s", d.key, strings.Join(parts, ", ")))
		}
		if len(lines) > 0 {
			fmt.Printf("GETXATTR names on %s, per operation: %s.\n\n", s, strings.Join(lines, "; "))
		}
	}
}

func breakdown(r stepResult) string {
	if r.ops == 0 || r.reqs.ops == nil {
		return "–"
	}
	type kv struct {
		k string
		v float64
	}
	var l []kv
	for k, v := range r.reqs.ops {
		if x := float64(v) / float64(r.ops); x >= 0.005 {
			l = append(l, kv{k, x})
		}
	}
	sort.Slice(l, func(i, j int) bool { return l[i].v > l[j].v || l[i].v == l[j].v && l[i].k < l[j].k })
	var parts []string
	for _, x := range l {
		parts = append(parts, fmt.Sprintf("%s %.2f", strings.ToUpper(x.k), x.v))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, " · ")
}

// printDeviceWrites prints what the host's block device wrote per
// operation of each step, for every system (median over rounds). The host
// filesystem is synced after each timed step, so a step's dirty pages count
// in it, its journal's writes too.
func printDeviceWrites(systems []string, results map[string]map[string][]stepResult) {
	fmt.Printf("\n### Device writes per operation (median over rounds)\n\n")
	fmt.Printf("Bytes the host's block device wrote during each step and the sync after it (/sys/dev/block/…/stat): file data, metadata, journals and, for lsmfs, its flushes and compactions; other activity on the device counts too.\n\n")
	printTableHead("| workload | per |", "|---|---|", systems)
	for _, d := range rows {
		if _, ok := results[systems[0]][d.key]; !ok {
			continue
		}
		fmt.Printf("| %s | %s |", d.key, d.per)
		for _, s := range systems {
			v, ok := perOp(results[s][d.key], func(r stepResult) float64 { return float64(r.dbytes) })
			if !ok {
				fmt.Printf(" – |")
				continue
			}
			fmt.Printf(" %s |", commas(int64(v)))
		}
		fmt.Println()
	}
}
