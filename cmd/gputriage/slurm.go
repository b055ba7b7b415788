package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/gputriage/gputriage/hostlist"
	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/slurm"
	"github.com/gputriage/gputriage/triage"
)

// slurmOptions are the flags that let Slurm choose the hosts: the nodes of jobs, of a
// partition, of a node list, in some states; asked here or on a login node over SSH.
type slurmOptions struct {
	jobs      []string // --slurm-job, repeatable, each a comma list
	partition string
	nodes     string
	states    string
	via       string // --slurm-via LOGIN
}

func (o *slurmOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&o.jobs, "slurm-job", nil, "triage the nodes Slurm job `IDS` run or ran on (comma list, repeatable)")
	fs.StringVar(&o.partition, "slurm-partition", "", "triage the nodes of Slurm `PARTITION` (comma list)")
	fs.StringVar(&o.nodes, "slurm-nodes", "", "triage the Slurm `NODES` (node[01-64]) that the other --slurm flags select")
	fs.StringVar(&o.states, "slurm-state", "", "only Slurm nodes in `STATES`, as sinfo -t takes them: drain, down, idle, ... (comma list)")
	fs.StringVar(&o.via, "slurm-via", "", "ask Slurm on login node `LOGIN` over SSH instead of with this machine's squeue and sinfo")
}

// given reports whether Slurm is to choose hosts (--slurm-via alone chooses none).
func (o *slurmOptions) given() bool {
	return len(o.jobs) > 0 || o.partition != "" || o.nodes != "" || o.states != ""
}

// query is the validated Slurm query the flags ask.
func (o *slurmOptions) query() (slurm.Query, error) {
	q := slurm.Query{Partition: o.partition, Nodes: o.nodes, States: o.states}
	for _, j := range o.jobs {
		q.Jobs = append(q.Jobs, strings.Split(j, ",")...)
	}
	if err := q.Validate(); err != nil {
		return q, usagef("%v", err)
	}
	return q, nil
}

// maxSlurmOutput bounds what squeue or sinfo may print: 16 MiB is some 200,000 node lines.
const maxSlurmOutput = 16 << 20

// slurmHosts asks Slurm which nodes the flags select, here or through --slurm-via, and
// returns their names and what Slurm says of each, by name. Notes (a pending job, a node
// Slurm does not know) go to stderr. Every failure is a usage error: nothing was swept.
func (o *sweepOptions) slurmHosts(ctx context.Context, e *env) ([]string, map[string]*report.Scheduler, error) {
	q, err := o.slurm.query()
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	nonce := triage.NewNonce()
	var squeue, sinfo *slurm.Output
	if o.slurm.via != "" {
		squeue, sinfo, err = o.slurmVia(ctx, q, nonce, e)
	} else {
		squeue, sinfo, err = slurmHere(ctx, q, nonce)
	}
	if err != nil {
		return nil, nil, err
	}
	sel, err := slurm.Select(q, nonce, squeue, sinfo)
	if err != nil {
		return nil, nil, usagef("%s%v", o.slurmWhere(), err)
	}
	for _, n := range sel.Notes {
		fmt.Fprintf(e.stderr, "gputriage: slurm: %s\n", report.Sanitize(n))
	}
	names := make([]string, len(sel.Nodes))
	sched := make(map[string]*report.Scheduler, len(sel.Nodes))
	for i, n := range sel.Nodes {
		names[i] = n.Name
		sched[n.Name] = &report.Scheduler{Name: "slurm", State: n.State, Reason: n.Reason, ReasonUser: n.ReasonUser, ReasonTime: n.ReasonTime}
	}
	return names, sched, nil
}

// slurmWhere prefixes a Slurm error with the login node it came from, if any.
func (o *sweepOptions) slurmWhere() string {
	if o.slurm.via != "" {
		return "--slurm-via " + o.slurm.via + ": "
	}
	return ""
}

// slurmHere runs squeue (when jobs are asked for) and sinfo on this machine, each from argv
// (never a shell), with LC_ALL=C and bounded output.
func slurmHere(ctx context.Context, q slurm.Query, nonce string) (squeue, sinfo *slurm.Output, err error) {
	if _, err := exec.LookPath("sinfo"); err != nil {
		return nil, nil, usagef("Slurm's sinfo is not on this machine's PATH: run gputriage where " +
			"Slurm's commands are, or add --slurm-via LOGIN to ask a login node over SSH")
	}
	if argv := q.SqueueArgs(nonce); argv != nil {
		if squeue, err = runSlurm(ctx, argv); err != nil {
			return nil, nil, err
		}
	}
	sinfo, err = runSlurm(ctx, q.SinfoArgs(nonce))
	return squeue, sinfo, err
}

// runSlurm runs one Slurm command here. A non-zero exit is the caller's to judge (squeue
// exits 1 for jobs it does not know); one that could not run or ran out of time is an error.
func runSlurm(ctx context.Context, argv []string) (*slurm.Output, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out := &triage.CapWriter{Limit: maxSlurmOutput}
	errOut := &triage.CapWriter{Limit: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, errOut
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	o := &slurm.Output{Stdout: out.Buf.Bytes(), Stderr: errOut.Buf.String(), Truncated: out.Overflow}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return nil, usagef("slurm: %s did not answer in time (%v): is slurmctld up?", argv[0], ctx.Err())
	case errors.As(err, &ee):
		o.ExitCode = ee.ExitCode()
	case err != nil:
		return nil, usagef("slurm: %v", err)
	}
	return o, nil
}

// slurmVia runs the query on the --slurm-via login node: one SSH session, reached and
// checked like any host (ssh_config, known_hosts, agent), running slurm.Script through sh -s.
func (o *sweepOptions) slurmVia(ctx context.Context, q slurm.Query, nonce string, e *env) (squeue, sinfo *slurm.Output, err error) {
	ts, err := hostlist.Expand(o.slurm.via)
	if err != nil || len(ts) != 1 {
		return nil, nil, usagef("--slurm-via %s: one login node, please (%v)", o.slurm.via, err)
	}
	c := o.sweepConfig(e)
	res, err := c.Resolve(ts)
	if err != nil {
		return nil, nil, triageErr(err)
	}
	triage.PrintConfigNotes(e.stderr, res)
	r, err := c.Exec(ctx, res[0], "sh -s", []byte(slurm.Script(q, nonce)), maxSlurmOutput, o.timeout)
	if err != nil {
		return nil, nil, triageErr(err)
	}
	if r.Err != nil {
		msg := r.Err.Message
		if r.Err.Hop != "" && !strings.Contains(msg, r.Err.Hop) {
			msg = "via jump host " + r.Err.Hop + ": " + msg
		}
		return nil, nil, usagef("--slurm-via %s: failed (%s: %s): %s", o.slurm.via, r.Err.Phase, r.Err.Kind, msg)
	}
	squeue, sinfo, err = slurm.SplitScript(q, nonce, r.Stdout, string(r.Stderr), r.Truncated)
	if err != nil {
		return nil, nil, usagef("--slurm-via %s: %v", o.slurm.via, err)
	}
	return squeue, sinfo, nil
}
