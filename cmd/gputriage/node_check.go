package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/gputriage/gputriage/nodecheck"
	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/triage"
)

// nodeCheckOptions are node-check's flags.
type nodeCheckOptions struct {
	drain, resume bool
	unconstrained bool
	fullProbe     bool
	verbose       bool
	node          string
	timeout       time.Duration
}

func (o *nodeCheckOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.drain, "drain", false, `when there are problems, drain the node: scontrol update state=drain reason="gputriage: ..."`)
	fs.BoolVar(&o.resume, "resume", false, "when the node is clean and drained by gputriage (its reason starts with gputriage:), resume it; never a node drained for another reason")
	fs.BoolVar(&o.unconstrained, "drain-unconstrained", false, "count a running job's process on GPUs Slurm did not allocate to it (gpu-outside-allocation) as a problem, which --drain drains for; by default it is a note")
	fs.StringVar(&o.node, "node", "", "the Slurm node `NAME` to drain or resume (default $SLURMD_NODENAME, else the short host name)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "the `DURATION` the probe gets (each nvidia-smi call: 40% of it); the idle gate's time comes out of it, leaving the probe at least half")
	fs.BoolVar(&o.fullProbe, "full-probe", false, "always run the probe: skip the idle gate, which answers clean at once when it proves the node idle")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "say on stderr which path ran (the idle gate or the probe) and why")
}

// slurmPATH is the PATH node-check uses when it has none: Slurm gives its health check,
// prolog and epilog no PATH.
const slurmPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// nodeCheckCmd is `gputriage node-check`.
func nodeCheckCmd(ctx context.Context, args []string, e *env) (int, error) {
	var o nodeCheckFlags
	fs, err := parseFlags("node-check", &o, args)
	if err != nil {
		return exitUsage, err
	}
	if o.help {
		fmt.Fprint(e.stdout, usageText("node-check", helpWidth(e)))
		return exitOK, nil
	}
	if fs.NArg() > 0 {
		return exitUsage, usagef("node-check: no arguments, got %q: it checks this node", fs.Arg(0))
	}
	nc := o.nodeCheckOptions
	if nc.timeout <= 0 {
		return exitUsage, usagef("node-check: --timeout must be positive, got %s", nc.timeout)
	}
	node, err := nodeName(nc.node, e.getenv)
	if err != nil && (nc.drain || nc.resume) {
		return exitUsage, err
	}
	if os.Getenv("PATH") == "" {
		os.Setenv("PATH", slurmPATH)
	}
	script := e.getenv("SLURM_SCRIPT_CONTEXT") // set by Slurm (22.05 and later) for its Prolog and Epilog
	job := script == "prolog_slurmd" || script == "epilog_slurmd"
	if job && e.getenv("SLURM_JOB_GPUS") == "" && e.getenv("CUDA_VISIBLE_DEVICES") == "" {
		return exitOK, nil // a job without GPUs: nothing of gputriage's to check
	}
	problems, notes, code, err := nc.judge(ctx, e, job)
	if code != exitOK || err != nil {
		return code, err
	}
	// Host words (a title, a process title as the program) are masked for the lines and the
	// drain reason alike: sinfo -R shows the reason to every user of the cluster.
	problems = report.MaskSecretsIn(problems)
	for _, p := range problems {
		fmt.Fprintf(e.stdout, "gputriage: %s: %s\n", report.Sanitize(p.Code), report.Sanitize(p.Title))
	}
	for _, p := range notes {
		fmt.Fprintf(e.stdout, "gputriage: note: %s: %s (not a problem of the node's without --drain-unconstrained)\n",
			report.Sanitize(p.Code), report.Sanitize(report.MaskSecrets(p.Title)))
	}
	switch {
	case len(problems) > 0 && nc.drain:
		if err := nodecheck.Drain(ctx, node, nodecheck.DrainReason(problems), e.stdout); err != nil {
			return exitHostsFailed, err
		}
	case len(problems) == 0 && nc.resume:
		if err := nodecheck.Resume(ctx, node, e.stdout); err != nil {
			return exitHostsFailed, err
		}
	}
	if len(problems) > 0 {
		return exitFindings, nil
	}
	return exitOK, nil
}

// judge looks at this node and returns its problems: none at once when the idle gate proves
// the node clean, else those nodecheck.Check finds on the probe. A failed probe, or a job's GPU
// list that is not one, is an exit code other than exitOK, with nothing judged.
func (nc nodeCheckOptions) judge(ctx context.Context, e *env, job bool) (problems, notes []nodecheck.Problem, code int, err error) {
	scope := nodecheck.IdleScope{Job: job, SlurmGPUs: e.getenv("SLURM_JOB_GPUS"), CUDAVisible: e.getenv("CUDA_VISIBLE_DEVICES")}
	timeout := nc.timeout
	if !nc.fullProbe {
		start := time.Now()
		doubts := nodecheck.IdleGate(nodecheck.ReadIdleFacts(ctx, time.Duration(triage.SMISeconds(timeout))*time.Second), scope)
		took := time.Since(start).Round(time.Millisecond)
		if len(doubts) == 0 {
			nc.debugf(e, "idle gate: clean in %s, without the probe: no compute app, no GPU memory in use, only driver helpers on the GPUs' devices, no deleted /dev/shm file held, /dev/shm neither full nor holding 64 MiB", took)
			return nil, nil, exitOK, nil
		}
		nc.debugf(e, "idle gate: not proven idle in %s (%s): running the probe", took, report.MaskSecrets(doubts[0].String()))
		// The gate's time comes out of the probe's, which keeps at least half of it.
		timeout = max(timeout-time.Since(start), timeout/2)
	}
	h := triage.ProbeLocal(ctx, timeout)
	if h.Err != nil {
		fmt.Fprintf(e.stdout, "gputriage: node-check: the probe failed (%s: %s): %s\n",
			report.Sanitize(h.Err.Phase), report.Sanitize(h.Err.Kind), report.Sanitize(report.MaskSecrets(h.Err.Message)))
		return nil, nil, exitHostsFailed, nil
	}
	ns := nodecheck.Scope{Unconstrained: nc.unconstrained}
	if job {
		gpus, missing, err := nodecheck.JobGPUs(h.Snapshot, scope.SlurmGPUs, scope.CUDAVisible)
		if err != nil {
			return nil, nil, exitUsage, usagef("node-check: %v", err)
		}
		ns = nodecheck.Scope{GPUs: gpus, Missing: missing, RequireFree: true, Unconstrained: nc.unconstrained}
	}
	return nodecheck.Check(h.Result, ns), nodecheck.Notes(h.Result, ns), exitOK, nil
}

// debugf says on stderr, under -v, what node-check did: which path ran and why.
func (nc nodeCheckOptions) debugf(e *env, format string, args ...any) {
	if nc.verbose {
		fmt.Fprintf(e.stderr, "gputriage: node-check: %s\n", report.Sanitize(fmt.Sprintf(format, args...)))
	}
}

// nodeName is the Slurm node name to act on: --node, else SLURMD_NODENAME, else the short
// host name. It goes into scontrol's argv as nodename=NAME: only a plain name is taken.
func nodeName(flag string, getenv func(string) string) (string, error) {
	name := flag
	if name == "" {
		name = getenv("SLURMD_NODENAME")
	}
	if name == "" {
		host, _ := os.Hostname()
		name, _, _ = strings.Cut(host, ".")
	}
	if !triage.PlainHostname(name) || len(name) > 64 {
		return "", usagef("node-check: %q is not a Slurm node name: give --node NAME", name)
	}
	return name, nil
}
