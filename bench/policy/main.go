// Command policy runs a filesystem-shaped metadata workload on lsmfs's engine
// under every memtable policy and compaction style, in one run, and prints
// one markdown table with ratios against the "none" policy of the same style.
//
//	cd bench && go run ./policy -dir /var/tmp
//
// With -mounted N (default 50,000; 0 skips it) it then runs a churn
// workload through a mounted lsmfs under each policy (see mounted.go).
//
// Workload, with keys shaped like fs/'s keyspace (I+ino for inodes,
// D+parent+name for dentries):
//
//	(a) create: 200k files in 1,000 directories; each create is one batch
//	    of dentry + inode + parent inode update;
//	(b) churn: 2M small updates to a hot 5% of the inodes (size/mtime);
//	(c) during (b), every 20th operation is a point lookup of a random inode
//	    and every 200th a scan of a random directory (up to 200 entries).
//
// Disk bytes are what the process wrote (/proc/self/io wchar: journal,
// tables, manifest); tree write amp counts only table bytes (flushes and
// compactions), which is what the memtable policies act on. User bytes are
// the encoded batches applied. Mean memtable memory is sampled during (b).
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lsmfs/lsmfs/lsm"
)

var (
	flagDir      = flag.String("dir", os.TempDir(), "where the engines' directories go (a real disk)")
	flagFiles    = flag.Int("files", 200000, "files to create")
	flagDirs     = flag.Int("dirs", 1000, "directories")
	flagUpdates  = flag.Int("updates", 2000000, "hot-inode updates")
	flagMemtable = flag.Int64("memtable", 32<<20, "memtable_size")
	flagInMem    = flag.Int64("inmemory", 4<<20, "inmemory_flush_size")
	flagPolicies = flag.String("policies", "none,basic,eager,adaptive", "memtable policies")
	flagStyles   = flag.String("styles", "leveled,tiered", "compaction styles")
	flagMounted  = flag.Int("mounted", 50000, "operations of the mounted comparison (0 skips it)")
)

func inodeKey(buf []byte, ino uint64) []byte {
	buf = append(buf[:0], 'I')
	return binary.BigEndian.AppendUint64(buf, ino)
}

func dentryKey(buf []byte, parent uint64, name string) []byte {
	buf = append(buf[:0], 'D')
	buf = binary.BigEndian.AppendUint64(buf, parent)
	return append(buf, name...)
}

// attrs is a 72-byte inode value: mode, uid, gid, size, nlink, times.
func attrs(buf []byte, ino, size uint64, now int64) []byte {
	buf = append(buf[:0], 1) // version
	buf = binary.BigEndian.AppendUint32(buf, 0o100644)
	buf = binary.BigEndian.AppendUint32(buf, 1000)
	buf = binary.BigEndian.AppendUint32(buf, 1000)
	buf = binary.BigEndian.AppendUint64(buf, size)
	buf = binary.BigEndian.AppendUint64(buf, 1)
	buf = binary.BigEndian.AppendUint64(buf, ino)
	for i := 0; i < 3; i++ {
		buf = binary.BigEndian.AppendUint64(buf, uint64(now))
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
	userBytes, diskBytes uint64
	peakMem              uint64
	meanMem              float64
	bytesPerEntry        float64
	treeBytes            uint64 // flush + compaction table bytes
	flushes              uint64
	writeOps, readOps    float64
	p99                  time.Duration
	memMerges            uint64
}

func run(policy lsm.MemtablePolicy, style lsm.CompactionStyle) (result, error) {
	var res result
	dir, err := os.MkdirTemp(*flagDir, "policybench-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	opts := &lsm.Options{
		UUID: [16]byte{1}, MemtableSize: *flagMemtable, InMemoryFlushSize: *flagInMem,
		MemtablePolicy: policy, Compaction: style,
	}
	path := filepath.Join(dir, "db")
	if err := lsm.Format(path, opts); err != nil {
		return res, err
	}
	w0 := wchar()
	db, err := lsm.Open(path, opts)
	if err != nil {
		return res, err
	}
	rng := rand.New(rand.NewPCG(7, 11))
	var kb, vb, pb []byte
	b := lsm.NewBatch()
	nfiles, ndirs := uint64(*flagFiles), uint64(*flagDirs)
	now := time.Now().UnixNano()
	writes := 0
	start := time.Now()
	// (a) create.
	for i := uint64(0); i < nfiles; i++ {
		parent := 2 + i%ndirs
		ino := 2 + ndirs + i
		b.Reset()
		kb = dentryKey(kb, parent, fmt.Sprintf("file-%08d.txt", i))
		vb = binary.BigEndian.AppendUint64(vb[:0], ino)
		b.Set(kb, append(vb, 8))
		kb = inodeKey(kb, ino)
		b.Set(kb, attrs(vb, ino, 0, now))
		kb = inodeKey(kb, parent)
		pb = attrs(pb, parent, i, now)
		b.Set(kb, pb)
		res.userBytes += uint64(b.Len())
		if err := db.Apply(b, false); err != nil {
			return res, err
		}
		writes++
	}
	// (b) churn with (c) reads.
	hot := nfiles / 20
	var lat []time.Duration
	var memSum, perEntrySum float64
	memSamples, perEntrySamples := 0, 0
	reads := 0
	var readTime time.Duration
	for i := 0; i < *flagUpdates; i++ {
		if i%20 == 0 {
			t := time.Now()
			if _, err := db.Get(inodeKey(kb, 2+ndirs+rng.Uint64N(nfiles))); err != nil {
				return res, fmt.Errorf("lookup: %w", err)
			}
			d := time.Since(t)
			lat = append(lat, d)
			readTime += d
			reads++
		}
		if i%200 == 0 {
			t := time.Now()
			parent := 2 + rng.Uint64N(ndirs)
			lo := dentryKey(nil, parent, "")
			hi := dentryKey(nil, parent+1, "")
			it := db.NewIter(&lsm.IterOptions{LowerBound: lo, UpperBound: hi})
			n := 0
			for ok := it.First(); ok && n < 200; ok = it.Next() {
				n++
			}
			it.Close()
			d := time.Since(t)
			lat = append(lat, d)
			readTime += d
			reads++
		}
		if i%5000 == 0 {
			m := db.Metrics()
			memSum += float64(m.MemtableBytes)
			memSamples++
			if m.MemtableEntries > 0 {
				perEntrySum += float64(m.MemtableBytes) / float64(m.MemtableEntries)
				perEntrySamples++
			}
		}
		ino := 2 + ndirs + rng.Uint64N(hot)
		b.Reset()
		b.Set(inodeKey(kb, ino), attrs(vb, ino, uint64(i), now+int64(i)))
		res.userBytes += uint64(b.Len())
		if err := db.Apply(b, false); err != nil {
			return res, err
		}
		writes++
	}
	elapsed := time.Since(start)
	m := db.Metrics()
	if err := db.Close(); err != nil {
		return res, err
	}
	res.diskBytes = wchar() - w0
	res.peakMem = m.PeakMemtableBytes
	res.meanMem = memSum / float64(memSamples)
	res.bytesPerEntry = perEntrySum / float64(perEntrySamples)
	res.treeBytes = m.FlushBytes + m.CompactionBytes
	res.flushes = m.Flushes
	res.memMerges = m.InMemoryMerges
	res.writeOps = float64(writes) / (elapsed - readTime).Seconds()
	res.readOps = float64(reads) / readTime.Seconds()
	slices.Sort(lat)
	res.p99 = lat[len(lat)*99/100]
	return res, nil
}

func main() {
	flag.Parse()
	fmt.Printf("%d files in %d dirs, %d hot-inode updates (5%% of inodes), memtable_size=%dMiB inmemory_flush_size=%dMiB, GOMAXPROCS=%d\n\n",
		*flagFiles, *flagDirs, *flagUpdates, *flagMemtable>>20, *flagInMem>>20, runtime.GOMAXPROCS(0))
	fmt.Println("| style | policy | user MB | disk MB | write amp | vs none | tree write amp | vs none | peak memtable MiB | mean memtable MiB | memtable bytes/entry | vs none | flushes | in-mem merges | write ops/s | read ops/s | p99 read µs |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, style := range strings.Split(*flagStyles, ",") {
		var base *result
		for _, p := range strings.Split(*flagPolicies, ",") {
			runtime.GC()
			fmt.Fprintf(os.Stderr, "running %s/%s...\n", style, p)
			r, err := run(lsm.MemtablePolicy(p), lsm.CompactionStyle(style))
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s/%s: %v\n", style, p, err)
				os.Exit(1)
			}
			if base == nil {
				rr := r
				base = &rr
			}
			wa := float64(r.diskBytes) / float64(r.userBytes)
			bwa := float64(base.diskBytes) / float64(base.userBytes)
			twa := float64(r.treeBytes) / float64(r.userBytes)
			btwa := float64(base.treeBytes) / float64(base.userBytes)
			fmt.Printf("| %s | %s | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f | %.0f | %.2f | %d | %d | %.0f | %.0f | %.0f |\n",
				style, p, float64(r.userBytes)/1e6, float64(r.diskBytes)/1e6, wa, wa/bwa, twa, twa/btwa,
				float64(r.peakMem)/(1<<20), r.meanMem/(1<<20), r.bytesPerEntry, r.bytesPerEntry/base.bytesPerEntry, r.flushes, r.memMerges,
				r.writeOps, r.readOps, float64(r.p99.Microseconds()))
		}
	}
	if *flagMounted > 0 {
		if err := runMounted(strings.Split(*flagPolicies, ","), *flagMounted); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
