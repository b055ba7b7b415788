package report

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/readiness"
)

// The readiness values are built by hand, as readiness.Check gives them for ct200, so
// these tests do not depend on the diagnosis.

func ct200TP8() readiness.Readiness {
	return readiness.Readiness{
		Job:  readiness.Job{TP: 8, Engines: []string{"sglang", "vllm"}, GPUMemoryUtilization: 0.9, ContextOverheadMiB: 1280},
		GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7},
		Verdicts: []readiness.EngineVerdict{
			{Engine: "sglang", Formula: "min free 40,678 MiB (GPU 0) < 0.9 × max free 95,972 MiB (GPU 1) = 86,375 MiB", Failing: []int{0}},
			{Engine: "vllm", Formula: "free ≥ 0.9 × total on every GPU (total as CUDA sees it: 97,887 − 635 reserved = 97,252 MiB): GPU 0 has 40,678 MiB < 0.9 × 97,252 = 87,527 MiB (fails on GPU 0)", Failing: []int{0}},
		},
		Blockers: []readiness.Blocker{{GPU: 0, FreeMiB: 41958, Holders: []readiness.Holder{{PID: 20629, Name: "python3", MiB: 55286, Leftover: true}}}},
		AfterFix: true,
		FixPIDs:  []int{20629},
		Reason: "Not ready: GPUs 0-7 fail SGLang's and vLLM's startup checks, and no set of 8 GPUs on this host can pass: " +
			"free memory on GPU 0 is held by PID 20629 (55,286 MiB); stopping leftover PID 20629 (see leftover-process) would let GPUs 0-7 pass.",
	}
}

func ct200TP7() readiness.Readiness {
	r := ct200TP8()
	r.Job.TP = 7
	r.GPUs = r.GPUs[:7]
	r.Blockers = nil
	r.Subset = []int{1, 2, 3, 4, 5, 6, 7}
	r.SubsetEnv = "CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7"
	r.SubsetVerdicts = []readiness.EngineVerdict{
		{Engine: "sglang", Pass: true, Formula: "min free 95,972 MiB (GPU 1) ≥ 0.9 × max free 95,972 MiB (GPU 1) = 86,375 MiB"},
		{Engine: "vllm", Pass: true, Formula: "free ≥ 0.9 × total on every GPU (total as CUDA sees it: 97,887 − 635 reserved = 97,252 MiB): tightest GPU 1 has 95,972 MiB ≥ 0.9 × 97,252 = 87,527 MiB"},
	}
	r.Reason = "Not ready on the default GPUs: GPUs 0-6 fail SGLang's and vLLM's startup checks, but GPUs 1-7 pass: launch with CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7; " +
		"stopping leftover PID 20629 (see leftover-process) would let GPUs 0-6 pass."
	return r
}

func TestReadinessLines(t *testing.T) {
	need := int64(81920)
	tests := []struct {
		name string
		r    readiness.Readiness
		want []string
	}{
		{"ct200 TP 8", ct200TP8(), []string{
			"Not ready: GPUs 0-7 fail SGLang's and vLLM's startup checks, and no set of 8 GPUs on this host can pass: free memory on GPU 0 is held by PID 20629 (55,286 MiB); stopping leftover PID 20629 (see leftover-process) would let GPUs 0-7 pass.",
			"checked: TP 8; SGLang, vLLM (gpu_memory_utilization 0.9); 1,280 MiB CUDA context per rank taken from nvidia-smi's free",
			"why 1,280 MiB lower than memory-imbalance: each rank's CUDA context comes out of free first",
			"GPUs 0-7 (the default, CUDA_VISIBLE_DEVICES unset):",
			"  SGLang  fails   min free 40,678 MiB (GPU 0) < 0.9 × max free 95,972 MiB (GPU 1) = 86,375 MiB",
			"  vLLM    fails   free ≥ 0.9 × total on every GPU (total as CUDA sees it: 97,887 − 635 reserved = 97,252 MiB): GPU 0 has 40,678 MiB < 0.9 × 97,252 = 87,527 MiB (fails on GPU 0)",
			"held:",
			"  GPU 0: 41,958 MiB free; PID 20629 (python3) holds 55,286 MiB, leftover",
			"after stopping leftover PID 20629 (see leftover-process): GPUs 0-7 would pass",
		}},
		{"ct200 TP 7", ct200TP7(), []string{
			"Not ready on the default GPUs: GPUs 0-6 fail SGLang's and vLLM's startup checks, but GPUs 1-7 pass: launch with CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7; stopping leftover PID 20629 (see leftover-process) would let GPUs 0-6 pass.",
			"checked: TP 7; SGLang, vLLM (gpu_memory_utilization 0.9); 1,280 MiB CUDA context per rank taken from nvidia-smi's free",
			"why 1,280 MiB lower than memory-imbalance: each rank's CUDA context comes out of free first",
			"GPUs 0-6 (the default, CUDA_VISIBLE_DEVICES unset):",
			"  SGLang  fails   min free 40,678 MiB (GPU 0) < 0.9 × max free 95,972 MiB (GPU 1) = 86,375 MiB",
			"  vLLM    fails   free ≥ 0.9 × total on every GPU (total as CUDA sees it: 97,887 − 635 reserved = 97,252 MiB): GPU 0 has 40,678 MiB < 0.9 × 97,252 = 87,527 MiB (fails on GPU 0)",
			"use GPUs 1-7: CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7",
			"  SGLang  passes  min free 95,972 MiB (GPU 1) ≥ 0.9 × max free 95,972 MiB (GPU 1) = 86,375 MiB",
			"  vLLM    passes  free ≥ 0.9 × total on every GPU (total as CUDA sees it: 97,887 − 635 reserved = 97,252 MiB): tightest GPU 1 has 95,972 MiB ≥ 0.9 × 97,252 = 87,527 MiB",
			"after stopping leftover PID 20629 (see leftover-process): GPUs 0-6 would pass",
		}},
		{"vLLM only, --need, no context, not enough after the fix", readiness.Readiness{
			Job:      readiness.Job{TP: 2, Engines: []string{"vllm"}, GPUMemoryUtilization: 0.95, NeedMiB: &need},
			GPUs:     []int{0, 1},
			Verdicts: []readiness.EngineVerdict{{Engine: "vllm", Formula: "f", Failing: []int{0, 1}}},
			Blockers: []readiness.Blocker{{GPU: 0, FreeMiB: 1000, UnattributedMiB: 3000}, {GPU: 1, FreeMiB: 80000}},
			FixPIDs:  []int{7, 9},
			Notes:    []string{"GPU 3 has MIG enabled and cannot hold a tensor-parallel rank: left out"},
			Reason:   "Not ready.",
		}, []string{
			"Not ready.",
			"checked: TP 2; vLLM (gpu_memory_utilization 0.95); need 81,920 MiB free per GPU; no CUDA context allowance",
			"GPUs 0, 1 (the default, CUDA_VISIBLE_DEVICES unset):",
			"  vLLM    fails   f",
			"held:",
			"  GPU 0: 1,000 MiB free; 3,000 MiB used by no listed process (see ghost-memory)",
			"  GPU 1: 80,000 MiB free; no process holds memory on it",
			"stopping leftover PIDs 7, 9 (see leftover-process) would not be enough on GPUs 0, 1",
			"note: GPU 3 has MIG enabled and cannot hold a tensor-parallel rank: left out",
		}},
		{"nvidia-smi failed", readiness.Readiness{
			Job:    readiness.Job{TP: 8, Engines: []string{"sglang"}, GPUMemoryUtilization: 0.9, ContextOverheadMiB: 1024},
			Reason: `Not ready: nvidia-smi failed (no-driver), so no GPU memory can be checked (see smi-failed): "NVIDIA-SMI has failed."`,
		}, []string{
			`Not ready: nvidia-smi failed (no-driver), so no GPU memory can be checked (see smi-failed): "NVIDIA-SMI has failed."`,
			"checked: TP 8; SGLang; 1,024 MiB CUDA context per rank taken from nvidia-smi's free",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ReadinessLines(tc.r)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestReadinessLinesSanitized: every string that came from the host is shown escaped.
func TestReadinessLinesSanitized(t *testing.T) {
	r := ct200TP8()
	r.Reason = `Not ready: nvidia-smi failed (other): "` + csiRed + "GPU is lost" + rlo + `".`
	r.Blockers[0].Holders[0].Name = "python" + osc + csiRed
	r.Notes = []string{"note" + rlo}
	r.Subset, r.SubsetEnv = []int{1}, "CUDA_VISIBLE_DEVICES=1"+csiRed
	r.Verdicts[0].Formula += "\x1b[2J"
	for _, l := range ReadinessLines(r) {
		for _, bad := range []string{"\x1b", "\u202e", "\x07", "\u009b"} {
			if strings.Contains(l, bad) {
				t.Errorf("line carries %q raw: %q", bad, l)
			}
		}
	}
	joined := strings.Join(ReadinessLines(r), "\n")
	for _, want := range []string{`\x1b[31m`, `\u202e`} {
		if !strings.Contains(joined, want) {
			t.Errorf("escape %s not shown in:\n%s", want, joined)
		}
	}
	for _, l := range FleetReadinessLines(readiness.Fleet{NotReady: []string{"gpu" + csiRed}}) {
		if strings.Contains(l, "\x1b") {
			t.Errorf("fleet line carries ESC raw: %q", l)
		}
	}
}

func TestFleetReadinessLines(t *testing.T) {
	f := readiness.Fleet{
		ReadyNow:        []string{"gpu01", "gpu02", "gpu03", "gpu04", "gpu07"},
		ReadyWithSubset: []string{"gpu05"},
		NotReady:        []string{"gpu08", "gpu09", "login1"},
	}
	want := []string{
		"ready now: gpu[01-04,07]",
		"ready with CUDA_VISIBLE_DEVICES set: gpu05",
		"not ready: gpu[08-09],login1",
	}
	if got := FleetReadinessLines(f); !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got := FleetReadinessLines(readiness.Fleet{}); got != nil {
		t.Errorf("empty fleet: %q", got)
	}
}

func TestReadinessJSON(t *testing.T) {
	marshal := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	got := marshal(ReadinessJSONOf(ct200TP7()))
	want := `{"tp":7,"engines":["sglang","vllm"],"gpu_memory_utilization":0.9,"need_mib":null,"context_overhead_mib":1280,` +
		`"gpus":[0,1,2,3,4,5,6],"ready":false,"verdicts":[` +
		`{"engine":"sglang","pass":false,"formula":"min free 40,678 MiB (GPU 0) \u003c 0.9 × max free 95,972 MiB (GPU 1) = 86,375 MiB","failing_gpus":[0]},` +
		`{"engine":"vllm","pass":false,"formula":"free ≥ 0.9 × total on every GPU (total as CUDA sees it: 97,887 − 635 reserved = 97,252 MiB): GPU 0 has 40,678 MiB \u003c 0.9 × 97,252 = 87,527 MiB (fails on GPU 0)","failing_gpus":[0]}],` +
		`"subset":[1,2,3,4,5,6,7],"cuda_visible_devices":"1,2,3,4,5,6,7","env":"CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7","subset_verdicts":[` +
		`{"engine":"sglang","pass":true,"formula":"min free 95,972 MiB (GPU 1) ≥ 0.9 × max free 95,972 MiB (GPU 1) = 86,375 MiB","failing_gpus":[]},` +
		`{"engine":"vllm","pass":true,"formula":"free ≥ 0.9 × total on every GPU (total as CUDA sees it: 97,887 − 635 reserved = 97,252 MiB): tightest GPU 1 has 95,972 MiB ≥ 0.9 × 97,252 = 87,527 MiB","failing_gpus":[]}],` +
		`"blockers":[],"ready_after_fix":true,"fix_pids":[20629],"notes":[],` +
		`"reason":"Not ready on the default GPUs: GPUs 0-6 fail SGLang's and vLLM's startup checks, but GPUs 1-7 pass: launch with CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7; stopping leftover PID 20629 (see leftover-process) would let GPUs 0-6 pass."}`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	got = marshal(ReadinessJSONOf(ct200TP8()))
	for _, want := range []string{`"subset":null,"cuda_visible_devices":null,"env":null,"subset_verdicts":[]`,
		`"blockers":[{"gpu":0,"free_mib":41958,"holders":[{"pid":20629,"name":"python3","mib":55286,"leftover":true}],"unattributed_mib":0}]`} {
		if !strings.Contains(got, want) {
			t.Errorf("%s\nlacks %s", got, want)
		}
	}

	got = marshal(FleetReadinessJSONOf(readiness.Fleet{ReadyNow: []string{"gpu01"}, NotReady: []string{"bad\xffhost"}}))
	if want := `{"ready_now":["gpu01"],"ready_with_subset":[],"ready_after_fix":[],"not_ready":["bad` + "\uFFFD" + `host"]}`; got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}
