package journal

// Internals exposed to the black-box tests (package journal_test).

// FrameInfo describes a frame of the recovered log.
type FrameInfo struct {
	Seq               uint64
	Off, Len          int64
	FirstLSN, LastLSN uint64
	// Covered is the number of bytes from Off that the checksum covers
	// (header and stored payload); the rest up to Len is padding.
	Covered int64
}

// ListFrames recovers the log on dev (without opening a journal) and lists
// its frames.
func ListFrames(dev Device) ([]FrameInfo, Recovery, error) {
	j, err := inspect(dev)
	if err != nil {
		return nil, Recovery{}, err
	}
	var out []FrameInfo
	var buf []byte
	for _, m := range j.mu.frames {
		h, _, err := j.readFrame(m.off, m.seq, &buf)
		if err != nil {
			return nil, Recovery{}, err
		}
		out = append(out, FrameInfo{Seq: m.seq, Off: m.off, Len: m.len, FirstLSN: m.firstLSN, LastLSN: m.lastLSN,
			Covered: int64(frameHeaderSize) + int64(h.storedLen)})
	}
	return out, j.recovery, nil
}

// FrameHeaderSize is the length of a frame header.
const FrameHeaderSize = frameHeaderSize
