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
