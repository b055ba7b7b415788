package readiness

import (
	"cmp"
	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/snaptest"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/parse"
)

func TestCheck(t *testing.T) {
	ctx := DefaultContextOverheadMiB
	// withFree sets every GPU's free memory (and used to match) on an idle host.
	withFree := func(free int64) *parse.Snapshot {
		s := snaptest.Idle()
		for i := range s.GPUs {
			s.GPUs[i].MemoryFreeMiB, s.GPUs[i].MemoryUsedMiB = snaptest.I64(free), snaptest.I64(97252-free)
		}
		return s
	}
	// mixed is 4 H100s (GPU 1 busy) then 4 RTX PRO 6000s, all idle but GPU 1.
	mixed := func() *parse.Snapshot {
		s := snaptest.Idle()
		for i := range 4 {
			s.GPUs[i] = snaptest.GPU(i, "NVIDIA H100 80GB HBM3", 81559, 559, 81000)
		}
		s.GPUs[1].MemoryUsedMiB, s.GPUs[1].MemoryFreeMiB = snaptest.I64(51559), snaptest.I64(30000)
		return s
	}
	// reserved adds what nvidia-smi reports as reserved on ct200's GPUs.
	reserved := func(f func() *parse.Snapshot) func() *parse.Snapshot {
		return func() *parse.Snapshot {
			s := f()
			for i := range s.GPUs {
				s.GPUs[i].MemoryReservedMiB = snaptest.I64(635)
			}
			return s
		}
	}
	mig := func() *parse.Snapshot {
		s := snaptest.Idle()
		s.GPUs[3].MIGMode = "Enabled"
		return s
	}
	smiFailed := func() *parse.Snapshot {
		s := snaptest.Idle()
		s.GPUs = nil
		s.SMI.Failure = &parse.SMIFailure{Kind: parse.SMINoDriver,
			Message: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n"}
		return s
	}

	type verdict struct {
		engine  string
		pass    bool
		formula string // exact
		failing []int
	}
	tests := []struct {
		name    string
		snap    func() *parse.Snapshot
		job     Job
		gpus    []int
		ready   bool
		verdict []verdict // on the default GPUs, exact when set
		subset  []int
		env     string
		subsetV []verdict
		block   []Blocker // exact
		after   bool
		fixPIDs []int
		notes   []string // each must appear in some note
		reason  []string // each must appear in Reason
	}{
		{
			name: "ct200 TP 8: both engines fail, no 8-GPU set, ready after stopping the leftover",
			snap: reserved(snaptest.CT200), job: Job{TP: 8, ContextOverheadMiB: ctx},
			gpus: []int{0, 1, 2, 3, 4, 5, 6, 7},
			verdict: []verdict{
				// 41,958 − 1,280 = 40,678; 97,252 − 1,280 = 95,972; ceil(0.9 × 95,972) = 86,375.
				{EngineSGLang, false, "min free 40,678 MiB (GPU 0) < 0.9 × max free 95,972 MiB (GPU 1) = 86,375 MiB", []int{0}},
				// vLLM's total is CUDA's: 97,887 − 635 = 97,252; ceil(0.9 × 97,252) = ceil(87,526.8) = 87,527.
				{EngineVLLM, false, "free ≥ 0.9 × total on every GPU (total as CUDA sees it: 97,887 − 635 reserved = 97,252 MiB): GPU 0 has 40,678 MiB < 0.9 × 97,252 = 87,527 MiB (fails on GPU 0)", []int{0}},
			},
			block:   []Blocker{{GPU: 0, FreeMiB: 41958, Holders: []Holder{{PID: 20629, Name: "python3", MiB: 55286, Leftover: true}}}},
			after:   true,
			fixPIDs: []int{20629},
			reason: []string{"Not ready: GPUs 0-7 fail SGLang's and vLLM's startup checks",
				"no set of 8 GPUs on this host can pass: free memory on GPU 0 is held by PID 20629 (55,286 MiB)",
				"stopping leftover PID 20629 (see leftover-process) would let GPUs 0-7 pass"},
		},
		{
			name: "ct200 TP 7: GPUs 1-7 pass",
			snap: reserved(snaptest.CT200), job: Job{TP: 7, ContextOverheadMiB: ctx},
			gpus:   []int{0, 1, 2, 3, 4, 5, 6},
			subset: []int{1, 2, 3, 4, 5, 6, 7},
			env:    "CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7",
			subsetV: []verdict{
				{EngineSGLang, true, "min free 95,972 MiB (GPU 1) ≥ 0.9 × max free 95,972 MiB (GPU 1) = 86,375 MiB", nil},
				{EngineVLLM, true, "free ≥ 0.9 × total on every GPU (total as CUDA sees it: 97,887 − 635 reserved = 97,252 MiB): tightest GPU 1 has 95,972 MiB ≥ 0.9 × 97,252 = 87,527 MiB", nil},
			},
			after:   true,
			fixPIDs: []int{20629},
			reason:  []string{"but GPUs 1-7 pass: launch with CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7"},
		},
		{
			name: "ct200 SGLang only, TP 1: no balance check, GPU 0 has room",
			snap: snaptest.CT200, job: Job{TP: 1, Engines: []string{"SGLang"}, ContextOverheadMiB: ctx},
			gpus: []int{0}, ready: true,
			verdict: []verdict{{EngineSGLang, true, "TP 1: no balance check", nil}},
			reason:  []string{"Ready: GPU 0 passes SGLang's startup check for TP 1."},
		},
		{
			name: "idle host, reserved unknown: ready against nvidia-smi's total",
			snap: snaptest.Idle, job: Job{TP: 8, ContextOverheadMiB: ctx},
			gpus: []int{0, 1, 2, 3, 4, 5, 6, 7}, ready: true,
			verdict: []verdict{
				{EngineSGLang, true, "min free 95,972 MiB (GPU 0) ≥ 0.9 × max free 95,972 MiB (GPU 0) = 86,375 MiB", nil},
				{EngineVLLM, true, "free ≥ 0.9 × total on every GPU: tightest GPU 0 has 95,972 MiB ≥ 0.9 × 97,887 = 88,099 MiB", nil},
			},
			reason: []string{"Ready: GPUs 0-7 pass SGLang's and vLLM's startup checks for TP 8."},
		},
		{
			name: "no context overhead: nvidia-smi's numbers as they are",
			snap: snaptest.CT200, job: Job{TP: 8, Engines: []string{EngineSGLang}},
			gpus: []int{0, 1, 2, 3, 4, 5, 6, 7},
			// The README's numbers: 0.9 × 97,252 = 87,526.8.
			verdict: []verdict{{EngineSGLang, false, "min free 41,958 MiB (GPU 0) < 0.9 × max free 97,252 MiB (GPU 1) = 87,527 MiB", []int{0}}},
			after:   true, fixPIDs: []int{20629},
		},
		{
			name: "mixed sizes TP 4: the subset stays within one size",
			snap: mixed, job: Job{TP: 4, ContextOverheadMiB: ctx},
			gpus:   []int{0, 1, 2, 3},
			subset: []int{4, 5, 6, 7},
			env:    "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=4,5,6,7",
			notes:  []string{"different models"},
		},
		{
			name: "mixed sizes TP 5: seven GPUs have room, but no five of one size",
			snap: mixed, job: Job{TP: 5, ContextOverheadMiB: ctx},
			gpus:   []int{0, 1, 2, 3, 4},
			reason: []string{"this host has no 5 GPUs of one size that can hold ranks (at most 4)"},
		},
		{
			name: "--need larger than any GPU has",
			snap: snaptest.Idle, job: Job{TP: 8, NeedMiB: snaptest.I64(96000), ContextOverheadMiB: ctx},
			gpus: []int{0, 1, 2, 3, 4, 5, 6, 7},
			verdict: []verdict{
				{EngineSGLang, false, "min free 95,972 MiB (GPU 0) ≥ 0.9 × max free 95,972 MiB (GPU 0) = 86,375 MiB; min free 95,972 MiB (GPU 0) < need 96,000 MiB", []int{0, 1, 2, 3, 4, 5, 6, 7}},
				{EngineVLLM, false, "free ≥ 0.9 × total on every GPU: tightest GPU 0 has 95,972 MiB ≥ 0.9 × 97,887 = 88,099 MiB; min free 95,972 MiB (GPU 0) < need 96,000 MiB", []int{0, 1, 2, 3, 4, 5, 6, 7}},
			},
			block: []Blocker{{GPU: 0, FreeMiB: 97252}, {GPU: 1, FreeMiB: 97252}, {GPU: 2, FreeMiB: 97252}, {GPU: 3, FreeMiB: 97252},
				{GPU: 4, FreeMiB: 97252}, {GPU: 5, FreeMiB: 97252}, {GPU: 6, FreeMiB: 97252}, {GPU: 7, FreeMiB: 97252}},
			reason: []string{"no set of 8 GPUs on this host can pass: free memory on GPUs 0-7 is too little, with no process holding it"},
		},
		{
			name: "vLLM 0.9 passes with 92,000 MiB free",
			snap: func() *parse.Snapshot { return withFree(92000) }, job: Job{TP: 8, Engines: []string{EngineVLLM}, ContextOverheadMiB: ctx},
			gpus: []int{0, 1, 2, 3, 4, 5, 6, 7}, ready: true,
			verdict: []verdict{{EngineVLLM, true, "free ≥ 0.9 × total on every GPU: tightest GPU 0 has 90,720 MiB ≥ 0.9 × 97,887 = 88,099 MiB", nil}},
		},
		{
			name: "vLLM 0.95 fails with 92,000 MiB free",
			snap: func() *parse.Snapshot { return withFree(92000) }, job: Job{TP: 8, Engines: []string{EngineVLLM}, GPUMemoryUtilization: 0.95, ContextOverheadMiB: ctx},
			gpus: []int{0, 1, 2, 3, 4, 5, 6, 7},
			// ceil(0.95 × 97,887) = ceil(92,992.65) = 92,993.
			verdict: []verdict{{EngineVLLM, false, "free ≥ 0.95 × total on every GPU: GPU 0 has 90,720 MiB < 0.95 × 97,887 = 92,993 MiB (fails on GPUs 0-7)", []int{0, 1, 2, 3, 4, 5, 6, 7}}},
			reason:  []string{"GPUs 0-7 fail vLLM's startup check,"},
		},
		{
			name: "a healthy TP-8 job fills every GPU: vLLM fails everywhere, held by the job",
			snap: snaptest.BusyTP8, job: Job{TP: 8, ContextOverheadMiB: ctx},
			gpus:   []int{0, 1, 2, 3, 4, 5, 6, 7},
			reason: []string{"free memory on GPUs 0-7 is held by PIDs 3017 (72,059 MiB), 3016 (72,022 MiB), 3015 (71,985 MiB), 3014 (71,948 MiB), 3013 (71,911 MiB), 3 more."},
		},
		{
			name: "fewer GPUs than TP",
			snap: snaptest.Idle, job: Job{TP: 16, ContextOverheadMiB: ctx},
			reason: []string{"Not ready: TP 16 needs 16 GPUs and this host has 8."},
		},
		{
			name: "nvidia-smi failed",
			snap: smiFailed, job: Job{TP: 8, ContextOverheadMiB: ctx},
			reason: []string{`Not ready: nvidia-smi failed (no-driver), so no GPU memory can be checked (see smi-failed): "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."`},
		},
		{
			name: "MIG GPU in the default set: left out of the subset",
			snap: mig, job: Job{TP: 4, ContextOverheadMiB: ctx},
			gpus: []int{0, 1, 2, 3},
			verdict: []verdict{
				{EngineSGLang, false, "GPU 3: MIG enabled: cannot hold a rank", []int{3}},
				{EngineVLLM, false, "GPU 3: MIG enabled: cannot hold a rank", []int{3}},
			},
			subset: []int{0, 1, 2, 4},
			env:    "CUDA_VISIBLE_DEVICES=0,1,2,4",
			notes:  []string{"GPU 3 has MIG enabled and cannot hold a tensor-parallel rank: left out"},
		},
		{
			name: "MIG GPU: no 8 usable GPUs",
			snap: mig, job: Job{TP: 8, ContextOverheadMiB: ctx},
			gpus:   []int{0, 1, 2, 3, 4, 5, 6, 7},
			reason: []string{"no 8 GPUs of one size that can hold ranks (at most 7)"},
		},
		{
			name: "GPU with no room for the context",
			snap: func() *parse.Snapshot { return withFree(1000) }, job: Job{TP: 2, Engines: []string{EngineSGLang}, ContextOverheadMiB: ctx},
			gpus: []int{0, 1},
			verdict: []verdict{{EngineSGLang, false,
				"min free -280 MiB (GPU 0) < 0.9 × max free -280 MiB (GPU 0) = -252 MiB; GPUs 0, 1 have less free than the 1,280 MiB CUDA context", []int{0, 1}}},
		},
		{
			name: "unknown engine", snap: snaptest.Idle, job: Job{TP: 8, Engines: []string{"trt-llm"}},
			reason: []string{`Cannot check readiness: unknown engine "trt-llm" (known: sglang, vllm).`},
		},
		{
			name: "TP 0", snap: snaptest.Idle, job: Job{TP: 0},
			reason: []string{"the tensor-parallel size must be at least 1, not 0"},
		},
		{
			name: "utilization above 1", snap: snaptest.Idle, job: Job{TP: 1, GPUMemoryUtilization: 1.5},
			reason: []string{"gpu_memory_utilization must be in (0, 1], not 1.5"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.snap()
			got := Check(s, diagnose.Diagnose(s, time.Time{}), tc.job)
			if !slices.Equal(got.GPUs, tc.gpus) {
				t.Errorf("GPUs = %v, want %v", got.GPUs, tc.gpus)
			}
			if got.Ready != tc.ready {
				t.Errorf("Ready = %v, want %v (%s)", got.Ready, tc.ready, got.Reason)
			}
			checkVerdicts := func(what string, gotV []EngineVerdict, want []verdict) {
				t.Helper()
				if want == nil {
					return
				}
				if len(gotV) != len(want) {
					t.Fatalf("%s: %d verdicts, want %d: %+v", what, len(gotV), len(want), gotV)
				}
				for i, w := range want {
					g := gotV[i]
					if g.Engine != w.engine || g.Pass != w.pass || g.Formula != w.formula || !slices.Equal(g.Failing, w.failing) {
						t.Errorf("%s %d:\n got %s pass=%v failing=%v %q\nwant %s pass=%v failing=%v %q",
							what, i, g.Engine, g.Pass, g.Failing, g.Formula, w.engine, w.pass, w.failing, w.formula)
					}
				}
			}
			checkVerdicts("verdict", got.Verdicts, tc.verdict)
			checkVerdicts("subset verdict", got.SubsetVerdicts, tc.subsetV)
			if !slices.Equal(got.Subset, tc.subset) || got.SubsetEnv != tc.env {
				t.Errorf("Subset = %v %q, want %v %q", got.Subset, got.SubsetEnv, tc.subset, tc.env)
			}
			if tc.block != nil && !reflect.DeepEqual(got.Blockers, tc.block) {
				t.Errorf("Blockers = %+v\nwant %+v", got.Blockers, tc.block)
			}
			if got.AfterFix != tc.after || !slices.Equal(got.FixPIDs, tc.fixPIDs) {
				t.Errorf("AfterFix = %v %v, want %v %v", got.AfterFix, got.FixPIDs, tc.after, tc.fixPIDs)
			}
			for _, n := range tc.notes {
				if !slices.ContainsFunc(got.Notes, func(s string) bool { return strings.Contains(s, n) }) {
					t.Errorf("no note with %q in %q", n, got.Notes)
				}
			}
			for _, r := range tc.reason {
				if !strings.Contains(got.Reason, r) {
					t.Errorf("Reason %q lacks %q", got.Reason, r)
				}
			}
			// One sentence, quoting nvidia-smi's own words at most.
			own, _, _ := strings.Cut(got.Reason, `"`)
			if strings.Contains(own, ". ") || !strings.HasSuffix(got.Reason, ".") && !strings.HasSuffix(got.Reason, `."`) {
				t.Errorf("Reason is not one sentence: %q", got.Reason)
			}
		})
	}
}

func TestCheckDoesNotModifySnapshot(t *testing.T) {
	s := snaptest.CT200()
	r := diagnose.Diagnose(s, time.Time{})
	before := *s.GPUs[0].MemoryFreeMiB
	Check(s, r, Job{TP: 8, ContextOverheadMiB: DefaultContextOverheadMiB})
	if *s.GPUs[0].MemoryFreeMiB != before {
		t.Errorf("GPU 0 free changed: %d -> %d", before, *s.GPUs[0].MemoryFreeMiB)
	}
	if Check(nil, diagnose.Result{}, Job{TP: 1}).Ready {
		t.Error("nil snapshot is ready")
	}
}

// TestBestSubsetIsOptimal compares the sliding window with trying every set of TP GPUs.
func TestBestSubsetIsOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	engineSets := [][]string{{EngineSGLang}, {EngineVLLM}, {EngineSGLang, EngineVLLM}}
	for iter := range 3000 {
		n := 1 + rng.IntN(9)
		s := &parse.Snapshot{}
		for i := range n {
			total := []int64{81559, 97887, 97800}[rng.IntN(3)]
			// Few distinct values, so ties and near-ties are common.
			free := total - []int64{0, 500, 2000, 9000, 12000, 30000, 60000}[rng.IntN(7)] - int64(rng.IntN(3))*700
			g := snaptest.GPU(i, "GPU", total, total-free, free)
			if rng.IntN(2) == 0 {
				g.MemoryReservedMiB = snaptest.I64([]int64{0, 469, 635}[rng.IntN(3)])
			}
			if rng.IntN(12) == 0 {
				g.MIGMode = "Enabled"
			}
			s.GPUs = append(s.GPUs, g)
		}
		job := Job{TP: 1 + rng.IntN(n), Engines: engineSets[rng.IntN(3)],
			GPUMemoryUtilization: []float64{0.8, 0.9, 0.95}[rng.IntN(3)], ContextOverheadMiB: int64(rng.IntN(3)) * 640}
		if rng.IntN(3) == 0 {
			job.NeedMiB = snaptest.I64(70000 + int64(rng.IntN(30000)))
		}
		job, _ = normalize(job)
		c := &checker{job: job}
		c.sglang = slices.Contains(job.Engines, EngineSGLang)
		c.vllm = slices.Contains(job.Engines, EngineVLLM)
		c.ratioApplies = c.sglang && job.TP > 1
		groups := diagnose.GPUGroups(s)

		got, gotMin, gotOK := c.bestSubset(groups)

		var want []int
		var wantMin int64
		wantOK := false
		for _, grp := range groups {
			for _, set := range combinations(grp, job.TP) {
				var rs []rankGPU
				for _, m := range set {
					rs = append(rs, c.rankGPU(m))
				}
				if !allPass(c.verdicts(rs)) {
					continue
				}
				lo := slices.MinFunc(rs, func(a, b rankGPU) int { return cmp.Compare(a.avail, b.avail) }).avail
				var idx []int
				for _, g := range rs {
					idx = append(idx, g.index)
				}
				slices.Sort(idx)
				if !wantOK || lo > wantMin || (lo == wantMin && slices.Compare(idx, want) < 0) {
					want, wantMin, wantOK = idx, lo, true
				}
			}
		}
		if gotOK != wantOK || gotMin != wantMin || !slices.Equal(got, want) {
			t.Fatalf("case %d: job %+v GPUs %+v:\nwindow %v (min %d, %v)\nbrute  %v (min %d, %v)", iter, job, s.GPUs, got, gotMin, gotOK, want, wantMin, wantOK)
		}
	}
}

func combinations(xs []*parse.GPU, k int) [][]*parse.GPU {
	if k == 0 {
		return [][]*parse.GPU{nil}
	}
	if len(xs) < k {
		return nil
	}
	var out [][]*parse.GPU
	for _, rest := range combinations(xs[1:], k-1) {
		out = append(out, append([]*parse.GPU{xs[0]}, rest...))
	}
	return append(out, combinations(xs[1:], k)...)
}

func TestBestSubsetLarge(t *testing.T) {
	// 64 GPUs, TP 64 and TP 32: linear-logarithmic, and exact.
	s := &parse.Snapshot{}
	for i := range 64 {
		free := int64(97252)
		if i%2 == 0 {
			free = 40000
		}
		s.GPUs = append(s.GPUs, snaptest.GPU(i, "GPU", 97887, 97252-free, free))
	}
	r := Check(s, diagnose.Result{}, Job{TP: 32, ContextOverheadMiB: DefaultContextOverheadMiB})
	var odd []int
	for i := 1; i < 64; i += 2 {
		odd = append(odd, i)
	}
	if !slices.Equal(r.Subset, odd) {
		t.Errorf("TP 32 subset = %v, want the odd GPUs", r.Subset)
	}
	r = Check(s, diagnose.Result{}, Job{TP: 64, ContextOverheadMiB: DefaultContextOverheadMiB})
	if r.Ready || r.Subset != nil || len(r.Blockers) != 32 {
		t.Errorf("TP 64: ready %v subset %v, %d blockers", r.Ready, r.Subset, len(r.Blockers))
	}
}

func TestSummarize(t *testing.T) {
	ct := snaptest.CT200()
	idleS := snaptest.Idle()
	job := Job{TP: 8, ContextOverheadMiB: DefaultContextOverheadMiB}
	job7 := Job{TP: 7, ContextOverheadMiB: DefaultContextOverheadMiB}
	busy := snaptest.BusyTP8()
	hosts := []Host{
		{"gpu01", Check(idleS, diagnose.Diagnose(idleS, time.Time{}), job)},
		{"gpu02", Check(ct, diagnose.Diagnose(ct, time.Time{}), job)},
		{"gpu03", Check(ct, diagnose.Diagnose(ct, time.Time{}), job7)},
		{"gpu04", Check(busy, diagnose.Diagnose(busy, time.Time{}), job)},
		{"gpu05", Check(idleS, diagnose.Diagnose(idleS, time.Time{}), job)},
	}
	got := Summarize(hosts)
	want := Fleet{ReadyNow: []string{"gpu01", "gpu05"}, ReadyWithSubset: []string{"gpu03"},
		ReadyAfterFix: []string{"gpu02"}, NotReady: []string{"gpu04"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

// TestWordsFromFactsOnly: every word of an answer (each verdict's formula, the notes, the
// reason) is composed from its typed facts alone: cleared and composed again, an answer says
// exactly what Check said, on every kind of answer.
func TestWordsFromFactsOnly(t *testing.T) {
	ct := snaptest.CT200()
	smiFailed := snaptest.Idle()
	smiFailed.GPUs = nil
	smiFailed.SMI.Failure = &parse.SMIFailure{Kind: parse.SMINoDriver, Message: "NVIDIA-SMI has failed\n"}
	mig := snaptest.Idle()
	mig.GPUs[3].MIGMode = "Enabled"
	mig.GPUs[5].MemoryFreeMiB = nil
	mig.GPUs[6].Name = "NVIDIA H100 80GB HBM3"
	need := int64(96000)
	answers := []Readiness{
		Check(ct, diagnose.Diagnose(ct, time.Time{}), Job{TP: 8, ContextOverheadMiB: DefaultContextOverheadMiB}),
		Check(ct, diagnose.Diagnose(ct, time.Time{}), Job{TP: 7, ContextOverheadMiB: DefaultContextOverheadMiB}),
		Check(ct, diagnose.Diagnose(ct, time.Time{}), Job{TP: 1, Engines: []string{EngineSGLang}, NeedMiB: &need}),
		Check(ct, diagnose.Result{}, Job{TP: 9}),
		Check(ct, diagnose.Result{}, Job{TP: 2, Engines: []string{"trt"}}),
		Check(nil, diagnose.Result{}, Job{TP: 1}),
		Check(smiFailed, diagnose.Result{}, Job{TP: 1}),
		Check(mig, diagnose.Result{}, Job{TP: 8, ContextOverheadMiB: 97000}),
		Check(mig, diagnose.Result{}, Job{TP: 4, GPUMemoryUtilization: 0.95}),
	}
	for i, want := range answers {
		if want.Reason == "" {
			t.Fatalf("answer %d has no reason", i)
		}
		bare := want
		bare.Verdicts = slices.Clone(want.Verdicts)
		bare.SubsetVerdicts = slices.Clone(want.SubsetVerdicts)
		for j := range bare.Verdicts {
			bare.Verdicts[j].Formula = ""
		}
		for j := range bare.SubsetVerdicts {
			bare.SubsetVerdicts[j].Formula = ""
		}
		bare.Notes, bare.Reason = nil, ""
		if got := bare.composed(); !reflect.DeepEqual(got, want) {
			t.Errorf("answer %d composed again:\n%+v\nwant\n%+v", i, got, want)
		}
	}
}
