package slurm

import (
	"fmt"
	"strings"

	"github.com/gputriage/gputriage/hostlist"
)

// Selection is the answer to a Query: the nodes to triage, in Slurm's order (the jobs' node
// lists in the order the jobs were given, else sinfo's), each with what sinfo says of it, and
// notes for the user (a pending job, a node Slurm does not know).
type Selection struct {
	Nodes []Node
	Notes []string
}

// Select answers q from the commands' outputs: squeue's (nil when q names no job) and sinfo's.
// A job Slurm does not know, output cut at the caller's bound, a command that failed, or no
// node at all, is an error that says which.
func Select(q Query, nonce string, squeue, sinfo *Output) (Selection, error) {
	var sel Selection
	var jobNodes []string
	if len(q.Jobs) > 0 {
		var err error
		if jobNodes, sel.Notes, err = selectJobs(q, nonce, squeue); err != nil {
			return Selection{}, err
		}
	}
	if err := failed(sinfo); err != nil {
		return Selection{}, err
	}
	nodes, err := ParseNodes(sinfo.Stdout, nonce)
	if err != nil {
		return Selection{}, err
	}
	byName := make(map[string]Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	filtered := q.Partition != "" || q.Nodes != "" || q.States != ""
	switch {
	case len(q.Jobs) == 0:
		sel.Nodes = nodes
	case !filtered:
		// Every node of the jobs, with what sinfo says of it (sinfo listed them all).
		for _, name := range jobNodes {
			n, ok := byName[name]
			if !ok {
				n = Node{Name: name}
			}
			sel.Nodes = append(sel.Nodes, n)
		}
	default:
		for _, name := range jobNodes {
			if n, ok := byName[name]; ok {
				sel.Nodes = append(sel.Nodes, n)
			}
		}
	}
	if q.Nodes != "" && q.Partition == "" && q.States == "" {
		sel.Notes = append(sel.Notes, unknownNodes(q.Nodes, byName)...)
	}
	if len(sel.Nodes) == 0 {
		return Selection{}, fmt.Errorf("%w: no node %s", ErrQuery, describe(q))
	}
	return sel, nil
}

// selectJobs returns the nodes of q's jobs, each once, in the order the jobs were given, and
// a note for each job that has none (pending). A job squeue does not list is an error.
func selectJobs(q Query, nonce string, squeue *Output) ([]string, []string, error) {
	if squeue == nil {
		return nil, nil, fmt.Errorf("%w: squeue did not run", ErrParse)
	}
	// With any known job among them squeue lists those and exits 0; with none it exits 1
	// saying "Invalid job id specified".
	unknownAll := squeue.ExitCode != 0 && strings.Contains(squeue.Stderr, "Invalid job id")
	if !unknownAll {
		if err := failed(squeue); err != nil {
			return nil, nil, err
		}
	}
	jobs, err := ParseJobs(squeue.Stdout, nonce)
	if err != nil {
		return nil, nil, err
	}
	var nodes, notes, unknown []string
	seen := map[string]bool{}
	for _, id := range q.Jobs {
		found := false
		for _, j := range jobs {
			if !jobOf(j.ID, id) {
				continue
			}
			found = true
			if len(j.Nodes) == 0 {
				notes = append(notes, fmt.Sprintf("job %s is %s: it has no nodes", j.ID, j.State))
			}
			for _, n := range j.Nodes {
				if !seen[n] {
					seen[n] = true
					nodes = append(nodes, n)
				}
			}
		}
		if !found {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		return nil, nil, fmt.Errorf("%w: %s %s: Slurm does not know it (slurmctld forgets a job MinJobAge after it ends, "+
			"300 s by default; sacct -j %s -o JobID,NodeList says where it ran)",
			ErrQuery, plural(len(unknown), "job", "jobs"), strings.Join(unknown, ", "), strings.Join(unknown, ","))
	}
	return nodes, notes, nil
}

// jobOf reports whether squeue's record id is the job the user named: the same id, or for a
// plain job id one of its array tasks (42_3, 42_[4-9]) or heterogeneous parts (42+1).
func jobOf(record, asked string) bool {
	if record == asked {
		return true
	}
	if strings.Contains(asked, "_") {
		return false
	}
	return strings.HasPrefix(record, asked+"_") || strings.HasPrefix(record, asked+"+")
}

// failed is the error of a command that did not answer: it exited non-zero, or its output
// was cut at the caller's bound.
func failed(o *Output) error {
	switch {
	case o == nil:
		return fmt.Errorf("%w: sinfo did not run", ErrParse)
	case o.Truncated:
		return fmt.Errorf("%w: the output was cut at %d bytes, so the node list may be incomplete: select fewer nodes", ErrParse, len(o.Stdout))
	case o.ExitCode != 0:
		msg := strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(o.Stderr), "\n", " ; ")), " ")
		msg = strings.ReplaceAll(msg, " ; ", "; ")
		if len(msg) > 1024 {
			msg = "..." + msg[len(msg)-1024:]
		}
		if msg == "" {
			msg = "no message"
		}
		return fmt.Errorf("%w: exit status %d: %s", ErrQuery, o.ExitCode, msg)
	}
	return nil
}

// unknownNodes notes the nodes of list that sinfo did not list: they are not Slurm's.
func unknownNodes(list string, byName map[string]Node) []string {
	names, err := ExpandNodes(list)
	if err != nil {
		return nil // Validate refused it before anything ran
	}
	var missing []string
	for _, n := range names {
		if _, ok := byName[n]; !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("Slurm has no %s %s", plural(len(missing), "node", "nodes"), hostlist.Fold(missing))}
}

// describe says what q selected, for "no node ...".
func describe(q Query) string {
	var parts []string
	if len(q.Jobs) > 0 {
		parts = append(parts, "of "+plural(len(q.Jobs), "job", "jobs")+" "+strings.Join(q.Jobs, ","))
	}
	if q.Nodes != "" {
		parts = append(parts, "among "+q.Nodes)
	}
	if q.Partition != "" {
		parts = append(parts, "in partition "+q.Partition)
	}
	if q.States != "" {
		parts = append(parts, "in state "+q.States)
	}
	if len(parts) == 0 {
		return "is known to Slurm"
	}
	return strings.Join(parts, " ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
