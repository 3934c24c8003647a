package journal

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Stats are counters since Open (plus the ring state at the time of the
// call).
type Stats struct {
	Records uint64 // records written in frames
	Frames  uint64 // frames written
	// RawBytes and StoredBytes are payload bytes before and after
	// compression; DeviceBytes adds headers and block padding.
	RawBytes, StoredBytes, DeviceBytes uint64
	CompressedFrames                   uint64 // frames stored LZ4-compressed
	Forces                             uint64 // Device.Sync calls for frames
	ForceLatencyTotal                  time.Duration
	ForceLatencyMax                    time.Duration
	MeanRecordsPerFrame                float64
	MaxRecordsPerFrame                 uint64
	// SpaceWaits counts writers (and committer rounds) that waited for ring
	// space; SpaceWaitTime is their total wait.
	SpaceWaits    uint64
	SpaceWaitTime time.Duration
	Checkpoints   uint64
	// LiveBytes is the ring space from the checkpoint to the head (not yet
	// reclaimable); Capacity is the ring size.
	LiveBytes, Capacity int64
	CheckpointLSN       uint64 // records <= are no longer needed
	DurableLSN          uint64 // records <= are durable
	LastLSN             uint64 // the last lsn enqueued
}

// CompressionRatio is RawBytes/StoredBytes (1 when nothing was written).
func (s Stats) CompressionRatio() float64 {
	if s.StoredBytes == 0 {
		return 1
	}
	return float64(s.RawBytes) / float64(s.StoredBytes)
}

// String renders the stats on one line.
func (s Stats) String() string {
	meanForce := time.Duration(0)
	if s.Forces > 0 {
		meanForce = s.ForceLatencyTotal / time.Duration(s.Forces)
	}
	return fmt.Sprintf("records=%d frames=%d raw=%d stored=%d ratio=%.2f forces=%d force_mean=%v force_max=%v "+
		"records/frame=%.1f (max %d) space_waits=%d (%v) checkpoints=%d live=%d/%d lsn=%d durable=%d checkpoint=%d",
		s.Records, s.Frames, s.RawBytes, s.StoredBytes, s.CompressionRatio(), s.Forces, meanForce, s.ForceLatencyMax,
		s.MeanRecordsPerFrame, s.MaxRecordsPerFrame, s.SpaceWaits, s.SpaceWaitTime, s.Checkpoints,
		s.LiveBytes, s.Capacity, s.LastLSN, s.DurableLSN, s.CheckpointLSN)
}

type statsCounters struct {
	records, frames                    atomic.Uint64
	rawBytes, storedBytes, deviceBytes atomic.Uint64
	compressedFrames                   atomic.Uint64
	forces, forceNanos, forceMaxNanos  atomic.Uint64
	maxRecordsPerFrame                 atomic.Uint64
	spaceWaits, spaceWaitNanos         atomic.Uint64
	checkpoints                        atomic.Uint64
}

func updateMax(a *atomic.Uint64, v uint64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// Stats returns the counters.
func (j *Journal) Stats() Stats {
	c := &j.stats
	s := Stats{
		Records:            c.records.Load(),
		Frames:             c.frames.Load(),
		RawBytes:           c.rawBytes.Load(),
		StoredBytes:        c.storedBytes.Load(),
		DeviceBytes:        c.deviceBytes.Load(),
		CompressedFrames:   c.compressedFrames.Load(),
		Forces:             c.forces.Load(),
		ForceLatencyTotal:  time.Duration(c.forceNanos.Load()),
		ForceLatencyMax:    time.Duration(c.forceMaxNanos.Load()),
		MaxRecordsPerFrame: c.maxRecordsPerFrame.Load(),
		SpaceWaits:         c.spaceWaits.Load(),
		SpaceWaitTime:      time.Duration(c.spaceWaitNanos.Load()),
		Checkpoints:        c.checkpoints.Load(),
		Capacity:           j.ringSize,
	}
	if s.Frames > 0 {
		s.MeanRecordsPerFrame = float64(s.Records) / float64(s.Frames)
	}
	j.mu.Lock()
	s.LiveBytes = j.mu.used
	s.CheckpointLSN = j.mu.ckpt.lsn
	s.DurableLSN = j.mu.durableLSN
	s.LastLSN = j.mu.nextLSN - 1
	j.mu.Unlock()
	return s
}
