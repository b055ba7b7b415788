package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/sshexec"
	"github.com/gputriage/gputriage/triage"
)

// sshOptions are the flags that choose and reach hosts over SSH.
type sshOptions struct {
	configFile     string
	user           string
	port           int
	identity       []string
	jump           string
	opts           []string // -o Key=Value
	debug          bool     // --debug-ssh
	fanout         int
	connectTimeout time.Duration
	acceptNew      bool
	askPassphrase  bool
	sudo           bool
	dryRun         bool
	save           string
}

func (o *sshOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.configFile, "config", "F", "", "ssh config `FILE`, like ssh -F (default ~/.ssh/config, then /etc/ssh/ssh_config)")
	fs.StringVarP(&o.user, "login", "l", "", "`USER` to log in as, like ssh -l")
	fs.IntVarP(&o.port, "port", "p", 0, "`PORT` to connect to, like ssh -p")
	fs.StringArrayVarP(&o.identity, "identity", "i", nil, "identity `FILE`, like ssh -i (repeatable)")
	fs.StringVarP(&o.jump, "jump", "J", "", "`JUMPS`, like ssh -J: [user@]host[:port][,...]")
	fs.StringArrayVarP(&o.opts, "option", "o", nil, "ssh_config option as `Key=Value`, like ssh -o: before the config file, first value wins (repeatable)")
	fs.IntVar(&o.fanout, "fanout", sshexec.DefaultFanout, "`N` hosts probed at once (pdsh's -f; here -f is a hosts file)")
	fs.BoolVar(&o.debug, "debug-ssh", false, "print on stderr how each host is reached and how its connection ended, with its stderr")
	fs.DurationVar(&o.connectTimeout, "connect-timeout", 10*time.Second, "TCP connect `DURATION` per host (ConnectTimeout in ssh config wins)")
	fs.BoolVar(&o.acceptNew, "accept-new", false, "trust and record unknown host keys (like StrictHostKeyChecking accept-new); a changed key is always refused")
	fs.BoolVar(&o.askPassphrase, "ask-passphrase", false, "prompt for the passphrase of encrypted identity files the agent does not hold (terminal only)")
	fs.BoolVar(&o.sudo, "sudo", false, "run the probe under sudo -n to see other users' processes; falls back to unprivileged when sudo wants a password")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print how each host would be reached (like ssh -G) and connect to none")
	fs.StringVar(&o.save, "save", "", "also keep each host's raw capture in `DIR`/HOST.capture, for --replay")
}

// triageConfig is the pipeline's configuration from the command line: how hosts are reached
// and probed, what each host gets (--timeout), and what is kept of each for the report (the
// --tp job, the capture a Markdown report shows).
func (o *options) triageConfig(e *env, job *diagnose.Job) *triage.Config {
	s := &o.ssh
	c := &triage.Config{SSHConfig: s.configFile, User: s.user, Port: s.port, Identity: s.identity, Jump: s.jump,
		Options: s.opts, ConnectTimeout: s.connectTimeout, AcceptNew: s.acceptNew, AskPassphrase: s.askPassphrase,
		Fanout: s.fanout, Debug: s.debug, Sudo: s.sudo, Timeout: o.timeout, Save: s.save, Job: job,
		Getenv: e.getenv, Stdin: e.stdin, Stderr: e.stderr}
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
