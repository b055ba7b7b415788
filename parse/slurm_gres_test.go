package parse

import (
	"encoding/base64"
	"strings"
	"testing"
)

// The node lines carry real `scontrol show node -o` records (Slurm 22.05, testdata/slurm): a
// node with GPU GRES and one without; the gres line, scontrol show config's GresTypes,
// ConstrainDevices and TaskPlugin.
func TestSlurmNodesAndGRES(t *testing.T) {
	enc := func(name, node string) string {
		rec := strings.Replace(strings.TrimSuffix(slurmRecording(t, name), "\n"), "NodeName=node2 ", "NodeName="+node+" ", 1)
		return base64.StdEncoding.EncodeToString([]byte(rec))
	}
	forged := base64.StdEncoding.EncodeToString([]byte("NodeName=node2 Arch=x86_64 Gres=(null) Reason=x Gres=gpu:8"))
	other := base64.StdEncoding.EncodeToString([]byte(strings.Replace(slurmRecording(t, "node-gres.txt"), "NodeName=node2", "NodeName=node9", 1)))
	body := "tz +0000\n4 -\nnode node2 0 " + enc("node-gres.txt", "node2") + "\nnode node3 0 " + enc("node-nogres.txt", "node3") +
		"\nnode node4 1 " + base64.StdEncoding.EncodeToString([]byte("Node node4 not found")) + "\nnode node5 -\nnode node6 0 " + forged +
		"\nnode node7 0 " + other + "\ntimeouts 2 60\ngres gpu,shard no task/affinity,task/cgroup\n"
	sec, err := ParseSlurmSection(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	want := map[string]*bool{"node2": &yes, "node3": &no, "node4": nil, "node5": nil, "node6": nil, "node7": nil}
	if len(sec.Nodes) != len(want) {
		t.Fatalf("%d nodes: %+v", len(sec.Nodes), sec.Nodes)
	}
	for _, n := range sec.Nodes {
		if w := want[n.Name]; (w == nil) != (n.GPUGres == nil) || w != nil && *w != *n.GPUGres {
			t.Errorf("node %s: GPUGres %v, want %v (%+v)", n.Name, n.GPUGres, w, n)
		}
	}
	if n := sec.Nodes[2]; !n.NotFound || !n.Asked {
		t.Errorf("node4: %+v", n)
	}
	if n := sec.Nodes[4]; !n.Ambiguous {
		t.Errorf("node6's forged Gres: %+v", n)
	}
	g := sec.GRES
	if !g.TypesKnown || strings.Join(g.Types, ",") != "gpu,shard" || g.ConstrainDevices == nil || *g.ConstrainDevices || g.TaskCgroup == nil || !*g.TaskCgroup {
		t.Errorf("gres %+v", g)
	}
	if sec.Timeouts.KillWait == nil || len(sec.Jobs) != 1 {
		t.Errorf("jobs and timeouts: %+v", sec)
	}
	for _, tt := range []struct {
		line  string
		known bool
		types string
		bad   bool
	}{
		{"gres (null) - -", true, "", false},
		{"gres - - -", false, "", false},
		{"gres gpu maybe -", false, "", true},
		{"gres gpu", false, "", true},
	} {
		sec, err := ParseSlurmSection(strings.NewReader(tt.line + "\n"))
		if (err != nil) != tt.bad || sec.GRES.TypesKnown != tt.known || strings.Join(sec.GRES.Types, ",") != tt.types {
			t.Errorf("%q: %+v, %v", tt.line, sec.GRES, err)
		}
	}
	if sec, err := ParseSlurmSection(strings.NewReader("node n1 -\nnode n1 -\nnode -x -\nnode a/b -\n")); err == nil || len(sec.Nodes) != 0 || len(sec.Contested) != 1 {
		t.Errorf("twice and bad names: %+v, %v", sec, err)
	}
}

func TestGresHasGPU(t *testing.T) {
	for v, want := range map[string]bool{
		"gpu:2": true, "gpu:a100:4(S:0-1)": true, "gpu": true, "gpu:a100": true, "shard:8,gpu:h100:8(S:0-1)": true,
		"(null)": false, "gpu:0": false, "mps:100": false, "gpus:2": false, "shard:8": false, "gpu:tesla:0,mps:0": false,
	} {
		if got := gresHasGPU(v); got != want {
			t.Errorf("gresHasGPU(%q) = %v, want %v", v, got, want)
		}
	}
}

// The job record of a node without GPU GRES still has a GRES field, empty: read as "no
// GPUs", which means something only where the node has GPU GRES (diagnose checks that).
func TestSlurmJobWithoutGRES(t *testing.T) {
	jobs, _, _, err := ParseSlurm(strings.NewReader(slurmSection("+0000", "1", 0, strings.TrimSuffix(slurmRecording(t, "running-nogres.txt"), "\n"))))
	if err != nil || len(jobs) != 1 || len(jobs[0].Alloc) != 1 || !jobs[0].Alloc[0].GPUsKnown || len(jobs[0].Alloc[0].GPUs) != 0 {
		t.Fatalf("%+v %v", jobs, err)
	}
}
