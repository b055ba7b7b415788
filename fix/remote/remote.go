package remote

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

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/fix"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/sshexec"
	"github.com/gputriage/gputriage/triage"
)

// Exit statuses of fix.
const (
	OK         = 0
	Incomplete = 1 // a target was refused, still runs or still holds memory; or the operator declined
	Usage      = 2 // usage error, or no terminal for the typed confirmation without Yes
	HostFailed = 3 // a host could not be probed or reached to apply
	Internal   = 4 // the plan could not be written
)

// Runner is one `gputriage fix`: how it reaches hosts, what it was asked, and where it talks
// to the operator.
type Runner struct {
	// Config is how hosts are reached; a fresh one for each use.
	Config func() *triage.Config
	// Probe probes and diagnoses the named hosts (and those the command line names besides),
	// calling each, possibly at once from several goroutines, for every host as it arrives.
	// Hosts nil with a nil error: nothing to do (a dry run).
	Probe func(ctx context.Context, names []string, each func(*report.Host)) ([]report.Host, error)
	// Usagef makes a usage error.
	Usagef func(format string, args ...any) error

	Sudo      bool
	Fanout    int           // hosts at once
	Timeout   time.Duration // each host's probe
	KillAfter time.Duration // SIGKILL what still runs this long after SIGTERM; 0: ask on a terminal
	Wait      time.Duration // to watch each target exit and its memory be released
	Include   []int         // PIDs needing judgement to stop too
	Yes       bool          // apply without asking
	PlanOut   string        // write the plan here and apply nothing
	Apply     string        // apply the reviewed plan in this file instead of probing
	Replay    string        // show the plan the captures of this file or directory give; reach no host, apply nothing

	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Terminal       bool                // Stdin is a terminal, where the typed confirmation is read
	Clean          func(string) string // makes host text safe to print
	Getenv         func(string) string

	// bases are the hosts' whole snapshots as probed for the plan, or again just before it is
	// applied, by host name: the first round of the watch for released memory.
	bases map[string]baseline
}

// baseline is a host's whole snapshot as fix probed it before acting: watch's first round.
type baseline struct {
	snap   *parse.Snapshot
	result diagnose.Result
}

// Run probes the hosts of names (or reads the plan of Apply), shows the plan, and, once the
// operator confirms, applies it. With Replay it shows the plan the captures give and returns:
// nothing is reached, asked or applied. It returns fix's exit status.
func (r *Runner) Run(ctx context.Context, names []string) (int, error) {
	plan, failed, err := r.plan(ctx, names)
	if err != nil || plan == nil {
		return Usage, err
	}
	fix.WritePlan(r.Stdout, *plan, fix.How{Sudo: r.Sudo, KillAfter: r.KillAfter}, r.Clean)
	if r.Replay != "" && plan.Targets() > 0 {
		r.replayed(*plan)
		return failedCode(failed, OK), nil
	}
	if r.PlanOut != "" {
		if err := writePlanFile(r.PlanOut, *plan); err != nil {
			return Internal, err
		}
		fmt.Fprintf(r.Stdout, "plan %s written to %s: review it, then gputriage fix --apply %s\n", plan.ID, r.PlanOut, r.PlanOut)
		return failedCode(failed, OK), nil
	}
	if plan.Targets() == 0 {
		fmt.Fprintln(r.Stdout, "nothing to apply")
		return failedCode(failed, OK), nil
	}
	if ok, err := r.confirm(*plan); err != nil || !ok {
		return Incomplete, err
	}
	code := OK
	if r.Apply != "" || !r.Yes {
		// A reviewed plan, or one that waited at the prompt, is a past probe's: apply only
		// what a probe taken now still names.
		*plan, code = r.recheck(ctx, *plan)
	}
	return failedCode(failed, worse(code, r.applyPlan(ctx, *plan))), nil
}

// worse is the exit status of two parts of one fix: a target not stopped (1) before a host
// not reached (3) before success.
func worse(a, b int) int {
	for _, c := range []int{Incomplete, HostFailed} {
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
// Incomplete when a target was refused, else HostFailed when a host could not be probed.
func (r *Runner) recheck(ctx context.Context, p fix.Plan) (fix.Plan, int) {
	var mu sync.Mutex
	r.bases = map[string]baseline{}
	see := func(h *report.Host) {
		if h.Err == nil && h.Snapshot != nil {
			mu.Lock()
			r.bases[h.Name] = baseline{snap: h.Snapshot, result: h.Result}
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
		r.Probe(ctx, names, see)
	}
	code := OK
	kept := p
	kept.Hosts = slices.Clone(p.Hosts)
	for i, hp := range kept.Hosts {
		if len(hp.Targets) == 0 {
			continue
		}
		var refused []fix.Refusal
		if b, ok := r.bases[hp.Host]; ok {
			kept.Hosts[i], refused = fix.Recheck(hp, b.snap, b.result)
			if len(refused) > 0 {
				code = Incomplete
			}
		} else {
			kept.Hosts[i].Targets = nil
			for _, t := range hp.Targets {
				refused = append(refused, fix.Refusal{Target: t, Detail: fix.DetailNotReprobed})
			}
			code = worse(code, HostFailed)
		}
		if len(refused) > 0 {
			r.reportRefused(p.ID, hp, refused)
		}
	}
	return kept, code
}

// reportRefused prints and records the targets of hp that recheck refused: nothing was sent
// to the host for them.
func (r *Runner) reportRefused(planID string, hp fix.HostPlan, refused []fix.Refusal) {
	run := hostRun{hp: hp}
	run.hp.Targets = nil
	for _, x := range refused {
		run.hp.Targets = append(run.hp.Targets, x.Target)
		run.results = append(run.results, fix.Result{PID: x.Target.PID, Outcome: fix.Refused, Detail: x.Detail})
	}
	r.report(planID, fix.ModeTerm, run)
}

func failedCode(failed bool, code int) int {
	if failed && code == OK {
		return HostFailed
	}
	return code
}

// plan probes and diagnoses the hosts and builds the plan, or reads it from Apply. failed
// is set when some host could not be probed.
func (r *Runner) plan(ctx context.Context, names []string) (*fix.Plan, bool, error) {
	if r.Apply != "" {
		p, err := readPlanFile(r.Apply, r.Include)
		if err != nil {
			return nil, false, r.Usagef("fix: %v", err)
		}
		return &p, false, nil
	}
	var mu sync.Mutex
	plans := map[string]fix.HostPlan{} // by host name, built while each whole snapshot is at hand
	r.bases = map[string]baseline{}
	see := func(h *report.Host) {
		if h.Err == nil && h.Snapshot != nil {
			hp := fix.BuildHost(h.Name, h.Snapshot, h.Result).Include(r.Include)
			mu.Lock()
			plans[h.Name] = hp
			if len(hp.Targets) > 0 {
				r.bases[h.Name] = baseline{snap: h.Snapshot, result: h.Result}
			}
			mu.Unlock()
		}
	}
	probe := r.Probe
	if r.Replay != "" {
		probe = r.replay
	}
	hosts, err := probe(ctx, names, see)
	if err != nil || hosts == nil {
		return nil, false, err
	}
	p := &fix.Plan{Version: fix.Version, ID: randomHex(8)}
	failed := false
	for _, h := range hosts {
		hp, ok := plans[h.Name]
		if !ok {
			failed = true
			fmt.Fprintf(r.Stderr, "gputriage: %s: not probed: %s\n", report.Sanitize(h.Name), r.Clean(errText(h.Err)))
			continue
		}
		p.Hosts = append(p.Hosts, hp)
	}
	return p, failed, nil
}

// replay diagnoses the captures of Replay, calling each for every host, as Probe would have
// from their hosts: the plan is built from them exactly as from a live probe. Nothing is
// reached.
func (r *Runner) replay(_ context.Context, _ []string, each func(*report.Host)) ([]report.Host, error) {
	c := r.Config()
	c.Each = each
	hosts, err := triage.Replay(r.Replay, c)
	if err != nil {
		return nil, r.Usagef("fix %v", err)
	}
	return hosts, nil
}

// replayed ends a replay whose plan has targets: nothing is applied. The targets the apply
// script would refuse at once, run as the capture's user (another user's process, without
// Sudo), are said in the words a live run says it in.
func (r *Runner) replayed(p fix.Plan) {
	var hosts []string
	for _, hp := range p.Hosts {
		if len(hp.Targets) > 0 {
			hosts = append(hosts, r.Clean(hp.Host))
		}
		b, ok := r.bases[hp.Host]
		if !ok || r.Sudo || b.snap.Host.UID == nil || *b.snap.Host.UID == 0 {
			continue
		}
		for _, t := range hp.Targets {
			if t.UID != *b.snap.Host.UID {
				fmt.Fprintf(r.Stdout, "applied as the capture's user (uid %d), it would end:\n", *b.snap.Host.UID)
				fix.WriteResult(r.Stdout, hp.Host, t, fix.Result{PID: t.PID, Outcome: fix.Refused, Detail: "permission"}, r.Sudo, r.Clean)
			}
		}
	}
	fmt.Fprintf(r.Stdout, "nothing applied (--replay): gputriage fix %s probes again, shows the plan for what runs then, and asks before applying\n",
		strings.Join(hosts, " "))
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

// confirm asks the operator to type the host's name (for a fleet, the number of hosts), or
// takes Yes. Without Yes, standard input must be a terminal.
func (r *Runner) confirm(p fix.Plan) (bool, error) {
	if r.Yes {
		return true, nil
	}
	if !r.Terminal {
		return false, r.Usagef("fix: standard input is not a terminal: pass --yes to apply without typed confirmation, or --plan-out FILE to review")
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
	fmt.Fprintf(r.Stderr, "To apply %d action(s), type %s: ", p.Targets(), what)
	line, err := bufio.NewReader(r.Stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	if strings.TrimSpace(line) != want {
		fmt.Fprintln(r.Stderr, "gputriage: not applied: the answer did not match")
		return false, nil
	}
	return true, nil
}

// applyPlan applies each host's targets, one SSH session per host and mode, and reports and
// records every result.
func (r *Runner) applyPlan(ctx context.Context, p fix.Plan) int {
	code := OK
	runs := r.runHosts(ctx, p, fix.ModeTerm, nil)
	var again []int // indexes of hosts with targets still running
	for i, run := range runs {
		if run.err != nil && !run.unknown {
			code = HostFailed
			continue
		}
		for _, res := range run.results {
			if res.Outcome == fix.StillRunning {
				again = append(again, i)
				break
			}
		}
	}
	if len(again) > 0 && r.KillAfter == 0 && r.askKill(runs, again) {
		for _, i := range again {
			runs[i] = r.runHosts(ctx, p, fix.ModeKill, &runs[i])[i]
		}
	}
	for i, run := range runs {
		_, watched := r.bases[p.Hosts[i].Host]
		for _, res := range run.results {
			if (res.Outcome != fix.Stopped || watched && !run.released) && code == OK {
				code = Incomplete
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

// askKill asks, on a terminal, whether to SIGKILL the targets still running; with Yes or
// without a terminal it does not.
func (r *Runner) askKill(runs []hostRun, again []int) bool {
	if r.Yes || !r.Terminal {
		fmt.Fprintln(r.Stderr, "gputriage: targets still run after SIGTERM; no SIGKILL without --kill-after D or a terminal to ask at")
		return false
	}
	n := 0
	for _, i := range again {
		for _, res := range runs[i].results {
			if res.Outcome == fix.StillRunning {
				n++
			}
		}
	}
	fmt.Fprintf(r.Stderr, "%d target(s) still run after SIGTERM. Send SIGKILL (identities checked again)? Type %d: ", n, n)
	line, _ := bufio.NewReader(r.Stdin).ReadString('\n')
	return strings.TrimSpace(line) == strconv.Itoa(n)
}

// runHosts runs the apply script on every host of p with targets (in ModeKill, only on the
// host of prev, with its targets still running), prints each result and records it.
func (r *Runner) runHosts(ctx context.Context, p fix.Plan, mode fix.Mode, prev *hostRun) []hostRun {
	runs := make([]hostRun, len(p.Hosts))
	var wg sync.WaitGroup
	var mu sync.Mutex                              // one host's lines at a time
	slots := make(chan struct{}, max(1, r.Fanout)) // Fanout hosts at once
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
			run := r.runHost(ctx, p.ID, hp, mode)
			mu.Lock()
			r.report(p.ID, mode, run)
			mu.Unlock()
			if base, ok := r.bases[hp.Host]; ok && run.err == nil {
				var lines []string
				lines, run.released = r.watchRelease(ctx, run, base, start)
				mu.Lock()
				for _, l := range lines {
					fmt.Fprintln(r.Stdout, l)
				}
				mu.Unlock()
			}
			runs[i] = run
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
func (r *Runner) runHost(ctx context.Context, planID string, hp fix.HostPlan, mode fix.Mode) hostRun {
	run := hostRun{hp: hp}
	nonce := randomHex(8)
	kill := r.KillAfter
	if mode == fix.ModeKill {
		kill = 0
	}
	in, err := fix.ApplyInput(fix.ApplyOptions{Nonce: nonce, PlanID: planID, Mode: mode, Wait: r.Wait, KillAfter: kill}, hp)
	if err != nil {
		run.err = err
		return run
	}
	c := r.Config()
	h, err := c.ResolveOne(hp.Host)
	if err != nil {
		run.err = err
		return run
	}
	res, err := c.Exec(ctx, h, c.ProbeCommand(), in, 1<<20, r.Timeout+r.Wait)
	if err != nil {
		run.err = err
		return run
	}
	run.results, run.err = fix.ParseResults(res.Stdout, nonce, len(hp.Targets))
	if res.Err != nil && res.Err.Kind != sshexec.KindExit {
		// Cut short: what the script said it did stands; with no word from it, once the plan
		// was on its way, nobody knows.
		if run.err == nil {
			run.cut = res.Err
		} else {
			run.results, run.err, run.unknown = nil, res.Err, res.Err.Phase == sshexec.PhaseProbe
		}
	}
	if run.unknown {
		for _, t := range hp.Targets {
			run.results = append(run.results, fix.Result{PID: t.PID, Outcome: fix.Unconfirmed, Detail: "no-answer"})
		}
	}
	return run
}

// report prints one host's results and appends them to the audit log.
func (r *Runner) report(planID string, mode fix.Mode, run hostRun) {
	host := run.hp.Host
	clean := r.Clean
	switch {
	case run.err != nil && !run.unknown:
		fmt.Fprintf(r.Stdout, "%s: not applied: %s\n", report.Sanitize(host), clean(run.err.Error()))
		return
	case run.err != nil:
		fmt.Fprintf(r.Stdout, "%s: outcome unknown: the session ended after the plan was sent (%s), before the host said what it did: "+
			"targets may have been signalled; see what became of them with gputriage watch %s --until free\n",
			report.Sanitize(host), clean(run.err.Error()), report.Sanitize(host))
	case run.cut != nil:
		fmt.Fprintf(r.Stdout, "%s: the session ended before the watch did (%s); what the host said it did:\n",
			report.Sanitize(host), clean(run.cut.Error()))
	}
	signal, killAfter := "SIGTERM", ""
	if mode == fix.ModeKill {
		signal = "SIGKILL"
	} else if r.KillAfter > 0 {
		killAfter = r.KillAfter.String()
	}
	who := r.Getenv("USER")
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	login := ""
	if h, err := r.Config().ResolveOne(host); err == nil {
		login = h.Conf.User
	}
	var recs []fix.Record
	for j, res := range run.results {
		fix.WriteResult(r.Stdout, host, run.hp.Targets[j], res, r.Sudo, clean)
		recs = append(recs, fix.Record{Time: time.Now().UTC(), Who: who, Host: host, Login: login, Sudo: r.Sudo,
			PlanID: planID, BootID: run.hp.BootID, Signal: signal, KillAfter: killAfter, Target: run.hp.Targets[j], Result: res})
	}
	if err := r.appendAudit(recs); err != nil {
		fmt.Fprintf(r.Stderr, "gputriage: audit log: %v\n", err)
	}
}

// auditPath is $XDG_STATE_HOME/gputriage/fix.log, by default ~/.local/state/gputriage/fix.log.
func (r *Runner) auditPath() (string, error) {
	dir := r.Getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(dir) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "gputriage", "fix.log"), nil
}

func (r *Runner) appendAudit(recs []fix.Record) error {
	name, err := r.auditPath()
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
