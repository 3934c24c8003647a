package journal

import "fmt"

// checkInvariantsLocked verifies the ring accounting when built with the
// invariants tag, and panics on a violation (a bug, never bad input).
func (j *Journal) checkInvariantsLocked() {
	if !invariants {
		return
	}
	fs := j.mu.frames
	if want := j.liveBytes(j.mu.ckpt.off, j.mu.head, len(fs) > 0); j.mu.used != want {
		panic(fmt.Sprintf("journal: invariant: used=%d, ring distance from checkpoint off=%d to head=%d is %d",
			j.mu.used, j.mu.ckpt.off, j.mu.head, want))
	}
	if j.mu.used > j.ringSize || j.mu.used < 0 {
		panic(fmt.Sprintf("journal: invariant: used=%d outside [0, %d]", j.mu.used, j.ringSize))
	}
	for i, m := range fs {
		if m.off < j.ringStart || m.off+m.len > j.ringEnd || m.off%BlockSize != 0 {
			panic(fmt.Sprintf("journal: invariant: frame seq=%d off=%d len=%d outside ring [%d, %d)", m.seq, m.off, m.len, j.ringStart, j.ringEnd))
		}
		if i > 0 && (m.seq != fs[i-1].seq+1 || m.firstLSN != fs[i-1].lastLSN+1) {
			panic(fmt.Sprintf("journal: invariant: frame seq=%d lsn=%d does not follow seq=%d lsn=%d", m.seq, m.firstLSN, fs[i-1].seq, fs[i-1].lastLSN))
		}
	}
	if n := len(fs); n > 0 && fs[n-1].seq != j.mu.placedSeq {
		panic(fmt.Sprintf("journal: invariant: last frame seq=%d, placed seq=%d", fs[n-1].seq, j.mu.placedSeq))
	}
}
