package slurm

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// The commands a query runs. Their records end with "|NONCE\n": no field but the last (a
// drain reason, which an admin or a health check wrote and which may hold '|' and newlines)
// comes from anyone but Slurm, and the nonce is drawn afresh for each run, so no reason can
// end a record early or forge one.
const (
	// squeue: job id, state, the nodes it runs or ran on ("" while pending). -t all keeps
	// jobs that ended but that slurmctld still holds (MinJobAge, 300 s by default).
	jobFormat = "%i|%T|%N|"
	// sinfo -N: one line per node and partition: name, state, who set the reason and when,
	// and the reason (last: it is the one free-text field).
	nodeFormat = "%N|%T|%u|%H|%E|"
)

// SqueueArgs is the argv (squeue first) that lists q's jobs; nil when q names no job.
func (q Query) SqueueArgs(nonce string) []string {
	if len(q.Jobs) == 0 {
		return nil
	}
	return []string{"squeue", "-h", "-t", "all", "-j", strings.Join(q.Jobs, ","), "-o", jobFormat + nonce}
}

// SinfoArgs is the argv (sinfo first) that lists the nodes q's partition, nodes and states
// select, with their states and reasons; every node when q gives none of them.
func (q Query) SinfoArgs(nonce string) []string {
	args := []string{"sinfo", "-h", "-N"}
	if q.Partition != "" {
		args = append(args, "-p", q.Partition)
	}
	if q.Nodes != "" {
		args = append(args, "-n", q.Nodes)
	}
	if q.States != "" {
		args = append(args, "-t", q.States)
	}
	return append(args, "-o", nodeFormat+nonce)
}

// ValidNonce reports whether a nonce can end records: 16 to 64 lower-case hex digits.
func ValidNonce(nonce string) bool {
	if len(nonce) < 16 || len(nonce) > 64 {
		return false
	}
	for i := 0; i < len(nonce); i++ {
		if c := nonce[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// marker starts the lines the login node's script prints around each command's output.
const marker = "@@gputriage-slurm "

// Script is the POSIX sh script a login node runs (fed to `sh -s` on stdin, so the login
// shell's own syntax does not matter): squeue when q names jobs, then sinfo, each followed by a
// line with its exit status. Every argument was validated by Query.Validate and is quoted
// besides; the nonce is hex.
func Script(q Query, nonce string) string {
	var b strings.Builder
	b.WriteString("LC_ALL=C; export LC_ALL\n")
	fmt.Fprintf(&b, "echo '%s%s begin'\n", marker, nonce)
	for _, argv := range [][]string{q.SqueueArgs(nonce), q.SinfoArgs(nonce)} {
		if argv == nil {
			continue
		}
		quoted := make([]string, len(argv))
		for i, a := range argv {
			quoted[i] = shellQuote(a)
		}
		fmt.Fprintf(&b, "%s </dev/null\necho \"%s%s end %s rc=$?\"\n", strings.Join(quoted, " "), marker, nonce, argv[0])
	}
	return b.String()
}

// shellQuote single-quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Output is what one command printed: its standard output, bounded by the caller, the end of
// its standard error (for messages), and its exit status.
type Output struct {
	Stdout   []byte
	Stderr   string
	ExitCode int
	// Truncated: Stdout reached the caller's bound, so the list may be incomplete.
	Truncated bool
}

// SplitScript takes the login node's output of Script apart into the commands' outputs
// (squeue nil when q names no job). What a login shell printed before the script's first line
// (a banner) is dropped. stderr is the session's, shared by both commands.
func SplitScript(q Query, nonce string, stdout []byte, stderr string, truncated bool) (squeue, sinfo *Output, err error) {
	begin := marker + nonce + " begin\n"
	i := bytes.Index(stdout, []byte(begin))
	if i < 0 {
		return nil, nil, fmt.Errorf("%w: the login node did not run the query script (no start line in %d bytes of output)", ErrParse, len(stdout))
	}
	rest := stdout[i+len(begin):]
	next := func(cmd string) (*Output, error) {
		end := marker + nonce + " end " + cmd + " rc="
		j := bytes.Index(rest, []byte(end))
		if j < 0 {
			if truncated {
				return &Output{Stdout: rest, Stderr: stderr, ExitCode: -1, Truncated: true}, nil
			}
			return nil, fmt.Errorf("%w: %s: the output ends before its exit status", ErrParse, cmd)
		}
		o := &Output{Stdout: rest[:j], Stderr: stderr}
		line, tail, ok := bytes.Cut(rest[j+len(end):], []byte("\n"))
		rc, err := strconv.Atoi(string(line))
		if !ok || err != nil || !digits(string(line)) || rc > 255 {
			return nil, fmt.Errorf("%w: %s: bad exit status line %q", ErrParse, cmd, line)
		}
		o.ExitCode, rest = rc, tail
		return o, nil
	}
	if len(q.Jobs) > 0 {
		if squeue, err = next("squeue"); err != nil || squeue.Truncated {
			return squeue, nil, err
		}
	}
	sinfo, err = next("sinfo")
	return squeue, sinfo, err
}
