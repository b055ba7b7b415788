package slurm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/gputriage/gputriage/hostlist"
	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/triage"
)

// Asker is where a Query is asked: this machine's squeue and sinfo, or a login node's over SSH.
type Asker struct {
	// Via is the login node to ask over SSH (--slurm-via), "" for this machine.
	Via string
	// Config reaches Via, as any host is reached (ssh_config, known_hosts, agent).
	Config  func() *triage.Config
	Timeout time.Duration // the whole question's
	Notes   io.Writer     // a pending job, a node Slurm does not know
}

// maxOutput bounds what squeue or sinfo may print: 16 MiB is some 200,000 node lines.
const maxOutput = 16 << 20

func usagef(format string, args ...any) error {
	return &triage.UsageError{Msg: fmt.Sprintf(format, args...)}
}

// Hosts asks Slurm which nodes q selects, here or through Via, and returns their names and
// what Slurm says of each, by name. Notes go to a.Notes. Every failure is a
// *triage.UsageError, or the error of reaching Via: nothing was swept.
func (a *Asker) Hosts(ctx context.Context, q Query) ([]string, map[string]*report.Scheduler, error) {
	ctx, cancel := context.WithTimeout(ctx, a.Timeout)
	defer cancel()
	nonce := triage.NewNonce()
	var squeue, sinfo *Output
	var err error
	if a.Via != "" {
		squeue, sinfo, err = a.via(ctx, q, nonce)
	} else {
		squeue, sinfo, err = here(ctx, q, nonce)
	}
	if err != nil {
		return nil, nil, err
	}
	sel, err := Select(q, nonce, squeue, sinfo)
	if err != nil {
		return nil, nil, usagef("%s%v", a.where(), err)
	}
	for _, n := range sel.Notes {
		fmt.Fprintf(a.Notes, "gputriage: slurm: %s\n", report.Sanitize(n))
	}
	names := make([]string, len(sel.Nodes))
	sched := make(map[string]*report.Scheduler, len(sel.Nodes))
	for i, n := range sel.Nodes {
		names[i] = n.Name
		sched[n.Name] = &report.Scheduler{Name: "slurm", State: n.State, Reason: n.Reason, ReasonUser: n.ReasonUser, ReasonTime: n.ReasonTime}
	}
	return names, sched, nil
}

// where prefixes a Slurm error with the login node it came from, if any.
func (a *Asker) where() string {
	if a.Via != "" {
		return "--slurm-via " + a.Via + ": "
	}
	return ""
}

// here runs squeue (when jobs are asked for) and sinfo on this machine, each from argv
// (never a shell), with LC_ALL=C and bounded output.
func here(ctx context.Context, q Query, nonce string) (squeue, sinfo *Output, err error) {
	if _, err := exec.LookPath("sinfo"); err != nil {
		return nil, nil, usagef("Slurm's sinfo is not on this machine's PATH: run gputriage where " +
			"Slurm's commands are, or add --slurm-via LOGIN to ask a login node over SSH")
	}
	if argv := q.SqueueArgs(nonce); argv != nil {
		if squeue, err = run(ctx, argv); err != nil {
			return nil, nil, err
		}
	}
	sinfo, err = run(ctx, q.SinfoArgs(nonce))
	return squeue, sinfo, err
}

// run runs one Slurm command here. A non-zero exit is the caller's to judge (squeue exits 1
// for jobs it does not know); one that could not run or ran out of time is an error.
func run(ctx context.Context, argv []string) (*Output, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out := &triage.CapWriter{Limit: maxOutput}
	errOut := &triage.CapWriter{Limit: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, errOut
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	o := &Output{Stdout: out.Buf.Bytes(), Stderr: errOut.Buf.String(), Truncated: out.Overflow}
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

// via runs the query on the login node Via: one SSH session, reached and checked like any
// host (ssh_config, known_hosts, agent), running Script through sh -s.
func (a *Asker) via(ctx context.Context, q Query, nonce string) (squeue, sinfo *Output, err error) {
	ts, err := hostlist.Expand(a.Via)
	if err != nil || len(ts) != 1 {
		return nil, nil, usagef("--slurm-via %s: one login node, please (%v)", a.Via, err)
	}
	c := a.Config()
	res, err := c.Resolve(ts)
	if err != nil {
		return nil, nil, err
	}
	triage.PrintConfigNotes(a.Notes, res)
	r, err := c.Exec(ctx, res[0], "sh -s", []byte(Script(q, nonce)), maxOutput, a.Timeout)
	if err != nil {
		return nil, nil, err
	}
	if r.Err != nil {
		msg := r.Err.Message
		if r.Err.Hop != "" && !strings.Contains(msg, r.Err.Hop) {
			msg = "via jump host " + r.Err.Hop + ": " + msg
		}
		return nil, nil, usagef("--slurm-via %s: failed (%s: %s): %s", a.Via, r.Err.Phase, r.Err.Kind, msg)
	}
	squeue, sinfo, err = SplitScript(q, nonce, r.Stdout, string(r.Stderr), r.Truncated)
	if err != nil {
		return nil, nil, usagef("--slurm-via %s: %v", a.Via, err)
	}
	return squeue, sinfo, nil
}
