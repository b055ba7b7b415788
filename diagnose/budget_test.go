package diagnose

import (
	"slices"
	"strings"
	"testing"
)

// foldedOf is how many items of what a result's probe-limited finding says it folded.
func foldedOf(res Result, what string) int {
	for _, f := range res.Findings {
		for _, r := range f.Reasons {
			if r.Code == ReasonDetailFolded && r.Detail == what {
				return r.Folded
			}
		}
	}
	return 0
}

// TestFoldRepeated: 2,000 healthy jobs each make a gpu-busy finding, and one finding names
// 2,000 PIDs. The result keeps MaxFindingsOfCode findings of a code, MaxDetail items per
// list and, once retained, MaxProcesses processes beside those it names; its probe-limited
// finding says
// how many of each it folded, in its reasons and its words: never silently.
func TestFoldRepeated(t *testing.T) {
	const n = 2000
	for _, separate := range []bool{true, false} {
		res := Diagnose(crowded(n, separate), refTime)
		if len(res.Processes) != n {
			t.Errorf("%d processes before Retain, want every one of %d (node-check and fix read them)", len(res.Processes), n)
		}
		Retain(&res)
		count := map[string]int{}
		for _, f := range res.Findings {
			count[f.Code]++
			for what, l := range map[string]int{"PIDs": len(f.PIDs), "actions": len(f.Actions), "evidence": len(f.Evidence)} {
				if l > MaxDetail && f.Code != CodeProbeLimited {
					t.Errorf("%s: %d %s, want at most %d", f.Code, l, what, MaxDetail)
				}
			}
		}
		for code, c := range count {
			if c > MaxFindingsOfCode {
				t.Errorf("%d findings %s, want at most %d", c, code, MaxFindingsOfCode)
			}
		}
		if len(res.Processes) > MaxProcesses+MaxFindingsOfCode*MaxDetail*len(count) {
			t.Errorf("%d processes kept", len(res.Processes))
		}
		if got := len(res.Processes) + foldedOf(res, "processes"); got != n {
			t.Errorf("%d processes kept and folded, want %d", got, n)
		}
		pl := findCode(res.Findings, CodeProbeLimited)
		if pl == nil {
			t.Fatalf("separate=%v: no probe-limited finding says what was folded", separate)
		}
		if separate && (count[CodeGPUBusy] != MaxFindingsOfCode || foldedOf(res, "findings "+CodeGPUBusy) < n/4) {
			t.Errorf("gpu-busy findings: %d kept, %d folded", count[CodeGPUBusy], foldedOf(res, "findings "+CodeGPUBusy))
		}
		if !slices.ContainsFunc(pl.Evidence, func(l string) bool { return strings.Contains(l, "more processes were folded") }) {
			t.Errorf("probe-limited's words do not say processes were folded: %q", pl.Evidence)
		}
	}
}

// TestFoldSpreadsOverGPUs: of more findings of one code than a result keeps, one on each GPU
// is kept before a second on any, and never a finding over a worse one of its code.
func TestFoldSpreadsOverGPUs(t *testing.T) {
	var fs []Finding
	for i := range 3 * MaxFindingsOfCode { // GPU 0 first, many times over, then GPUs 1-7
		g := 0
		if i >= 2*MaxFindingsOfCode {
			g = 1 + i%7
		}
		fs = append(fs, Finding{Code: CodeGPUBusy, Severity: Info, GPUs: []int{g}, PIDs: []int{1000 + i}})
	}
	fs = append(fs, Finding{Code: CodeLeftoverProcess, Severity: Error, GPUs: []int{0}, PIDs: []int{1}},
		Finding{Code: CodeLeftoverProcess, Severity: Warning, GPUs: []int{5}, PIDs: []int{2}})
	for range MaxFindingsOfCode {
		fs = append(fs, Finding{Code: CodeLeftoverProcess, Severity: Error, GPUs: []int{0}, PIDs: []int{3}})
	}
	sortFindings(fs) // as Diagnose leaves them: most severe first
	var fo folder
	kept := fo.foldFindings(fs)
	onGPU := map[int]bool{}
	for _, f := range kept {
		if f.Code == CodeGPUBusy {
			onGPU[f.GPUs[0]] = true
		}
		if f.Code == CodeLeftoverProcess && f.Severity == Warning {
			t.Errorf("a warning kept over %d errors of its code for the sake of its GPU", MaxFindingsOfCode+1)
		}
	}
	if len(onGPU) != 8 {
		t.Errorf("gpu-busy findings kept on GPUs %v, want all 8", onGPU)
	}
}
