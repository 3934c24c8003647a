package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lsmfs/lsmfs/bench/internal/mounted"
	"github.com/lsmfs/lsmfs/mount"
)

// The separate-journal experiment: readers doing random small-file reads and
// stats while writers ingest small files with fsync, on lsmfs with its
// journal (a) as a file in DATADIR (the default) and (b) on a loop device
// over a file in /dev/shm (losetup; mkfs --journal /dev/loopN), standing in
// for a dedicated log device, and (c) as (b) with value_threshold=0 (file data
// stays in the tree instead of the value log on the data disk, so a force
// touches the journal device only). The filesystems are mounted side by side
// and populated once; the runs rotate a, b, c from round to round.
//
// Every reader operation reaches the daemon: a stat is statx with
// AT_STATX_FORCE_SYNC (a GETATTR despite lsmfs's 1 h attribute timeout), a
// read is open(O_DIRECT) + one 4 KiB pread + close (a READ despite the page
// cache). Every jdrop the host's page cache is dropped (echo 1 >
// drop_caches), so that the daemon's table and value-log reads that miss its
// own block cache go to the disk the file journal shares.

type journalCfg struct {
	files            int
	dur              time.Duration
	rounds           int
	readers, writers int
	drop             time.Duration
	// writeSizes are the sizes of the writers' files, one set of runs each:
	// below the value threshold (4 KiB) data stays in the tree and reaches
	// the disk through the journal alone; from it, a force also syncs the
	// value log on the data disk.
	writeSizes []int
	// noVlog adds (c): the journal on a second loop device and the mount
	// option value_threshold=0.
	noVlog bool
}

var (
	journalFull  = journalCfg{files: 50000, dur: 20 * time.Second, rounds: 3, readers: 8, writers: 4, drop: time.Second, writeSizes: []int{1024, 4096}, noVlog: true}
	journalQuick = journalCfg{files: 2000, dur: 4 * time.Second, rounds: 1, readers: 8, writers: 4, drop: time.Second, writeSizes: []int{1024, 4096}, noVlog: true}
)

type journalSetup struct {
	name    string
	dataDir string
	d       *mounted.Daemon
	base    string
}

func journalRun(st *starter, jc journalCfg) (err error) {
	fmt.Fprintf(os.Stderr, "separate journal: %d files, %d readers, %d writers, %v × %d rounds\n",
		jc.files, jc.readers, jc.writers, jc.dur, jc.rounds)
	// (b)'s device: a loop device over a file in /dev/shm, sized like the
	// default file journal (256 MiB ring) plus its superblock.
	img := filepath.Join("/dev/shm", fmt.Sprintf("fsbench-journal-%d.img", os.Getpid()))
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		return err
	}
	defer os.Remove(img)
	if err := os.Truncate(img, 257<<20); err != nil {
		return err
	}
	out, err := exec.Command("losetup", "-f", "--show", img).Output()
	if err != nil {
		return fmt.Errorf("losetup: %w", err)
	}
	loop := strings.TrimSpace(string(out))
	defer func() {
		if out, derr := exec.Command("losetup", "-d", loop).CombinedOutput(); derr != nil && err == nil {
			err = fmt.Errorf("losetup -d %s: %v: %s", loop, derr, out)
		}
	}()

	var setups []*journalSetup
	defer func() {
		for _, s := range setups {
			if uerr := s.d.Unmount(); uerr != nil && err == nil {
				err = uerr
			}
			os.RemoveAll(s.base)
		}
	}()
	configs := []struct {
		name, opts string
		mkfs       []string
	}{
		{"a: journal file in DATADIR", "", nil},
		{"b: journal on " + loop + " (/dev/shm)", "", []string{"--journal", loop}},
	}
	var loop2 string
	if jc.noVlog {
		// (c): like (b), with value_threshold=0: file data stays in the
		// tree, so a force touches the journal device only.
		img2 := img + "-c"
		if werr := os.WriteFile(img2, nil, 0o600); werr != nil {
			return werr
		}
		defer os.Remove(img2)
		if terr := os.Truncate(img2, 257<<20); terr != nil {
			return terr
		}
		out2, lerr := exec.Command("losetup", "-f", "--show", img2).Output()
		if lerr != nil {
			return fmt.Errorf("losetup: %w", lerr)
		}
		loop2 = strings.TrimSpace(string(out2))
		defer func() {
			if out, derr := exec.Command("losetup", "-d", loop2).CombinedOutput(); derr != nil && err == nil {
				err = fmt.Errorf("losetup -d %s: %v: %s", loop2, derr, out)
			}
		}()
		configs = append(configs, struct {
			name, opts string
			mkfs       []string
		}{"c: journal on " + loop2 + " (/dev/shm), value_threshold=0", "value_threshold=0", []string{"--journal", loop2}})
	}
	for _, c := range configs {
		base, err := os.MkdirTemp(st.dir, "fsbench-journal-")
		if err != nil {
			return err
		}
		s := &journalSetup{name: c.name, base: base, dataDir: filepath.Join(base, "data")}
		s.d, err = mounted.Mount(st.lsmfsBin, s.dataDir, filepath.Join(base, "mnt"), c.opts, c.mkfs...)
		if err != nil {
			os.RemoveAll(base)
			return fmt.Errorf("journal %s: %w", c.name, err)
		}
		setups = append(setups, s)
		if err := populate(s.d.Mnt, jc.files); err != nil {
			return fmt.Errorf("journal %s: populate: %w", c.name, err)
		}
	}
	type result struct {
		reads, writes  []float64
		forces         uint64
		forceSec       float64
		readLatencySum time.Duration
		readOps        uint64
	}
	fmt.Printf("## Separate journal: %d readers (random stat / 4 KiB O_DIRECT read of %s files of 4 KiB) while %d writers create small files with fsync\n\n",
		jc.readers, commas(int64(jc.files)), jc.writers)
	fmt.Printf("%v per run, %d rounds alternating a and b, median; host page cache dropped every %v. Reader ops reach the daemon (statx AT_STATX_FORCE_SYNC, O_DIRECT). A force is lsmfs's journal force, which first syncs the value log when the batches it makes durable hold separated values (from 4 KiB).\n\n", jc.dur, jc.rounds, jc.drop)
	fmt.Printf("| writers' files | journal | reader ops/s | mean reader op (µs) | writer files/s | journal forces/s | mean force (µs) |\n|---|---|---:|---:|---:|---:|---:|\n")
	var summary []string
	for _, ws := range jc.writeSizes {
		res := make([]result, len(setups))
		for r := range jc.rounds {
			for k := range setups {
				i := (k + r) % len(setups)
				s := setups[i]
				dropCaches()
				j0, err := journalStats(s.dataDir)
				if err != nil {
					return err
				}
				reads, writes, lat, n, err := mixed(s.d.Mnt, jc, ws, r)
				if err != nil {
					return fmt.Errorf("journal %s: %w", s.name, err)
				}
				j1, err := journalStats(s.dataDir)
				if err != nil {
					return err
				}
				res[i].reads = append(res[i].reads, reads)
				res[i].writes = append(res[i].writes, writes)
				res[i].forces += j1.Forces - j0.Forces
				res[i].forceSec += j1.ForceSeconds - j0.ForceSeconds
				res[i].readLatencySum += lat
				res[i].readOps += n
				fmt.Fprintf(os.Stderr, "  %d B, round %d, %s: reads %.0f/s, fsync'ed creates %.0f/s\n", ws, r+1, s.name, reads, writes)
			}
		}
		for i, s := range setups {
			r := res[i]
			total := jc.dur.Seconds() * float64(len(r.reads))
			mf := 0.0
			if r.forces > 0 {
				mf = r.forceSec / float64(r.forces) * 1e6
			}
			ml := 0.0
			if r.readOps > 0 {
				ml = float64(r.readLatencySum.Microseconds()) / float64(r.readOps)
			}
			fmt.Printf("| %d B | %s | %s | %.0f | %s | %.0f | %.0f |\n", ws, s.name, commas(int64(median(r.reads))), ml,
				commas(int64(median(r.writes))), float64(r.forces)/total, mf)
		}
		a := median(res[0].reads)
		for i := 1; i < len(setups); i++ {
			x := string(rune('a' + i))
			summary = append(summary, fmt.Sprintf("writers' files of %d B: %s/a reader ops/s **%.2f**, writer files/s %.2f",
				ws, x, median(res[i].reads)/a, median(res[i].writes)/median(res[0].writes)))
		}
	}
	fmt.Printf("\n%s.\n\n", strings.Join(summary, "; "))
	return nil
}

func journalStats(dataDir string) (mount.JournalStats, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := mount.NewControl(dataDir).Stats(ctx)
	return s.Journal, err
}

// populate creates n 4 KiB files in 100 directories under mnt/pop.
func populate(mnt string, n int) error {
	block := make([]byte, 4096)
	for i := range n {
		d := filepath.Join(mnt, "pop", fmt.Sprintf("d%03d", i%100))
		if i < 100 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		block[0] = byte(i)
		if err := writeFile(filepath.Join(d, fmt.Sprintf("f%06d", i)), block, false); err != nil {
			return err
		}
	}
	return syncfsPath(mnt)
}

func syncfsPath(p string) error {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	// Linux sends syncfs(2) to virtiofs only: on an lsmfs mount an fsync
	// of the directory forces the journal, syncfs the rest.
	if err := unix.Fsync(fd); err != nil {
		return err
	}
	return unix.Syncfs(fd)
}

// mixed runs the readers and writers for jc.dur and returns reader ops/s,
// writer files/s, the summed reader latency and the reader op count.
func mixed(mnt string, jc journalCfg, size, round int) (float64, float64, time.Duration, uint64, error) {
	var stop atomic.Bool
	var readOps, writeOps atomic.Uint64
	var latency atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, jc.readers+jc.writers+1)
	for r := range jc.readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = reader(mnt, jc.files, uint64(round*100+r), &stop, &readOps, &latency)
		}()
	}
	for w := range jc.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir := filepath.Join(mnt, "ingest", fmt.Sprintf("r%d-w%d-%d", round, w, time.Now().UnixNano()))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				errs[jc.readers+w] = err
				return
			}
			block := make([]byte, size)
			for i := 0; !stop.Load(); i++ {
				if err := writeFile(filepath.Join(dir, fmt.Sprintf("f%07d", i)), block, true); err != nil {
					errs[jc.readers+w] = err
					return
				}
				writeOps.Add(1)
			}
		}()
	}
	dropDone := make(chan struct{})
	go func() {
		defer close(dropDone)
		for !stop.Load() {
			time.Sleep(jc.drop)
			os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0)
		}
	}()
	t := time.Now()
	time.Sleep(jc.dur)
	stop.Store(true)
	wg.Wait()
	el := time.Since(t).Seconds()
	<-dropDone
	return float64(readOps.Load()) / el, float64(writeOps.Load()) / el,
		time.Duration(latency.Load()), readOps.Load(), errors.Join(errs...)
}

func reader(mnt string, files int, seed uint64, stop *atomic.Bool, ops *atomic.Uint64, latency *atomic.Int64) error {
	rng := rand.New(rand.NewPCG(seed, 3))
	buf, free, err := alignedBuf(4096)
	if err != nil {
		return err
	}
	defer free()
	var stx unix.Statx_t
	for i := 0; !stop.Load(); i++ {
		k := rng.IntN(files)
		p := filepath.Join(mnt, "pop", fmt.Sprintf("d%03d", k%100), fmt.Sprintf("f%06d", k))
		t := time.Now()
		if i%2 == 0 {
			if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_STATX_FORCE_SYNC|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &stx); err != nil {
				return fmt.Errorf("statx %s: %w", p, err)
			}
		} else {
			fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("open %s: %w", p, err)
			}
			n, err := unix.Pread(fd, buf, 0)
			unix.Close(fd)
			if err != nil || n != 4096 {
				return fmt.Errorf("pread %s: %d, %v", p, n, err)
			}
		}
		latency.Add(int64(time.Since(t)))
		ops.Add(1)
	}
	return nil
}
