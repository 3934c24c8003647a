package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/lsmfs/lsmfs/bench/internal/mounted"
)

// runMounted is the same comparison through a mounted lsmfs: many small
// appends to a few files (each append opens, writes 100 bytes and closes,
// so each rewrites the file's inode and last block in the engine), and a
// stat of a random file among many every fifth operation. Each policy is
// given as a mount option.
func runMounted(policies []string, ops int) error {
	tmp, err := os.MkdirTemp("", "policybench-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin, err := mounted.Build(tmp)
	if err != nil {
		return err
	}
	fmt.Printf("\nThrough a mounted lsmfs (-o memtable_size=%dM,inmemory_flush_size=%dM,memtable_policy=P): %d appends of 100 bytes to 8 files (open, write, close each) and a stat of one of 2,000 files every 5th operation\n\n",
		*flagMemtable>>20, *flagInMem>>20, ops)
	fmt.Println("| policy | daemon bytes written (MB) | vs none | ops/s | daemon peak RSS (MiB) |")
	fmt.Println("|---|---:|---:|---:|---:|")
	var baseWritten float64
	for _, p := range policies {
		fmt.Fprintf(os.Stderr, "running mounted/%s...\n", p)
		base, err := os.MkdirTemp(*flagDir, "policybench-mnt-")
		if err != nil {
			return err
		}
		opts := fmt.Sprintf("memtable_size=%d,inmemory_flush_size=%d,memtable_policy=%s", *flagMemtable, *flagInMem, p)
		d, err := mounted.Mount(bin, filepath.Join(base, "data"), filepath.Join(base, "mnt"), opts)
		if err != nil {
			os.RemoveAll(base)
			return err
		}
		written, rate, err := mountedWorkload(d, ops)
		rss := d.PeakRSS()
		if uerr := d.Unmount(); err == nil {
			err = uerr
		}
		os.RemoveAll(base)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if baseWritten == 0 {
			baseWritten = float64(written)
		}
		fmt.Printf("| %s | %.1f | %.2f | %.0f | %.0f |\n", p, float64(written)/1e6, float64(written)/baseWritten, rate, float64(rss)/(1<<20))
	}
	return nil
}

func mountedWorkload(d *mounted.Daemon, ops int) (written uint64, rate float64, err error) {
	var names []string
	for i := 0; i < 2000; i++ {
		dir := filepath.Join(d.Mnt, fmt.Sprintf("d%02d", i%20))
		if i < 20 {
			if err := os.Mkdir(dir, 0o755); err != nil {
				return 0, 0, err
			}
		}
		name := filepath.Join(dir, fmt.Sprintf("f%04d", i))
		if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
			return 0, 0, err
		}
		names = append(names, name)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	rec := make([]byte, 100)
	w0 := d.IO("write_bytes")
	start := time.Now()
	for i := 0; i < ops; i++ {
		if i%5 == 4 {
			if _, err := os.Stat(names[rng.IntN(len(names))]); err != nil {
				return 0, 0, err
			}
			continue
		}
		f, err := os.OpenFile(names[rng.IntN(8)], os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return 0, 0, err
		}
		if _, err := f.Write(rec); err != nil {
			f.Close()
			return 0, 0, err
		}
		if err := f.Close(); err != nil {
			return 0, 0, err
		}
	}
	if err := syncfs(d.Mnt); err != nil {
		return 0, 0, err
	}
	return d.IO("write_bytes") - w0, float64(ops) / time.Since(start).Seconds(), nil
}
