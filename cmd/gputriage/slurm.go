package main

import (
	"context"
	"strings"

	"github.com/spf13/pflag"

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

// slurmHosts asks Slurm which nodes the flags select, here or through --slurm-via, and
// returns their names and what Slurm says of each, by name. Notes (a pending job, a node
// Slurm does not know) go to stderr. Every failure is a usage error: nothing was swept.
func (o *sweepOptions) slurmHosts(ctx context.Context, e *env) ([]string, map[string]*report.Scheduler, error) {
	q, err := o.slurm.query()
	if err != nil {
		return nil, nil, err
	}
	a := slurm.Asker{Via: o.slurm.via, Config: func() *triage.Config { return o.sweepConfig(e) }, Timeout: o.timeout, Notes: e.stderr}
	names, sched, err := a.Hosts(ctx, q)
	return names, sched, triageErr(err)
}
