// Package slurm turns a user's Slurm selection (jobs, a partition, nodes, node states) into the
// squeue and sinfo command lines that answer it, and their output into the nodes to triage, each
// with the state and drain reason Slurm gives it. Those parts are pure (no exec, no I/O).
//
// Asker runs the commands: on this machine from argv (never a shell), or on a --slurm-via
// login node over one SSH session reached through triage.Config.Exec like any host, each
// bounded in bytes and time, and hands their output to Select. The flags that make the Query
// stay in cmd/gputriage.
//
// Every byte Slurm prints is treated as untrusted: a drain reason may hold '|' and newlines,
// so each record ends with a per-run nonce nobody who set the reason could know, and node
// names must be plain names before they become hosts.
package slurm

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gputriage/gputriage/hostlist"
)

// ErrParse is wrapped by every error about output Slurm's commands printed.
var ErrParse = errors.New("slurm: unexpected output")

// ErrQuery is wrapped by every error about a selection the user gave.
var ErrQuery = errors.New("slurm")

// MaxJobs bounds the job ids of one query.
const MaxJobs = 1000

// Query is what the user asked Slurm for. All given parts must hold for a node: the nodes of
// Jobs that are in Partition, in Nodes and in one of States. A Query with none given is empty.
type Query struct {
	Jobs      []string // job ids: N, or N_M for one task of an array job
	Partition string   // sinfo -p: a partition name, or a comma list of them
	Nodes     string   // sinfo -n: a Slurm host list such as node[01-64,70]
	States    string   // sinfo -t: a state, or a comma list (drain, down, idle, ...)
}

// Empty reports whether q asks for nothing.
func (q Query) Empty() bool {
	return len(q.Jobs) == 0 && q.Partition == "" && q.Nodes == "" && q.States == ""
}

// Validate refuses a query part that is not a plain Slurm value, so that no argument can be
// read as an option or as shell syntax wherever it is run.
func (q Query) Validate() error {
	if len(q.Jobs) > MaxJobs {
		return fmt.Errorf("%w: --slurm-job: %d job ids, at most %d", ErrQuery, len(q.Jobs), MaxJobs)
	}
	for _, j := range q.Jobs {
		if !jobID(j) {
			return fmt.Errorf("%w: --slurm-job: %q is not a job id (digits, or JOB_TASK for an array task)", ErrQuery, j)
		}
	}
	for _, p := range strings.Split(q.Partition, ",") {
		if q.Partition != "" && !Name(p) {
			return fmt.Errorf("%w: --slurm-partition: %q is not a partition name (letters, digits, '_', '.', '-')", ErrQuery, p)
		}
	}
	for _, s := range strings.Split(q.States, ",") {
		if q.States != "" && !stateWord(s) {
			return fmt.Errorf("%w: --slurm-state: %q is not a node state (drain, down, idle, ...)", ErrQuery, s)
		}
	}
	if q.Nodes != "" {
		if _, err := ExpandNodes(q.Nodes); err != nil {
			return fmt.Errorf("%w: --slurm-nodes: %w", ErrQuery, err)
		}
	}
	return nil
}

// Name reports whether s is a plain Slurm node or partition name: letters, digits, '_', '.'
// and '-', not starting with '-' or '.', at most 253 bytes. Only such names become hosts.
func Name(s string) bool {
	if s == "" || len(s) > 253 || s[0] == '-' || s[0] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// jobID reports whether s is N or N_M, N and M at most 10 digits.
func jobID(s string) bool {
	job, task, array := strings.Cut(s, "_")
	return digits(job) && (!array || digits(task))
}

func digits(s string) bool {
	if s == "" || len(s) > 10 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// stateWord reports whether s can be one of sinfo -t's states (letters, '_', a trailing '^'
// as in reboot^); sinfo itself says which it knows.
func stateWord(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '^' && i == len(s)-1) {
			return false
		}
	}
	return true
}

// ExpandNodes expands a Slurm host list (node[01-64,70], a comma list) into node names, each a
// plain Name: Slurm's syntax for these lists is pdsh's, which hostlist reads. A user@ or :port
// is refused: Slurm names nodes, and the user's ssh_config says how each is reached.
func ExpandNodes(list string) ([]string, error) {
	ts, err := hostlist.Expand(list)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ts))
	for _, t := range ts {
		if t.User != "" || t.Port != 0 || !Name(t.Host) {
			return nil, fmt.Errorf("%q is not a Slurm node name", t.String())
		}
		names = append(names, t.Host)
	}
	return names, nil
}
