package slurm

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// The testdata files were recorded from a real Slurm 22.05 (Debian's slurmctld and four
// slurmd on one machine) with the nonce below: node1 drained by gputriage with a reason holding
// '|', node2 drained with a reason that holds a newline and a forged record for node3, node3
// and node4 in two partitions running job 1, node1 running job 2, job 3 pending, job 5 an
// array whose task 1 completed on node2.
const nonce = "0123456789abcdef"

func testdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseNodesRecorded(t *testing.T) {
	nodes, err := ParseNodes(testdata(t, "sinfo-all.txt"), nonce)
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{
		{Name: "node1", State: "draining", Reason: "gputriage: leftover PID 20629 | holds 55 GiB", ReasonUser: "root", ReasonTime: "2026-12-01T00:54:42"},
		// The forged line stays inside node2's reason: it did not end with the nonce.
		{Name: "node2", State: "draining", Reason: "gpu lost\nnode3|drained|root|2026-12-01T00:00:00|forged", ReasonUser: "root", ReasonTime: "2026-12-01T00:58:19"},
		{Name: "node3", State: "allocated"},
		{Name: "node4", State: "allocated"},
	}
	if !reflect.DeepEqual(nodes, want) {
		t.Errorf("got  %+v\nwant %+v", nodes, want)
	}
}

func TestParseJobsRecorded(t *testing.T) {
	jobs, err := ParseJobs(testdata(t, "squeue.txt"), nonce)
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{ID: "5_1", State: "COMPLETED", Nodes: []string{"node2"}},
		{ID: "2", State: "RUNNING", Nodes: []string{"node1"}},
		{ID: "5_2", State: "RUNNING", Nodes: []string{"node2"}},
		{ID: "3", State: "PENDING"},
		{ID: "1", State: "RUNNING", Nodes: []string{"node3", "node4"}},
	}
	if !reflect.DeepEqual(jobs, want) {
		t.Errorf("got  %+v\nwant %+v", jobs, want)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tt := range []struct{ name, out string }{
		{"no end", "node1|idle|Unknown|Unknown|none\n"},
		{"cut short", "node1|idle|Unknown|Unknown|none|" + nonce + "\nnode2|idle"},
		{"another run's nonce", "node1|idle|Unknown|Unknown|none|fedcba9876543210\n"},
		{"user@ in a node name", "root@node1|idle|Unknown|Unknown|none|" + nonce + "\n"},
		{"option as a node name", "-oProxyCommand=x|idle|Unknown|Unknown|none|" + nonce + "\n"},
		{"few fields", "node1|idle|" + nonce + "\n"},
		{"space in a state", "node1|id le|Unknown|Unknown|none|" + nonce + "\n"},
	} {
		if _, err := ParseNodes([]byte(tt.out), nonce); !errors.Is(err, ErrParse) {
			t.Errorf("sinfo %s: err %v, want ErrParse", tt.name, err)
		}
	}
	for _, tt := range []struct{ name, out string }{
		{"node with a port", "1|RUNNING|node1:22|" + nonce + "\n"},
		{"bad range", "1|RUNNING|node[1-|" + nonce + "\n"},
		{"bad id", "x1|RUNNING|node1|" + nonce + "\n"},
		{"four fields", "1|RUNNING|node1|x|" + nonce + "\n"},
	} {
		if _, err := ParseJobs([]byte(tt.out), nonce); !errors.Is(err, ErrParse) {
			t.Errorf("squeue %s: err %v, want ErrParse", tt.name, err)
		}
	}
}

func TestValidate(t *testing.T) {
	good := []Query{
		{Jobs: []string{"42", "43_7"}},
		{Partition: "gpu-h100.a,debug"},
		{Nodes: "node[01-64,70],login_1"},
		{States: "drain,down,reboot^"},
	}
	for _, q := range good {
		if err := q.Validate(); err != nil {
			t.Errorf("%+v: %v", q, err)
		}
	}
	bad := []Query{
		{Jobs: []string{"42;reboot"}}, {Jobs: []string{"-1"}}, {Jobs: []string{""}}, {Jobs: []string{"4_"}},
		{Partition: "-pgpu"}, {Partition: "gpu part"}, {Partition: "$(id)"}, {Partition: "gpu,"},
		{Nodes: "root@node1"}, {Nodes: "node1:2222"}, {Nodes: "node[1-"}, {Nodes: "-n1"}, {Nodes: "node`id`"},
		{States: "drain;id"}, {States: "dr ain"}, {States: "^drain"},
		{Jobs: make([]string, MaxJobs+1)},
	}
	for _, q := range bad {
		if err := q.Validate(); !errors.Is(err, ErrQuery) {
			t.Errorf("%+v: err %v, want ErrQuery", q, err)
		}
	}
}

func TestSelect(t *testing.T) {
	all := &Output{Stdout: testdata(t, "sinfo-all.txt")}
	drain := &Output{Stdout: testdata(t, "sinfo-drain.txt")}
	jobs := &Output{Stdout: testdata(t, "squeue.txt")}
	for _, tt := range []struct {
		name          string
		q             Query
		squeue, sinfo *Output
		nodes         string // names, space separated
		notes         string
		err           string
	}{
		{name: "jobs", q: Query{Jobs: []string{"1", "2"}}, squeue: jobs, sinfo: all, nodes: "node3 node4 node1"},
		{name: "array job", q: Query{Jobs: []string{"5"}}, squeue: jobs, sinfo: all, nodes: "node2"},
		{name: "jobs on drained nodes", q: Query{Jobs: []string{"1", "2"}, States: "drain"}, squeue: jobs, sinfo: drain, nodes: "node1"},
		{name: "drained", q: Query{States: "drain"}, sinfo: drain, nodes: "node1 node2"},
		{name: "partition", q: Query{Partition: "gpu"}, sinfo: &Output{Stdout: testdata(t, "sinfo-gpu.txt")}, nodes: "node3 node4"},
		{name: "pending job noted", q: Query{Jobs: []string{"3", "2"}}, squeue: jobs, sinfo: all, nodes: "node1", notes: "job 3 is PENDING: it has no nodes"},
		{name: "pending job only", q: Query{Jobs: []string{"3"}}, squeue: jobs, sinfo: all, err: "slurm: no node of job 3"},
		{name: "unknown node noted", q: Query{Nodes: "node[1-2,9]"}, sinfo: &Output{Stdout: []byte("node1|idle|Unknown|Unknown|none|" + nonce + "\nnode2|idle|Unknown|Unknown|none|" + nonce + "\n")},
			nodes: "node1 node2", notes: "Slurm has no node node9"},
		{name: "unknown job", q: Query{Jobs: []string{"2", "999"}}, squeue: jobs, sinfo: all, err: "slurm: job 999: Slurm does not know it"},
		{name: "every job unknown", q: Query{Jobs: []string{"999"}}, squeue: &Output{ExitCode: 1, Stderr: "slurm_load_jobs error: Invalid job id specified\n"}, sinfo: all,
			err: "slurm: job 999: Slurm does not know it"},
		{name: "no match", q: Query{Partition: "nope", States: "drain"}, sinfo: &Output{}, err: "slurm: no node in partition nope in state drain"},
		{name: "sinfo fails", q: Query{States: "bogus"}, sinfo: &Output{ExitCode: 1, Stderr: "sinfo: error: Bad state string: \"bogus\"\n"},
			err: `slurm: exit status 1: sinfo: error: Bad state string: "bogus"`},
		{name: "squeue fails", q: Query{Jobs: []string{"1"}}, squeue: &Output{ExitCode: 1, Stderr: "squeue: error: Unable to contact slurm controller\n"}, sinfo: all,
			err: "slurm: exit status 1: squeue: error: Unable to contact slurm controller"},
		{name: "cut short", q: Query{States: "idle"}, sinfo: &Output{Stdout: all.Stdout, Truncated: true}, err: "may be incomplete"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := Select(tt.q, nonce, tt.squeue, tt.sinfo)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, n := range sel.Nodes {
				names = append(names, n.Name)
			}
			if got := strings.Join(names, " "); got != tt.nodes {
				t.Errorf("nodes %q, want %q", got, tt.nodes)
			}
			if got := strings.Join(sel.Notes, "; "); got != tt.notes {
				t.Errorf("notes %q, want %q", got, tt.notes)
			}
		})
	}
}

// TestScript runs the login node's script in a real sh, with squeue and sinfo that print
// their argv: every argument arrives as one word, exactly as validated, and the output splits
// back into both commands' outputs and exit statuses, after a login banner.
func TestScript(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no POSIX sh")
	}
	dir := t.TempDir()
	for name, rc := range map[string]string{"squeue": "0", "sinfo": "3"} {
		fake := "#!/bin/sh\nfor a; do printf '<%s>' \"$a\"; done\nprintf '|" + nonce + "\\n'\necho " + name + " said no >&2\nexit " + rc + "\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	q := Query{Jobs: []string{"42", "43_1"}, Partition: "gpu.a", Nodes: "node[1-2]", States: "drain,down"}
	cmd := exec.Command("sh", "-c", "echo 'Welcome to login1'; exec sh -s")
	cmd.Stdin = strings.NewReader(Script(q, nonce))
	cmd.Env = append(os.Environ(), "PATH="+dir+":/usr/bin:/bin")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	squeue, sinfo, err := SplitScript(q, nonce, out, stderr.String(), false)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	wantQ := "<-h><-t><all><-j><42,43_1><-o><%i|%T|%N|" + nonce + ">|" + nonce + "\n"
	wantI := "<-h><-N><-p><gpu.a><-n><node[1-2]><-t><drain,down><-o><%N|%T|%u|%H|%E|" + nonce + ">|" + nonce + "\n"
	if string(squeue.Stdout) != wantQ || squeue.ExitCode != 0 {
		t.Errorf("squeue got %q rc %d, want %q rc 0", squeue.Stdout, squeue.ExitCode, wantQ)
	}
	if string(sinfo.Stdout) != wantI || sinfo.ExitCode != 3 || !strings.Contains(sinfo.Stderr, "sinfo said no") {
		t.Errorf("sinfo got %q rc %d stderr %q, want %q rc 3", sinfo.Stdout, sinfo.ExitCode, sinfo.Stderr, wantI)
	}
}

func TestSplitScriptRecorded(t *testing.T) {
	// Recorded from Script(Query{Jobs: 1,2, States: drain}) run by sh -s after a banner.
	q := Query{Jobs: []string{"1", "2"}, States: "drain"}
	squeue, sinfo, err := SplitScript(q, nonce, testdata(t, "via.txt"), "", false)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := Select(q, nonce, squeue, sinfo)
	if err != nil {
		t.Fatal(err)
	}
	if len(sel.Nodes) != 1 || sel.Nodes[0].Name != "node1" || !strings.HasPrefix(sel.Nodes[0].Reason, "gputriage: leftover PID 20629") {
		t.Errorf("selection %+v", sel)
	}
	for _, bad := range []string{"", "no begin line\n", "@@gputriage-slurm " + nonce + " begin\nx|" + nonce + "\n",
		"@@gputriage-slurm " + nonce + " begin\n@@gputriage-slurm " + nonce + " end squeue rc=x\n"} {
		if _, _, err := SplitScript(q, nonce, []byte(bad), "", false); !errors.Is(err, ErrParse) {
			t.Errorf("%q: err %v, want ErrParse", bad, err)
		}
	}
}
