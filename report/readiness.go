package report

import "github.com/gputriage/gputriage/readiness"

// ReadinessLines renders one host's readiness (--tp) as plain lines (readiness.Lines), every
// string that came from the host sanitized: the text and Markdown renderers place and style
// them.
func ReadinessLines(r readiness.Readiness) []string { return readiness.Lines(r, Sanitize) }

// FleetReadinessLines is the sweep's answer to "which hosts can take this job", sanitized.
func FleetReadinessLines(f readiness.Fleet) []string { return readiness.FleetLines(f, Sanitize) }

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
