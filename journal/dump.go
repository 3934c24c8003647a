package journal

import (
	"fmt"
	"io"
	"log/slog"
	"strconv"
)

// DumpOptions select what Dump prints.
type DumpOptions struct {
	// Records prints every record of every frame (quoted, truncated to
	// MaxRecordBytes).
	Records bool
	// MaxRecordBytes bounds each printed record; 0 means 32.
	MaxRecordBytes int
}

// Dump writes a description of the journal on dev to w: both superblock
// copies, what recovery finds, and every frame from the checkpoint to the end
// of the log. It only reads dev (for `lsmfs debug journal dump`). A journal
// that Open would refuse is described as far as possible and the reason is
// returned.
func Dump(w io.Writer, dev Device, opts DumpOptions) error {
	if opts.MaxRecordBytes == 0 {
		opts.MaxRecordBytes = 32
	}
	buf := alignedBuf(superblockCopies * BlockSize)
	if err := readFull(dev, buf, 0); err != nil {
		return err
	}
	for i := 0; i < superblockCopies; i++ {
		sb, err := decodeSuperblock(buf[i*BlockSize:(i+1)*BlockSize], i)
		if err != nil {
			fmt.Fprintf(w, "superblock %d: %v\n", i, err)
			continue
		}
		fmt.Fprintf(w, "superblock %d: gen=%d uuid=%s ring=[%d,%d) checkpoint lsn=%d off=%d seq=%d\n",
			i, sb.generation, FormatUUID(sb.uuid), sb.ringStart, sb.ringStart+sb.ringSize,
			sb.ckpt.lsn, sb.ckpt.off, sb.ckpt.seq)
	}
	j, err := inspect(dev)
	if err != nil {
		fmt.Fprintf(w, "error: %v\n", err)
		return err
	}
	var fbuf, scratch []byte
	for _, m := range j.mu.frames {
		h, _, err := j.readFrame(m.off, m.seq, 0, &fbuf)
		if err != nil {
			return err
		}
		comp := "raw"
		if h.flags&flagLZ4 != 0 {
			comp = "lz4"
		}
		fmt.Fprintf(w, "frame seq=%d off=%d len=%d lsn=%d..%d records=%d raw=%d stored=%d %s\n",
			h.seq, m.off, m.len, h.firstLSN, h.lastLSN(), h.count, h.rawLen, h.storedLen, comp)
		if !opts.Records {
			continue
		}
		raw, err := framePayload(fbuf, &h, &scratch)
		if err != nil {
			return err
		}
		err = forEachRecord(raw, h.count, func(i int, rec []byte) error {
			s := rec
			if len(s) > opts.MaxRecordBytes {
				s = s[:opts.MaxRecordBytes]
			}
			q := strconv.Quote(string(s))
			if len(s) < len(rec) {
				q += fmt.Sprintf("... (%d bytes)", len(rec))
			}
			fmt.Fprintf(w, "  %d %s\n", h.firstLSN+uint64(i), q)
			return nil
		})
		if err != nil {
			return err
		}
	}
	r := j.recovery
	fmt.Fprintf(w, "end off=%d seq=%d frames=%d records=%d lsn=%d..%d live=%d/%d scanned=%d\n",
		r.End, r.EndSeq, r.Frames, r.Records, r.FirstLSN, r.LastLSN, j.mu.used, j.ringSize, r.ScannedBytes)
	if r.TailErr != nil {
		fmt.Fprintf(w, "tail: %v\n", r.TailErr)
	}
	return nil
}

// inspect reads the superblock and recovers the log of dev without starting
// a journal (no goroutines, nothing written).
func inspect(dev Device) (*Journal, error) {
	sb, err := readSuperblock(dev, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	j := &Journal{
		dev: dev, log: slog.New(slog.DiscardHandler),
		uuid: sb.uuid, nonce: sb.nonce, seed: frameSeed(sb.uuid, sb.nonce),
		ringStart: sb.ringStart, ringEnd: sb.ringStart + sb.ringSize, ringSize: sb.ringSize,
		readFrameLen: readFrameLen(sb.ringSize),
	}
	if err := j.recover(sb); err != nil {
		return nil, err
	}
	return j, nil
}
