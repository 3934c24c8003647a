// Command lsm compares lsmfs's engine (lsm/) with Pebble and goleveldb on
// the same workloads in one run, and prints a markdown table of ops/s,
// ratios and write amplification.
//
//	cd bench && go run ./lsm -n 1000000 -dir /var/tmp
//
// Every engine gets a 64 MiB memtable, a 128 MiB block cache, 10-bit bloom
// filters, its write-ahead log on, and no per-write sync. Write amplification
// is bytes the process wrote (/proc/self/io wchar) per user byte (key +
// value) during the fill and overwrite phases.
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

type engine interface {
	put(k, v []byte) error
	get(k []byte) (bool, error)
	scan() (int, error)
	close() error
}

type opener struct {
	name string
	open func(dir string) (engine, error)
}

var (
	flagN       = flag.Int("n", 1000000, "keys to fill")
	flagReads   = flag.Int("reads", 500000, "random reads per read phase")
	flagUpdates = flag.Int("updates", 1000000, "overwrites of the hot 10% of keys")
	flagDir     = flag.String("dir", os.TempDir(), "where the engines' directories go (a real disk, not tmpfs)")
	flagEngines = flag.String("engines", "lsm,pebble,goleveldb", "engines to run, comma-separated")
	flagValue   = flag.Int("value", 100, "value size")
)

func key(buf []byte, i uint64) []byte {
	// Keys are 16 bytes, in an order unrelated to i.
	binary.BigEndian.PutUint64(buf[0:], i*0x9e3779b97f4a7c15)
	binary.BigEndian.PutUint64(buf[8:], i)
	return buf[:16]
}

// value is half random, half repeated, like db_bench's compressible values.
func value(rng *rand.Rand, buf []byte) []byte {
	n := len(buf) / 2
	for i := 0; i < n; i++ {
		buf[i] = byte('a' + rng.IntN(26))
	}
	for i := n; i < len(buf); i++ {
		buf[i] = 'x'
	}
	return buf
}

func wchar() uint64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "wchar: "); ok {
			n, _ := strconv.ParseUint(v, 10, 64)
			return n
		}
	}
	return 0
}

type result struct {
	fill, readHit, readMiss, scan, update float64 // ops/s
	wamp                                  float64
	err                                   error
}

func run(o opener) (res result) {
	dir, err := os.MkdirTemp(*flagDir, "lsmbench-"+o.name+"-")
	if err != nil {
		return result{err: err}
	}
	defer os.RemoveAll(dir)
	e, err := o.open(filepath.Join(dir, "db"))
	if err != nil {
		return result{err: err}
	}
	defer func() {
		if err := e.close(); err != nil && res.err == nil {
			res.err = err
		}
	}()
	n := uint64(*flagN)
	rng := rand.New(rand.NewPCG(1, 2))
	kb := make([]byte, 16)
	vb := make([]byte, *flagValue)
	userBytes := uint64(0)
	w0 := wchar()

	start := time.Now()
	perm := rng.Perm(int(n))
	for _, i := range perm {
		if err := e.put(key(kb, uint64(i)), value(rng, vb)); err != nil {
			return result{err: fmt.Errorf("fill: %w", err)}
		}
		userBytes += uint64(16 + len(vb))
	}
	res.fill = float64(n) / time.Since(start).Seconds()

	start = time.Now()
	for i := 0; i < *flagReads; i++ {
		ok, err := e.get(key(kb, rng.Uint64N(n)))
		if err != nil || !ok {
			return result{err: fmt.Errorf("read hit: found=%v err=%v", ok, err)}
		}
	}
	res.readHit = float64(*flagReads) / time.Since(start).Seconds()

	start = time.Now()
	for i := 0; i < *flagReads; i++ {
		ok, err := e.get(key(kb, n+rng.Uint64N(n)))
		if err != nil || ok {
			return result{err: fmt.Errorf("read miss: found=%v err=%v", ok, err)}
		}
	}
	res.readMiss = float64(*flagReads) / time.Since(start).Seconds()

	start = time.Now()
	got, err := e.scan()
	if err != nil || got != int(n) {
		return result{err: fmt.Errorf("scan: %d keys, err %v", got, err)}
	}
	res.scan = float64(got) / time.Since(start).Seconds()

	start = time.Now()
	hot := n / 10
	for i := 0; i < *flagUpdates; i++ {
		if err := e.put(key(kb, rng.Uint64N(hot)), value(rng, vb)); err != nil {
			return result{err: fmt.Errorf("update: %w", err)}
		}
		userBytes += uint64(16 + len(vb))
	}
	res.update = float64(*flagUpdates) / time.Since(start).Seconds()
	if err := e.close(); err != nil {
		return result{err: err}
	}
	res.wamp = float64(wchar()-w0) / float64(userBytes)
	e = nopEngine{}
	return res
}

type nopEngine struct{}

func (nopEngine) put(k, v []byte) error      { return nil }
func (nopEngine) get(k []byte) (bool, error) { return false, nil }
func (nopEngine) scan() (int, error)         { return 0, nil }
func (nopEngine) close() error               { return nil }

func main() {
	flag.Parse()
	all := map[string]opener{"lsm": openLSM(), "pebble": openPebble(), "goleveldb": openGoleveldb()}
	var names []string
	results := map[string]result{}
	for _, name := range strings.Split(*flagEngines, ",") {
		o, ok := all[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown engine %q\n", name)
			os.Exit(2)
		}
		runtime.GC()
		fmt.Fprintf(os.Stderr, "running %s...\n", name)
		r := run(o)
		if r.err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, r.err)
			os.Exit(1)
		}
		names = append(names, name)
		results[name] = r
	}
	fmt.Print(table(names, results))
}

func table(names []string, res map[string]result) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d keys, %d-byte values, %d reads per read phase, %d hot-key updates; GOMAXPROCS=%d\n\n",
		*flagN, *flagValue, *flagReads, *flagUpdates, runtime.GOMAXPROCS(0))
	fmt.Fprintf(&b, "| workload |")
	for _, n := range names {
		fmt.Fprintf(&b, " %s |", n)
	}
	peers := []string{}
	for _, n := range names {
		if n != "lsm" {
			peers = append(peers, n)
			fmt.Fprintf(&b, " lsm/%s |", n)
		}
	}
	fmt.Fprintf(&b, "\n|---|")
	for range names {
		b.WriteString("---:|")
	}
	for range peers {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	rows := []struct {
		name string
		f    func(result) float64
		unit string
	}{
		{"fill random (ops/s)", func(r result) float64 { return r.fill }, ""},
		{"read random, hit (ops/s)", func(r result) float64 { return r.readHit }, ""},
		{"read random, miss (ops/s)", func(r result) float64 { return r.readMiss }, ""},
		{"full scan (keys/s)", func(r result) float64 { return r.scan }, ""},
		{"overwrite hot 10% (ops/s)", func(r result) float64 { return r.update }, ""},
		{"write amplification (lower is better)", func(r result) float64 { return r.wamp }, "x"},
	}
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s |", row.name)
		for _, n := range names {
			v := row.f(res[n])
			if row.unit == "x" {
				fmt.Fprintf(&b, " %.2f |", v)
			} else {
				fmt.Fprintf(&b, " %.0f |", v)
			}
		}
		if l, ok := res["lsm"]; ok {
			for _, p := range peers {
				fmt.Fprintf(&b, " %.2f |", row.f(l)/row.f(res[p]))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
