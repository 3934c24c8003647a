package lsm

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// recordHandler keeps the records logged through it.
type recordHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r)
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

// TestLogLimiter: a message repeated while a full device makes a flush fail
// every couple of seconds goes out at its level once a minute, with the
// count of the repeats in between (logged at Debug).
func TestLogLimiter(t *testing.T) {
	h := &recordHandler{}
	logger := slog.New(h)
	var l logLimiter
	for range 5 {
		l.log(logger, slog.LevelWarn, "retrying", "in", time.Second)
	}
	levels := func() (warn, debug int) {
		for _, r := range h.recs {
			switch r.Level {
			case slog.LevelWarn:
				warn++
			case slog.LevelDebug:
				debug++
			}
		}
		return
	}
	if w, d := levels(); w != 1 || d != 4 {
		t.Fatalf("5 messages in a row: %d at Warn, %d at Debug; want 1 and 4", w, d)
	}
	l.mu.Lock()
	l.last = time.Now().Add(-logEvery - time.Second)
	l.mu.Unlock()
	l.log(logger, slog.LevelWarn, "retrying", "in", time.Second)
	if w, _ := levels(); w != 2 {
		t.Fatalf("after %v: %d messages at Warn, want 2", logEvery, w)
	}
	last := h.recs[len(h.recs)-1]
	var repeats int64 = -1
	last.Attrs(func(a slog.Attr) bool {
		if a.Key == "repeats_in_last_interval" {
			repeats = a.Value.Int64()
		}
		return true
	})
	if repeats != 4 {
		t.Fatalf("repeats_in_last_interval = %d, want 4", repeats)
	}
}
