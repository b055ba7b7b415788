package slurm

import (
	"errors"
	"strings"
	"testing"
)

// Every parser takes any input without panicking, returns errors that wrap ErrParse, and only
// ever returns plain node names: nothing Slurm prints may become a user@, a :port or an option.

func checkNames(t *testing.T, names []string) {
	t.Helper()
	for _, n := range names {
		if !Name(n) {
			t.Fatalf("node name %q", n)
		}
	}
}

func FuzzParseNodes(f *testing.F) {
	f.Add(testdata(f, "sinfo-all.txt"))
	f.Add(testdata(f, "sinfo-drain.txt"))
	f.Add([]byte("node1|idle|Unknown|Unknown|a|b\nnode9|x|y|z|w|" + nonce + "\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, out []byte) {
		nodes, err := ParseNodes(out, nonce)
		if err != nil && !errors.Is(err, ErrParse) {
			t.Fatalf("error does not wrap ErrParse: %v", err)
		}
		seen := map[string]bool{}
		for _, n := range nodes {
			checkNames(t, []string{n.Name})
			if seen[n.Name] {
				t.Fatalf("%s twice", n.Name)
			}
			seen[n.Name] = true
			if strings.Contains(n.Reason, "|"+nonce+"\n") {
				t.Fatalf("a reason holds a record end: %q", n.Reason)
			}
		}
	})
}

func FuzzParseJobs(f *testing.F) {
	f.Add(testdata(f, "squeue.txt"))
	f.Add([]byte("7_[1-3%2]|PENDING||" + nonce + "\n8+1|RUNNING|gpu[01-02],cpu1|" + nonce + "\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, out []byte) {
		jobs, err := ParseJobs(out, nonce)
		if err != nil && !errors.Is(err, ErrParse) {
			t.Fatalf("error does not wrap ErrParse: %v", err)
		}
		for _, j := range jobs {
			checkNames(t, j.Nodes)
		}
	})
}

func FuzzSplitScript(f *testing.F) {
	f.Add(testdata(f, "via.txt"), false)
	f.Add([]byte("@@gputriage-slurm "+nonce+" begin\n@@gputriage-slurm "+nonce+" end squeue rc=1\n"), true)
	f.Fuzz(func(t *testing.T, out []byte, truncated bool) {
		q := Query{Jobs: []string{"1"}}
		squeue, sinfo, err := SplitScript(q, nonce, out, "", truncated)
		if err != nil {
			if !errors.Is(err, ErrParse) {
				t.Fatalf("error does not wrap ErrParse: %v", err)
			}
			return
		}
		sel, err := Select(q, nonce, squeue, sinfo)
		if err != nil && !errors.Is(err, ErrParse) && !errors.Is(err, ErrQuery) {
			t.Fatalf("error wraps neither ErrParse nor ErrQuery: %v", err)
		}
		for _, n := range sel.Nodes {
			checkNames(t, []string{n.Name})
		}
	})
}
