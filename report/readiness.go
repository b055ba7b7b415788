package report

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/hostlist"
	"github.com/gputriage/gputriage/readiness"
)

// ReadinessLines renders one host's readiness (--tp) as plain lines, without indentation of
// their own beyond two spaces for the details under a heading, no color and no wrapping: the
// text and Markdown renderers place and style them. Everything that came from the host is
// sanitized.
func ReadinessLines(r readiness.Readiness) []string {
	out := []string{Sanitize(r.Reason)}
	out = append(out, "checked: "+readinessJob(r.Job))
	if c := r.Job.ContextOverheadMiB; c > 0 && len(r.Verdicts) > 0 {
		// The same host's memory-imbalance finding and the held: lines quote nvidia-smi's free
		// as it is: say once why the checks' figures are lower.
		out = append(out, "why "+mib(c)+" MiB lower than memory-imbalance: each rank's CUDA context comes out of free first")
	}
	if len(r.GPUs) > 0 && len(r.Verdicts) > 0 {
		out = append(out, diagnose.FormatGPUs(r.GPUs)+" (the default, CUDA_VISIBLE_DEVICES unset):")
		out = append(out, readinessVerdicts(r.Verdicts)...)
	}
	if r.Subset != nil {
		out = append(out, "use "+diagnose.FormatGPUs(r.Subset)+": "+Sanitize(r.SubsetEnv))
		out = append(out, readinessVerdicts(r.SubsetVerdicts)...)
	}
	if len(r.Blockers) > 0 {
		out = append(out, "held:")
		for _, b := range r.Blockers {
			out = append(out, "  "+readinessBlocker(b))
		}
	}
	if len(r.FixPIDs) > 0 && !r.Ready {
		what := "leftover " + readinessPIDs(r.FixPIDs) + " (see leftover-process)"
		if r.AfterFix {
			out = append(out, "after stopping "+what+": "+diagnose.FormatGPUs(r.GPUs)+" would pass")
		} else {
			out = append(out, "stopping "+what+" would not be enough on "+diagnose.FormatGPUs(r.GPUs))
		}
	}
	for _, n := range r.Notes {
		out = append(out, "note: "+Sanitize(n))
	}
	return out
}

// FleetReadinessLines is the sweep's answer to "which hosts can take this job": one line per
// kind of answer that has hosts, the hosts folded (gpu[01-04,07]).
func FleetReadinessLines(f readiness.Fleet) []string {
	var out []string
	add := func(label string, hosts []string) {
		if len(hosts) > 0 {
			out = append(out, label+": "+Sanitize(hostlist.Fold(hosts)))
		}
	}
	add("ready now", f.ReadyNow)
	add("ready with CUDA_VISIBLE_DEVICES set", f.ReadyWithSubset)
	add("ready after stopping leftover processes", f.ReadyAfterFix)
	add("not ready", f.NotReady)
	return out
}

func readinessEngine(e string) string {
	if n := readiness.EngineTitle(e); n != "" {
		return n
	}
	return Sanitize(e)
}

// readinessJob is "TP 8; SGLang, vLLM (gpu_memory_utilization 0.9); 1,280 MiB CUDA context per
// rank taken from nvidia-smi's free".
func readinessJob(j readiness.Job) string {
	var engines []string
	for _, e := range j.Engines {
		n := readinessEngine(e)
		if e == readiness.EngineVLLM {
			n += " (gpu_memory_utilization " + strconv.FormatFloat(j.GPUMemoryUtilization, 'f', -1, 64) + ")"
		}
		engines = append(engines, n)
	}
	parts := []string{"TP " + strconv.Itoa(j.TP), strings.Join(engines, ", ")}
	if j.NeedMiB != nil {
		parts = append(parts, "need "+mib(*j.NeedMiB)+" MiB free per GPU")
	}
	if j.ContextOverheadMiB > 0 {
		parts = append(parts, mib(j.ContextOverheadMiB)+" MiB CUDA context per rank taken from nvidia-smi's free")
	} else {
		parts = append(parts, "no CUDA context allowance")
	}
	return strings.Join(parts, "; ")
}

func readinessVerdicts(vs []readiness.EngineVerdict) []string {
	var out []string
	for _, v := range vs {
		word := "fails "
		if v.Pass {
			word = "passes"
		}
		out = append(out, fmt.Sprintf("  %-6s  %s  %s", readinessEngine(v.Engine), word, Sanitize(v.Formula)))
	}
	return out
}

// readinessBlocker is "GPU 0: 41,958 MiB free; PID 20629 (python3) holds 55,286 MiB, leftover".
func readinessBlocker(b readiness.Blocker) string {
	s := fmt.Sprintf("GPU %d: %s MiB free", b.GPU, mib(b.FreeMiB))
	for _, h := range b.Holders {
		s += fmt.Sprintf("; PID %d", h.PID)
		if h.Name != "" {
			s += " (" + Sanitize(h.Name) + ")"
		}
		s += " holds " + mib(h.MiB) + " MiB"
		if h.Leftover {
			s += ", leftover"
		}
	}
	if b.UnattributedMiB > 0 {
		s += "; " + mib(b.UnattributedMiB) + " MiB used by no listed process (see ghost-memory)"
	}
	if len(b.Holders) == 0 && b.UnattributedMiB == 0 {
		s += "; no process holds memory on it"
	}
	return s
}

func readinessPIDs(pids []int) string {
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(p)
	}
	if len(pids) == 1 {
		return "PID " + s[0]
	}
	return "PIDs " + strings.Join(s, ", ")
}

// ReadinessJSON is one host's readiness in the JSON report (docs/readiness.md). Strings are
// the values exactly, made valid UTF-8; lists are [] when empty, and subset,
// cuda_visible_devices and env are null when no subset passes.
type ReadinessJSON struct {
	TP                   int                    `json:"tp"`
	Engines              []string               `json:"engines"`
	GPUMemoryUtilization float64                `json:"gpu_memory_utilization"`
	NeedMiB              *int64                 `json:"need_mib"`
	ContextOverheadMiB   int64                  `json:"context_overhead_mib"`
	GPUs                 []int                  `json:"gpus"`
	Ready                bool                   `json:"ready"`
	Verdicts             []ReadinessVerdictJSON `json:"verdicts"`
	Subset               []int                  `json:"subset"`
	CUDAVisibleDevices   *string                `json:"cuda_visible_devices"`
	Env                  *string                `json:"env"`
	SubsetVerdicts       []ReadinessVerdictJSON `json:"subset_verdicts"`
	Blockers             []ReadinessBlockerJSON `json:"blockers"`
	ReadyAfterFix        bool                   `json:"ready_after_fix"`
	FixPIDs              []int                  `json:"fix_pids"`
	Notes                []string               `json:"notes"`
	Reason               string                 `json:"reason"`
}

// ReadinessVerdictJSON is one engine's check.
type ReadinessVerdictJSON struct {
	Engine      string `json:"engine"`
	Pass        bool   `json:"pass"`
	Formula     string `json:"formula"`
	FailingGPUs []int  `json:"failing_gpus"`
}

// ReadinessBlockerJSON is a GPU whose free memory keeps every set of TP GPUs from passing.
type ReadinessBlockerJSON struct {
	GPU             int                   `json:"gpu"`
	FreeMiB         int64                 `json:"free_mib"`
	Holders         []ReadinessHolderJSON `json:"holders"`
	UnattributedMiB int64                 `json:"unattributed_mib"`
}

// ReadinessHolderJSON is a process holding memory on a blocking GPU.
type ReadinessHolderJSON struct {
	PID      int    `json:"pid"`
	Name     string `json:"name"`
	MiB      int64  `json:"mib"`
	Leftover bool   `json:"leftover"`
}

// FleetReadinessJSON is the sweep's readiness summary: host names exactly as given, each in
// one list.
type FleetReadinessJSON struct {
	ReadyNow        []string `json:"ready_now"`
	ReadyWithSubset []string `json:"ready_with_subset"`
	ReadyAfterFix   []string `json:"ready_after_fix"`
	NotReady        []string `json:"not_ready"`
}

// ReadinessJSONOf converts a readiness for the JSON report.
func ReadinessJSONOf(r readiness.Readiness) ReadinessJSON {
	j := ReadinessJSON{
		TP: r.Job.TP, Engines: readinessList(validAll(r.Job.Engines)), GPUMemoryUtilization: r.Job.GPUMemoryUtilization,
		NeedMiB: r.Job.NeedMiB, ContextOverheadMiB: r.Job.ContextOverheadMiB,
		GPUs: orEmpty(r.GPUs), Ready: r.Ready, Verdicts: readinessVerdictsJSON(r.Verdicts),
		Subset: r.Subset, SubsetVerdicts: readinessVerdictsJSON(r.SubsetVerdicts),
		Blockers: []ReadinessBlockerJSON{}, ReadyAfterFix: r.AfterFix, FixPIDs: orEmpty(r.FixPIDs),
		Notes: readinessList(validAll(r.Notes)), Reason: validUTF8(r.Reason),
	}
	if r.Subset != nil {
		j.CUDAVisibleDevices = optStr(joinInts(r.Subset))
		j.Env = optStr(r.SubsetEnv)
	}
	for _, b := range r.Blockers {
		bj := ReadinessBlockerJSON{GPU: b.GPU, FreeMiB: b.FreeMiB, Holders: []ReadinessHolderJSON{}, UnattributedMiB: b.UnattributedMiB}
		for _, h := range b.Holders {
			bj.Holders = append(bj.Holders, ReadinessHolderJSON{PID: h.PID, Name: validUTF8(h.Name), MiB: h.MiB, Leftover: h.Leftover})
		}
		j.Blockers = append(j.Blockers, bj)
	}
	return j
}

// FleetReadinessJSONOf converts a fleet summary for the JSON report.
func FleetReadinessJSONOf(f readiness.Fleet) FleetReadinessJSON {
	return FleetReadinessJSON{
		ReadyNow: readinessList(validAll(f.ReadyNow)), ReadyWithSubset: readinessList(validAll(f.ReadyWithSubset)),
		ReadyAfterFix: readinessList(validAll(f.ReadyAfterFix)), NotReady: readinessList(validAll(f.NotReady)),
	}
}

func readinessVerdictsJSON(vs []readiness.EngineVerdict) []ReadinessVerdictJSON {
	out := []ReadinessVerdictJSON{}
	for _, v := range vs {
		out = append(out, ReadinessVerdictJSON{Engine: validUTF8(v.Engine), Pass: v.Pass, Formula: validUTF8(v.Formula), FailingGPUs: orEmpty(v.Failing)})
	}
	return out
}

// readinessList is [] for an empty list of strings, as the JSON report writes every empty list.
func readinessList(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

// fleetReadiness summarizes the hosts' readiness when --tp was given (any host has one).
func fleetReadiness(hosts []Host) *readiness.Fleet {
	var hr []readiness.Host
	for _, h := range hosts {
		if h.Readiness != nil {
			hr = append(hr, readiness.Host{Host: h.Name, Readiness: *h.Readiness})
		}
	}
	if hr == nil {
		return nil
	}
	f := readiness.Summarize(hr)
	return &f
}
