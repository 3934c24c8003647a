package mount_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lsmfs/lsmfs/mount"
)

func sampleStats() mount.Stats {
	var ops mount.OpCounters
	for i := range 100 {
		ops.Record("lookup", time.Duration(i)*time.Microsecond, i%10 != 0)
		ops.Record("write", time.Duration(i)*time.Millisecond, true)
	}
	return mount.Stats{
		Source: "daemon", DataDir: "/srv/lsmfs", Mountpoint: "/mnt/lsmfs",
		Ops:           ops.Snapshot(),
		EngineOptions: map[string]string{"compaction": "leveled"},
		Levels:        []mount.LevelStats{{Level: 0, Tables: 2, Bytes: 1 << 20}, {Level: 6, Tables: 9, Bytes: 70 << 20}},
		Memtable:      mount.MemtableStats{Policy: "basic"},
	}
}

// The exposition follows Prometheus's naming conventions (promlint: _total
// counters, base units, no duplicate or reserved names).
func TestMetricsLint(t *testing.T) {
	c := mount.NewStatsCollector(sampleStats)
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	if n := testutil.CollectAndCount(c); n < len(mount.MetricNames()) {
		t.Errorf("collected %d metrics, want at least %d", n, len(mount.MetricNames()))
	}
	for _, name := range mount.MetricNames() {
		if !strings.HasPrefix(name, "lsmfs_") {
			t.Errorf("metric %s lacks the lsmfs_ prefix", name)
		}
	}
}

func TestOpStats(t *testing.T) {
	for d, want := range map[time.Duration]int{
		0: 0, time.Microsecond: 0, 1001: 1, 2 * time.Microsecond: 1, 2001: 2,
		time.Millisecond: 10, time.Hour: 25,
	} {
		if got := mount.BucketOf(d); got != want {
			t.Errorf("bucketOf(%v) = %d, want %d", d, got, want)
		}
	}
	s := sampleStats()
	if len(s.Ops) != 2 || s.Ops[0].Op != "lookup" || s.Ops[1].Op != "write" {
		t.Fatalf("ops: %+v", s.Ops)
	}
	l, w := s.Ops[0], s.Ops[1]
	if l.Count != 100 || l.Errors != 10 {
		t.Errorf("lookup: count %d errors %d; want 100, 10", l.Count, l.Errors)
	}
	// Latencies 0..99ms: percentiles within a factor of two.
	for _, q := range []struct {
		name      string
		got, want float64
	}{{"p50", w.P50, 0.050}, {"p90", w.P90, 0.090}, {"p99", w.P99, 0.099}} {
		if q.got < q.want/2 || q.got > q.want*2 {
			t.Errorf("write %s = %v, want about %v", q.name, q.got, q.want)
		}
	}
	if !(w.P50 <= w.P90 && w.P90 <= w.P99 && w.P99 <= w.Max) {
		t.Errorf("write percentiles out of order: %+v", w)
	}
	if w.Buckets[len(w.Buckets)-1] != w.Count {
		t.Errorf("cumulative buckets end at %d, want the count %d", w.Buckets[len(w.Buckets)-1], w.Count)
	}
}
