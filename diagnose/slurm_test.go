package diagnose

import (
	"github.com/gputriage/gputriage/internal/snaptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/parse"
)

var (
	slurmHost  = snaptest.SlurmHost
	withGres   = snaptest.WithGres
	runningJob = snaptest.RunningJob
)

func endedJob(state string, ago time.Duration) parse.SlurmJob {
	j := runningJob("node2")
	j.State, j.Alloc = state, []parse.SlurmAlloc{{Nodes: "node2", GPUsKnown: true}}
	end := refTime.Add(-ago)
	j.EndTime = &end
	return j
}

// A COMPLETING job's process is a leftover once the job has been completing past the host's
// KillWait + UnkillableStepTimeout (+ 30 s): sooner on a host with short ones, later on one
// with long ones; Slurm's defaults (two minutes in all) where the probe could not read them.
func TestSlurmCompletingByHostTimeouts(t *testing.T) {
	d := func(v time.Duration) *time.Duration { return &v }
	tests := []struct {
		name     string
		timeouts parse.SlurmTimeouts
		ago      time.Duration
		leftover bool
	}{
		{"short timeouts, past them", parse.SlurmTimeouts{KillWait: d(2 * time.Second), UnkillableStep: d(5 * time.Second)}, 60 * time.Second, true},
		{"short timeouts, within them", parse.SlurmTimeouts{KillWait: d(2 * time.Second), UnkillableStep: d(5 * time.Second)}, 30 * time.Second, false},
		{"long timeouts, within them", parse.SlurmTimeouts{KillWait: d(5 * time.Minute), UnkillableStep: d(10 * time.Minute)}, 10 * time.Minute, false},
		{"long timeouts, past them", parse.SlurmTimeouts{KillWait: d(5 * time.Minute), UnkillableStep: d(10 * time.Minute)}, 16 * time.Minute, true},
		{"unknown: defaults, within", parse.SlurmTimeouts{}, 110 * time.Second, false},
		{"unknown: defaults, past", parse.SlurmTimeouts{}, 130 * time.Second, true},
		{"KillWait only", parse.SlurmTimeouts{KillWait: d(10 * time.Minute)}, 5 * time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := slurmHost(0, endedJob("COMPLETING", tt.ago))
			s.SlurmTimeouts = tt.timeouts
			f := findCode(Diagnose(s, refTime).Findings, CodeLeftoverProcess)
			if (f != nil) != tt.leftover {
				t.Errorf("completing for %v: leftover %v, want %v", tt.ago, f != nil, tt.leftover)
			}
		})
	}
}

func TestSlurmVerdicts(t *testing.T) {
	const healthy = ""
	tests := []struct {
		name   string
		snap   *parse.Snapshot
		reason string // a reason's words, or healthy
		fix    string // the first fix command
	}{
		{"running job on its own GPU", slurmHost(0, runningJob("node2", 0, 1)), healthy, ""},
		{"running on two nodes, this one among them", slurmHost(1, runningJob("node[1-2]", 1)), healthy, ""},
		{"completing within KillWait", slurmHost(0, endedJob("COMPLETING", 20*time.Second)), healthy, ""},
		{"cancelled 2 h ago", slurmHost(0, endedJob("CANCELLED", 2*time.Hour)),
			"Slurm job 4242 of alice ended 2h00m ago (CANCELLED); its PID 20629 still holds 56,320 MiB on GPU 0", "kill 20629"},
		{"completing past KillWait", slurmHost(0, endedJob("COMPLETING", 10*time.Minute)),
			"Slurm job 4242 of alice ended 10m ago and is still completing", "kill 20629"},
		{"purged", slurmHost(0, parse.SlurmJob{Purged: true, ExitCode: ip(1)}),
			"Slurm job 4242 ended long enough ago that Slurm no longer knows it", "kill 20629"},
		{"requeued: pending again", slurmHost(0, func() parse.SlurmJob { j := runningJob(""); j.State, j.Alloc = "PENDING", nil; return j }()),
			"Slurm job 4242 of alice (PENDING) no longer runs on node node2", "kill 20629"},
		{"runs on other nodes only", slurmHost(0, runningJob("node[3-4]", 0)),
			"Slurm job 4242 of alice (RUNNING) no longer runs on node node2", "kill 20629"},
		// A running job's process on a GPU it was not allocated is no leftover (see
		// TestSlurmOutsideAllocation).
		{"a GPU the job was not allocated", slurmHost(3, runningJob("node2", 0, 1)), healthy, ""},
		// Nothing is read from a record whose keys came twice: no verdict either way.
		{"ambiguous record", slurmHost(3, parse.SlurmJob{Ambiguous: true}), healthy, ""},
		{"Slurm not asked", slurmHost(3, func() parse.SlurmJob { j := runningJob("node2", 0); return j }()), "not allocated", "kill 20629"},
	}
	tests[len(tests)-1].snap.SlurmJobs[0].Asked = false
	tests[len(tests)-1].reason, tests[len(tests)-1].fix = healthy, ""
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Diagnose(tt.snap, refTime)
			f := findCode(res.Findings, CodeLeftoverProcess)
			if tt.reason == healthy {
				if f != nil {
					t.Fatalf("blamed a healthy job's process:\n%s", dump(res.Findings))
				}
				return
			}
			if f == nil {
				t.Fatalf("no leftover:\n%s", dump(res.Findings))
			}
			if !strings.Contains(f.Explanation, tt.reason) {
				t.Errorf("explanation lacks %q:\n%s", tt.reason, f.Explanation)
			}
			if len(f.Fix) == 0 || f.Fix[0] != tt.fix {
				t.Errorf("fix %q, want first %q", f.Fix, tt.fix)
			}
			for _, c := range f.Fix {
				if strings.Contains(c, "scancel") {
					t.Errorf("scancel for a job that ended or a stray process: %q", c)
				}
			}
		})
	}
}

// A leftover of a job Slurm still runs (here: stopped) is stopped through the job; without
// Slurm's word the cgroup is the evidence, as before.
func TestSlurmCancelOnlyForRunningJob(t *testing.T) {
	for _, asked := range []bool{true, false} {
		s := slurmHost(0, runningJob("node2", 0))
		s.SlurmJobs[0].Asked = asked
		s.Processes[0].State = "T"
		f := findCode(Diagnose(s, refTime).Findings, CodeLeftoverProcess)
		if f == nil || f.Fix[0] != "scancel -- 4242" {
			t.Errorf("asked %v: %v", asked, f)
		}
	}
	s := slurmHost(0, endedJob("CANCELLED", time.Hour))
	s.Processes[0].State = "T"
	f := findCode(Diagnose(s, refTime).Findings, CodeLeftoverProcess)
	if f == nil || !strings.HasPrefix(f.Fix[0], "kill 20629") {
		t.Errorf("ended: %v", f)
	}
}

// Without a Slurm cgroup (proctrack/linuxproc) the slurmstepd ancestor names the job, and a
// leftover of a job Slurm still runs is stopped through that job as well, the scancel freeing
// what its processes hold; a process whose ancestors name no job gets its PID.
func TestSlurmCancelByStepdAncestor(t *testing.T) {
	s := slurmHost(0, runningJob("node2", 0))
	s.Processes[0].State = "T"
	s.Processes[0].Cgroup = parse.Cgroup{Path: "/"}
	s.Ancestors = []parse.Ancestor{{PID: 20600, PPID: 1, UID: 0, SlurmJob: "4242", SlurmStep: "0"}}
	f := findCode(Diagnose(s, refTime).Findings, CodeLeftoverProcess)
	if f == nil || f.Fix[0] != "scancel -- 4242" {
		t.Fatalf("%v", f)
	}
	if a := f.Actions[0]; a.Kind != ActionCancelJob || a.Target != "4242" || !slices.Equal(a.PIDs, []int{20629}) || a.Frees.GPUMiB[0] != 56_320 {
		t.Errorf("action %+v", a)
	}
	s.Ancestors[0].SlurmJob, s.Ancestors[0].SlurmStep = "", ""
	if f := findCode(Diagnose(s, refTime).Findings, CodeLeftoverProcess); f == nil || !strings.HasPrefix(f.Fix[0], "kill 20629") {
		t.Errorf("no job named: %v", f)
	}
}

// Without a Slurm cgroup (proctrack/linuxproc), the slurmstepd ancestor names the job; one of
// a single-slurmd host is matched to the job's only node.
func TestSlurmStepdAncestor(t *testing.T) {
	s := withGres(slurmHost(3, runningJob("gpu7", 0)), "gpu:4", "gpu7", "gpu8")
	s.Processes[0].Cgroup = parse.Cgroup{Path: "/"}
	s.Ancestors = []parse.Ancestor{{PID: 20590, PPID: 1, UID: 0, SlurmJob: "4242", SlurmStep: "0"}, {PID: 20600, PPID: 20590, UID: 1000}} // sorted by PID, as parse gives them
	f := findCode(Diagnose(s, refTime).Findings, CodeGPUOutsideAllocation)
	if f == nil || !strings.Contains(f.Explanation, "was not allocated GPU 3 on node gpu7") {
		t.Fatalf("%v", f)
	}
	// On several nodes, the host's own name says which one it is; without it, nothing.
	s = withGres(slurmHost(3, runningJob("gpu[7-8]", 0)), "gpu:4", "gpu7", "gpu8")
	s.Processes[0].Cgroup = parse.Cgroup{Path: "/"}
	s.Ancestors = []parse.Ancestor{{PID: 20600, PPID: 1, UID: 0, SlurmJob: "4242", SlurmStep: "0"}}
	if f := findCode(Diagnose(s, refTime).Findings, CodeGPUOutsideAllocation); f != nil {
		t.Errorf("node unknown, yet: %s", f.Explanation)
	}
	s.Host.Hostname = "gpu8.cluster"
	if f := findCode(Diagnose(s, refTime).Findings, CodeGPUOutsideAllocation); f == nil {
		t.Errorf("node gpu8: no finding")
	}
}

func TestSlurmReasonCodes(t *testing.T) {
	h := newHost(slurmHost(0, endedJob("CANCELLED", 2*time.Hour)), refTime)
	rs := h.slurmReasons(&h.procs[0])
	if len(rs) != 1 || rs[0].Code != ReasonJobEnded || !rs[0].Strong || rs[0].Job != "4242" || rs[0].Age != 2*time.Hour {
		t.Errorf("%+v", rs)
	}
	a, ok := h.slurmAction(&h.procs[0])
	if !ok || a.Kind != ActionKill || a.Target != "20629" || a.Frees.TotalGPUMiB() != 56_320 {
		t.Errorf("%+v", a)
	}
	h = newHost(slurmHost(2, runningJob("node2", 0)), refTime)
	if rs := h.slurmReasons(&h.procs[0]); len(rs) != 0 {
		t.Errorf("a running job's process on another GPU is no leftover: %+v", rs)
	}
	r, ok := h.outsideAllocation(&h.procs[0])
	if !ok || r.Code != ReasonGPUNotAllocated || len(r.GPUs) != 1 || r.GPUs[0] != 2 || r.Job != "4242" || r.Node != "node2" ||
		r.ConstrainDevices == nil || *r.ConstrainDevices {
		t.Errorf("%+v", r)
	}
}

// A running job's process on a GPU its job was not allocated: on a node with GPU GRES, a
// gpu-outside-allocation warning about that job, worded as such (no leftover, no kill, no
// scancel); on a node without GPU GRES, or where Slurm's GRES could not be read, nothing:
// Slurm allocates no GPUs there, and its GPU use is normal.
func TestSlurmOutsideAllocation(t *testing.T) {
	const none = ""
	bare := func(s *parse.Snapshot) *parse.Snapshot { s.SlurmNodes, s.SlurmGRES = nil, parse.SlurmGRES{}; return s }
	noGPUType := func(s *parse.Snapshot) *parse.Snapshot {
		s.SlurmNodes, s.SlurmGRES = nil, parse.SlurmGRES{Types: []string{"shard"}, TypesKnown: true}
		return s
	}
	constrained := func(s *parse.Snapshot) *parse.Snapshot {
		yes := true
		s.SlurmGRES.ConstrainDevices = &yes
		return s
	}
	noTask := func(s *parse.Snapshot) *parse.Snapshot {
		no := false
		s.SlurmGRES.TaskCgroup = &no
		return s
	}
	// The real no-GRES record: "GRES=" on each node's line, read as "no GPUs".
	noJobGres := runningJob("node2")
	tests := []struct {
		name string
		snap *parse.Snapshot
		want string // words of the finding, or none
	}{
		{"GRES, devices not constrained", slurmHost(3, runningJob("node2", 0, 1)),
			"devices are not constrained (ConstrainDevices=no in cgroup.conf"},
		{"GRES, no task/cgroup", noTask(constrained(slurmHost(3, runningJob("node2", 0, 1)))), "TaskPlugin lacks task/cgroup"},
		{"GRES, constrained", constrained(slurmHost(3, runningJob("node2", 0, 1))), "it may have left its job's cgroup"},
		{"GRES, the job asked for no GPU", slurmHost(1, noJobGres), "was not allocated GPU 1 on node node2"},
		{"no GPU GRES on the node", withGres(slurmHost(3, runningJob("node2", 0, 1)), "(null)", "node2"), none},
		{"no GPU GRES, the job has none", withGres(slurmHost(1, noJobGres), "(null)", "node2"), none},
		{"GresTypes without gpu", noGPUType(slurmHost(1, noJobGres)), none},
		{"Slurm's GRES unknown", bare(slurmHost(1, noJobGres)), none},
		{"GRES on other nodes only", withGres(slurmHost(1, noJobGres), "gpu:4", "node1", "node3"), none},
		{"a GPU of its own", slurmHost(0, runningJob("node2", 0, 1)), none},
		// A share of a GPU (mps, shard): parse cannot tell which GPU.
		{"GRES, a share of GPUs", slurmHost(3, func() parse.SlurmJob { j := runningJob("node2"); j.Alloc[0].GPUsKnown = false; return j }()), none},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Diagnose(tt.snap, refTime)
			for _, f := range res.Findings {
				if f.Severity >= Warning && f.Code != CodeGPUOutsideAllocation {
					t.Errorf("%s:\n%s", f.Code, dump(res.Findings))
				}
			}
			f := findCode(res.Findings, CodeGPUOutsideAllocation)
			if tt.want == none {
				if f != nil {
					t.Fatalf("a job's GPU use called outside its allocation:\n%s", dump(res.Findings))
				}
				return
			}
			if f == nil {
				t.Fatalf("no gpu-outside-allocation:\n%s", dump(res.Findings))
			}
			all := strings.Join(append(append([]string{f.Title, f.Explanation}, f.Evidence...), f.Fix...), "\n")
			if f.Severity != Warning || !slices.Equal(f.PIDs, []int{20629}) || !strings.Contains(all, tt.want) ||
				!strings.Contains(f.Title, "Slurm job 4242 of alice uses GPU") {
				t.Errorf("want a warning on PID 20629 saying %q:\n%s", tt.want, dump(res.Findings))
			}
			for _, bad := range []string{"left over", "leftover from", "abandoned", "kill", "scancel"} {
				if strings.Contains(all, bad) {
					t.Errorf("the finding says %q:\n%s", bad, all)
				}
			}
		})
	}
	// Without GPU GRES, the job's busy finding says why its GPU use is its own business.
	res := Diagnose(withGres(slurmHost(1, noJobGres), "(null)", "node2"), refTime)
	if f := findCode(res.Findings, CodeGPUBusy); f == nil || !strings.Contains(strings.Join(f.Evidence, "\n"), "GPUs are not configured as GRES on node node2") {
		t.Errorf("no word of GRES:\n%s", dump(res.Findings))
	}
	for _, f := range res.Findings {
		if strings.Contains(f.Title+f.Explanation+strings.Join(f.Evidence, " "), "allocated GPU") {
			t.Errorf("words of allocation on a node without GRES:\n%s", dump(res.Findings))
		}
	}
}
