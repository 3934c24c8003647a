package main

import (
	"log/slog"
	"log/syslog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSyslogPriorities: the daemon's syslog lines carry the priority of
// their level (LOG_DAEMON: <27> error, <28> warning, <30> info), with the
// logger's attributes and groups as the text handler writes them.
func TestSyslogPriorities(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "log")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	w, err := syslog.Dial("unixgram", sock, syslog.LOG_DAEMON|syslog.LOG_INFO, "lsmfs")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	log := slog.New(newSyslogHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo})).With("mountpoint", "/m")
	log.Error("flush failed", "err", "EIO")
	log.Warn("slow")
	log.WithGroup("g").Info("mounted", "k", 1)
	log.Debug("not sent")
	for _, want := range []struct{ pri, text string }{
		{"<27>", `level=ERROR msg="flush failed" mountpoint=/m err=EIO`},
		{"<28>", `level=WARN msg=slow mountpoint=/m`},
		{"<30>", `level=INFO msg=mounted mountpoint=/m g.k=1`},
	} {
		buf := make([]byte, 4096)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("read syslog message: %v", err)
		}
		got := strings.TrimSpace(string(buf[:n]))
		if !strings.HasPrefix(got, want.pri) || !strings.HasSuffix(got, want.text) {
			t.Fatalf("message %q: want priority %s and text %q", got, want.pri, want.text)
		}
	}
}
