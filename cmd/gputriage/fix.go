package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/gputriage/gputriage/fix"
	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/sshexec"
)

// fixOptions are the flags of `gputriage fix` besides the triage command's SSH and host flags.
type fixOptions struct {
	yes       bool
	planOut   string
	apply     string
	killAfter time.Duration
	wait      time.Duration
	include   []int

	// bases are the hosts' whole snapshots as probed for the plan, or again just before it is
	// applied, by host name: the first round of the watch for released memory.
	bases map[string]baseline
}

func (o *fixOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.yes, "yes", false, "apply without asking (for scripts; needed when standard input is not a terminal)")
	fs.StringVar(&o.planOut, "plan-out", "", "write the plan as JSON to `FILE` for review, and apply nothing")
	fs.StringVar(&o.apply, "apply", "", "apply the reviewed plan in `FILE` (written by --plan-out) instead of probing")
	fs.DurationVar(&o.killAfter, "kill-after", 0, "send SIGKILL to targets still running `DURATION` after SIGTERM; 0: ask on a terminal")
	fs.DurationVar(&o.wait, "wait", 60*time.Second, "`DURATION` to watch each target exit and its GPU memory be released")
	fs.IntSliceVar(&o.include, "include", nil, "also stop `PID`, shown as needing your judgement (its evidence another user could have made); repeatable")
}

// Exit statuses of fix, besides exitUsage, exitInternal and exitInterrupted.
const (
	exitFixIncomplete = 1 // a target was refused, still runs or still holds memory; or the operator declined
	exitFixHostFailed = 3 // a host could not be probed or reached to apply
)

const fixUsage = `gputriage fix: stop what the findings name, each process checked again on the
host right before it is signalled, and record what was done.

Usage:
  gputriage fix [flags] HOST...          probe, show the plan, apply it once you type
                                         the host name (for a fleet, the number of hosts)
  gputriage fix --yes HOST...            apply without asking (scripts)
  gputriage fix --plan-out FILE HOST...  write the plan as JSON for review; apply nothing
  gputriage fix --apply FILE             apply a reviewed plan

Only leftover-process findings are acted on: SIGTERM to the PID, or the unit's, container's
or job's stop when that is what the evidence supports. A process that would look abandoned
only on evidence another user could have made (its files deleted from a directory others may
write: leftover-unconfirmed) is shown as needing your judgement and stopped only if you name
it: --include PID, or "include": true in a plan file. PID 1, kernel threads, sshd, the fix
session itself, zombies and processes stuck in the driver are never signalled: the plan says
what to do instead. Each target is named by boot id, PID, start time, uid and argv hash; a
target whose identity differs on the host is refused. Every action is recorded in
$XDG_STATE_HOME/gputriage/fix.log (JSON Lines) and in the host's syslog (logger -t gputriage).
See docs/fix.md.

Flags:
`

const fixTail = `
Exit status:
  0    every target stopped and its GPU memory was released (or nothing to do, or --plan-out)
  1    a target was refused, still runs, still holds memory, or what became of it is not
       known (the session ended before the host answered); or the answer did not match
  2    usage error, or no terminal for the typed confirmation without --yes
  3    a host could not be probed or reached
`

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
	plan, failed, err := f.plan(ctx, o, fs.Args(), e)
	if err != nil || plan == nil {
		return exitUsage, err
	}
	fix.WritePlan(e.stdout, *plan, fix.How{Sudo: o.ssh.sudo, KillAfter: f.killAfter}, hostText(o.out.showSecrets))
	if f.planOut != "" {
		if err := writePlanFile(f.planOut, *plan); err != nil {
			return exitInternal, err
		}
		fmt.Fprintf(e.stdout, "plan %s written to %s: review it, then gputriage fix --apply %s\n", plan.ID, f.planOut, f.planOut)
		return failedCode(failed, exitOK), nil
	}
	if plan.Targets() == 0 {
		fmt.Fprintln(e.stdout, "nothing to apply")
		return failedCode(failed, exitOK), nil
	}
	if ok, err := f.confirm(*plan, e); err != nil || !ok {
		return exitFixIncomplete, err
	}
	code := exitOK
	if f.apply != "" || !f.yes {
		// A reviewed plan, or one that waited at the prompt, is a past probe's: apply only
		// what a probe taken now still names.
		*plan, code = f.recheck(ctx, o, *plan, e)
	}
	return failedCode(failed, fixWorse(code, f.applyPlan(ctx, o, *plan, e))), nil
}

// fixWorse is the exit status of two parts of one fix: a target not stopped (1) before a host
// not reached (3) before success.
func fixWorse(a, b int) int {
	for _, c := range []int{exitFixIncomplete, exitFixHostFailed} {
		if a == c || b == c {
			return c
		}
	}
	return max(a, b)
}

// recheck probes the plan's hosts once more, just before it is applied, and keeps each host's
// targets that this probe's diagnosis still names alike (fix.Recheck); it prints and records
// the others as refused, and refuses every target of a host it cannot probe. The probe is also
// the first round of the watch that sees each stopped target's memory come back. The code is
// exitFixIncomplete when a target was refused, else exitFixHostFailed when a host could not
// be probed.
func (f *fixOptions) recheck(ctx context.Context, o *options, p fix.Plan, e *env) (fix.Plan, int) {
	var mu sync.Mutex
	f.bases = map[string]baseline{}
	see := func(h *report.Host) {
		if h.Err == nil && h.Snapshot != nil {
			mu.Lock()
			f.bases[h.Name] = baseline{snap: h.Snapshot, result: h.Result}
			mu.Unlock()
		}
	}
	var names []string
	for _, hp := range p.Hosts {
		if len(hp.Targets) > 0 {
			names = append(names, hp.Host)
		}
	}
	if len(names) > 0 {
		c := o.triageConfig(e, nil)
		c.Each = see
		o.remote(ctx, names, c, e)
	}
	code := exitOK
	kept := p
	kept.Hosts = slices.Clone(p.Hosts)
	for i, hp := range kept.Hosts {
		if len(hp.Targets) == 0 {
			continue
		}
		var refused []fix.Refusal
		if b, ok := f.bases[hp.Host]; ok {
			kept.Hosts[i], refused = fix.Recheck(hp, b.snap, b.result)
			if len(refused) > 0 {
				code = exitFixIncomplete
			}
		} else {
			kept.Hosts[i].Targets = nil
			for _, t := range hp.Targets {
				refused = append(refused, fix.Refusal{Target: t, Detail: fix.DetailNotReprobed})
			}
			code = fixWorse(code, exitFixHostFailed)
		}
		if len(refused) > 0 {
			f.reportRefused(o, p.ID, hp, refused, e)
		}
	}
	return kept, code
}

// reportRefused prints and records the targets of hp that recheck refused: nothing was sent
// to the host for them.
func (f *fixOptions) reportRefused(o *options, planID string, hp fix.HostPlan, refused []fix.Refusal, e *env) {
	r := hostRun{hp: hp}
	r.hp.Targets = nil
	for _, x := range refused {
		r.hp.Targets = append(r.hp.Targets, x.Target)
		r.results = append(r.results, fix.Result{PID: x.Target.PID, Outcome: fix.Refused, Detail: x.Detail})
	}
	f.report(o, planID, fix.ModeTerm, r, e)
}

func failedCode(failed bool, code int) int {
	if failed && code == exitOK {
		return exitFixHostFailed
	}
	return code
}

func (f *fixOptions) check(o *options, fs *pflag.FlagSet) error {
	remote := fs.NArg() > 0 || o.hosts.given()
	switch {
	case f.apply != "" && remote:
		return usagef("fix: --apply reads its hosts from the plan: give no host names")
	case f.apply == "" && !remote:
		return usagef("fix: give host names, -w HOSTS or -f FILE, or --apply FILE")
	case f.apply != "" && f.planOut != "":
		return usagef("fix: --apply and --plan-out do not go together")
	case f.killAfter < 0 || f.wait <= 0 || o.timeout <= 0:
		return usagef("fix: --kill-after, --wait and --timeout must be positive")
	case f.killAfter > 0 && fix.Centis(f.killAfter) >= fix.Centis(f.wait):
		return usagef("fix: --kill-after (%s) must be shorter than --wait (%s)", f.killAfter, f.wait)
	}
	return nil
}

// plan probes and diagnoses the hosts and builds the plan, or reads it from --apply. failed
// is set when some host could not be probed.
func (f *fixOptions) plan(ctx context.Context, o *options, args []string, e *env) (*fix.Plan, bool, error) {
	if f.apply != "" {
		fh, err := os.Open(f.apply)
		if err != nil {
			return nil, false, usagef("fix: %v", err)
		}
		defer fh.Close()
		if err := checkPlanFile(fh); err != nil {
			return nil, false, usagef("fix: %s: %v", f.apply, err)
		}
		p, err := fix.Read(fh)
		if err != nil {
			return nil, false, usagef("fix: %s: %v", f.apply, err)
		}
		for i := range p.Hosts {
			p.Hosts[i] = p.Hosts[i].Include(f.include)
		}
		return &p, false, nil
	}
	var mu sync.Mutex
	plans := map[string]fix.HostPlan{} // by host name, built while each whole snapshot is at hand
	f.bases = map[string]baseline{}
	see := func(h *report.Host) {
		if h.Err == nil && h.Snapshot != nil {
			hp := fix.BuildHost(h.Name, h.Snapshot, h.Result).Include(f.include)
			mu.Lock()
			plans[h.Name] = hp
			if len(hp.Targets) > 0 {
				f.bases[h.Name] = baseline{snap: h.Snapshot, result: h.Result}
			}
			mu.Unlock()
		}
	}
	c := o.triageConfig(e, nil)
	c.Each = see
	hosts, code, err := o.remote(ctx, args, c, e)
	if err != nil || hosts == nil {
		if err == nil && code != exitOK {
			err = usagef("fix: no hosts")
		}
		return nil, false, err
	}
	p := &fix.Plan{Version: fix.Version, ID: randomHex(8)}
	failed := false
	for _, h := range hosts {
		hp, ok := plans[h.Name]
		if !ok {
			failed = true
			fmt.Fprintf(e.stderr, "gputriage: %s: not probed: %s\n", report.Sanitize(h.Name), hostText(o.out.showSecrets)(errText(h.Err)))
			continue
		}
		p.Hosts = append(p.Hosts, hp)
	}
	return p, failed, nil
}

func errText(he *report.HostError) string {
	if he == nil {
		return "no capture"
	}
	return he.Error()
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on the systems gputriage runs on
	}
	return hex.EncodeToString(b)
}

func writePlanFile(name string, p fix.Plan) error {
	fh, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("--plan-out: %w", err)
	}
	if err := fix.Write(fh, p); err != nil {
		fh.Close()
		return fmt.Errorf("--plan-out: %w", err)
	}
	return fh.Close()
}

// confirm asks the operator to type the host's name (for a fleet, the number of hosts), or
// takes --yes. Without --yes, standard input must be a terminal.
func (f *fixOptions) confirm(p fix.Plan, e *env) (bool, error) {
	if f.yes {
		return true, nil
	}
	if !stdinTerminal(e) {
		return false, usagef("fix: standard input is not a terminal: pass --yes to apply without typed confirmation, or --plan-out FILE to review")
	}
	want := strconv.Itoa(p.ApplyHosts())
	what := want + " (the number of hosts)"
	if p.ApplyHosts() == 1 {
		for _, h := range p.Hosts {
			if len(h.Targets) > 0 {
				want = h.Host
			}
		}
		what = "the host name " + report.Sanitize(want)
	}
	fmt.Fprintf(e.stderr, "To apply %d action(s), type %s: ", p.Targets(), what)
	line, err := bufio.NewReader(e.stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	if strings.TrimSpace(line) != want {
		fmt.Fprintln(e.stderr, "gputriage: not applied: the answer did not match")
		return false, nil
	}
	return true, nil
}

// applyPlan applies each host's targets, one SSH session per host and mode, and reports and
// records every result.
func (f *fixOptions) applyPlan(ctx context.Context, o *options, p fix.Plan, e *env) int {
	code := exitOK
	runs := f.runHosts(ctx, o, p, fix.ModeTerm, nil, e)
	var again []int // indexes of hosts with targets still running
	for i, r := range runs {
		if r.err != nil && !r.unknown {
			code = exitFixHostFailed
			continue
		}
		for _, res := range r.results {
			if res.Outcome == fix.StillRunning {
				again = append(again, i)
				break
			}
		}
	}
	if len(again) > 0 && f.killAfter == 0 && f.askKill(runs, again, e) {
		for _, i := range again {
			runs[i] = f.runHosts(ctx, o, p, fix.ModeKill, &runs[i], e)[i]
		}
	}
	for i, r := range runs {
		_, watched := f.bases[p.Hosts[i].Host]
		for _, res := range r.results {
			if (res.Outcome != fix.Stopped || watched && !r.released) && code == exitOK {
				code = exitFixIncomplete
			}
		}
	}
	return code
}

// hostRun is one host's apply: its plan, the targets it was given and their results.
type hostRun struct {
	hp      fix.HostPlan
	results []fix.Result
	err     error
	// unknown: err came after the plan was sent and before the script said anything, so
	// targets may have been signalled; cut: the session ended after the script said what it
	// did (results hold it), before it said what became of everything.
	unknown bool
	cut     error
	// released: watch saw the memory of every stopped target come back (false when it did
	// not, or did not watch: a host the probe before acting missed).
	released bool
}

// askKill asks, on a terminal, whether to SIGKILL the targets still running; with --yes or
// without a terminal it does not.
func (f *fixOptions) askKill(runs []hostRun, again []int, e *env) bool {
	if f.yes || !stdinTerminal(e) {
		fmt.Fprintln(e.stderr, "gputriage: targets still run after SIGTERM; no SIGKILL without --kill-after D or a terminal to ask at")
		return false
	}
	n := 0
	for _, i := range again {
		for _, r := range runs[i].results {
			if r.Outcome == fix.StillRunning {
				n++
			}
		}
	}
	fmt.Fprintf(e.stderr, "%d target(s) still run after SIGTERM. Send SIGKILL (identities checked again)? Type %d: ", n, n)
	line, _ := bufio.NewReader(e.stdin).ReadString('\n')
	return strings.TrimSpace(line) == strconv.Itoa(n)
}

// runHosts runs the apply script on every host of p with targets (in ModeKill, only on the
// host of prev, with its targets still running), prints each result and records it.
func (f *fixOptions) runHosts(ctx context.Context, o *options, p fix.Plan, mode fix.Mode, prev *hostRun, e *env) []hostRun {
	runs := make([]hostRun, len(p.Hosts))
	var wg sync.WaitGroup
	var mu sync.Mutex                                  // one host's lines at a time
	slots := make(chan struct{}, max(1, o.ssh.fanout)) // --fanout hosts at once
	for i, hp := range p.Hosts {
		if prev != nil {
			if prev.hp.Host != hp.Host {
				continue
			}
			hp = stillRunning(*prev)
		}
		if len(hp.Targets) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			start := time.Now()
			r := f.runHost(ctx, o, p.ID, hp, mode, e)
			mu.Lock()
			f.report(o, p.ID, mode, r, e)
			mu.Unlock()
			if base, ok := f.bases[hp.Host]; ok && r.err == nil {
				var lines []string
				lines, r.released = f.watchRelease(ctx, o, r, base, start, e)
				mu.Lock()
				for _, l := range lines {
					fmt.Fprintln(e.stdout, l)
				}
				mu.Unlock()
			}
			runs[i] = r
		}()
	}
	wg.Wait()
	return runs
}

// stillRunning is the plan of the targets of r still running.
func stillRunning(r hostRun) fix.HostPlan {
	hp := r.hp
	hp.Targets = nil
	for j, res := range r.results {
		if res.Outcome == fix.StillRunning {
			hp.Targets = append(hp.Targets, r.hp.Targets[j])
		}
	}
	return hp
}

// runHost applies hp's targets on its host over one SSH session.
func (f *fixOptions) runHost(ctx context.Context, o *options, planID string, hp fix.HostPlan, mode fix.Mode, e *env) hostRun {
	r := hostRun{hp: hp}
	nonce := randomHex(8)
	kill := f.killAfter
	if mode == fix.ModeKill {
		kill = 0
	}
	in, err := fix.ApplyInput(fix.ApplyOptions{Nonce: nonce, PlanID: planID, Mode: mode, Wait: f.wait, KillAfter: kill}, hp)
	if err != nil {
		r.err = err
		return r
	}
	c := o.triageConfig(e, nil)
	h, err := c.ResolveOne(hp.Host)
	if err != nil {
		r.err = err
		return r
	}
	res, err := c.Exec(ctx, h, c.ProbeCommand(), in, 1<<20, o.timeout+f.wait)
	if err != nil {
		r.err = err
		return r
	}
	r.results, r.err = fix.ParseResults(res.Stdout, nonce, len(hp.Targets))
	if res.Err != nil && res.Err.Kind != sshexec.KindExit {
		// Cut short: what the script said it did stands; with no word from it, once the plan
		// was on its way, nobody knows.
		if r.err == nil {
			r.cut = res.Err
		} else {
			r.results, r.err, r.unknown = nil, res.Err, res.Err.Phase == sshexec.PhaseProbe
		}
	}
	if r.unknown {
		for _, t := range hp.Targets {
			r.results = append(r.results, fix.Result{PID: t.PID, Outcome: fix.Unconfirmed, Detail: "no-answer"})
		}
	}
	return r
}

// report prints one host's results and appends them to the audit log.
func (f *fixOptions) report(o *options, planID string, mode fix.Mode, r hostRun, e *env) {
	host := r.hp.Host
	clean := hostText(o.out.showSecrets)
	switch {
	case r.err != nil && !r.unknown:
		fmt.Fprintf(e.stdout, "%s: not applied: %s\n", report.Sanitize(host), clean(r.err.Error()))
		return
	case r.err != nil:
		fmt.Fprintf(e.stdout, "%s: outcome unknown: the session ended after the plan was sent (%s), before the host said what it did: "+
			"targets may have been signalled; see what became of them with gputriage watch %s --until free\n",
			report.Sanitize(host), clean(r.err.Error()), report.Sanitize(host))
	case r.cut != nil:
		fmt.Fprintf(e.stdout, "%s: the session ended before the watch did (%s); what the host said it did:\n",
			report.Sanitize(host), clean(r.cut.Error()))
	}
	signal, killAfter := "SIGTERM", ""
	if mode == fix.ModeKill {
		signal = "SIGKILL"
	} else if f.killAfter > 0 {
		killAfter = f.killAfter.String()
	}
	who := e.getenv("USER")
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	login := ""
	if h, err := o.triageConfig(e, nil).ResolveOne(host); err == nil {
		login = h.Conf.User
	}
	var recs []fix.Record
	for j, res := range r.results {
		fix.WriteResult(e.stdout, host, r.hp.Targets[j], res, o.ssh.sudo, clean)
		recs = append(recs, fix.Record{Time: time.Now().UTC(), Who: who, Host: host, Login: login, Sudo: o.ssh.sudo,
			PlanID: planID, BootID: r.hp.BootID, Signal: signal, KillAfter: killAfter, Target: r.hp.Targets[j], Result: res})
	}
	if err := appendAudit(e, recs); err != nil {
		fmt.Fprintf(e.stderr, "gputriage: audit log: %v\n", err)
	}
}

// auditPath is $XDG_STATE_HOME/gputriage/fix.log, by default ~/.local/state/gputriage/fix.log.
func auditPath(e *env) (string, error) {
	dir := e.getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(dir) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "gputriage", "fix.log"), nil
}

func appendAudit(e *env, recs []fix.Record) error {
	name, err := auditPath(e)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
		return err
	}
	fh, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if err := fix.WriteRecords(fh, recs); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}
