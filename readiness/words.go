package readiness

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
)

// Words of readiness: its one-sentence verdicts, its notes and each engine's formula, written
// here and only here from the facts Check found.

var (
	fmtMiB     = diagnose.FormatMiB
	formatGPUs = diagnose.FormatGPUs
	plural     = diagnose.Plural
	thousands  = diagnose.Thousands
)

// composed is out with its words: each verdict's Formula, Notes and Reason.
func (out Readiness) composed() Readiness {
	for i := range out.Verdicts {
		out.Verdicts[i].Formula = formula(out.Verdicts[i].Check)
	}
	for i := range out.SubsetVerdicts {
		out.SubsetVerdicts[i].Formula = formula(out.SubsetVerdicts[i].Check)
	}
	out.Notes = notes(out)
	out.Reason = reason(out)
	return out
}

// reason is the one sentence that says why.
func reason(out Readiness) string {
	switch out.Unchecked {
	case UncheckedBadJob:
		return "Cannot check readiness: " + jobProblem(*out.BadJob) + "."
	case UncheckedNotProbed:
		return "Not ready: the host was not probed."
	case UncheckedSMIFailed:
		return smiUnreadyReason(out.SMIFailure)
	case UncheckedNoGPUs:
		return "Not ready: nvidia-smi lists no GPUs."
	case UncheckedTooFewGPUs:
		return fmt.Sprintf("Not ready: TP %d needs %d GPUs and this host has %d.", out.Job.TP, out.Job.TP, out.HostGPUs)
	}
	if out.Ready {
		return readyReason(out)
	}
	return notReadyReason(out)
}

// jobProblem says what makes the job impossible to check.
func jobProblem(p JobProblem) string {
	switch p.Field {
	case "engine":
		return fmt.Sprintf("unknown engine %q (known: sglang, vllm)", p.Engine)
	case "tp":
		return fmt.Sprintf("the tensor-parallel size must be at least 1, not %d", p.TP)
	case "utilization":
		return fmt.Sprintf("gpu_memory_utilization must be in (0, 1], not %v", p.Utilization)
	case "need":
		return "the memory needed per GPU cannot be negative"
	}
	return "the context overhead cannot be negative"
}

// notes say which GPUs are left out and whether their models differ.
func notes(out Readiness) []string {
	var notes []string
	if mig := out.MIG; len(mig) > 0 {
		notes = append(notes, fmt.Sprintf("%s %s MIG enabled and cannot hold a tensor-parallel rank: left out", formatGPUs(mig), plural(len(mig), "has", "have")))
	}
	if len(out.MemoryUnknown) > 0 {
		notes = append(notes, fmt.Sprintf("nvidia-smi did not report the memory of %s: left out", formatGPUs(out.MemoryUnknown)))
	}
	if out.MixedModels {
		notes = append(notes, "the GPUs are of different models: CUDA numbers them fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID is set, so the default GPUs may not be nvidia-smi's 0.."+strconv.Itoa(out.Job.TP-1))
	}
	return notes
}

// formula writes one engine's check out with the host's numbers, clause by clause.
func formula(c EngineCheck) string {
	if len(c.Unusable) > 0 {
		var bad []string
		for _, u := range c.Unusable {
			bad = append(bad, fmt.Sprintf("GPU %d: %s", u.GPU, u.Why))
		}
		return strings.Join(bad, "; ") + ": cannot hold a rank"
	}
	var clauses []string
	switch {
	case c.Balance != nil:
		b := c.Balance
		clauses = append(clauses, fmt.Sprintf("min free %s (GPU %d) %s 0.9 × max free %s (GPU %d) = %s",
			fmtMiB(b.Min.FreeMiB), b.Min.GPU, relation(b.Min.FreeMiB, b.NeedMiB), fmtMiB(b.Max.FreeMiB), b.Max.GPU, fmtMiB(b.NeedMiB)))
	case c.TP1:
		clauses = append(clauses, "TP 1: no balance check")
	case c.PerGPU != nil:
		clauses = append(clauses, utilizationClause(*c.PerGPU))
	}
	if len(c.NoRoom) > 0 {
		clauses = append(clauses, fmt.Sprintf("%s %s less free than the %s CUDA context", formatGPUs(c.NoRoom),
			plural(len(c.NoRoom), "has", "have"), fmtMiB(c.ContextMiB)))
	}
	if n := c.Need; n != nil {
		clauses = append(clauses, fmt.Sprintf("min free %s (GPU %d) %s need %s", fmtMiB(n.Min.FreeMiB), n.Min.GPU,
			relation(n.Min.FreeMiB, n.NeedMiB), fmtMiB(n.NeedMiB)))
	}
	return strings.Join(clauses, "; ")
}

// relation is "≥" when have meets need, else "<".
func relation(have, need int64) string {
	if have < need {
		return "<"
	}
	return "≥"
}

// utilizationClause is vLLM's check, written on its tightest GPU.
func utilizationClause(u UtilizationCheck) string {
	f := strconv.FormatFloat(u.Utilization, 'f', -1, 64)
	clause := fmt.Sprintf("free ≥ %s × total on every GPU", f)
	if u.ReservedMiB > 0 {
		clause += fmt.Sprintf(" (total as CUDA sees it: %s − %s reserved = %s)",
			thousands(u.TotalMiB+u.ReservedMiB), thousands(u.ReservedMiB), fmtMiB(u.TotalMiB))
	}
	if len(u.Failing) == 0 {
		return clause + fmt.Sprintf(": tightest GPU %d has %s ≥ %s × %s = %s",
			u.Tight.GPU, fmtMiB(u.Tight.FreeMiB), f, thousands(u.TotalMiB), fmtMiB(u.NeedMiB))
	}
	return clause + fmt.Sprintf(": GPU %d has %s < %s × %s = %s (fails on %s)",
		u.Tight.GPU, fmtMiB(u.Tight.FreeMiB), f, thousands(u.TotalMiB), fmtMiB(u.NeedMiB), formatGPUs(u.Failing))
}

// smiUnreadyReason says that no GPU memory can be checked because nvidia-smi failed.
func smiUnreadyReason(f *parse.SMIFailure) string {
	reason := fmt.Sprintf("Not ready: nvidia-smi failed (%s), so no GPU memory can be checked (see smi-failed)", f.Kind)
	msg := strings.TrimSpace(strings.SplitN(f.Message, "\n", 2)[0])
	if msg == "" {
		return reason + "."
	}
	reason += ": \"" + msg + "\""
	if !strings.HasSuffix(msg, ".") {
		reason += "."
	}
	return reason
}

// readyReason says that the default GPUs pass.
func readyReason(out Readiness) string {
	return fmt.Sprintf("Ready: %s %s %s startup check%s for TP %d.", formatGPUs(out.GPUs), plural(len(out.GPUs), "passes", "pass"),
		engineList(out.Verdicts), plural(len(out.Verdicts), "", "s"), out.Job.TP)
}

// notReadyReason says why the default GPUs fail, and what would pass instead.
func notReadyReason(out Readiness) string {
	failed := failedOnly(out.Verdicts)
	fails := fmt.Sprintf("%s %s %s startup check%s", formatGPUs(out.GPUs), plural(len(out.GPUs), "fails", "fail"), engineList(failed), plural(len(failed), "", "s"))
	fix := ""
	if out.AfterFix {
		fix = fmt.Sprintf("; stopping leftover %s (see leftover-process) would let %s pass", diagnose.FormatPIDs(out.FixPIDs), formatGPUs(out.GPUs))
	}
	tp := out.Job.TP
	switch {
	case out.Subset != nil:
		return fmt.Sprintf("Not ready on the default GPUs: %s, but %s %s: launch with %s%s.", fails, formatGPUs(out.Subset),
			plural(len(out.Subset), "passes", "pass"), out.SubsetEnv, fix)
	case out.LargestGroup < tp:
		return fmt.Sprintf("Not ready: %s, and this host has no %d GPUs of one size that can hold ranks (at most %d)%s.", fails, tp, out.LargestGroup, fix)
	}
	return fmt.Sprintf("Not ready: %s, and no set of %d GPUs on this host can pass: %s%s.", fails, tp, blockerSentence(out.Blockers), fix)
}

// EngineTitle is an engine's name as people write it: "SGLang", "vLLM"; "" for an unknown one.
func EngineTitle(engine string) string { return engineTitles[engine] }

var engineTitles = map[string]string{EngineSGLang: "SGLang", EngineVLLM: "vLLM"}

// engineList is "SGLang's and vLLM's" for the engines of vs.
func engineList(vs []EngineVerdict) string {
	var names []string
	for _, v := range vs {
		names = append(names, engineTitles[v.Engine]+"'s")
	}
	return strings.Join(names, " and ")
}

func failedOnly(vs []EngineVerdict) []EngineVerdict {
	var out []EngineVerdict
	for _, v := range vs {
		if !v.Pass {
			out = append(out, v)
		}
	}
	return out
}

func blockerSentence(bs []Blocker) string {
	var gpus, pids []int
	mem := map[int]int64{}
	if len(bs) == 0 {
		return "no GPU has room for a rank"
	}
	var unattributed int64
	for _, b := range bs {
		gpus = append(gpus, b.GPU)
		for _, h := range b.Holders {
			if _, ok := mem[h.PID]; !ok {
				pids = append(pids, h.PID)
			}
			mem[h.PID] += h.MiB
		}
		unattributed += b.UnattributedMiB
	}
	slices.SortFunc(pids, func(a, b int) int { return cmp.Or(cmp.Compare(mem[b], mem[a]), cmp.Compare(a, b)) })
	// A sentence, not a table: the report lists every blocker.
	const maxPIDs = 5
	var who []string
	for i, p := range pids {
		if i == maxPIDs {
			who = append(who, fmt.Sprintf("%d more", len(pids)-maxPIDs))
			break
		}
		who = append(who, fmt.Sprintf("%d (%s)", p, fmtMiB(mem[p])))
	}
	s := "free memory on " + formatGPUs(gpus) + " is "
	switch {
	case len(who) > 0:
		s += "held by " + plural(len(pids), "PID ", "PIDs ") + strings.Join(who, ", ")
		if unattributed > 0 {
			s += fmt.Sprintf(" and %s by no listed process", fmtMiB(unattributed))
		}
	case unattributed > 0:
		s += fmt.Sprintf("held by no listed process (%s; see ghost-memory)", fmtMiB(unattributed))
	default:
		s += "too little, with no process holding it"
	}
	return s
}
