package mount

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Prometheus metrics
//
// With metrics=ADDR the daemon serves GET /metrics on ADDR (host:port; port
// 0 picks a free one, shown by `lsmfs stats`) in the Prometheus text format.
// The same exposition is on the control socket. There is no authentication:
// bind it to loopback or to a monitoring network.
//
// The figures are the ones of Stats, read at scrape time (a collector over
// the engine's counters, not a second set of counters): counters end in
// _total, durations are in seconds, sizes in bytes. MetricNames lists them.

// metricsNamespace prefixes every lsmfs metric.
const metricsNamespace = "lsmfs"

// metricDesc describes one metric of the collector.
type metricDesc struct {
	name, help string
	typ        prometheus.ValueType
	labels     []string
	value      func(s *Stats, emit func(v float64, labels ...string))
}

func counter(name, help string, f func(s *Stats) float64) metricDesc {
	return metricDesc{name: name, help: help, typ: prometheus.CounterValue,
		value: func(s *Stats, emit func(float64, ...string)) { emit(f(s)) }}
}

func gauge(name, help string, f func(s *Stats) float64) metricDesc {
	return metricDesc{name: name, help: help, typ: prometheus.GaugeValue,
		value: func(s *Stats, emit func(float64, ...string)) { emit(f(s)) }}
}

// metricDescs is the table of lsmfs metrics (the FUSE latency histogram is
// added by the collector).
func metricDescs() []metricDesc {
	return []metricDesc{
		{name: "mount_info", help: "The mount: 1, labelled with its data directory, mount point and policies.",
			typ: prometheus.GaugeValue, labels: []string{"datadir", "mountpoint", "memtable_policy", "compaction", "read_only"},
			value: func(s *Stats, emit func(float64, ...string)) {
				emit(1, s.DataDir, s.Mountpoint, s.Memtable.Policy, s.EngineOptions["compaction"], strconv.FormatBool(s.ReadOnly))
			}},
		gauge("uptime_seconds", "Seconds since the filesystem was mounted.", func(s *Stats) float64 { return s.UptimeSeconds }),
		{name: "fuse_operation_errors_total", help: "FUSE requests answered with an error, by operation.",
			typ: prometheus.CounterValue, labels: []string{"op"},
			value: func(s *Stats, emit func(float64, ...string)) {
				for _, o := range s.Ops {
					emit(float64(o.Errors), o.Op)
				}
			}},

		counter("journal_records_total", "Records (engine batches) written to the journal.", func(s *Stats) float64 { return float64(s.Journal.Records) }),
		counter("journal_frames_total", "Journal frames written (one write per frame: group commit).", func(s *Stats) float64 { return float64(s.Journal.Frames) }),
		counter("journal_compressed_frames_total", "Journal frames stored LZ4-compressed.", func(s *Stats) float64 { return float64(s.Journal.CompressedFrames) }),
		counter("journal_forces_total", "Journal device forces (fsync/fdatasync).", func(s *Stats) float64 { return float64(s.Journal.Forces) }),
		counter("journal_force_seconds_total", "Time spent in journal device forces.", func(s *Stats) float64 { return s.Journal.ForceSeconds }),
		counter("journal_raw_bytes_total", "Journal frame payload bytes before compression.", func(s *Stats) float64 { return float64(s.Journal.RawBytes) }),
		counter("journal_stored_bytes_total", "Journal frame payload bytes after compression.", func(s *Stats) float64 { return float64(s.Journal.StoredBytes) }),
		counter("journal_device_bytes_total", "Bytes written to the journal device (headers and padding included).", func(s *Stats) float64 { return float64(s.Journal.DeviceBytes) }),
		counter("journal_checkpoints_total", "Journal checkpoints (ring space reclaimed).", func(s *Stats) float64 { return float64(s.Journal.Checkpoints) }),
		counter("journal_space_waits_total", "Writers that waited for journal ring space.", func(s *Stats) float64 { return float64(s.Journal.SpaceWaits) }),
		counter("journal_space_wait_seconds_total", "Time writers waited for journal ring space.", func(s *Stats) float64 { return s.Journal.SpaceWaitSeconds }),
		gauge("journal_live_bytes", "Journal ring bytes not yet reclaimable.", func(s *Stats) float64 { return float64(s.Journal.LiveBytes) }),
		gauge("journal_capacity_bytes", "Journal ring size.", func(s *Stats) float64 { return float64(s.Journal.Capacity) }),

		gauge("memtable_segments", "Memtable segments (active and pipeline).", func(s *Stats) float64 { return float64(s.Memtable.Segments) }),
		gauge("memtable_bytes", "Memory held by the memtable segments.", func(s *Stats) float64 { return float64(s.Memtable.Bytes) }),
		gauge("memtable_peak_bytes", "Most memory the memtable segments held since the mount.", func(s *Stats) float64 { return float64(s.Memtable.PeakBytes) }),
		counter("memtable_in_memory_compactions_total", "Memtable segments flattened or merged in memory.", func(s *Stats) float64 { return float64(s.Memtable.InMemoryCompactions) }),
		counter("memtable_in_memory_merges_total", "In-memory merges of memtable segments.", func(s *Stats) float64 { return float64(s.Memtable.InMemoryMerges) }),
		counter("memtable_in_memory_dropped_entries_total", "Entries dropped by in-memory merges.", func(s *Stats) float64 { return float64(s.Memtable.InMemoryDropped) }),
		gauge("memtable_duplicate_share", "Share of duplicate keys last measured by the adaptive policy.", func(s *Stats) float64 { return s.Memtable.DuplicateShare }),

		{name: "level_tables", help: "Tables per level.", typ: prometheus.GaugeValue, labels: []string{"level"},
			value: func(s *Stats, emit func(float64, ...string)) {
				for _, l := range s.Levels {
					emit(float64(l.Tables), strconv.Itoa(l.Level))
				}
			}},
		{name: "level_bytes", help: "Table bytes per level.", typ: prometheus.GaugeValue, labels: []string{"level"},
			value: func(s *Stats, emit func(float64, ...string)) {
				for _, l := range s.Levels {
					emit(float64(l.Bytes), strconv.Itoa(l.Level))
				}
			}},
		counter("user_bytes_total", "Encoded bytes of the batches applied to the engine.", func(s *Stats) float64 { return float64(s.Compaction.UserBytes) }),
		counter("flushes_total", "Memtable flushes to level-0 tables.", func(s *Stats) float64 { return float64(s.Compaction.Flushes) }),
		counter("flush_bytes_total", "Table bytes written by flushes.", func(s *Stats) float64 { return float64(s.Compaction.FlushBytes) }),
		counter("compactions_total", "Compactions run.", func(s *Stats) float64 { return float64(s.Compaction.Compactions) }),
		counter("compaction_moves_total", "Tables moved down a level without rewriting.", func(s *Stats) float64 { return float64(s.Compaction.Moves) }),
		counter("compaction_read_bytes_total", "Table bytes read by compactions.", func(s *Stats) float64 { return float64(s.Compaction.ReadBytes) }),
		counter("compaction_written_bytes_total", "Table bytes written by compactions.", func(s *Stats) float64 { return float64(s.Compaction.WrittenBytes) }),
		counter("write_stalls_total", "Writes stalled by backpressure (memtables or level 0 full).", func(s *Stats) float64 { return float64(s.Compaction.WriteStalls) }),
		gauge("write_amplification", "Bytes written to disk (journal, flushes, compactions) per user byte.", func(s *Stats) float64 { return s.Compaction.WriteAmplification }),

		gauge("value_log_segments", "Value-log segments.", func(s *Stats) float64 { return float64(s.ValueLog.Segments) }),
		gauge("value_log_bytes", "Bytes of the sealed value-log segments.", func(s *Stats) float64 { return float64(s.ValueLog.Bytes) }),
		gauge("value_log_live_bytes", "Estimated live bytes of the sealed value-log segments.", func(s *Stats) float64 { return float64(s.ValueLog.LiveBytes) }),
		gauge("value_log_live_ratio", "Live share of the sealed value-log segments.", func(s *Stats) float64 { return s.ValueLog.LiveRatio }),
		counter("value_log_cleaned_segments_total", "Value-log segments cleaned and removed.", func(s *Stats) float64 { return float64(s.ValueLog.Cleaned) }),
		counter("value_log_rewritten_bytes_total", "Value bytes moved by the value-log cleaner.", func(s *Stats) float64 { return float64(s.ValueLog.RewrittenBytes) }),
		counter("value_log_flush_moved_bytes_total", "Value bytes of synchronous writes that flushes moved from the journal's inline copies to the value log.", func(s *Stats) float64 { return float64(s.ValueLog.FlushMovedBytes) }),
		counter("value_log_disk_reads_total", "Values read from value-log files.", func(s *Stats) float64 { return float64(s.ValueLog.DiskReads) }),
		counter("value_log_read_aheads_total", "Runs of a file read in sequence served from the daemon's read-ahead.", func(s *Stats) float64 { return float64(s.ValueLog.ReadAheads) }),

		counter("cache_hits_total", "Block cache hits.", func(s *Stats) float64 { return float64(s.Cache.Hits) }),
		counter("cache_misses_total", "Block cache misses.", func(s *Stats) float64 { return float64(s.Cache.Misses) }),
		counter("cache_evictions_total", "Values evicted from the block cache.", func(s *Stats) float64 { return float64(s.Cache.Evicted) }),
		gauge("cache_capacity_bytes", "Block cache size.", func(s *Stats) float64 { return float64(s.Cache.Capacity) }),
		gauge("cache_used_bytes", "Bytes held by the block cache.", func(s *Stats) float64 { return float64(s.Cache.Used) }),

		counter("bloom_filter_useful_total", "Table lookups a bloom filter saved.", func(s *Stats) float64 { return float64(s.Reads.BloomUseful) }),
		counter("bloom_filter_useless_total", "Table lookups a bloom filter let through for nothing.", func(s *Stats) float64 { return float64(s.Reads.BloomUseless) }),
		counter("table_blocks_read_total", "Table blocks read from disk.", func(s *Stats) float64 { return float64(s.Reads.BlocksRead) }),
		counter("table_read_bytes_total", "Table bytes read from disk.", func(s *Stats) float64 { return float64(s.Reads.BytesRead) }),
		gauge("background_error", "1 if the engine hit a background error (it then refuses writes).", func(s *Stats) float64 {
			if s.BackgroundError != "" {
				return 1
			}
			return 0
		}),
	}
}

// opDurationName is the FUSE latency histogram.
const opDurationName = "fuse_operation_duration_seconds"

// MetricNames lists the full names of lsmfs's own metrics (without the
// Go runtime and process metrics also exported), for docs and tests.
func MetricNames() []string {
	names := []string{metricsNamespace + "_" + opDurationName}
	for _, d := range metricDescs() {
		names = append(names, metricsNamespace+"_"+d.name)
	}
	return names
}

// statsCollector exports Stats as Prometheus metrics at scrape time.
type statsCollector struct {
	stats  func() Stats
	descs  []metricDesc
	pdescs []*prometheus.Desc
	opDesc *prometheus.Desc
}

func newStatsCollector(stats func() Stats) *statsCollector {
	c := &statsCollector{stats: stats, descs: metricDescs()}
	for _, d := range c.descs {
		c.pdescs = append(c.pdescs, prometheus.NewDesc(metricsNamespace+"_"+d.name, d.help, d.labels, nil))
	}
	c.opDesc = prometheus.NewDesc(metricsNamespace+"_"+opDurationName,
		"Latency of FUSE requests in the daemon, from arrival to reply, by operation.", []string{"op"}, nil)
	return c
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.pdescs {
		ch <- d
	}
	ch <- c.opDesc
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	for i, d := range c.descs {
		d.value(&s, func(v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(c.pdescs[i], d.typ, v, labels...)
		})
	}
	bounds := BucketBounds()
	for _, o := range s.Ops {
		buckets := make(map[float64]uint64, len(bounds))
		for k, b := range bounds {
			buckets[b] = o.Buckets[k]
		}
		ch <- prometheus.MustNewConstHistogram(c.opDesc, o.Count, o.Sum, buckets, o.Op)
	}
}

// metricsHandler returns the /metrics handler: lsmfs's metrics plus the Go
// runtime's and the process's.
func metricsHandler(stats func() Stats) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newStatsCollector(stats), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}
