package sstable

import (
	"fmt"
	"os"
	"testing"
	"time"
)

func Watchdog(t *testing.T, data []byte) func() {
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			os.WriteFile(fmt.Sprintf("/tmp/hang-%d", time.Now().UnixNano()), data, 0o644)
			panic("hang")
		}
	}()
	return func() { close(done) }
}
