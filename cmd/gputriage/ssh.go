package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gputriage/gputriage/readiness"
	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/sshexec"
	"github.com/gputriage/gputriage/triage"
)

// config is the pipeline's configuration of how hosts are reached: ssh's flags, and this
// run's environment (for ssh_config's tokens, the passphrase prompt, --debug-ssh's trace).
func (s *reachFlags) config(e *env) *triage.Config {
	return &triage.Config{SSHConfig: s.configFile, User: s.user, Port: s.port, Identity: s.identity, Jump: s.jump,
		Options: s.opts, ConnectTimeout: s.connectTimeout, AcceptNew: s.acceptNew, AskPassphrase: s.askPassphrase,
		Sudo: s.sudo, Fanout: sshexec.DefaultFanout, Getenv: e.getenv, Stdin: e.stdin, Stderr: e.stderr}
}

// config is reachFlags' configuration with the sweep's --fanout and --debug-ssh.
func (s *sshOptions) config(e *env) *triage.Config {
	c := s.reachFlags.config(e)
	c.Fanout, c.Debug = s.fanout, s.debug
	return c
}

// sweepConfig is the configuration of a sweep of the hosts a command names: how each is
// reached, and the time it gets (--timeout).
func (o *sweepOptions) sweepConfig(e *env) *triage.Config {
	c := o.ssh.config(e)
	c.Timeout = o.timeout
	return c
}

// triageConfig is the pipeline's configuration from the triage command line: how hosts are
// reached and probed, what each host gets (--timeout), and what is kept of each for the
// report (the --tp job, the capture a Markdown report shows).
func (o *options) triageConfig(e *env, job *readiness.Job) *triage.Config {
	c := o.sweepConfig(e)
	c.Save, c.Job = o.save, job
	if o.format == "markdown" || o.format == "md" {
		c.Keep = report.MarkdownCaptureBytes
	}
	return c
}

// triageErr is a pipeline's error as the command reports it: a usage error stays one.
func triageErr(err error) error {
	var ue *triage.UsageError
	if errors.As(err, &ue) {
		return usagef("%s", ue.Msg)
	}
	return err
}

// sweep runs the pipeline on hosts, with the progress line on a terminal's stderr.
func sweep(ctx context.Context, c *triage.Config, hosts []triage.Host, e *env) ([]report.Host, error) {
	if tty, _ := e.isTerminal(e.stderr); tty && c.Fanout >= 1 {
		p := newProgressLine(e.stderr)
		c.Progress = p.update
		defer p.done()
	}
	return triage.Run(ctx, c, hosts)
}

// progressLine redraws one status line on a terminal's stderr while hosts are outstanding.
type progressLine struct {
	w    io.Writer
	mu   sync.Mutex
	last sshexec.Progress
	stop chan struct{}
	wg   sync.WaitGroup
}

func newProgressLine(w io.Writer) *progressLine {
	p := &progressLine{w: w, stop: make(chan struct{})}
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

func (p *progressLine) update(pr sshexec.Progress) {
	p.mu.Lock()
	p.last = pr
	p.mu.Unlock()
}

func (p *progressLine) draw() {
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

func (p *progressLine) done() {
	close(p.stop)
	p.wg.Wait()
	fmt.Fprint(p.w, "\r\x1b[K")
}
