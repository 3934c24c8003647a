package journal_test

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/lsmfs/lsmfs/journal"
)

// TestDataDriven runs the scenarios in testdata/frames: journals built,
// damaged, crashed, reopened and replayed on an in-memory device. Regenerate
// the expected output with -rewrite and review the diff.
//
// Commands:
//
//	format size=<bytes>                  format a fresh device (uuid A, fixed nonce)
//	open [max-frame=N] [compression=off] [uuid=b]
//	                                     open; prints what recovery found (or the error)
//	append [sync]                        one Enqueue of the input lines; prints the last lsn
//	fill count=N size=S                  N synced appends of one S-byte pseudo-random record
//	sync | close
//	checkpoint lsn=N
//	crash                                keep only synced bytes; the open journal is abandoned
//	dump [records]                       journal.Dump of the current bytes
//	corrupt seq=N byte=K                 flip byte K of frame seq N (durably)
//	tear seq=N from=K                    zero frame seq N from byte K to its end (durably)
//	flip off=N                           flip the byte at device offset N (durably)
//	corrupt-superblock copy=N            flip a byte (the checkpoint lsn) of superblock copy N
//	replay [from=N]                      the replayed records
func TestDataDriven(t *testing.T) {
	var (
		dev *memDevice
		j   *journal.Journal
	)
	defer func() {
		if j != nil {
			j.Close()
		}
	}()
	datadriven.RunTest(t, "testdata/frames", func(t *testing.T, td *datadriven.TestData) string {
		needJournal := func() {
			if j == nil {
				td.Fatalf(t, "no open journal")
			}
		}
		switch td.Cmd {
		case "format":
			var size int64
			td.ScanArgs(t, "size", &size)
			if j != nil {
				j.Close()
				j = nil
			}
			dev = newMemDevice(size)
			if err := journal.Format(dev, journal.FormatOptions{UUID: uuidA, Nonce: 42}); err != nil {
				return err.Error()
			}
			return "ok"

		case "open":
			if j != nil {
				td.Fatalf(t, "journal already open")
			}
			opts := journal.Options{UUID: uuidA, CommitInterval: time.Hour}
			if td.HasArg("max-frame") {
				td.ScanArgs(t, "max-frame", &opts.MaxFrameBytes)
			}
			if td.HasArg("compression") {
				opts.DisableCompression = true
			}
			if td.HasArg("uuid") {
				opts.UUID = uuidB
			}
			var err error
			if j, err = journal.Open(dev.reopen(), opts); err != nil {
				j = nil
				return "error: " + err.Error()
			}
			return recoveryString(j.Recovery())

		case "append":
			needJournal()
			var batch [][]byte
			for _, line := range strings.Split(td.Input, "\n") {
				batch = append(batch, []byte(line))
			}
			lsn, err := j.Append(batch, td.HasArg("sync"))
			if err != nil {
				return "error: " + err.Error()
			}
			return fmt.Sprintf("lsn=%d", lsn)

		case "fill":
			needJournal()
			var count, size int
			td.ScanArgs(t, "count", &count)
			td.ScanArgs(t, "size", &size)
			var first, last uint64
			for i := 0; i < count; i++ {
				rng := rand.New(rand.NewPCG(uint64(i), uint64(size)))
				rec := make([]byte, size)
				for k := range rec {
					rec[k] = byte(rng.Uint32())
				}
				lsn, err := j.Append([][]byte{rec}, true)
				if err != nil {
					return fmt.Sprintf("lsn=%d..%d\nerror: %v", first, last, err)
				}
				if first == 0 {
					first = lsn
				}
				last = lsn
			}
			return fmt.Sprintf("lsn=%d..%d", first, last)

		case "sync":
			needJournal()
			if err := j.Sync(); err != nil {
				return "error: " + err.Error()
			}
			return "ok"

		case "close":
			needJournal()
			err := j.Close()
			j = nil
			if err != nil {
				return "error: " + err.Error()
			}
			return "ok"

		case "checkpoint":
			needJournal()
			var lsn uint64
			td.ScanArgs(t, "lsn", &lsn)
			if err := j.Checkpoint(lsn); err != nil {
				return "error: " + err.Error()
			}
			s := j.Stats()
			return fmt.Sprintf("live=%d/%d", s.LiveBytes, s.Capacity)

		case "crash":
			crash := dev.CrashClone()
			if j != nil {
				j.Close()
				j = nil
			}
			dev = crash
			return "ok"

		case "dump":
			var out bytes.Buffer
			err := journal.Dump(&out, dev.Clone(), journal.DumpOptions{Records: td.HasArg("records")})
			if err != nil && !strings.Contains(out.String(), err.Error()) {
				fmt.Fprintf(&out, "error: %v\n", err)
			}
			return out.String()

		case "corrupt", "tear":
			var seq uint64
			var k int64
			td.ScanArgs(t, "seq", &seq)
			if td.Cmd == "corrupt" {
				td.ScanArgs(t, "byte", &k)
			} else {
				td.ScanArgs(t, "from", &k)
			}
			frames, _, err := journal.ListFrames(dev.Clone())
			if err != nil {
				td.Fatalf(t, "list frames: %v", err)
			}
			for _, f := range frames {
				if f.Seq != seq {
					continue
				}
				if td.Cmd == "corrupt" {
					dev.damage(func(b []byte) { b[f.Off+k] ^= 0xff })
					return fmt.Sprintf("flipped byte at off=%d", f.Off+k)
				}
				dev.damage(func(b []byte) { clear(b[f.Off+k : f.Off+f.Len]) })
				return fmt.Sprintf("zeroed [%d, %d)", f.Off+k, f.Off+f.Len)
			}
			td.Fatalf(t, "no frame seq=%d", seq)

		case "flip":
			var off int64
			td.ScanArgs(t, "off", &off)
			dev.damage(func(b []byte) { b[off] ^= 0xff })
			return "ok"

		case "corrupt-superblock":
			var c int
			td.ScanArgs(t, "copy", &c)
			dev.damage(func(b []byte) { b[c*journal.BlockSize+70] ^= 0xff })
			return "ok"

		case "replay":
			needJournal()
			var from uint64
			if td.HasArg("from") {
				td.ScanArgs(t, "from", &from)
			}
			var out strings.Builder
			err := j.Replay(from, func(lsn uint64, rec []byte) error {
				fmt.Fprintf(&out, "%d: %s\n", lsn, showRecord(rec))
				return nil
			})
			if err != nil {
				fmt.Fprintf(&out, "error: %v\n", err)
			}
			return out.String()
		}
		td.Fatalf(t, "unknown command %s", td.Cmd)
		return ""
	})
}

func recoveryString(r journal.Recovery) string {
	s := fmt.Sprintf("checkpoint=%d frames=%d records=%d lsn=%d..%d end off=%d seq=%d",
		r.CheckpointLSN, r.Frames, r.Records, r.FirstLSN, r.LastLSN, r.End, r.EndSeq)
	if r.TailErr != nil {
		s += "\ntail: " + r.TailErr.Error()
	}
	return s
}

func showRecord(rec []byte) string {
	for _, c := range rec {
		if c < ' ' || c > '~' {
			return fmt.Sprintf("(%d bytes, crc32 %08x)", len(rec), crc32.ChecksumIEEE(rec))
		}
	}
	if len(rec) > 40 {
		return strconv.Quote(string(rec[:40])) + fmt.Sprintf("... (%d bytes)", len(rec))
	}
	return strconv.Quote(string(rec))
}
