package diagnose

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// What a host's result details is bounded, whatever the host sent: a capture with every
// section at its bound lists some 100,000 processes, and a finding naming each of them (and
// a report repeating it in every format) costs hundreds of MiB. Beyond the bounds a result
// folds: it keeps the first of each kind (findings are sorted most severe first, so the
// folded ones are never worse than those kept) and says what it folded in a probe-limited
// reason of code detail-folded, never silently.
const (
	// MaxFindingsOfCode bounds the findings of one code a result keeps.
	MaxFindingsOfCode = 12
	// MaxDetail bounds each list a finding holds: GPUs, PIDs, files, evidence lines,
	// reasons (probe-limited's of each code), actions, checks and /dev/shm files.
	MaxDetail = 32
	// maxFixLines bounds a finding's Fix lines (an action's comment and its commands).
	maxFixLines = 4 * MaxDetail
	// MaxLineBytes bounds each of a finding's evidence and Fix lines, and its explanation.
	MaxLineBytes = 2048
	// MaxProcesses bounds the processes a retained result keeps beside those its findings
	// name (Retain: node-check and fix read every process, before a result is retained).
	MaxProcesses = 32
	// MaxLimitsOfCode bounds probe-limited's reasons of one code: each is a line a reader
	// reads, and the eighth PID nvidia-smi lists that /proc could not show says no more than
	// the first.
	MaxLimitsOfCode = 8
)

// ReasonDetailFolded is probe-limited's reason for what a result folded: Folded items of
// Detail ("findings ghost-memory", "PIDs of ghost-memory", "processes") were left out of
// the result; a Strong one folded a warning or worse.
const ReasonDetailFolded ReasonCode = "detail-folded"

// folder gathers what a result folded, as probe-limited reasons.
type folder struct{ reasons []Reason }

// fold notes that n items of what were left out; strong when they weigh on the verdict.
func (fo *folder) fold(what string, n int, strong bool) {
	if n > 0 {
		fo.reasons = append(fo.reasons, Reason{Code: ReasonDetailFolded, Detail: what, Folded: n, Strong: strong})
	}
}

// foldFindings keeps, of fs (sorted), the first MaxFindingsOfCode findings of each code, each
// within MaxDetail items per list.
func (fo *folder) foldFindings(fs []Finding) []Finding {
	kept := fs[:0:0]
	keep := spreadOverGPUs(fs)
	dropped := map[string]int{}
	var order []string
	worst := map[string]Severity{}
	for i, f := range fs {
		if !keep[i] {
			if dropped[f.Code] == 0 {
				order = append(order, f.Code)
			}
			dropped[f.Code]++
			worst[f.Code] = max(worst[f.Code], f.Severity)
			continue
		}
		kept = append(kept, fo.foldFinding(f))
	}
	for _, code := range order {
		fo.fold("findings "+code, dropped[code], worst[code] >= Warning)
	}
	return slices.Clone(kept) // not an array grown for more
}

// spreadOverGPUs chooses the MaxFindingsOfCode findings of each code a result keeps: in
// their order, but first one of the code's worst severity for each GPU such a finding is on,
// so that a host busy on every GPU has each GPU's work named before a second finding on any of
// them, and no finding is kept over a worse one of its code for the sake of its GPU.
func spreadOverGPUs(fs []Finding) map[int]bool {
	keep := map[int]bool{}
	count := map[string]int{}
	onGPU := map[string]bool{}
	worst := map[string]Severity{}
	for _, f := range fs {
		worst[f.Code] = max(worst[f.Code], f.Severity)
	}
	for pass := range 2 {
		for i, f := range fs {
			if keep[i] || count[f.Code] >= MaxFindingsOfCode {
				continue
			}
			if pass == 0 {
				if len(f.GPUs) == 0 || f.Severity < worst[f.Code] || onGPU[fmt.Sprint(f.Code, f.GPUs[0])] {
					continue
				}
				onGPU[fmt.Sprint(f.Code, f.GPUs[0])] = true
			}
			keep[i] = true
			count[f.Code]++
		}
	}
	return keep
}

// foldFinding bounds each list of f at MaxDetail items.
func (fo *folder) foldFinding(f Finding) Finding {
	of := " of " + f.Code
	f.GPUs = foldList(fo, f.GPUs, MaxDetail, "GPUs"+of)
	f.PIDs = foldList(fo, f.PIDs, MaxDetail, "PIDs"+of)
	f.Files = foldList(fo, f.Files, MaxDetail, "files"+of)
	f.Evidence = foldList(fo, f.Evidence, MaxDetail, "evidence lines"+of)
	f.Actions = foldList(fo, f.Actions, MaxDetail, "actions"+of)
	f.Checks = foldList(fo, f.Checks, MaxDetail, "checks"+of)
	f.Shm = foldList(fo, f.Shm, MaxDetail, "/dev/shm files"+of)
	f.Named = slices.Clone(f.Named) // not the array its appends grew
	if u := f.ShmUse; u != nil && (len(u.Blamed) > MaxDetail || len(u.Healthy) > MaxDetail) {
		c := *u // not the diagnosis's, nor its arrays of every keeper
		c.Blamed = foldList(fo, c.Blamed, MaxDetail, "blamed /dev/shm keepers"+of)
		c.Healthy = foldList(fo, c.Healthy, MaxDetail, "healthy /dev/shm keepers"+of)
		f.ShmUse = &c
	}
	fo.foldFix(&f)
	if f.Code != CodeProbeLimited {
		f.Reasons = foldList(fo, f.Reasons, MaxDetail, "reasons"+of)
	}
	fo.foldLines(&f)
	return f
}

// foldWords bounds f's words as foldFinding does: evidence lines, Fix lines, and the bytes of
// its explanation and of each line.
func (fo *folder) foldWords(f *Finding) {
	f.Evidence = foldList(fo, f.Evidence, MaxDetail, "evidence lines of "+f.Code)
	fo.foldFix(f)
	fo.foldLines(f)
}

// foldFix bounds f's Fix lines, saying at their end how many it left out.
func (fo *folder) foldFix(f *Finding) {
	if n := len(f.Fix) - maxFixLines; n > 0 {
		f.Fix = append(slices.Clone(f.Fix[:maxFixLines]), fmt.Sprintf("# and %d more lines (see probe-limited)", n))
		fo.fold("fix lines of "+f.Code, n, false)
	}
}

// foldLines bounds the bytes of f's explanation and of each evidence and Fix line.
func (fo *folder) foldLines(f *Finding) {
	of := " of " + f.Code
	f.Explanation = fo.foldLine(f.Explanation, "bytes of the explanation"+of)
	for _, lines := range [][]string{f.Evidence, f.Fix} {
		for i := range lines {
			lines[i] = fo.foldLine(lines[i], "bytes of lines"+of)
		}
	}
}

// foldLine cuts a line longer than MaxLineBytes (a list of thousands of PIDs) at a rune
// boundary and says so at its end.
func (fo *folder) foldLine(s, what string) string {
	if len(s) <= MaxLineBytes {
		return s
	}
	n := MaxLineBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	fo.fold(what, len(s)-n, false)
	return strings.Clone(s[:n]) + fmt.Sprintf(" … (%d more bytes folded, see probe-limited)", len(s)-n)
}

// foldList keeps the first n items of xs and notes how many it left out.
func foldList[T any](fo *folder, xs []T, n int, what string) []T {
	if len(xs) <= n {
		return xs
	}
	fo.fold(what, len(xs)-n, false)
	return slices.Clone(xs[:n]) // not the whole list's array
}

// limitBuilder gathers probe-limited's reasons as they come, each once, and keeps the first
// MaxLimitsOfCode of each code: the rest are counted in one detail-folded reason per code,
// strong when any reason it folded was. A host listing 100,000 PIDs it could not read so costs
// MaxLimitsOfCode reasons, not 100,000.
type limitBuilder struct {
	rs     []Reason
	seen   map[limitKey]bool
	count  map[ReasonCode]int
	folded map[ReasonCode]int // code -> index in rs of its detail-folded reason
}

func (lb *limitBuilder) add(r Reason) {
	k := keyOfLimit(r)
	if lb.seen[k] {
		return
	}
	lb.seen[k] = true
	if lb.count[r.Code]++; lb.count[r.Code] <= MaxLimitsOfCode || r.Code == ReasonDetailFolded {
		lb.rs = append(lb.rs, r)
		return
	}
	i, ok := lb.folded[r.Code]
	if !ok {
		i = len(lb.rs)
		lb.folded[r.Code] = i
		lb.rs = append(lb.rs, Reason{Code: ReasonDetailFolded, Detail: "reasons " + string(r.Code) + " of " + CodeProbeLimited})
	}
	lb.rs[i].Folded++
	lb.rs[i].Strong = lb.rs[i].Strong || r.Strong
}

// Retain bounds what r keeps of its processes once only a report reads it (a sweep keeps each
// host's result until the report is written): the processes its findings name and
// MaxProcesses others. What it leaves out is a detail-folded reason of probe-limited. Call it
// after node-check, fix and readiness have read the whole result.
func Retain(r *Result) {
	var fo folder
	r.Processes = fo.foldProcesses(r.Processes, r.Findings)
	if len(fo.reasons) == 0 {
		return
	}
	i := slices.IndexFunc(r.Findings, func(f Finding) bool { return f.Code == CodeProbeLimited })
	if i < 0 {
		r.Findings = append(r.Findings, Finding{Code: CodeProbeLimited, Severity: Info, Explanation: limitExplanation})
		i = len(r.Findings) - 1
	}
	f := &r.Findings[i]
	f.Reasons = append(slices.Clip(f.Reasons), fo.reasons...)
	for _, rs := range fo.reasons {
		f.Evidence = append(slices.Clip(f.Evidence), limitLine(rs))
	}
	f.Title = limitTitle(len(f.Evidence))
	sortFindings(r.Findings)
}

// foldProcesses keeps the processes the findings name (as PIDs or in an action) and up to
// MaxProcesses others, in their order (by PID).
func (fo *folder) foldProcesses(procs []GPUProcess, fs []Finding) []GPUProcess {
	if len(procs) <= MaxProcesses {
		return procs
	}
	named := map[int]bool{}
	for _, f := range fs {
		for _, p := range f.PIDs {
			named[p] = true
		}
		for _, a := range f.Actions {
			for _, p := range a.PIDs {
				named[p] = true
			}
		}
	}
	var kept []GPUProcess
	others := 0
	for _, p := range procs {
		if !named[p.PID] {
			if others++; others > MaxProcesses {
				continue
			}
		}
		kept = append(kept, p)
	}
	fo.fold("processes", len(procs)-len(kept), false)
	return slices.Clone(kept) // not an array grown for more
}
