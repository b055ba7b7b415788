package diagnose

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gputriage/gputriage/parse"
)

const (
	// sglangRatio is SGLang's tensor-parallel startup check: every rank fails when the
	// smallest free memory across ranks is below sglangRatio × its own free memory.
	sglangRatio = 0.9
	// vllmUtilization is vLLM's default gpu_memory_utilization: each GPU must have this
	// fraction of its total memory free at startup.
	vllmUtilization = 0.9
	// sizeTolerance groups GPUs whose memory.total differs by at most this fraction (the
	// same model can report a few MiB more or less, e.g. with ECC toggled).
	sizeTolerance = 0.02
	// An imbalance is reported only when the spread of free memory is at least
	// minSpreadFraction of the GPU's total and minSpreadMiB: on GPUs that a healthy job has
	// nearly filled, a few hundred MiB of difference fails the ratio but means nothing.
	minSpreadFraction = 0.05
	minSpreadMiB      = 1024
)

type gpuMem struct {
	g                 *parse.GPU
	total, free, used int64
	usedKnown         bool
}

// gpuGroups splits the GPUs with known total and free memory, MIG off, into groups of the
// same size; each group is what a tensor-parallel job would span.
func (h *host) gpuGroups() [][]gpuMem {
	var all []gpuMem
	for i := range h.s.GPUs {
		g := &h.s.GPUs[i]
		if g.MemoryTotalMiB == nil || g.MemoryFreeMiB == nil || *g.MemoryTotalMiB <= 0 || g.MIGMode == "Enabled" {
			continue
		}
		m := gpuMem{g: g, total: *g.MemoryTotalMiB, free: *g.MemoryFreeMiB}
		if g.MemoryUsedMiB != nil {
			m.used, m.usedKnown = *g.MemoryUsedMiB, true
		}
		all = append(all, m)
	}
	slices.SortStableFunc(all, func(a, b gpuMem) int {
		return cmp.Or(cmp.Compare(a.total, b.total), cmp.Compare(a.g.Index, b.g.Index))
	})
	var groups [][]gpuMem
	for _, m := range all {
		n := len(groups)
		if n > 0 && float64(m.total) <= float64(groups[n-1][0].total)*(1+sizeTolerance) {
			groups[n-1] = append(groups[n-1], m)
			continue
		}
		groups = append(groups, []gpuMem{m})
	}
	for _, grp := range groups {
		slices.SortFunc(grp, func(a, b gpuMem) int { return a.g.Index - b.g.Index })
	}
	return groups
}

// imbalanceFindings runs SGLang's check on each group of same-size GPUs.
func (h *host) imbalanceFindings() []Finding {
	var out []Finding
	for _, grp := range h.gpuGroups() {
		if len(grp) < 2 {
			continue
		}
		if f, ok := h.imbalance(grp); ok {
			out = append(out, f)
		}
	}
	return out
}

func (h *host) imbalance(grp []gpuMem) (Finding, bool) {
	lo, hi := grp[0], grp[0]
	maxTotal := grp[0].total
	for _, m := range grp[1:] {
		if m.free < lo.free {
			lo = m
		}
		if m.free > hi.free {
			hi = m
		}
		maxTotal = max(maxTotal, m.total)
	}
	limit := sglangRatio * float64(hi.free)
	need := sglangNeed(hi.free)
	spread := hi.free - lo.free
	if float64(lo.free) >= limit || spread < minSpreadMiB || float64(spread) < minSpreadFraction*float64(maxTotal) {
		return Finding{}, false
	}

	var idx, short, pass []int
	for _, m := range grp {
		idx = append(idx, m.g.Index)
		if float64(m.free) < limit {
			short = append(short, m.g.Index)
		}
	}

	f := Finding{Code: CodeMemoryImbalance, GPUs: idx}
	f.Title = fmt.Sprintf("SGLang's TP check fails on %s: GPU %d has %s free vs %s on GPU %d",
		FormatGPUs(idx), lo.g.Index, fmtMiB(lo.free), fmtMiB(hi.free), hi.g.Index)

	// The group and each GPU's memory, GPUs with identical numbers on one line.
	f.Evidence = append(f.Evidence, fmt.Sprintf("%s: %s, %s total each", FormatGPUs(idx), groupName(grp), totalRange(grp)))
	type row struct {
		used, free int64
		known      bool
	}
	var rows []row
	rowGPUs := map[row][]int{}
	for _, m := range grp {
		r := row{m.used, m.free, m.usedKnown}
		if _, ok := rowGPUs[r]; !ok {
			rows = append(rows, r)
		}
		rowGPUs[r] = append(rowGPUs[r], m.g.Index)
	}
	for _, r := range rows {
		used := "used unknown"
		if r.known {
			used = "used " + fmtMiB(r.used)
		}
		f.Evidence = append(f.Evidence, fmt.Sprintf("%s: %s, free %s", FormatGPUs(rowGPUs[r]), used, fmtMiBGiB(r.free)))
	}
	check := fmt.Sprintf("%s < 0.9 × %s = %s", thousands(lo.free), thousands(hi.free), fmtMiB(need))
	f.Evidence = append(f.Evidence, fmt.Sprintf("SGLang TP check: min free %s (GPU %d) < 0.9 × max free %s (GPU %d) = %s → fails",
		fmtMiB(lo.free), lo.g.Index, fmtMiB(hi.free), hi.g.Index, fmtMiB(need)))

	// vLLM: per GPU, free >= ceil(utilization × total), total as CUDA reports it (nvidia-smi's
	// total less its reserved memory), as readiness computes it.
	var vfail []int
	for _, m := range grp {
		if m.free < ceilMul(vllmUtilization, cudaTotal(m.g)) {
			vfail = append(vfail, m.g.Index)
		} else {
			pass = append(pass, m.g.Index)
		}
	}
	ct := cudaTotal(grp[0].g)
	vneed := ceilMul(vllmUtilization, ct)
	cudaNote := ""
	if ct != grp[0].total {
		cudaNote = fmt.Sprintf(" (%s total − %s reserved, as CUDA counts it)", thousands(grp[0].total), thousands(grp[0].total-ct))
	}
	vline := fmt.Sprintf("vLLM check (gpu_memory_utilization=0.9): needs 0.9 × %s%s = %s free per GPU → ",
		thousands(ct), cudaNote, fmtMiB(vneed))
	switch {
	case len(vfail) == 0:
		vline += "passes on every GPU"
	case len(pass) == 0:
		vline += "fails on every GPU (lowest " + fmtMiB(lo.free) + " free)"
	default:
		vline += fmt.Sprintf("fails on %s (lowest %s free); %s pass", FormatGPUs(vfail), fmtMiB(lo.free), FormatGPUs(pass))
	}
	f.Evidence = append(f.Evidence, vline)

	im := h.judgeImbalance(grp, short)
	f.Imbalance = im
	f.Evidence = append(f.Evidence, h.imbalanceHolderLines(im)...)
	f.PIDs = append(slices.Clone(im.Leftover), im.Healthy...)
	slices.Sort(f.PIDs)
	f.Severity = Info
	if len(im.Leftover) > 0 || im.unlisted() > 0 || len(im.Healthy) == 0 {
		f.Severity = Error
	}
	f.Explanation = fmt.Sprintf("A tensor-parallel launch across %s fails SGLang's startup check (\"The memory capacity is unbalanced. Some GPUs may be occupied by other processes.\"): "+
		"each rank takes the smallest free memory across all ranks and refuses to start if it is below 90%% of its own free memory. "+
		"Here GPU %d has %s free and GPU %d has %s, and %s. "+
		"SGLang prints these numbers in GiB, measured after each rank has created its CUDA context, so its figures read a little lower. ",
		FormatGPUs(idx), lo.g.Index, fmtMiB(lo.free), hi.g.Index, fmtMiB(hi.free), check)
	if len(vfail) > 0 {
		f.Explanation += fmt.Sprintf("vLLM checks each GPU on its own: with gpu_memory_utilization=0.9 it needs %s free on every GPU, which %s %s not have. ",
			fmtMiB(vneed), FormatGPUs(vfail), plural(len(vfail), "does", "do"))
	}
	f.Explanation += h.imbalanceVerdict(im)
	actions, omitted := h.imbalanceActions(im, pass)
	f.Actions, f.Checks = actions, []Command{verifyGPUFree}
	f.Fix = fixWords(f.Actions, omitted, f.Checks)
	return f, true
}

func groupName(grp []gpuMem) string {
	name := grp[0].g.Name
	for _, m := range grp[1:] {
		if m.g.Name != name {
			return "mixed models"
		}
	}
	if name == "" {
		return "model unknown"
	}
	return name
}

func totalRange(grp []gpuMem) string {
	lo, hi := grp[0].total, grp[0].total
	for _, m := range grp {
		lo, hi = min(lo, m.total), max(hi, m.total)
	}
	if lo == hi {
		return fmtMiB(lo)
	}
	return thousands(lo) + "–" + fmtMiB(hi)
}

func joinInts(xs []int, sep string) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, sep)
}

// busyFindings reports healthy GPU work, one finding per job, so a busy host reads as fine.
func (h *host) busyFindings() []Finding {
	jobs := map[string][]*GPUProcess{}
	var keys []string
	for i := range h.procs {
		gp := &h.procs[i]
		if gp.memMiB() <= 0 {
			continue
		}
		if _, bad := h.leftovers[gp.PID]; bad {
			continue
		}
		if p := h.procByPID[gp.PID]; p != nil && p.Gone {
			continue
		}
		k := h.jobKey(gp)
		if _, ok := jobs[k]; !ok {
			keys = append(keys, k)
		}
		jobs[k] = append(jobs[k], gp)
	}
	slices.Sort(keys)
	var out []Finding
	var folded []int
	if len(keys) > maxDetailed {
		for _, k := range keys[maxDetailed:] {
			for _, gp := range jobs[k] {
				folded = append(folded, gp.PID)
			}
		}
		slices.Sort(folded)
		keys = keys[:maxDetailed]
	}
	for _, k := range keys {
		procs := jobs[k]
		perGPU := map[int]int64{}
		var total int64
		f := Finding{Code: CodeGPUBusy, Severity: Info}
		for _, gp := range procs {
			f.PIDs = append(f.PIDs, gp.PID)
			for g, m := range gp.GPUMemoryMiB {
				perGPU[g] += m
				total += m
			}
		}
		for g := range perGPU {
			f.GPUs = append(f.GPUs, g)
		}
		slices.Sort(f.GPUs)
		title := h.jobTitle(k, procs)
		f.Title = fmt.Sprintf("%s in use by %s: %s in %d %s", FormatGPUs(f.GPUs), title, fmtMiB(total), len(procs), plural(len(procs), "process", "processes"))
		f.Explanation = fmt.Sprintf("This GPU memory is held by %s, and nothing suggests %s abandoned. This is information about the host, not a problem.",
			title, plural(len(procs), "it is", "they are"))
		f.Evidence = append(f.Evidence, h.ownerEvidence(procs[0])...)
		for _, g := range f.GPUs {
			line := fmt.Sprintf("GPU %d: %s used by this job", g, fmtMiB(perGPU[g]))
			if gg := h.gpuByIndex[g]; gg != nil && gg.MemoryUsedMiB != nil && gg.MemoryTotalMiB != nil {
				line += fmt.Sprintf(" (GPU: %s of %s used)", thousands(*gg.MemoryUsedMiB), fmtMiB(*gg.MemoryTotalMiB))
			}
			f.Evidence = append(f.Evidence, line)
		}
		const maxLines = 10
		for i, gp := range procs {
			if i == maxLines {
				f.Evidence = append(f.Evidence, fmt.Sprintf("… and %d more processes", len(procs)-maxLines))
				break
			}
			age := "age unknown"
			if gp.Elapsed != nil {
				age = "up " + FormatAge(*gp.Elapsed)
			}
			f.Evidence = append(f.Evidence, fmt.Sprintf("PID %d (%s, %s, %s on %s): %s", gp.PID, h.userName(gp.UID, gp.User), age,
				fmtMiB(gp.memMiB()), FormatGPUs(gp.memGPUs()), h.cmdline(gp.PID)))
		}
		out = append(out, f)
	}
	if len(folded) > 0 {
		out = append(out, foldedFinding(CodeGPUBusy, Info, "hold GPU memory in other jobs", folded))
	}
	return out
}

// cudaTotal is a GPU's memory as CUDA reports it to the engines: nvidia-smi's total less the
// memory the driver reserves, when nvidia-smi reports that.
func cudaTotal(g *parse.GPU) int64 {
	t := *g.MemoryTotalMiB
	if g.MemoryReservedMiB != nil && *g.MemoryReservedMiB > 0 && *g.MemoryReservedMiB < t {
		t -= *g.MemoryReservedMiB
	}
	return t
}
