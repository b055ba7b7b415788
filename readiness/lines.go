package readiness

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/hostlist"
)

// The lines of a readiness answer in a report: words too, composed here from the facts; the
// report sanitizes what came from the host (through the function it passes) and places them.

// Lines writes one host's readiness (--tp) as plain lines, without indentation of their own
// beyond two spaces for the details under a heading, no color and no wrapping: the report's
// text and Markdown renderers place and style them. Everything that came from the host goes
// through sanitize.
func Lines(r Readiness, sanitize func(string) string) []string {
	out := []string{sanitize(r.Reason)}
	out = append(out, "checked: "+readinessJob(r.Job, sanitize))
	if c := r.Job.ContextOverheadMiB; c > 0 && len(r.Verdicts) > 0 {
		// The same host's memory-imbalance finding and the held: lines quote nvidia-smi's free
		// as it is: say once why the checks' figures are lower.
		out = append(out, "why "+thousands(c)+" MiB lower than memory-imbalance: each rank's CUDA context comes out of free first")
	}
	if len(r.GPUs) > 0 && len(r.Verdicts) > 0 {
		out = append(out, formatGPUs(r.GPUs)+" (the default, CUDA_VISIBLE_DEVICES unset):")
		out = append(out, readinessVerdicts(r.Verdicts, sanitize)...)
	}
	if r.Subset != nil {
		out = append(out, "use "+formatGPUs(r.Subset)+": "+sanitize(r.SubsetEnv))
		out = append(out, readinessVerdicts(r.SubsetVerdicts, sanitize)...)
	}
	if len(r.Blockers) > 0 {
		out = append(out, "held:")
		for _, b := range r.Blockers {
			out = append(out, "  "+readinessBlocker(b, sanitize))
		}
	}
	if len(r.FixPIDs) > 0 && !r.Ready {
		what := "leftover " + diagnose.FormatPIDs(r.FixPIDs) + " (see leftover-process)"
		if r.AfterFix {
			out = append(out, "after stopping "+what+": "+formatGPUs(r.GPUs)+" would pass")
		} else {
			out = append(out, "stopping "+what+" would not be enough on "+formatGPUs(r.GPUs))
		}
	}
	for _, n := range r.Notes {
		out = append(out, "note: "+sanitize(n))
	}
	return out
}

// FleetLines is the sweep's answer to "which hosts can take this job": one line per kind of
// answer that has hosts, the hosts folded (gpu[01-04,07]) and put through sanitize.
func FleetLines(f Fleet, sanitize func(string) string) []string {
	var out []string
	add := func(label string, hosts []string) {
		if len(hosts) > 0 {
			out = append(out, label+": "+sanitize(hostlist.Fold(hosts)))
		}
	}
	add("ready now", f.ReadyNow)
	add("ready with CUDA_VISIBLE_DEVICES set", f.ReadyWithSubset)
	add("ready after stopping leftover processes", f.ReadyAfterFix)
	add("not ready", f.NotReady)
	return out
}

func readinessEngine(e string, sanitize func(string) string) string {
	if n := EngineTitle(e); n != "" {
		return n
	}
	return sanitize(e)
}

// readinessJob is "TP 8; SGLang, vLLM (gpu_memory_utilization 0.9); 1,280 MiB CUDA context per
// rank taken from nvidia-smi's free".
func readinessJob(j Job, sanitize func(string) string) string {
	var engines []string
	for _, e := range j.Engines {
		n := readinessEngine(e, sanitize)
		if e == EngineVLLM {
			n += " (gpu_memory_utilization " + strconv.FormatFloat(j.GPUMemoryUtilization, 'f', -1, 64) + ")"
		}
		engines = append(engines, n)
	}
	parts := []string{"TP " + strconv.Itoa(j.TP), strings.Join(engines, ", ")}
	if j.NeedMiB != nil {
		parts = append(parts, "need "+thousands(*j.NeedMiB)+" MiB free per GPU")
	}
	if j.ContextOverheadMiB > 0 {
		parts = append(parts, thousands(j.ContextOverheadMiB)+" MiB CUDA context per rank taken from nvidia-smi's free")
	} else {
		parts = append(parts, "no CUDA context allowance")
	}
	return strings.Join(parts, "; ")
}

func readinessVerdicts(vs []EngineVerdict, sanitize func(string) string) []string {
	var out []string
	for _, v := range vs {
		word := "fails "
		if v.Pass {
			word = "passes"
		}
		out = append(out, fmt.Sprintf("  %-6s  %s  %s", readinessEngine(v.Engine, sanitize), word, sanitize(v.Formula)))
	}
	return out
}

// readinessBlocker is "GPU 0: 41,958 MiB free; PID 20629 (python3) holds 55,286 MiB, leftover".
func readinessBlocker(b Blocker, sanitize func(string) string) string {
	s := fmt.Sprintf("GPU %d: %s MiB free", b.GPU, thousands(b.FreeMiB))
	for _, h := range b.Holders {
		s += fmt.Sprintf("; PID %d", h.PID)
		if h.Name != "" {
			s += " (" + sanitize(h.Name) + ")"
		}
		s += " holds " + thousands(h.MiB) + " MiB"
		if h.Leftover {
			s += ", leftover"
		}
	}
	if b.UnattributedMiB > 0 {
		s += "; " + thousands(b.UnattributedMiB) + " MiB used by no listed process (see ghost-memory)"
	}
	if len(b.Holders) == 0 && b.UnattributedMiB == 0 {
		s += "; no process holds memory on it"
	}
	return s
}
