package diagnose

import (
	"cmp"
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

// groupCheck is SGLang's and vLLM's startup checks on one group of same-size GPUs: the GPUs
// with least (lo) and most (hi) free memory, what SGLang needs (0.9 × hi's free), the GPUs
// below it (short), and per GPU vLLM's verdict against 0.9 × the total CUDA reports (cudaMiB).
type groupCheck struct {
	grp                     []gpuMem
	lo, hi                  gpuMem
	idx, short, vfail, pass []int
	needMiB                 int64
	cudaMiB, vneedMiB       int64
}

// checkGroup runs the checks; false when SGLang's passes or the spread is too small to matter.
func checkGroup(grp []gpuMem) (groupCheck, bool) {
	c := groupCheck{grp: grp, lo: grp[0], hi: grp[0]}
	maxTotal := grp[0].total
	for _, m := range grp[1:] {
		if m.free < c.lo.free {
			c.lo = m
		}
		if m.free > c.hi.free {
			c.hi = m
		}
		maxTotal = max(maxTotal, m.total)
	}
	limit := sglangRatio * float64(c.hi.free)
	c.needMiB = sglangNeed(c.hi.free)
	spread := c.hi.free - c.lo.free
	if float64(c.lo.free) >= limit || spread < minSpreadMiB || float64(spread) < minSpreadFraction*float64(maxTotal) {
		return groupCheck{}, false
	}
	// vLLM: per GPU, free >= ceil(utilization × total), total as CUDA reports it (nvidia-smi's
	// total less its reserved memory), as readiness computes it.
	c.cudaMiB = cudaTotal(grp[0].g)
	c.vneedMiB = ceilMul(vllmUtilization, c.cudaMiB)
	for _, m := range grp {
		c.idx = append(c.idx, m.g.Index)
		if float64(m.free) < limit {
			c.short = append(c.short, m.g.Index)
		}
		if m.free < ceilMul(vllmUtilization, cudaTotal(m.g)) {
			c.vfail = append(c.vfail, m.g.Index)
		} else {
			c.pass = append(c.pass, m.g.Index)
		}
	}
	return c, true
}

// groupCheckFacts is c as a finding's facts.
func (h *host) groupCheckFacts(c groupCheck) *GroupCheck {
	g := &GroupCheck{Lo: c.lo.g.Index, Hi: c.hi.g.Index, NeedMiB: c.needMiB, CUDAMiB: c.cudaMiB, VLLMNeedMiB: c.vneedMiB,
		VLLMFail: c.vfail, VLLMPass: c.pass, PCIOrder: h.mixedModels()}
	for _, m := range c.grp {
		gg := GroupGPU{Index: m.g.Index, Name: m.g.Name, TotalMiB: m.total, FreeMiB: m.free}
		if m.usedKnown {
			gg.UsedMiB = &m.used
		}
		g.GPUs = append(g.GPUs, gg)
	}
	return g
}

// imbalance is the memory-imbalance finding of one group, when SGLang's check fails on it.
func (h *host) imbalance(grp []gpuMem) (Finding, bool) {
	c, ok := checkGroup(grp)
	if !ok {
		return Finding{}, false
	}
	im := h.judgeImbalance(grp, c.short)
	f := Finding{Code: CodeMemoryImbalance, GPUs: c.idx, Imbalance: im, Severity: Info}
	f.PIDs = append(slices.Clone(im.Leftover), im.Healthy...)
	slices.Sort(f.PIDs)
	if len(im.Leftover) > 0 || im.unlisted() > 0 || len(im.Healthy) == 0 {
		f.Severity = Error
	}
	actions, omitted := h.imbalanceActions(im, c.pass)
	f.Actions, f.Checks = actions, []Command{verifyGPUFree}
	f.Check, f.Omitted = h.groupCheckFacts(c), omitted
	for _, sg := range im.Short {
		for i, s := range sg.Holders {
			if i == maxHolderLines {
				break
			}
			h.name(&f, s.PID)
		}
	}
	for _, pids := range whoLists(im) {
		h.name(&f, firstN(pids, maxWho)...)
	}
	imbalanceWords(&f)
	return f, true
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
		f := Finding{Code: CodeGPUBusy, Severity: Info}
		for _, gp := range procs {
			f.PIDs = append(f.PIDs, gp.PID)
			for g := range gp.GPUMemoryMiB {
				if !slices.Contains(f.GPUs, g) {
					f.GPUs = append(f.GPUs, g)
				}
			}
		}
		slices.Sort(f.GPUs)
		f.Job = h.busyJob(k, procs)
		for _, g := range f.GPUs {
			f.Memory = append(f.Memory, h.gpuMemory(g))
		}
		for _, gp := range procs[:min(len(procs), maxBusyLines)] {
			f.Named = append(f.Named, h.describe(gp.PID))
		}
		busyWords(&f)
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
