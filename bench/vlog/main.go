// Command vlog measures what value separation buys on a mounted lsmfs: it
// writes files of 1 MiB and of 64 MiB, then makes 4 KiB random overwrites
// with an fsync every 32, with the value log on (the default) and off
// (value_threshold=0), and prints bytes the daemon wrote to storage per user
// byte (write amplification, from /proc/PID/io write_bytes) and MiB/s or
// IOPS, in one markdown table.
//
//	cd bench && go run ./vlog -dir /var/tmp -size 1G
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lsmfs/lsmfs/bench/internal/mounted"
)

var (
	flagDir    = flag.String("dir", os.TempDir(), "where data directories and mount points go (a real disk)")
	flagSize   = flag.String("size", "1G", "bytes written per file size (1 MiB files and 64 MiB files)")
	flagRandom = flag.Int("random", 16384, "4 KiB random overwrites")
)

func parseSize(s string) int64 {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return n * mult
}

type phase struct {
	name      string
	userBytes int64
	written   uint64
	dur       time.Duration
	ops       int
}

func writeFiles(mnt, prefix string, fileSize, total int64, buf []byte) (int64, error) {
	var n int64
	for i := 0; n < total; i++ {
		f, err := os.Create(filepath.Join(mnt, fmt.Sprintf("%s-%05d", prefix, i)))
		if err != nil {
			return n, err
		}
		for off := int64(0); off < fileSize; off += int64(len(buf)) {
			if _, err := f.Write(buf); err != nil {
				f.Close()
				return n, err
			}
		}
		if err := f.Close(); err != nil {
			return n, err
		}
		n += fileSize
	}
	return n, nil
}

func run(bin, opts string) ([]phase, error) {
	base, err := os.MkdirTemp(*flagDir, "vlogbench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(base)
	d, err := mounted.Mount(bin, filepath.Join(base, "data"), filepath.Join(base, "mnt"), opts)
	if err != nil {
		return nil, err
	}
	defer d.Unmount()
	total := parseSize(*flagSize)
	buf := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range buf {
		buf[i] = byte(rng.Uint32()) // incompressible, like most file data
	}
	var phases []phase
	measure := func(name string, f func() (int64, int, error)) error {
		w0 := d.IO("write_bytes")
		start := time.Now()
		n, ops, err := f()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		// Everything durable: syncfs through any file on the mount.
		if err := syncfs(d.Mnt); err != nil {
			return err
		}
		phases = append(phases, phase{name: name, userBytes: n, written: d.IO("write_bytes") - w0, dur: time.Since(start), ops: ops})
		return nil
	}
	if err := measure("sequential write, 1 MiB files", func() (int64, int, error) {
		n, err := writeFiles(d.Mnt, "small", 1<<20, total, buf)
		return n, 0, err
	}); err != nil {
		return nil, err
	}
	if err := measure("sequential write, 64 MiB files", func() (int64, int, error) {
		n, err := writeFiles(d.Mnt, "large", 64<<20, total, buf)
		return n, 0, err
	}); err != nil {
		return nil, err
	}
	if err := measure("4 KiB random overwrites, fsync every 32", func() (int64, int, error) {
		nfiles := int(total / (64 << 20))
		var files []*os.File
		for i := 0; i < nfiles; i++ {
			f, err := os.OpenFile(filepath.Join(d.Mnt, fmt.Sprintf("large-%05d", i)), os.O_RDWR, 0)
			if err != nil {
				return 0, 0, err
			}
			defer f.Close()
			files = append(files, f)
		}
		page := buf[:4096]
		for i := 0; i < *flagRandom; i++ {
			f := files[rng.IntN(len(files))]
			off := rng.Int64N(64<<20/4096) * 4096
			if _, err := f.WriteAt(page, off); err != nil {
				return 0, 0, err
			}
			if i%32 == 31 {
				if err := f.Sync(); err != nil {
					return 0, 0, err
				}
			}
		}
		return int64(*flagRandom) * 4096, *flagRandom, nil
	}); err != nil {
		return nil, err
	}
	return phases, nil
}

func main() {
	flag.Parse()
	tmp, err := os.MkdirTemp("", "vlogbench-bin-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(tmp)
	bin, err := mounted.Build(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	configs := []struct{ name, opts string }{{"value log on (default)", ""}, {"value log off", "value_threshold=0"}}
	results := make([][]phase, len(configs))
	for i, c := range configs {
		fmt.Fprintf(os.Stderr, "running %s...\n", c.name)
		if results[i], err = run(bin, c.opts); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", c.name, err)
			os.Exit(1)
		}
	}
	fmt.Printf("%s per file size, %d random 4 KiB overwrites; write amplification = bytes the daemon wrote to storage (/proc/PID/io write_bytes) / bytes written by the application\n\n", *flagSize, *flagRandom)
	fmt.Println("| workload | vlog on: write amp | vlog on: speed | vlog off: write amp | vlog off: speed | speed on/off |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	for p := range results[0] {
		on, off := results[0][p], results[1][p]
		speed := func(ph phase) (string, float64) {
			if ph.ops > 0 {
				v := float64(ph.ops) / ph.dur.Seconds()
				return fmt.Sprintf("%.0f IOPS", v), v
			}
			v := float64(ph.userBytes) / (1 << 20) / ph.dur.Seconds()
			return fmt.Sprintf("%.0f MiB/s", v), v
		}
		sOn, vOn := speed(on)
		sOff, vOff := speed(off)
		fmt.Printf("| %s | %.2f | %s | %.2f | %s | %.2f |\n", on.name,
			float64(on.written)/float64(on.userBytes), sOn, float64(off.written)/float64(off.userBytes), sOff, vOn/vOff)
	}
}
