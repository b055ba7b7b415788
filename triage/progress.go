package triage

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/sshexec"
)

// ProgressLine redraws one status line on a terminal's stderr while a sweep's hosts are
// outstanding (Config.Progress = Update), until Done.
type ProgressLine struct {
	w    io.Writer
	mu   sync.Mutex
	last sshexec.Progress
	stop chan struct{}
	wg   sync.WaitGroup
}

func NewProgressLine(w io.Writer) *ProgressLine {
	p := &ProgressLine{w: w, stop: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
	return p
}

func (p *ProgressLine) Update(pr sshexec.Progress) {
	p.mu.Lock()
	p.last = pr
	p.mu.Unlock()
}

func (p *ProgressLine) draw() {
	p.mu.Lock()
	pr := p.last
	p.mu.Unlock()
	if pr.Total == 0 {
		return
	}
	line := fmt.Sprintf("%d/%d done, %d failed, %d running, %d waiting", pr.Succeeded+pr.Failed, pr.Total, pr.Failed, pr.Running, pr.Waiting)
	if pr.Slowest != "" && !pr.SlowestSince.IsZero() {
		line += fmt.Sprintf("; slowest %s (%s)", report.Sanitize(pr.Slowest), time.Since(pr.SlowestSince).Truncate(time.Second))
	}
	fmt.Fprintf(p.w, "\r\x1b[K%s", line)
}

func (p *ProgressLine) Done() {
	close(p.stop)
	p.wg.Wait()
	fmt.Fprint(p.w, "\r\x1b[K")
}
