package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/gputriage/gputriage/fix"
	"github.com/gputriage/gputriage/fix/remote"
	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/triage"
)

// fixOptions are the flags of `gputriage fix` besides the triage command's SSH and host flags.
type fixOptions struct {
	yes       bool
	planOut   string
	apply     string
	replay    string
	killAfter time.Duration
	wait      time.Duration
	include   []int
}

func (o *fixOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.yes, "yes", false, "apply without asking (for scripts; needed when standard input is not a terminal)")
	fs.StringVar(&o.planOut, "plan-out", "", "write the plan as JSON to `FILE` for review, and apply nothing")
	fs.StringVar(&o.apply, "apply", "", "apply the reviewed plan in `FILE` (written by --plan-out) instead of probing")
	fs.StringVar(&o.replay, "replay", "", "print the plan a live run would build from the saved captures at `PATH` (a capture file, or a directory of HOST.capture files); reach no host, apply nothing")
	fs.DurationVar(&o.killAfter, "kill-after", 0, "send SIGKILL to targets still running `DURATION` after SIGTERM; 0: ask on a terminal")
	fs.DurationVar(&o.wait, "wait", 60*time.Second, "`DURATION` to watch each target exit and its GPU memory be released")
	fs.IntSliceVar(&o.include, "include", nil, "also stop `PID`, shown as needing your judgement (its evidence another user could have made); repeatable")
}

// Exit statuses of fix, besides exitUsage, exitInternal and exitInterrupted.
const (
	exitFixIncomplete = remote.Incomplete // a target was refused, still runs or still holds memory; or the operator declined
	exitFixHostFailed = remote.HostFailed // a host could not be probed or reached to apply
)

// stdinTerminal reports whether standard input is a terminal, where the typed confirmation
// is read.
func stdinTerminal(e *env) bool {
	in, ok := e.stdin.(*os.File)
	return ok && term.IsTerminal(int(in.Fd()))
}

// fixCmd is `gputriage fix HOST...` and `gputriage fix --apply FILE`.
func fixCmd(ctx context.Context, args []string, e *env) (int, error) {
	var ff fixFlags
	fs, err := parseFlags("fix", &ff, args)
	if err != nil {
		return exitUsage, err
	}
	if ff.help {
		fmt.Fprint(e.stdout, usageText("fix", helpWidth(e)))
		return exitOK, nil
	}
	o, f := ff.asTriage(), &ff.fix
	if err := f.check(o, fs); err != nil {
		return exitUsage, err
	}
	return f.runner(o, e).Run(ctx, fs.Args())
}

// runner is the fix the flags ask for, reaching hosts as the triage command o would.
func (f *fixOptions) runner(o *options, e *env) *remote.Runner {
	return &remote.Runner{
		Config: func() *triage.Config { return o.triageConfig(e, nil) },
		Probe: func(ctx context.Context, names []string, each func(*report.Host)) ([]report.Host, error) {
			c := o.triageConfig(e, nil)
			c.Each = each
			hosts, code, err := o.remote(ctx, names, c, e)
			if err == nil && hosts == nil && code != exitOK {
				err = usagef("fix: no hosts")
			}
			return hosts, err
		},
		Usagef: usagef,
		Sudo:   o.ssh.sudo, Fanout: o.ssh.fanout, Timeout: o.timeout,
		KillAfter: f.killAfter, Wait: f.wait, Include: f.include, Yes: f.yes, PlanOut: f.planOut, Apply: f.apply, Replay: f.replay,
		Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr, Terminal: stdinTerminal(e),
		Clean: hostText(o.out.showSecrets), Getenv: e.getenv,
	}
}

func (f *fixOptions) check(o *options, fs *pflag.FlagSet) error {
	remote := fs.NArg() > 0 || o.hosts.given()
	if err := replayCheck(f.replay, fs); err != nil {
		return err
	}
	switch {
	case f.apply != "" && remote:
		return usagef("fix: --apply reads its hosts from the plan: give no host names")
	case f.apply == "" && f.replay == "" && !remote:
		return usagef("fix: give host names, -w HOSTS or -f FILE, --apply FILE or --replay PATH")
	case f.apply != "" && f.planOut != "":
		return usagef("fix: --apply and --plan-out do not go together")
	case f.killAfter < 0:
		return usagef("fix: --kill-after must not be negative, got %s", f.killAfter)
	case f.wait <= 0:
		return usagef("fix: --wait must be positive, got %s", f.wait)
	case o.timeout <= 0:
		return usagef("fix: --timeout must be positive, got %s", o.timeout)
	case f.killAfter > 0 && fix.Centis(f.killAfter) >= fix.Centis(f.wait):
		return usagef("fix: --kill-after (%s) must be shorter than --wait (%s)", f.killAfter, f.wait)
	}
	return nil
}

// replayCheck refuses with --replay, naming them as given, the flags and host names that go
// with reaching hosts or applying: --replay does neither.
func replayCheck(replay string, fs *pflag.FlagSet) error {
	var given []string
	for _, n := range []string{"yes", "apply", "plan-out", "hosts", "hosts-file", "exclude", "slurm-job", "slurm-partition", "slurm-nodes", "slurm-state", "slurm-via"} {
		if f := fs.Lookup(n); f.Changed && f.Shorthand != "" {
			given = append(given, "-"+f.Shorthand+" (--"+n+")")
		} else if f.Changed {
			given = append(given, "--"+n)
		}
	}
	if fs.NArg() > 0 {
		given = append(given, "the host names "+report.Sanitize(strings.Join(fs.Args(), " ")))
	}
	if replay != "" && len(given) > 0 {
		return usagef("fix: --replay prints the plan of saved captures and applies nothing: leave out %s", strings.Join(given, ", "))
	}
	return nil
}
