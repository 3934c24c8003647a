package main

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress is a progress bar on stderr for long operations (fsck, compact,
// mkfs). It draws only when stderr is a terminal, so logs, pipes and tests
// see nothing of it; a nil *progress is valid and draws nothing.
type progress struct {
	bar *progressbar.ProgressBar
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// newProgress returns a bar of total units (bytes if bytes is set; total -1
// draws a spinner) described by desc, on w if w is a terminal, else nil.
func newProgress(w io.Writer, total int64, desc string, bytes bool) *progress {
	if !isTerminal(w) {
		return nil
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowBytes(bytes),
		progressbar.OptionSetPredictTime(total > 0),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
	return &progress{bar: bar}
}

// set moves the bar to done of total (total may change between phases).
func (p *progress) set(done, total int64, desc string) {
	if p == nil {
		return
	}
	if total > 0 && p.bar.GetMax64() != total {
		p.bar.ChangeMax64(total)
	}
	p.bar.Describe(desc)
	p.bar.Set64(done)
}

// tick advances a spinner.
func (p *progress) tick() {
	if p != nil {
		p.bar.Add(1)
	}
}

// done clears the bar.
func (p *progress) done() {
	if p != nil {
		p.bar.Finish()
		p.bar.Exit()
	}
}

// spin shows a spinner described by desc on w (if a terminal) until the
// returned function is called.
func spin(w io.Writer, desc string) (stop func()) {
	p := newProgress(w, -1, desc, false)
	if p == nil {
		return func() {}
	}
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				p.tick()
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
		p.done()
	}
}
