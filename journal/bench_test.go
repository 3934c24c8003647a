package journal_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lsmfs/lsmfs/journal"
)

// Run with: go test -run XXX -bench . -benchtime 2s ./journal/
//
// BenchmarkGroupCommit: N goroutines append 200-byte records with sync=true
// to a journal file in b.TempDir() (on the machine's disk, fdatasync as the
// force). It reports records/s, forces/s and records/force, and for N=64
// the speedup over N=1 measured in the same run (group commit must give at
// least 20x).
//
// BenchmarkCompression: realistic metadata records (lsm batches of inode and
// dentry puts, as fs/ will write them) and the compression ratio of the
// stored frames.

// groupCommitRate remembers the records/s of the last committers=1 run, for
// the speedup metric of the committers=64 run.
var groupCommitRate = map[int]float64{}

func BenchmarkGroupCommit(b *testing.B) {
	for _, n := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("committers=%d", n), func(b *testing.B) {
			benchGroupCommit(b, n)
		})
	}
}

// openBenchJournal formats and opens a 64 MiB journal file in b.TempDir(),
// with an OnPressure that checkpoints everything durable (the engine's
// role after a memtable flush).
func openBenchJournal(b *testing.B) *journal.Journal {
	path := filepath.Join(b.TempDir(), "journal")
	dev, err := journal.CreateFile(path, 64<<20)
	if err != nil {
		b.Fatal(err)
	}
	if err := journal.Format(dev, journal.FormatOptions{UUID: uuidA}); err != nil {
		b.Fatal(err)
	}
	var j *journal.Journal
	ready := make(chan struct{})
	j, err = journal.Open(dev, journal.Options{UUID: uuidA, OnPressure: func() {
		<-ready
		j.Checkpoint(j.Stats().DurableLSN)
	}})
	if err != nil {
		b.Fatal(err)
	}
	close(ready)
	return j
}

func benchGroupCommit(b *testing.B, committers int) {
	j := openBenchJournal(b)
	rng := rand.New(rand.NewPCG(1, 2))
	rec := make([]byte, 200)
	for i := range rec {
		rec[i] = byte(rng.Uint32())
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := 0; c < committers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := [][]byte{rec}
			for next.Add(1) <= int64(b.N) {
				if _, err := j.Append(batch, true); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	b.StopTimer()
	s := j.Stats()
	if err := j.Close(); err != nil {
		b.Fatal(err)
	}
	rate := float64(b.N) / elapsed
	b.ReportMetric(rate, "records/s")
	b.ReportMetric(float64(s.Forces)/elapsed, "forces/s")
	b.ReportMetric(float64(b.N)/float64(max(s.Forces, 1)), "records/force")
	groupCommitRate[committers] = rate
	if committers > 1 && groupCommitRate[1] > 0 {
		b.ReportMetric(rate/groupCommitRate[1], "x_vs_1")
	}
}

// metadataWorkload produces engine-like journal records: one record per
// filesystem operation, each an lsm batch (seq, count, then entries
// kind | key | value), with the keys and values of DESIGN.md's keyspace:
// creates (dentry + inode + parent inode), writes (inode size/mtime),
// renames (two dentries + inode ctime) and unlinks.
type metadataWorkload struct {
	rng     *rand.Rand
	seq     uint64
	nextIno uint64
	now     int64
	dirs    []uint64
	files   []uint64
}

func newMetadataWorkload(seed uint64) *metadataWorkload {
	return &metadataWorkload{rng: rand.New(rand.NewPCG(seed, 0)), seq: 1000, nextIno: 2, now: 1_700_000_000_000_000_000, dirs: []uint64{1}}
}

func appendEntry(b []byte, kind byte, key, val []byte) []byte {
	b = append(b, kind)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, uint64(len(val)))
	return append(b, val...)
}

func inodeKey(ino uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'I'}, ino) }

func (w *metadataWorkload) inodeValue(ino uint64, dir bool, size uint64) []byte {
	v := make([]byte, 0, 64)
	mode := uint32(0o100644)
	nlink := uint32(1)
	if dir {
		mode, nlink = 0o40755, 2
	}
	v = binary.BigEndian.AppendUint32(v, mode)
	v = binary.BigEndian.AppendUint32(v, 1000) // uid
	v = binary.BigEndian.AppendUint32(v, 1000) // gid
	v = binary.BigEndian.AppendUint64(v, size)
	v = binary.BigEndian.AppendUint32(v, nlink)
	v = binary.BigEndian.AppendUint32(v, 0) // rdev
	for i := 0; i < 3; i++ {
		v = binary.BigEndian.AppendUint64(v, uint64(w.now)) // atime, mtime, ctime
	}
	return binary.BigEndian.AppendUint32(v, 0) // flags
}

func dentryKey(parent uint64, name string) []byte {
	return append(binary.BigEndian.AppendUint64([]byte{'D'}, parent), name...)
}

func (w *metadataWorkload) batch(entries int, fill func(b []byte) []byte) []byte {
	b := binary.BigEndian.AppendUint64(nil, w.seq)
	b = binary.BigEndian.AppendUint32(b, uint32(entries))
	w.seq += uint64(entries)
	return fill(b)
}

var nameStems = []string{"file", "IMG_", "report-", "main", "notes", "index", "data_", "lib"}
var nameExts = []string{".txt", ".jpg", ".go", ".o", ".json", "", ".c", ".h"}

// next returns the next operation's record.
func (w *metadataWorkload) next() []byte {
	w.now += int64(w.rng.IntN(2_000_000))
	switch op := w.rng.IntN(10); {
	case op < 4 || len(w.files) == 0: // create a file or a directory
		parent := w.dirs[w.rng.IntN(len(w.dirs))]
		ino := w.nextIno
		w.nextIno++
		dir := w.rng.IntN(8) == 0
		name := fmt.Sprintf("%s%04d%s", nameStems[w.rng.IntN(len(nameStems))], ino%10000, nameExts[w.rng.IntN(len(nameExts))])
		if dir {
			w.dirs = append(w.dirs, ino)
			name = fmt.Sprintf("dir%04d", ino%10000)
		} else {
			w.files = append(w.files, ino)
		}
		typ := byte(8)
		if dir {
			typ = 4
		}
		return w.batch(3, func(b []byte) []byte {
			b = appendEntry(b, 1, dentryKey(parent, name), append(binary.BigEndian.AppendUint64(nil, ino), typ))
			b = appendEntry(b, 1, inodeKey(ino), w.inodeValue(ino, dir, 0))
			return appendEntry(b, 1, inodeKey(parent), w.inodeValue(parent, true, 4096))
		})
	case op < 8: // write: size and mtime
		ino := w.files[w.rng.IntN(len(w.files))]
		return w.batch(1, func(b []byte) []byte {
			return appendEntry(b, 1, inodeKey(ino), w.inodeValue(ino, false, uint64(w.rng.IntN(1<<24))))
		})
	case op < 9: // rename within a directory
		parent := w.dirs[w.rng.IntN(len(w.dirs))]
		ino := w.files[w.rng.IntN(len(w.files))]
		return w.batch(3, func(b []byte) []byte {
			b = appendEntry(b, 0, dentryKey(parent, fmt.Sprintf("old-%d.tmp", ino)), nil)
			b = appendEntry(b, 1, dentryKey(parent, fmt.Sprintf("new-%d.txt", ino)), append(binary.BigEndian.AppendUint64(nil, ino), 8))
			return appendEntry(b, 1, inodeKey(ino), w.inodeValue(ino, false, 1234))
		})
	default: // unlink
		parent := w.dirs[w.rng.IntN(len(w.dirs))]
		ino := w.files[w.rng.IntN(len(w.files))]
		return w.batch(3, func(b []byte) []byte {
			b = appendEntry(b, 0, dentryKey(parent, fmt.Sprintf("file%04d.txt", ino%10000)), nil)
			b = appendEntry(b, 0, inodeKey(ino), nil)
			return appendEntry(b, 1, inodeKey(parent), w.inodeValue(parent, true, 4096))
		})
	}
}

// BenchmarkCompression reports the compression ratio (raw/stored payload
// bytes) of metadata records on a journal file, with frames as large as the
// workload makes them: async (sync=false: records fill 1 MiB frames),
// sync-16 (16 sync committers share frames) and sync-1 (one record per
// frame, the worst case).
func BenchmarkCompression(b *testing.B) {
	for _, mode := range []struct {
		name       string
		committers int
		sync       bool
	}{{"async", 1, false}, {"sync-16", 16, true}, {"sync-1", 1, true}} {
		b.Run(mode.name, func(b *testing.B) {
			j := openBenchJournal(b)
			// Pre-generate the records so that the timed part is the journal.
			w := newMetadataWorkload(1)
			records := make([][]byte, 4096)
			var recBytes int
			for i := range records {
				records[i] = w.next()
				recBytes += len(records[i])
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for c := 0; c < mode.committers; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						if _, err := j.Append([][]byte{records[i%int64(len(records))]}, mode.sync); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if err := j.Sync(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			s := j.Stats()
			j.Close()
			b.ReportMetric(s.CompressionRatio(), "ratio")
			b.ReportMetric(float64(s.StoredBytes)/float64(max(s.Records, 1)), "stored_B/rec")
			b.ReportMetric(float64(recBytes)/float64(len(records)), "raw_B/rec")
			b.ReportMetric(s.MeanRecordsPerFrame, "records/frame")
		})
	}
}
