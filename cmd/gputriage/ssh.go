package main

import (
	"context"
	"errors"

	"github.com/gputriage/gputriage/readiness"
	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/sshexec"
	"github.com/gputriage/gputriage/triage"
)

// config is the pipeline's configuration of how hosts are reached: ssh's flags, kubectl's
// (for k8s/NODE), and this run's environment (for ssh_config's tokens, the passphrase prompt, --debug-ssh's trace).
func (s *reachFlags) config(e *env) *triage.Config {
	return &triage.Config{SSHConfig: s.configFile, User: s.user, Port: s.port, Identity: s.identity, Jump: s.jump,
		Options: s.opts, ConnectTimeout: s.connectTimeout, AcceptNew: s.acceptNew, AskPassphrase: s.askPassphrase,
		Sudo: s.sudo, Fanout: sshexec.DefaultFanout, Getenv: e.getenv, Stdin: e.stdin, Stderr: e.stderr, Kube: s.kube}
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
		p := triage.NewProgressLine(e.stderr)
		c.Progress = p.Update
		defer p.Done()
	}
	return triage.Run(ctx, c, hosts)
}
