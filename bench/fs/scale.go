package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// scaleRun is the scale row: n empty files created in one directory
// (open(O_CREAT|O_EXCL) + close each, as touch does), the create rate over
// the first and the last 10%, then, after dropping caches, `ls -f | wc -l`
// of the directory, and the daemon's peak RSS (over the whole run, and
// during the listing alone: VmHWM is reset through /proc/PID/clear_refs
// before it). One round per system, in the order given.
func scaleRun(st *starter, systems []string, n int) error {
	type row struct {
		first, last, ls, lsRate float64
		lsPeak, peak            uint64
		listed                  int
	}
	res := map[string]row{}
	for _, name := range systems {
		fmt.Fprintf(os.Stderr, "scale: %s, %d files\n", name, n)
		s, err := st.start(name)
		if err != nil {
			return err
		}
		r, err := func() (row, error) {
			var r row
			dir := filepath.Join(s.root, "big")
			if err := os.Mkdir(dir, 0o755); err != nil {
				return r, err
			}
			tenth := n / 10
			marks := make([]time.Duration, 0, 11)
			t := time.Now()
			marks = append(marks, 0)
			for i := range n {
				p := filepath.Join(dir, fmt.Sprintf("f%07d", i))
				fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
				if err != nil {
					return r, fmt.Errorf("create %s: %w", p, err)
				}
				if err := unix.Close(fd); err != nil {
					return r, err
				}
				if (i+1)%tenth == 0 {
					marks = append(marks, time.Since(t))
					fmt.Fprintf(os.Stderr, "  %s: %d files, %.0f files/s over the last %d\n", name, i+1,
						float64(tenth)/(marks[len(marks)-1]-marks[len(marks)-2]).Seconds(), tenth)
				}
			}
			r.first = float64(tenth) / marks[1].Seconds()
			r.last = float64(tenth) / (marks[10] - marks[9]).Seconds()
			dropCaches()
			if s.pid != 0 {
				os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", s.pid), []byte("5"), 0)
			}
			t = time.Now()
			listed, err := countLines("ls", "-f", dir)
			if err != nil {
				return r, err
			}
			r.ls = time.Since(t).Seconds()
			r.listed = listed
			r.lsRate = float64(listed) / r.ls
			r.lsPeak = s.peakRSS()
			if listed != n+2 {
				return r, fmt.Errorf("ls -f listed %d entries, want %d", listed, n+2)
			}
			return r, nil
		}()
		r.peak = max(r.peak, s.peakRSS())
		fmt.Fprintf(os.Stderr, "  %s: stopping (removing %d files)...\n", name, n)
		if serr := s.stop(); err == nil && serr != nil {
			err = serr
		}
		if err != nil {
			return fmt.Errorf("scale %s: %w", name, err)
		}
		res[name] = r
	}
	fmt.Printf("## Scale: %s empty files in one directory (one round)\n\n", commas(int64(n)))
	fmt.Printf("Peak RSS during ls: VmHWM reset (clear_refs 5) after the creates and the cache drop, read after the listing.\n\n")
	fmt.Printf("| system | create, first 10%% (files/s) | create, last 10%% (files/s) | last/first | `ls -f \\| wc -l` (s) | entries/s | peak RSS during ls (MiB) | peak RSS, whole run (MiB) |\n")
	fmt.Printf("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, name := range systems {
		r := res[name]
		rssLs, rss := "–", "–"
		if name != sysExt4 {
			rssLs, rss = fmt.Sprintf("%.0f", float64(r.lsPeak)/(1<<20)), fmt.Sprintf("%.0f", float64(r.peak)/(1<<20))
		}
		fmt.Printf("| %s | %s | %s | %.2f | %.2f | %s | %s | %s |\n", name, commas(int64(r.first)), commas(int64(r.last)),
			r.last/r.first, r.ls, commas(int64(r.lsRate)), rssLs, rss)
	}
	fmt.Println()
	return nil
}
