package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/gputriage/gputriage/triage"
	"github.com/gputriage/gputriage/watch"
)

// watchRoundTimeout bounds each round of each host, connecting included: a slow host's round
// ends there, and its next round redials.
const watchRoundTimeout = 30 * time.Second

// watchOptions are watch's own flags.
type watchOptions struct {
	interval time.Duration
	until    string
}

func (o *watchOptions) addFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.interval, "interval", 2*time.Second, "re-probe each host every `DURATION`")
	fs.StringVar(&o.until, "until", "", "exit 0 once `COND` holds on every host: free (every leftover, stopped or zombie holder gone and its memory back), clean (no finding at warning or worse), ready (with --tp, the job would start)")
}

// watchCmd is `gputriage watch HOST...`.
func watchCmd(ctx context.Context, args []string, e *env) (int, error) {
	var o watchFlags
	fs, err := parseFlags("watch", &o, args)
	if err != nil {
		return exitUsage, err
	}
	if o.help {
		fmt.Fprint(e.stdout, usageText("watch", helpWidth(e)))
		return exitOK, nil
	}
	cfg, err := o.watchConfig(fs)
	if err != nil {
		return exitUsage, err
	}
	ts, err := o.hosts.targets(fs.Args(), e.stdin)
	if err != nil {
		return exitUsage, err
	}
	if len(ts) == 0 {
		return exitUsage, usagef("watch: no hosts given (or -x left none)")
	}
	c := o.ssh.config(e)
	c.Timeout = watchRoundTimeout
	hosts, err := c.Resolve(ts)
	if err != nil {
		return exitUsage, triageErr(err)
	}
	pool, err := triage.NewPool(c, hosts)
	if err != nil {
		return exitUsage, triageErr(err)
	}
	triage.PrintConfigNotes(e.stderr, hosts)
	w := &watch.Watcher{Config: cfg, Hosts: hosts, Pool: pool, Interval: o.watch.interval, Timeout: o.timeout,
		Until: o.watch.until, Format: o.watchFormat(e), Stdout: e.stdout, Stderr: e.stderr}
	return w.Run(ctx), nil
}

// watchFormat is how the watch is shown: JSON Lines, one screen redrawn in place (a terminal
// where color is allowed: redrawing needs its escapes), or lines.
func (o *watchFlags) watchFormat(e *env) string {
	if o.format == "json" {
		return "json"
	}
	if tty, _ := o.colorFor(e); tty {
		if term, _ := e.isTerminal(e.stdout); term {
			return "screen"
		}
	}
	return "lines"
}

// watchConfig checks watch's flags and returns what each host waits for.
func (o *watchFlags) watchConfig(fs *pflag.FlagSet) (watch.Config, error) {
	var cfg watch.Config
	switch o.format {
	case "text", "json":
	default:
		return cfg, usagef("watch: --format must be text or json, got %q", o.format)
	}
	if _, err := o.renderer(); err != nil { // checks --color
		return cfg, err
	}
	if o.watch.interval < 100*time.Millisecond {
		return cfg, usagef("watch: --interval must be at least 100ms, got %s", o.watch.interval)
	}
	if o.timeout < 0 {
		return cfg, usagef("watch: --timeout must not be negative, got %s", o.timeout)
	}
	job, err := o.ready.job(fs)
	if err != nil {
		return cfg, err
	}
	cfg.Job = job
	switch o.watch.until {
	case "":
	case "free":
		cfg.Until = watch.UntilFree
	case "clean":
		cfg.Until = watch.UntilClean
	case "ready":
		if job == nil {
			return cfg, usagef("watch: --until ready needs --tp N")
		}
		cfg.Until = watch.UntilReady
	default:
		return cfg, usagef("watch: --until must be free, clean or ready, got %q", o.watch.until)
	}
	return cfg, nil
}

// exitHoldsNot: --timeout passed before --until held.
const exitHoldsNot = watch.ExitHoldsNot
