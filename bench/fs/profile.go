package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// profileRun runs one round of the workloads on the profiling variant of
// lsmfs (serve.go: the mount package's daemon with the default options, plus
// net/http/pprof on a loopback port) and writes, per workload KEY, into dir:
//
//	KEY.cpu.pprof                     CPU profile of the daemon during the step
//	KEY.allocs0.pprof, KEY.allocs1.pprof   allocations before and after
//	KEY.cpu.txt, KEY.allocs.txt       go tool pprof -top summaries
//
// The step's allocations are go tool pprof -sample_index=alloc_space -base
// KEY.allocs0.pprof KEY.allocs1.pprof. Timings of a profiled round are not
// reported.
func profileRun(st *starter, e *env, dir string, only map[string]bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	st.profiled = true
	s, err := st.start(sysLsmfs)
	if err != nil {
		return err
	}
	var hookErr error
	e.hook = func(s *system, key string, start bool) {
		u := "http://" + s.pprofAddr + "/prof/stop"
		if start {
			u = "http://" + s.pprofAddr + "/prof/start?" + url.Values{"dir": {dir}, "name": {key}}.Encode()
		}
		resp, err := http.Post(u, "", nil)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("%s: %s", u, resp.Status)
			}
		}
		if err != nil && hookErr == nil {
			hookErr = err
		}
	}
	res, err := runRound(s, e, only)
	if serr := s.stop(); err == nil {
		err = serr
	}
	if err == nil {
		err = hookErr
	}
	if err != nil {
		return err
	}
	fmt.Printf("## Profiles of lsmfs (one round, written to %s)\n\n", dir)
	for _, d := range rows {
		if _, ok := res[d.key]; !ok {
			continue
		}
		p := filepath.Join(dir, d.key)
		cpu, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=40", p+".cpu.pprof").CombinedOutput()
		if err != nil {
			return fmt.Errorf("pprof %s: %v: %s", d.key, err, cpu)
		}
		if err := os.WriteFile(p+".cpu.txt", cpu, 0o644); err != nil {
			return err
		}
		al, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=40", "-sample_index=alloc_space",
			"-base", p+".allocs0.pprof", p+".allocs1.pprof").CombinedOutput()
		if err != nil {
			return fmt.Errorf("pprof allocs %s: %v: %s", d.key, err, al)
		}
		if err := os.WriteFile(p+".allocs.txt", al, 0o644); err != nil {
			return err
		}
		fmt.Printf("- %s: %s; %s\n", d.key, headline(string(cpu)), headline(string(al)))
	}
	fmt.Println()
	return nil
}

// headline returns pprof's "Showing nodes accounting for X, Y% of Z total"
// total.
func headline(top string) string {
	for _, l := range strings.Split(top, "\n") {
		if i := strings.Index(l, " of "); i >= 0 && strings.HasPrefix(strings.TrimSpace(l), "Showing nodes") {
			return strings.TrimSpace(l[i+4:])
		}
	}
	return "?"
}
