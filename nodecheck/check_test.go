package nodecheck

import (
	"errors"
	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/snaptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/parse"
)

func codes(ps []Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Code)
	}
	return out
}

// TestCheckNodeScope: the health check judges the whole node; a job's check only its GPUs,
// where any process holding memory is a problem (named once), a device fd alone is not
// (nvidia-persistenced holds every GPU's), and another GPU's leftover is none of its business.
func TestCheckNodeScope(t *testing.T) {
	s := snaptest.CT200()
	r := diagnose.Diagnose(s, time.Time{})
	cases := []struct {
		name  string
		scope Scope
		want  []string
	}{
		{"health check", Scope{}, []string{diagnose.CodeLeftoverProcess, diagnose.CodeMemoryImbalance, diagnose.CodeShmDeletedMapped}},
		{"epilog of GPU 0", Scope{GPUs: []int{0}, RequireFree: true}, []string{diagnose.CodeLeftoverProcess, diagnose.CodeShmDeletedMapped}},
		{"epilog of GPUs 1-7", Scope{GPUs: []int{1, 2, 3, 4, 5, 6, 7}, RequireFree: true}, nil},
		{"a GPU Slurm names and nvidia-smi does not", Scope{GPUs: []int{1}, Missing: []string{"9"}, RequireFree: true}, []string{CodeGPUMissing}},
	}
	for _, c := range cases {
		got := Check(r, c.scope)
		if !slices.Equal(codes(got), c.want) {
			t.Errorf("%s: problems %v, want %v", c.name, codes(got), c.want)
		}
	}
	p := Check(r, Scope{})[0]
	if p.PID != 20629 || p.GPU != 0 || p.MiB != 55286 || p.Program != "sglang.launch_server" {
		t.Errorf("the leftover's culprit is %+v", p)
	}
}

// TestCheckNodeNotFree: with RequireFree, a holder no finding blames (a healthy-looking
// server) still makes the job's GPU not free, and is named with its job.
func TestCheckNodeNotFree(t *testing.T) {
	s := snaptest.CT200()
	r := diagnose.Diagnose(s, time.Time{})
	r.Findings = nil // nothing blamed: only the holder is left
	for i := range r.Processes {
		if r.Processes[i].PID == 20629 {
			r.Processes[i].SlurmJob = "4242"
		}
	}
	got := Check(r, Scope{GPUs: []int{0}, RequireFree: true})
	if len(got) != 1 || got[0].Code != CodeGPUNotFree || got[0].PID != 20629 || got[0].Job != "4242" {
		t.Fatalf("problems %+v, want one gpu-not-free of PID 20629, job 4242", got)
	}
	if want := "PID 20629 (sglang.launch_server) holds 55,286 MiB on GPU 0"; !strings.HasPrefix(got[0].Title, want) {
		t.Errorf("title %q, want it to start with %q", got[0].Title, want)
	}
	if Check(r, Scope{GPUs: []int{0}}) != nil {
		t.Errorf("without RequireFree, a holder nothing blames is no problem")
	}
}

func TestJobGPUs(t *testing.T) {
	s := &parse.Snapshot{GPUs: []parse.GPU{
		{Index: 0, UUID: "GPU-aaaa", MinorNumber: snaptest.IP(2)},
		{Index: 1, UUID: "GPU-bbbb", MinorNumber: snaptest.IP(0)},
		{Index: 2, UUID: "GPU-cccc"}, // minor unknown: taken to be the index
	}}
	cases := []struct {
		slurm, cuda string
		want        []int
		missing     []string
	}{
		{"", "", nil, nil},
		{"2", "0", []int{0}, nil},     // SLURM_JOB_GPUS is minor numbers, and wins
		{"0,2", "", []int{0, 1}, nil}, // minor 0 is GPU 1, minor 2 GPU 0 (first match)
		{"", "0,1", []int{0, 1}, nil}, // CUDA_VISIBLE_DEVICES: indexes
		{"", "GPU-cccc,GPU-aaaa", []int{0, 2}, nil},
		{"0,7", "", []int{1}, []string{"7"}},
		{"", "GPU-dead", []int{}, []string{"GPU-dead"}},
	}
	for _, c := range cases {
		got, missing, err := JobGPUs(s, c.slurm, c.cuda)
		if err != nil || !slices.Equal(got, c.want) || (got == nil) != (c.want == nil) || !slices.Equal(missing, c.missing) {
			t.Errorf("JobGPUs(%q, %q) = %v, %v, %v; want %v, %v", c.slurm, c.cuda, got, missing, err, c.want, c.missing)
		}
	}
	for _, bad := range []string{"0;rm -rf /", "-1", "1e9", "9999999"} {
		if _, _, err := JobGPUs(s, bad, ""); !errors.Is(err, ErrBadGPUList) {
			t.Errorf("JobGPUs(%q): err %v, want ErrBadGPUList", bad, err)
		}
	}
}

// TestDrainReason: the reason names the culprit, stays printable ASCII and within 80 bytes
// whatever the host's program name holds, and counts only other culprits as "more".
func TestDrainReason(t *testing.T) {
	leftover := Problem{Code: diagnose.CodeLeftoverProcess, Severity: diagnose.Error, PID: 20629, Program: "sglang.launch_server", MiB: 55286, GPU: 0}
	cases := []struct {
		name     string
		problems []Problem
		want     string
	}{
		{"none", nil, ""},
		{"leftover", []Problem{leftover}, "gputriage: leftover-process (sglang.launch_server) PID 20629 55286 MiB GPU 0"},
		{"same culprit twice, another", []Problem{leftover, {Code: diagnose.CodeShmDeletedMapped, PID: 20629}, {Code: diagnose.CodeShmFull, GPU: -1}},
			"gputriage: leftover-process (sglang.launch_se) PID 20629 55286 MiB GPU 0 +1 more"}, // 80 bytes
		{"job", []Problem{{Code: CodeGPUNotFree, PID: 7, Program: "train.py", MiB: 10, GPU: 3, Job: "4242"}},
			"gputriage: gpu-not-free (train.py) PID 7 10 MiB GPU 3 job 4242"},
		{"no culprit", []Problem{{Code: diagnose.CodeSMIFailed, GPU: -1}}, "gputriage: smi-failed"},
		{"hostile program", []Problem{{Code: diagnose.CodeLeftoverProcess, PID: 1, GPU: 0, MiB: 1,
			Program: "\x1b]0;pwned\x07 evil\"name reason=x\nstate=resume é"}},
			"gputriage: leftover-process (0pwned_evilname_reasonxs) PID 1 1 MiB GPU 0"},
	}
	for _, c := range cases {
		if got := DrainReason(c.problems); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	long := leftover
	long.Program = strings.Repeat("x", 200)
	long.Job = strings.Repeat("9", 40)
	long.PID, long.MiB = 4194304, 1<<40
	ps := []Problem{long, {Code: diagnose.CodeShmFull}, {Code: diagnose.CodeGhostMemory}, {Code: diagnose.CodeShmStale}}
	got := DrainReason(ps)
	if len(got) > 80 || !strings.HasPrefix(got, "gputriage: leftover-process") || !strings.Contains(got, "PID 4194304") {
		t.Errorf("long: %q (%d bytes)", got, len(got))
	}
	for _, r := range got {
		if r < 0x20 || r > 0x7e {
			t.Errorf("long: byte %q in %q", r, got)
		}
	}
}

// A node check counts gpu-outside-allocation as a problem (and so drains for it) only when
// told to; otherwise it is a note. In a Prolog or Epilog, a GPU of the job that such a
// process holds is still not free.
func TestNodeCheckOutsideAllocation(t *testing.T) {
	res := diagnose.Diagnose(snaptest.SlurmHost(3, snaptest.RunningJob("node2", 0, 1)), snaptest.RefTime)
	if p := Check(res, Scope{}); len(p) != 0 {
		t.Errorf("problems without Unconstrained: %+v", p)
	}
	notes := Notes(res, Scope{})
	if len(notes) != 1 || notes[0].Code != diagnose.CodeGPUOutsideAllocation || notes[0].PID != 20629 || notes[0].Job != "4242" {
		t.Errorf("notes %+v", notes)
	}
	p := Check(res, Scope{Unconstrained: true})
	if len(p) != 1 || len(Notes(res, Scope{Unconstrained: true})) != 0 {
		t.Fatalf("with Unconstrained: problems %+v", p)
	}
	if r, want := DrainReason(p), "gputriage: gpu-outside-allocation (train.py) PID 20629 56320 MiB GPU 3 job 4242"; r != want {
		t.Errorf("drain reason %q, want %q", r, want)
	}
	prolog := Check(res, Scope{GPUs: []int{3}, RequireFree: true})
	if len(prolog) != 1 || prolog[0].Code != CodeGPUNotFree || prolog[0].PID != 20629 {
		t.Errorf("prolog of a job given GPU 3: %+v", prolog)
	}
	if p := Check(res, Scope{GPUs: []int{2}, RequireFree: true}); len(p) != 0 {
		t.Errorf("prolog of a job given GPU 2: %+v", p)
	}
}
