package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/gputriage/gputriage/diagnose"
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
	w := &watcher{o: &o, cfg: cfg, hosts: hosts, pool: pool, out: newWatchOutput(&o, e, hosts)}
	return w.run(ctx), nil
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

// watcher runs one watch: a goroutine per host probes it every --interval over its kept
// connection, and the rounds are judged and shown here, one at a time, as they come.
type watcher struct {
	o     *watchFlags
	cfg   watch.Config
	hosts []triage.Host
	pool  *triage.Pool
	out   watchOutput
}

// run follows every host's rounds (triage.Pool.Watch) until the condition holds on all of
// them (0), a host cannot be reached at its first round (3), --timeout passes (1; 0 without
// --until; 3 when a host is down then) or Ctrl-C (130).
func (w *watcher) run(ctx context.Context) int {
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if w.o.timeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, w.o.timeout)
	}
	defer cancel()
	defer w.pool.Close()
	hs := make([]*watch.Host, len(w.hosts))
	st := make([]*watch.Status, len(w.hosts))
	for i := range hs {
		hs[i] = watch.NewHost(w.cfg)
	}
	code, why := -1, ""
	w.pool.Watch(wctx, w.o.watch.interval, func(i int, r triage.Round) bool {
		for _, n := range r.Notes {
			w.out.note(i, n)
		}
		s, evs := hs[i].Observe(watch.RoundOf(r))
		first := st[i] == nil
		st[i] = &s
		w.out.round(i, r.At, s, evs, st)
		switch {
		case first && !s.Reachable:
			code, why = exitHostsFailed, w.hosts[i].Label+" cannot be reached"
		case w.cfg.Until != watch.UntilNone && allHold(st):
			code, why = exitOK, "--until "+w.o.watch.until+" holds on every host"
		}
		return code < 0
	})
	if code < 0 {
		code, why = exitHoldsNot, "--timeout "+w.o.timeout.String()+" passed before --until "+w.o.watch.until+" held"
		switch {
		case ctx.Err() != nil:
			code, why = exitInterrupted, "interrupted"
		case anyDown(st):
			code, why = exitHostsFailed, "--timeout passed with a host unreachable"
		case w.cfg.Until == watch.UntilNone:
			code, why = exitOK, "--timeout "+w.o.timeout.String()+" passed"
		}
	}
	w.out.end(time.Now(), code, why)
	return code
}

// exitHoldsNot: --timeout passed before --until held.
const exitHoldsNot = 1

func allHold(st []*watch.Status) bool {
	for _, s := range st {
		if s == nil || !s.Holds {
			return false
		}
	}
	return true
}

func anyDown(st []*watch.Status) bool {
	for _, s := range st {
		if s != nil && !s.Reachable {
			return true
		}
	}
	return false
}

// worstName is a severity for people, "" for none.
func worstName(s diagnose.Severity) string {
	if s < 0 {
		return ""
	}
	return s.String()
}
