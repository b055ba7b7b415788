package slurm

import (
	"bytes"
	"fmt"
	"strings"
)

// Job is one line of squeue: a job, or a task of an array job, and the nodes it runs or ran on.
type Job struct {
	ID    string   // 42, 42_3 (an array task), 42_[4-9] (pending tasks), 42+0 (a het job's part)
	State string   // RUNNING, PENDING, COMPLETING, COMPLETED, ...
	Nodes []string // expanded from its node list; none while it is pending
}

// Node is one node as sinfo lists it.
type Node struct {
	Name  string
	State string // sinfo's long form: idle, allocated, mixed, draining, drained, down*, ...
	// Reason is why the node was drained or downed ("" when it has none), as whoever did it
	// wrote it: free text from the cluster, to be sanitized before it is shown.
	Reason     string
	ReasonUser string // who set the reason; "" when unknown
	ReasonTime string // when, as Slurm writes it (2026-12-01T00:54:42); "" when unknown
}

// records splits out into the records that end with "|NONCE\n". Text after the last one (a
// record cut short) is an error.
func records(out []byte, nonce string) ([][]byte, error) {
	if !ValidNonce(nonce) {
		return nil, fmt.Errorf("%w: bad nonce %q", ErrParse, short(nonce))
	}
	end := []byte("|" + nonce + "\n")
	var recs [][]byte
	for len(out) > 0 {
		i := bytes.Index(out, end)
		if i < 0 {
			return nil, fmt.Errorf("%w: a record without its end: %q", ErrParse, short(string(out)))
		}
		recs = append(recs, out[:i])
		out = out[i+len(end):]
	}
	return recs, nil
}

// ParseJobs reads squeue's output for Query.SqueueArgs(nonce).
func ParseJobs(out []byte, nonce string) ([]Job, error) {
	recs, err := records(out, nonce)
	if err != nil {
		return nil, err
	}
	jobs := make([]Job, 0, len(recs))
	for _, r := range recs {
		f := strings.Split(string(r), "|")
		if len(f) != 3 {
			return nil, fmt.Errorf("%w: squeue: %d fields, want 3: %q", ErrParse, len(f), short(string(r)))
		}
		j := Job{ID: f[0], State: f[1]}
		if !jobRecordID(j.ID) || !stateToken(j.State) {
			return nil, fmt.Errorf("%w: squeue: bad job id or state: %q", ErrParse, short(string(r)))
		}
		if f[2] != "" && f[2] != "(null)" {
			if j.Nodes, err = ExpandNodes(f[2]); err != nil {
				return nil, fmt.Errorf("%w: squeue: job %s: node list %q: %v", ErrParse, j.ID, short(f[2]), err)
			}
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// ParseNodes reads sinfo's output for Query.SinfoArgs(nonce): one record per node and
// partition; a node in two partitions is kept once, where it first appears.
func ParseNodes(out []byte, nonce string) ([]Node, error) {
	recs, err := records(out, nonce)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var nodes []Node
	for _, r := range recs {
		f := strings.SplitN(string(r), "|", 5) // the reason, last, may hold '|'
		if len(f) != 5 {
			return nil, fmt.Errorf("%w: sinfo: %d fields, want 5: %q", ErrParse, len(f), short(string(r)))
		}
		n := Node{Name: f[0], State: f[1], ReasonUser: known(f[2]), ReasonTime: known(f[3]), Reason: f[4]}
		if !Name(n.Name) || !stateToken(n.State) || !token(n.ReasonUser) || !token(n.ReasonTime) {
			return nil, fmt.Errorf("%w: sinfo: bad node name, state, user or time: %q", ErrParse, short(string(r)))
		}
		if n.Reason == "none" {
			n.Reason = ""
		}
		if !seen[n.Name] {
			seen[n.Name] = true
			nodes = append(nodes, n)
		}
	}
	return nodes, nil
}

// known is sinfo's value, "" for its "Unknown" and "none".
func known(s string) string {
	if s == "Unknown" || s == "none" {
		return ""
	}
	return s
}

// jobRecordID reports whether s is a job id as squeue prints it: 42, 42_3, 42_[4-9,11],
// 42_[4-9%2] (a throttled array), 42+1.
func jobRecordID(s string) bool {
	job, rest, _ := strings.Cut(s, "_")
	if !digits(job) {
		if job, rest, _ = strings.Cut(s, "+"); !digits(job) {
			return false
		}
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; !(c >= '0' && c <= '9' || strings.IndexByte("[]-,%", c) >= 0) {
			return false
		}
	}
	return len(rest) <= 256
}

// stateToken reports whether s can be a state as squeue or sinfo print it: printable ASCII,
// no space, at most 64 bytes (down*, idle~, drained@, MIXED+DRAIN, ...).
func stateToken(s string) bool { return s != "" && token(s) }

// token reports whether s is printable ASCII without spaces, at most 64 bytes.
func token(s string) bool {
	if len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// short is s cut to 80 bytes for a message.
func short(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
