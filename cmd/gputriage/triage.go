package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/readiness"
	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/triage"
)

// version is set at build time with -ldflags "-X main.version=..."; otherwise it comes from
// the module's build info.
var version = ""

// dispatch runs the triage command, or collect (cmd "collect"): the same sweep, but it only
// saves each host's capture.
func dispatch(ctx context.Context, cmd string, args []string, e *env) (int, error) {
	collectOnly := cmd == "collect"
	if cmd == "" {
		if err := mistypedCommand(args, e); err != nil {
			return exitUsage, err
		}
	}
	o, fs, err := parseTriage(cmd, args)
	if err != nil {
		return exitUsage, err
	}
	if o.help {
		fmt.Fprint(e.stdout, usageText(cmd, helpWidth(e)))
		return exitOK, nil
	}
	if o.version {
		return versionCmd(ctx, nil, e)
	}
	render, job, err := o.check(fs, collectOnly)
	if err != nil {
		return exitUsage, err
	}

	c := o.triageConfig(e, job)
	var hosts []report.Host
	switch {
	case o.replay != "":
		hosts, err = triage.Replay(o.replay, c)
		if err != nil {
			return exitUsage, triageErr(err)
		}
	case o.local:
		h, err := triage.Local(ctx, c)
		var nogpu *triage.NoGPUError
		if errors.As(err, &nogpu) {
			return exitHostsFailed, err
		} else if err != nil {
			return exitInternal, err
		}
		hosts = []report.Host{h}
	default:
		var code int
		hosts, code, err = o.remote(ctx, fs.Args(), c, e)
		if err != nil || hosts == nil {
			return code, err
		}
	}

	if collectOnly {
		o.collected(e.stdout, hosts)
	} else if err := o.writeReport(e, render, hosts); err != nil {
		return exitInternal, fmt.Errorf("writing the report: %w", err)
	}
	if ctx.Err() != nil {
		return exitInterrupted, nil
	}
	code := exitStatus(hosts)
	if collectOnly && code == exitFindings {
		code = exitOK
	}
	return code, nil
}

// check refuses a triage or collect command line that parses but cannot run, and returns
// the renderer and the --tp job (nil: none) the run needs.
func (o *options) check(fs *pflag.FlagSet, collectOnly bool) (func(io.Writer, []report.Host, report.Options) error, *readiness.Job, error) {
	render, err := o.renderer()
	if err != nil {
		return nil, nil, err
	}
	if err := o.out.check(); err != nil {
		return nil, nil, err
	}
	if o.quiet == 1 && o.out.redact && o.out.output == "" {
		return nil, nil, usagef("-q prints host names and --redact hides them: give --output FILE for the redacted report")
	}
	job, err := o.ready.job(fs)
	if err != nil {
		return nil, nil, err
	}
	if o.timeout <= 0 {
		return nil, nil, usagef("--timeout must be positive, got %s", o.timeout)
	}
	if err := o.checkSources(fs.NArg() > 0, collectOnly); err != nil {
		return nil, nil, err
	}
	return render, job, nil
}

// checkSources refuses a command line that names no source, or more than one: host names,
// --replay or --local; and the flags that go with some sources only. Each message names
// only what was given.
func (o *options) checkSources(hostArgs, collectOnly bool) error {
	remote := hostArgs || o.hosts.given() || o.slurm.given() || o.ssh.kube.Selector != ""
	var given []string
	for _, s := range []struct {
		set  bool
		name string
	}{{o.replay != "", "--replay"}, {o.local, "--local"}, {remote, "host names"}} {
		if s.set {
			given = append(given, s.name)
		}
	}
	switch {
	case o.slurm.via != "" && !o.slurm.given():
		return usagef("--slurm-via goes with --slurm-job, --slurm-partition, --slurm-nodes or --slurm-state")
	case len(given) == 0 && collectOnly:
		return usagef("nothing to collect: give host names, k8s/NODE, -w HOSTS, -f FILE, --slurm-*, --k8s-selector or --local")
	case len(given) == 0:
		return usagef("nothing to triage: give host names, k8s/NODE, -w HOSTS, -f FILE, --slurm-*, --k8s-selector, --replay PATH or --local")
	case len(given) > 1:
		return usagef("give only one of %s and %s", strings.Join(given[:len(given)-1], ", "), given[len(given)-1])
	case collectOnly && o.save == "":
		return usagef("collect needs --save DIR")
	case collectOnly && o.replay != "":
		return usagef("collect saves hosts or --local: --replay reads what it saved")
	case o.dryRun && !remote:
		return usagef("--dry-run goes with host names, not %s", given[0])
	case o.save != "" && o.replay != "":
		return usagef("--save keeps the captures of a probe, and --replay probes nothing")
	case len(o.hosts.exclude) > 0 && !remote:
		return usagef("-x goes with host names, not %s", given[0])
	}
	return nil
}

// remote resolves and sweeps the hosts named by args and flags (or, with --dry-run, prints
// how they would be reached and returns no hosts).
func (o *options) remote(ctx context.Context, args []string, c *triage.Config, e *env) ([]report.Host, int, error) {
	if o.slurm.given() {
		nodes, s, err := o.slurmHosts(ctx, e)
		if err != nil && ctx.Err() != nil {
			return nil, exitInterrupted, errors.New("interrupted while asking Slurm for the hosts")
		} else if err != nil {
			return nil, exitUsage, err
		}
		args, c.Scheduler = append(slices.Clone(args), nodes...), s
	}
	ts, err := o.hosts.targets(args, e.stdin)
	if err != nil {
		return nil, exitUsage, err
	}
	if len(ts) == 0 && o.ssh.kube.Selector == "" {
		return nil, exitUsage, usagef("no hosts given (or -x left none)")
	}
	res, err := c.Resolve(ts)
	if err != nil {
		return nil, exitUsage, triageErr(err)
	}
	if o.dryRun {
		if err := triage.DryRun(e.stdout, res, o.format); err != nil {
			return nil, exitInternal, err
		}
		return nil, exitOK, nil
	}
	hosts, err := sweep(ctx, c, res, e)
	var ue *triage.UsageError
	switch {
	case errors.As(err, &ue):
		return nil, exitUsage, triageErr(err)
	case err != nil:
		return nil, exitInternal, err
	}
	return hosts, exitOK, nil
}

// collected prints collect's one line per host: -q keeps only the failed ones, -qq none.
func (o *options) collected(w io.Writer, hosts []report.Host) {
	for _, h := range hosts {
		switch {
		case o.quiet >= 2:
		case h.Err != nil:
			io.WriteString(w, failureLine(h, o.out.showSecrets))
		case o.quiet == 0:
			fmt.Fprintf(w, "%s: saved %d bytes\n", report.Sanitize(h.Name), max(h.CaptureSize, len(h.Capture)))
		}
	}
}

// exitStatus is 3 when any host failed, else 1 when any finding is a warning or worse, or
// (with --tp) a host cannot take the job on any of its GPUs.
func exitStatus(hosts []report.Host) int {
	code := exitOK
	for _, h := range hosts {
		if h.Err != nil {
			return exitHostsFailed
		}
		if h.Result.Worst() >= diagnose.Warning {
			code = exitFindings
		}
		if r := h.Readiness; r != nil && !r.Ready && r.Subset == nil {
			code = exitFindings
		}
	}
	return code
}

func (o *formatFlags) renderer() (func(io.Writer, []report.Host, report.Options) error, error) {
	switch o.color {
	case "auto", "always", "never":
	default:
		return nil, usagef("--color must be auto, always or never, got %q", o.color)
	}
	switch o.format {
	case "text":
		return report.Text, nil
	case "markdown", "md":
		return report.Markdown, nil
	case "json":
		return report.JSON, nil
	case "prometheus":
		return report.Prometheus, nil
	}
	return nil, usagef("--format must be text, markdown, json or prometheus, got %q", o.format)
}
