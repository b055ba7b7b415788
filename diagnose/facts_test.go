package diagnose

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/parse"
)

func reasonCodes(rs []Reason) []ReasonCode {
	var out []ReasonCode
	for _, r := range rs {
		out = append(out, r.Code)
	}
	return out
}

// composedFix is what Fix must be: every action's steps, then the checks, each line once.
func composedFix(f *Finding) []string {
	var out []string
	for _, a := range f.Actions {
		for _, c := range a.Steps {
			out = append(out, commandWords(c))
		}
	}
	for _, c := range f.Checks {
		out = append(out, commandWords(c))
	}
	return slices.Compact(out)
}

// The incident: one leftover SGLang server is named by three findings, and each suggests the
// same kill, with the same identity and the same impact, so a report can show it once and
// rank it by what it frees.
func TestFactsCT200(t *testing.T) {
	r := Diagnose(ct200(), refTime)
	left, imb, shm := findCode(r.Findings, CodeLeftoverProcess), findCode(r.Findings, CodeMemoryImbalance), findCode(r.Findings, CodeShmDeletedMapped)
	if left == nil || imb == nil || shm == nil {
		t.Fatalf("missing findings:\n%s", dump(r.Findings))
	}
	if got, want := reasonCodes(left.Reasons), []ReasonCode{ReasonShmDeleted, ReasonModelPathGone, ReasonSessionEnded, ReasonOrphaned}; !slices.Equal(got, want) {
		t.Errorf("reasons %v, want %v", got, want)
	}
	for i, rs := range left.Reasons {
		if rs.PID != 20629 || rs.Strong != (i < 2) {
			t.Errorf("reason %d: %+v", i, rs)
		}
	}
	if p := left.Reasons[0].Paths; !slices.Equal(p, []string{"/dev/shm/Qwen3.6-27B/model-00001-of-00012.safetensors"}) {
		t.Errorf("shm-deleted paths %q (the NCCL segment is unlinked by design, not evidence)", p)
	}
	if left.Reasons[2].Unit != "session-4.scope" {
		t.Errorf("session-ended unit %q", left.Reasons[2].Unit)
	}
	// The words are made of the reasons: each reason line and the explanation name them all.
	for _, rs := range left.Reasons {
		w := reasonWords(rs)
		if !slices.Contains(left.Evidence, "reason: "+w) || !strings.Contains(left.Explanation, w) {
			t.Errorf("reason %s not in the words: %q", rs.Code, w)
		}
	}

	kill := Action{Kind: ActionKill, Target: "20629", PIDs: []int{20629},
		Frees: Impact{GPUMiB: map[int]int64{0: 55286}, ShmBytes: 4_563_402_752},
		Steps: []Command{{Line: "kill 20629"}, {Line: "sleep 30; kill -0 20629 2>/dev/null && kill -9 20629"}}}
	for _, f := range []*Finding{left, imb, shm} {
		if !reflect.DeepEqual(f.Actions, []Action{kill}) {
			t.Errorf("%s actions %+v, want %+v", f.Code, f.Actions, kill)
		}
		if want := composedFix(f); !slices.Equal(f.Fix, want) {
			t.Errorf("%s fix %q, want it composed from its actions and checks: %q", f.Code, f.Fix, want)
		}
	}
	checks := map[*Finding]string{left: verifyGPU.Line, imb: verifyGPUFree.Line, shm: "df -h /dev/shm"}
	for f, line := range checks {
		if !reflect.DeepEqual(f.Checks, []Command{{Line: line}}) {
			t.Errorf("%s checks %+v, want %q", f.Code, f.Checks, line)
		}
	}
	wantShm := []ShmFile{{Path: "/dev/shm/Qwen3.6-27B/model-00001-of-00012.safetensors", Bytes: i64(4_563_402_752),
		Deleted: true, Mapped: true, PIDs: []int{20629}}}
	if !reflect.DeepEqual(shm.Shm, wantShm) {
		t.Errorf("shm files %+v, want %+v", shm.Shm, wantShm)
	}
}

// A deleted file that another live process keeps too stays in RAM when one of them exits:
// the kill frees its GPU memory, not the file's bytes.
func TestFactsSharedDeletedFileFreesNothing(t *testing.T) {
	s := ct200()
	other := proc(20700, 1, "S", 0, "root", time.Hour, "python3", "reader.py")
	other.Shm = []parse.ShmUse{{Path: "/dev/shm/Qwen3.6-27B/model-00001-of-00012.safetensors", Deleted: true, Open: true, Bytes: i64(4_563_402_752)}}
	s.Processes = append(s.Processes, other)
	r := Diagnose(s, refTime)
	left := findCode(r.Findings, CodeLeftoverProcess)
	if left == nil || len(left.Actions) != 1 {
		t.Fatalf("no leftover action:\n%s", dump(r.Findings))
	}
	if fr := left.Actions[0].Frees; fr.ShmBytes != 0 || fr.GPUMiB[0] != 55286 {
		t.Errorf("frees %+v, want GPU 0's 55286 MiB and no /dev/shm bytes", fr)
	}
	for _, f := range r.Findings {
		if f.Code == CodeShmDeletedMapped && f.PIDs[0] == 20629 {
			if got := f.Shm[0].PIDs; !slices.Equal(got, []int{20629, 20700}) {
				t.Errorf("keepers %v, want the finding's process first, then the other", got)
			}
		}
	}
}

// Each owner gets its own kind of action, named by what its commands act on, and a comment
// that used to live inside a command is the command's note.
func TestFactsActionKinds(t *testing.T) {
	zombie := func() *parse.Snapshot {
		parent := proc(2999, 1, "S", 1000, "bob", 5*time.Hour, "bash", "train.sh")
		parent.Cgroup = sessionCgroup(9)
		z := proc(3001, 2999, "Z", 1000, "bob", 4*time.Hour, "python3", "train.py")
		z.Cgroup = sessionCgroup(9)
		s := withLeftover(3001, 1, 2_000, z)
		s.Processes = append(s.Processes, parent)
		return s
	}
	docker := func() *parse.Snapshot {
		p := proc(5000, 4990, "S", 0, "root", 30*time.Hour, "python3", "serve.py")
		p.Cgroup = parse.Cgroup{Unit: "docker-b708f3d89365aa.scope", ContainerID: "b708f3d89365aa", Runtime: "docker"}
		deletedWeights(&p)
		return withLeftover(5000, 3, 20_000, p)
	}
	slurm := func() *parse.Snapshot {
		p := proc(6000, 5990, "T", 1001, "carol", 2*time.Hour, "python", "pretrain.py")
		p.Cgroup = parse.Cgroup{Unit: "slurmstepd.scope", SlurmJob: "12345", SlurmStep: "0"}
		return withLeftover(6000, 4, 30_000, p)
	}
	pod := func() *parse.Snapshot {
		p := proc(7000, 6990, "T", 0, "root", 2*time.Hour, "python", "serve.py")
		p.Cgroup = parse.Cgroup{PodUID: "0f1e2d3c-aaaa-bbbb-cccc-111122223333", ContainerID: "abc", Runtime: "containerd"}
		return withLeftover(7000, 5, 10_000, p)
	}
	unit := func() *parse.Snapshot {
		p := proc(8000, 1, "S", 998, "vllm", 3*time.Hour, "/opt/vllm/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/gone")
		p.Cgroup = serviceCgroup("vllm.service")
		p.ModelPaths = []parse.PathCheck{{Path: "/models/gone", Exists: false}}
		return withLeftover(8000, 2, 60_000, p,
			parse.Unit{Name: "vllm.service", LoadState: "loaded", ActiveState: "failed", SubState: "failed", Result: "exit-code"})
	}
	tests := []struct {
		name   string
		snap   func() *parse.Snapshot
		kind   ActionKind
		target string
		pids   []int
		gpu    int
		mib    int64
		notes  map[string]string // step line -> its note
		reason ReasonCode
	}{
		{"zombie", zombie, ActionReapZombie, "3001", []int{2999, 3001}, 1, 2_000,
			map[string]string{"kill 2999": "the parent, which should have reaped 3001", "ps -L -o pid,lwp,stat,wchan:32,cmd -p 3001": "threads in state D are stuck in the driver"},
			ReasonZombie},
		{"docker", docker, ActionStopContainer, "docker:b708f3d89365", []int{5000}, 3, 20_000,
			map[string]string{"docker stop -- b708f3d89365": ""}, ReasonShmDeleted},
		{"slurm", slurm, ActionCancelJob, "12345", []int{6000}, 4, 30_000, map[string]string{"scancel -- 12345": ""}, ReasonStopped},
		{"pod", pod, ActionDeletePod, "0f1e2d3c-aaaa-bbbb-cccc-111122223333", []int{7000}, 5, 10_000,
			map[string]string{"kubectl delete pod -n NAMESPACE -- NAME": "NAMESPACE and NAME from the line above"}, ReasonStopped},
		{"failed unit", unit, ActionKill, "8000", []int{8000}, 2, 60_000, map[string]string{"kill 8000": ""}, ReasonUnitStopped},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Diagnose(tc.snap(), refTime)
			f := findCode(r.Findings, CodeLeftoverProcess)
			if f == nil || len(f.Actions) != 1 {
				t.Fatalf("want one leftover action:\n%s", dump(r.Findings))
			}
			a := f.Actions[0]
			if a.Kind != tc.kind || a.Target != tc.target || !slices.Equal(a.PIDs, tc.pids) || a.Frees.GPUMiB[tc.gpu] != tc.mib {
				t.Errorf("action %+v, want %s %q PIDs %v freeing %d MiB on GPU %d", a, tc.kind, tc.target, tc.pids, tc.mib, tc.gpu)
			}
			for line, note := range tc.notes {
				i := slices.IndexFunc(a.Steps, func(c Command) bool { return c.Line == line })
				if i < 0 || a.Steps[i].Note != note {
					t.Errorf("steps %+v, want %q with note %q", a.Steps, line, note)
				}
			}
			for _, c := range a.Steps {
				if strings.Contains(c.Line, "#") {
					t.Errorf("a comment inside a command line: %q", c.Line)
				}
			}
			if !slices.Contains(reasonCodes(f.Reasons), tc.reason) {
				t.Errorf("reasons %v, want %s", reasonCodes(f.Reasons), tc.reason)
			}
			if want := composedFix(f); !slices.Equal(f.Fix, want) {
				t.Errorf("fix %q, want %q", f.Fix, want)
			}
		})
	}
}

// Stale /dev/shm entries are removed by one action each, which gives back their size; the
// same removal suggested by shm-full is the same action.
func TestFactsShm(t *testing.T) {
	s := ct200()
	old := refTime.Add(-50 * time.Hour)
	s.Shm = parse.Shm{SizeBytes: i64(64 * gib), UsedBytes: i64(63 * gib), AvailBytes: i64(gib / 2), Listed: true,
		Entries: []parse.ShmEntry{
			{Path: "/dev/shm/Llama-3-70B", Type: 'd', Bytes: 4096, TreeBytes: 40 * gib, MTime: old, UID: 1000},
			{Path: "/dev/shm/Llama-3-70B/model.safetensors", Type: 'f', Bytes: 40 * gib, TreeBytes: 40 * gib, MTime: old.Add(time.Minute), UID: 1000},
		}}
	s.Processes = append(s.Processes, parse.Process{PID: 1000, User: "alice", UID: ip(1000)})
	r := Diagnose(s, refTime)
	stale, full := findCode(r.Findings, CodeShmStale), findCode(r.Findings, CodeShmFull)
	if stale == nil || full == nil {
		t.Fatalf("missing findings:\n%s", dump(r.Findings))
	}
	rm := Action{Kind: ActionRemoveFiles, Target: "/dev/shm/Llama-3-70B", Frees: Impact{ShmBytes: 40 * gib},
		Steps: []Command{{Line: "rm -rf -- '/dev/shm/Llama-3-70B'"}}}
	if !reflect.DeepEqual(stale.Actions, []Action{rm}) {
		t.Errorf("shm-stale actions %+v, want %+v", stale.Actions, rm)
	}
	mod := old.Add(time.Minute)
	age := refTime.Sub(mod)
	wantFile := ShmFile{Path: "/dev/shm/Llama-3-70B", Bytes: i64(40 * gib), Dir: true, Owner: "alice (uid 1000)", Modified: &mod, Age: &age}
	if len(stale.Shm) != 1 || !reflect.DeepEqual(stale.Shm[0], wantFile) {
		t.Errorf("shm-stale files %+v, want %+v", stale.Shm, wantFile)
	}
	kinds := map[ActionKind]Action{}
	for _, a := range full.Actions {
		kinds[a.Kind] = a
	}
	if !reflect.DeepEqual(kinds[ActionRemoveFiles], rm) {
		t.Errorf("shm-full removal %+v, want the same action as shm-stale's %+v", kinds[ActionRemoveFiles], rm)
	}
	if k := kinds[ActionKill]; k.Target != "20629" || k.Frees.ShmBytes != 4_563_402_752 {
		t.Errorf("shm-full does not stop the leftover that keeps deleted files: %+v", k)
	}
	if kinds[ActionResizeShm].Target != "/dev/shm" || kinds[ActionInspect].Target != "/dev/shm" {
		t.Errorf("shm-full actions %+v", full.Actions)
	}
	for _, f := range []*Finding{stale, full} {
		if want := composedFix(f); !slices.Equal(f.Fix, want) {
			t.Errorf("%s fix %q, want %q", f.Code, f.Fix, want)
		}
	}
	if len(full.Shm) == 0 || full.Shm[0].Path != "/dev/shm/Llama-3-70B" || !full.Shm[0].Dir {
		t.Errorf("shm-full does not name what fills /dev/shm: %+v", full.Shm)
	}
}

// Ghost memory with no holder: actions that look, then a reset per GPU whose condition is
// its note, not a comment inside the command.
func TestFactsGhostAndSMI(t *testing.T) {
	s := idle()
	s.GPUs[2].MemoryUsedMiB, s.GPUs[2].MemoryFreeMiB = i64(10_240), i64(87_012)
	f := findCode(Diagnose(s, refTime).Findings, CodeGhostMemory)
	if f == nil || len(f.Actions) != 2 {
		t.Fatalf("ghost-memory actions: %+v", f)
	}
	if a := f.Actions[0]; a.Kind != ActionInspect || a.Target != "/dev/nvidia*" || len(a.Steps) != 3 {
		t.Errorf("inspect action %+v", a)
	}
	reset := Action{Kind: ActionDriver, Target: "GPU 2", Steps: []Command{{Line: "nvidia-smi --gpu-reset -i 2", Note: "only once nothing uses GPU 2; a reboot also clears it"}}}
	if !reflect.DeepEqual(f.Actions[1], reset) {
		t.Errorf("reset action %+v, want %+v", f.Actions[1], reset)
	}
	if want := composedFix(f); !slices.Equal(f.Fix, want) {
		t.Errorf("fix %q, want %q", f.Fix, want)
	}

	s = idle()
	s.SMI.Failure = &parse.SMIFailure{Kind: parse.SMIVersionMismatch, Message: "Failed to initialize NVML: Driver/library version mismatch"}
	f = findCode(Diagnose(s, refTime).Findings, CodeSMIFailed)
	if f == nil || len(f.Actions) != 2 || f.Actions[0].Kind != ActionInspect || f.Actions[1].Kind != ActionDriver {
		t.Fatalf("smi-failed actions: %+v", f)
	}
	if c := f.Actions[0].Steps[0]; c.Line != "cat /proc/driver/nvidia/version" || c.Note != "the loaded kernel module" {
		t.Errorf("first step %+v", c)
	}
	if want := composedFix(f); !slices.Equal(f.Fix, want) {
		t.Errorf("fix %q, want %q", f.Fix, want)
	}
}

// What the probe could not see is typed too: a limit that hides something that matters is
// strong, and the explanation says why for exactly those (not-root is weak here: the app on
// an unknown GPU makes ghost memory uncheckable, so no owner is missing).
func TestFactsProbeLimited(t *testing.T) {
	s := idle()
	s.Host = baseHost(1000)
	s.Notes = []parse.Note{{Code: "not-root", Message: "not root: other users' fds not visible"}}
	s.GPUs[2].MemoryUsedMiB, s.GPUs[2].MemoryFreeMiB = i64(10_240), i64(87_012)
	s.Truncated = true
	s.Apps = append(s.Apps, parse.ComputeApp{PID: 9, GPUUUID: "MIG-1234", UsedMiB: i64(5)})
	f := findCode(Diagnose(s, refTime).Findings, CodeProbeLimited)
	if f == nil {
		t.Fatal("no probe-limited finding")
	}
	want := []Reason{
		{Code: ReasonProbeNote, Note: "not-root", Detail: "not root: other users' fds not visible"},
		{Code: ReasonCaptureTruncated, Strong: true},
		{Code: ReasonUnmatchedApp, PID: 9, Detail: "MIG-1234"},
		{Code: ReasonPIDUnreadable, PID: 9},
	}
	if !reflect.DeepEqual(f.Reasons, want) {
		t.Errorf("reasons %+v\nwant %+v", f.Reasons, want)
	}
	if f.Severity != Warning || !strings.Contains(f.Explanation, "the capture was cut short") || strings.Contains(f.Explanation, "no visible owner") {
		t.Errorf("severity %s, explanation %q", f.Severity, f.Explanation)
	}
	if len(f.Evidence) != len(want) || f.Evidence[0] != "not-root: not root: other users' fds not visible" {
		t.Errorf("evidence %q", f.Evidence)
	}
}
