package lsm

// Metrics are engine counters for `lsmfs stats` and benchmarks.
type Metrics struct {
	// Memtables.
	MemtableCount int
	MemtableBytes uint64
}

// Metrics returns a snapshot of the engine's counters.
func (d *DB) Metrics() Metrics {
	rs := d.loadReadState()
	defer rs.unref()
	var m Metrics
	for _, mt := range rs.memtables {
		m.MemtableCount++
		m.MemtableBytes += mt.Size()
	}
	return m
}
