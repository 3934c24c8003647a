package mount

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"
)

// NewStatsCollector exposes the Prometheus collector to tests.
func NewStatsCollector(stats func() Stats) prometheus.Collector { return newStatsCollector(stats) }

// OpCounters exposes the FUSE operation counters to tests.
type OpCounters struct{ c opCounters }

// Record records one operation by name.
func (o *OpCounters) Record(op string, d time.Duration, ok bool) {
	for k, name := range opNames {
		if name == op {
			st := fuse.OK
			if !ok {
				st = fuse.ENOENT
			}
			o.c.record(opKind(k), time.Now().Add(-d), st)
		}
	}
}

// Snapshot returns the counters.
func (o *OpCounters) Snapshot() []OpStats { return o.c.snapshot() }

// BucketOf exposes the latency bucket function.
var BucketOf = bucketOf

// ServeControl serves h on the control socket of dataDir until stop.
func ServeControl(dataDir string, h http.Handler) (stop func(), err error) {
	ln, err := listenControl(dataDir)
	if err != nil {
		return nil, err
	}
	return serveHTTP(ln, h, slog.New(slog.DiscardHandler)), nil
}
