package diagnose

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gputriage/gputriage/parse"
)

// Readiness answers "will my deployment start on this host?" by running each inference
// engine's own startup memory check on the host's numbers. docs/readiness.md gives the
// formulas and the engine source they come from.

// Engine names, as --engine takes them.
const (
	EngineSGLang = "sglang"
	EngineVLLM   = "vllm"
)

const (
	// DefaultGPUMemoryUtilization is vLLM's default --gpu-memory-utilization.
	DefaultGPUMemoryUtilization = vllmUtilization
	// DefaultContextOverheadMiB is the memory each rank takes on its GPU before the engine
	// measures free memory: the CUDA context, NCCL's buffers and the custom all-reduce
	// workspace. Both engines measure after the process group is up. On ct200 (RTX PRO 6000
	// Blackwell, TP 8) nvidia-smi showed 41,958 MiB free on GPU 0 and SGLang reported
	// 39.75 GiB (40,704 MiB): 1,254 MiB less. Rounded up to 1.25 GiB; the usual range is
	// 0.5-1.5 GiB depending on the GPU, driver and NCCL settings.
	DefaultContextOverheadMiB int64 = 1280
)

// Job is the deployment to check a host for.
type Job struct {
	TP int // tensor-parallel size: GPUs per replica, >= 1
	// Engines are the engines whose startup checks must pass: EngineSGLang, EngineVLLM.
	// Empty means both.
	Engines []string
	// GPUMemoryUtilization is vLLM's --gpu-memory-utilization, in (0, 1]; 0 means the
	// default, 0.9.
	GPUMemoryUtilization float64
	// NeedMiB, when set, is the memory each rank needs free after its CUDA context (--need).
	NeedMiB *int64
	// ContextOverheadMiB is subtracted from nvidia-smi's free memory on every rank's GPU
	// before the checks; 0 means none. The CLI's default is DefaultContextOverheadMiB.
	ContextOverheadMiB int64
}

// EngineVerdict is one engine's startup check on a set of GPUs.
type EngineVerdict struct {
	Engine string // EngineSGLang or EngineVLLM
	Pass   bool
	// Formula is the check written out with the host's numbers, e.g. "min free 40,678 MiB
	// (GPU 0) < 0.9 × max free 95,972 MiB (GPU 1) = 86,375 MiB".
	Formula string
	// Failing are the GPUs that make the check fail, sorted.
	Failing []int
}

// Holder is a process holding memory on a GPU that blocks the job.
type Holder struct {
	PID      int
	Name     string // nvidia-smi's process name or the kernel's comm (host data: sanitize)
	MiB      int64  // on this GPU
	Leftover bool   // Diagnose reported it as leftover-process
}

// Blocker is a GPU whose free memory keeps every set of TP GPUs from passing.
type Blocker struct {
	GPU     int
	FreeMiB int64    // as nvidia-smi reports it
	Holders []Holder // most memory first
	// UnattributedMiB is memory.used that no listed process accounts for (see ghost-memory).
	UnattributedMiB int64
}

// Readiness is the answer for one host.
type Readiness struct {
	// Job is the job as checked: engines filled in, utilization defaulted.
	Job Job
	// GPUs is the set the engines would use with CUDA_VISIBLE_DEVICES unset: the first TP
	// GPUs by nvidia-smi index. Empty when the host has fewer than TP GPUs.
	GPUs     []int
	Verdicts []EngineVerdict // on GPUs, in the order of Job.Engines
	Ready    bool            // every engine passes on GPUs
	// Subset is, when not Ready, the best TP GPUs of one size that pass every engine: the
	// largest smallest free memory, then the lowest indexes. Nil when no set passes.
	Subset         []int
	SubsetEnv      string          // e.g. "CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7"
	SubsetVerdicts []EngineVerdict // the checks on Subset
	// Blockers are, when no subset passes, the GPUs whose free memory is held, with the
	// processes holding it.
	Blockers []Blocker
	// AfterFix is set when GPUs would pass every engine once the processes Diagnose
	// reported as leftover-process (FixPIDs) were stopped and their memory given back.
	AfterFix bool
	FixPIDs  []int
	// Notes are what the check could not use: MIG-enabled GPUs, GPUs with unknown memory,
	// mixed GPU models.
	Notes []string
	// Reason is one plain sentence saying why. It can quote nvidia-smi's message, so it is
	// host data.
	Reason string
}

// HostReadiness is one host's answer, for a fleet summary.
type HostReadiness struct {
	Host      string
	Readiness Readiness
}

// FleetReadiness sorts hosts by what it takes to run the job on them. Every host is in
// exactly one list, in the order given.
type FleetReadiness struct {
	ReadyNow        []string // the default GPUs pass
	ReadyWithSubset []string // passes now, with CUDA_VISIBLE_DEVICES set to Subset
	ReadyAfterFix   []string // passes once the leftover processes are stopped
	NotReady        []string
}

// SummarizeReadiness sorts hosts into FleetReadiness's lists.
func SummarizeReadiness(hosts []HostReadiness) FleetReadiness {
	var f FleetReadiness
	for _, h := range hosts {
		r := h.Readiness
		switch {
		case r.Ready:
			f.ReadyNow = append(f.ReadyNow, h.Host)
		case r.Subset != nil:
			f.ReadyWithSubset = append(f.ReadyWithSubset, h.Host)
		case r.AfterFix:
			f.ReadyAfterFix = append(f.ReadyAfterFix, h.Host)
		default:
			f.NotReady = append(f.NotReady, h.Host)
		}
	}
	return f
}

// rankGPU is one GPU as a rank would see it.
type rankGPU struct {
	index int
	// total is the total memory as CUDA reports it (cudaMemGetInfo, torch's mem_get_info):
	// nvidia-smi's memory.total less memory.reserved, which the driver keeps for itself. On
	// an RTX PRO 6000 Blackwell nvidia-smi says 97,887 MiB total, 635 MiB reserved, and vLLM
	// logs "94.97 GiB" (97,252 MiB). nvidia-smi's total when reserved is unknown.
	total    int64
	reserved int64 // memory.reserved; 0 when unknown
	free     int64 // nvidia-smi's memory.free
	avail    int64 // free minus the context overhead: what the engine measures
}

// checker runs the engines' checks for one job.
type checker struct {
	job          Job
	sglang, vllm bool
	ratioApplies bool // SGLang's balance check runs only with TP > 1
}

// ceilMul is the smallest whole number of MiB that is >= f × n. Free memory is a whole
// number of MiB, so free >= f × n exactly when free >= ceilMul(f, n). Both engines compute
// f × n in float64 (in bytes or GiB: a power-of-two scale, which rounds the same), so this
// reproduces their comparison bit for bit at nvidia-smi's granularity.
func ceilMul(f float64, n int64) int64 { return int64(math.Ceil(f * float64(n))) }

// sglangNeed is the least min free that passes SGLang's check against a rank with max free.
func sglangNeed(maxAvail int64) int64 { return ceilMul(sglangRatio, maxAvail) }

// vllmNeed is the least free memory that passes vLLM's check on a GPU of CUDA total total.
func (c *checker) vllmNeed(total int64) int64 { return ceilMul(c.job.GPUMemoryUtilization, total) }

// perGPUOK says whether g can hold a rank at all, whatever its peers: room for the context,
// vLLM's per-GPU check, and --need.
func (c *checker) perGPUOK(g rankGPU) bool {
	if g.avail <= 0 {
		return false
	}
	if c.vllm && g.avail < c.vllmNeed(g.total) {
		return false
	}
	if c.job.NeedMiB != nil && g.avail < *c.job.NeedMiB {
		return false
	}
	return true
}

// needClause checks --need against the smallest free memory of set; "" when --need is unset.
func (c *checker) needClause(lo rankGPU, set []rankGPU) (string, []int) {
	if c.job.NeedMiB == nil {
		return "", nil
	}
	need := *c.job.NeedMiB
	var short []int
	for _, g := range set {
		if g.avail < need {
			short = append(short, g.index)
		}
	}
	rel := "≥"
	if lo.avail < need {
		rel = "<"
	}
	return fmt.Sprintf("min free %s (GPU %d) %s need %s", fmtMiB(lo.avail), lo.index, rel, fmtMiB(need)), short
}

// contextClause names the GPUs left with no room for a CUDA context; "" when there are none.
func (c *checker) contextClause(set []rankGPU) (string, []int) {
	var none []int
	for _, g := range set {
		if g.avail <= 0 {
			none = append(none, g.index)
		}
	}
	if len(none) == 0 {
		return "", nil
	}
	return fmt.Sprintf("%s %s less free than the %s CUDA context", FormatGPUs(none), plural(len(none), "has", "have"),
		fmtMiB(c.job.ContextOverheadMiB)), none
}

func verdictOf(engine string, clauses []string, failing []int) EngineVerdict {
	var cs []string
	for _, c := range clauses {
		if c != "" {
			cs = append(cs, c)
		}
	}
	slices.Sort(failing)
	failing = slices.Compact(failing)
	if len(failing) == 0 {
		failing = nil
	}
	return EngineVerdict{Engine: engine, Pass: len(failing) == 0, Formula: strings.Join(cs, "; "), Failing: failing}
}

// sglangVerdict is SGLang's check: every rank takes the smallest free memory across ranks and
// fails when it is below 0.9 × its own; the strictest rank is the one with the most.
func (c *checker) sglangVerdict(set []rankGPU) EngineVerdict {
	lo, hi := set[0], set[0]
	for _, g := range set[1:] {
		if g.avail < lo.avail {
			lo = g
		}
		if g.avail > hi.avail {
			hi = g
		}
	}
	var clauses []string
	var failing []int
	if c.ratioApplies {
		need := sglangNeed(hi.avail)
		rel := "≥"
		if lo.avail < need {
			rel = "<"
			for _, g := range set {
				if g.avail < need {
					failing = append(failing, g.index)
				}
			}
		}
		clauses = append(clauses, fmt.Sprintf("min free %s (GPU %d) %s 0.9 × max free %s (GPU %d) = %s",
			fmtMiB(lo.avail), lo.index, rel, fmtMiB(hi.avail), hi.index, fmtMiB(need)))
	} else {
		clauses = append(clauses, "TP 1: no balance check")
	}
	cc, none := c.contextClause(set)
	nc, short := c.needClause(lo, set)
	return verdictOf(EngineSGLang, append(clauses, cc, nc), slices.Concat(failing, none, short))
}

// vllmVerdict is vLLM's check: each worker's free memory at startup must be at least
// gpu_memory_utilization × its GPU's total memory.
func (c *checker) vllmVerdict(set []rankGPU) EngineVerdict {
	u := strconv.FormatFloat(c.job.GPUMemoryUtilization, 'f', -1, 64)
	// The GPU with the least room to spare stands for the set.
	tight := set[0]
	var failing []int
	for _, g := range set {
		if g.avail-c.vllmNeed(g.total) < tight.avail-c.vllmNeed(tight.total) {
			tight = g
		}
		if g.avail < c.vllmNeed(g.total) {
			failing = append(failing, g.index)
		}
	}
	clause := fmt.Sprintf("free ≥ %s × total on every GPU", u)
	if tight.reserved > 0 {
		clause += fmt.Sprintf(" (total as CUDA sees it: %s − %s reserved = %s)",
			thousands(tight.total+tight.reserved), thousands(tight.reserved), fmtMiB(tight.total))
	}
	if len(failing) == 0 {
		clause += fmt.Sprintf(": tightest GPU %d has %s ≥ %s × %s = %s",
			tight.index, fmtMiB(tight.avail), u, thousands(tight.total), fmtMiB(c.vllmNeed(tight.total)))
	} else {
		clause += fmt.Sprintf(": GPU %d has %s < %s × %s = %s (fails on %s)",
			tight.index, fmtMiB(tight.avail), u, thousands(tight.total), fmtMiB(c.vllmNeed(tight.total)), FormatGPUs(failing))
	}
	lo := set[0]
	for _, g := range set[1:] {
		if g.avail < lo.avail {
			lo = g
		}
	}
	cc, none := c.contextClause(set)
	nc, short := c.needClause(lo, set)
	return verdictOf(EngineVLLM, []string{clause, cc, nc}, slices.Concat(failing, none, short))
}

func (c *checker) verdicts(set []rankGPU) []EngineVerdict {
	var vs []EngineVerdict
	for _, e := range c.job.Engines {
		switch e {
		case EngineSGLang:
			vs = append(vs, c.sglangVerdict(set))
		case EngineVLLM:
			vs = append(vs, c.vllmVerdict(set))
		}
	}
	return vs
}

func allPass(vs []EngineVerdict) bool {
	for _, v := range vs {
		if !v.Pass {
			return false
		}
	}
	return len(vs) > 0
}

func (c *checker) rankGPU(g *parse.GPU) rankGPU {
	total := cudaTotal(g)
	return rankGPU{index: g.Index, total: total, reserved: *g.MemoryTotalMiB - total,
		free: *g.MemoryFreeMiB, avail: *g.MemoryFreeMiB - c.job.ContextOverheadMiB}
}

// unusable says why a GPU cannot hold a rank, or "" when it can.
func unusable(g *parse.GPU) string {
	switch {
	case g.MIGMode == "Enabled":
		return "MIG enabled"
	case g.MemoryTotalMiB == nil || *g.MemoryTotalMiB <= 0 || g.MemoryFreeMiB == nil:
		return "memory unknown"
	}
	return ""
}

// defaultVerdicts checks the GPUs the engines use with CUDA_VISIBLE_DEVICES unset.
func (c *checker) defaultVerdicts(gs []*parse.GPU) []EngineVerdict {
	var set []rankGPU
	var bad []string
	var badIdx []int
	for _, g := range gs {
		if why := unusable(g); why != "" {
			bad = append(bad, fmt.Sprintf("GPU %d: %s", g.Index, why))
			badIdx = append(badIdx, g.Index)
			continue
		}
		set = append(set, c.rankGPU(g))
	}
	if len(bad) > 0 {
		var vs []EngineVerdict
		for _, e := range c.job.Engines {
			vs = append(vs, EngineVerdict{Engine: e, Formula: strings.Join(bad, "; ") + ": cannot hold a rank", Failing: badIdx})
		}
		return vs
	}
	return c.verdicts(set)
}

// bestSubset picks, among GPUs of one size (gpuGroups: within 2% of each other, MIG off),
// the TP GPUs that pass every engine with the largest smallest free memory, then the lowest
// indexes; ok is false when no set passes.
//
// Why sorting and sliding a window finds the optimum: drop first every GPU that fails a
// per-GPU condition (vLLM's, --need, room for the context); those can be in no passing set,
// and what remains is constrained only by SGLang's min ≥ 0.9 × max. Sort the rest by free
// memory, most first: f1 ≥ f2 ≥ ... . A set of TP GPUs whose smallest is at position k has
// every member at a position ≤ k, so its largest is at a position ≤ k−TP+1 and is at least
// f(k−TP+1). The window k−TP+1..k has the same smallest and a largest no bigger, so it passes
// whenever that set does. The best smallest free memory is therefore that of the first
// passing window (window minimums only fall as the window slides down). Among all sets with
// that smallest value m, the candidates are the GPUs with m ≤ f and (for SGLang)
// ceil(0.9 × f) ≤ m, and a set must include one GPU with f = m: the lowest indexes are the
// TP lowest-indexed candidates if they include such a GPU, else the TP−1 lowest plus the
// lowest-indexed GPU with f = m. O(n log n) per size group.
func (c *checker) bestSubset(groups [][]gpuMem) (best []int, bestMin int64, ok bool) {
	tp := c.job.TP
	for _, grp := range groups {
		var cands []rankGPU
		for _, m := range grp {
			g := c.rankGPU(m.g)
			if c.perGPUOK(g) {
				cands = append(cands, g)
			}
		}
		if len(cands) < tp {
			continue
		}
		slices.SortFunc(cands, func(a, b rankGPU) int {
			return cmp.Or(cmp.Compare(b.avail, a.avail), cmp.Compare(a.index, b.index))
		})
		m, found := int64(0), false
		for i := 0; i+tp <= len(cands); i++ {
			lo, hi := cands[i+tp-1].avail, cands[i].avail
			if !c.ratioApplies || lo >= sglangNeed(hi) {
				m, found = lo, true
				break
			}
		}
		if !found {
			continue
		}
		var within []rankGPU
		for _, g := range cands {
			if g.avail >= m && (!c.ratioApplies || sglangNeed(g.avail) <= m) {
				within = append(within, g)
			}
		}
		slices.SortFunc(within, func(a, b rankGPU) int { return cmp.Compare(a.index, b.index) })
		pick := within[:tp]
		if !slices.ContainsFunc(pick, func(g rankGPU) bool { return g.avail == m }) {
			at := slices.IndexFunc(within, func(g rankGPU) bool { return g.avail == m })
			pick = append(slices.Clone(within[:tp-1]), within[at])
		}
		idx := make([]int, len(pick))
		for i, g := range pick {
			idx[i] = g.index
		}
		if !ok || m > bestMin || (m == bestMin && slices.Compare(idx, best) < 0) {
			best, bestMin, ok = idx, m, true
		}
	}
	return best, bestMin, ok
}

// blockers are the GPUs, in the size groups with at least TP GPUs, that fail a per-GPU
// condition or fall short of SGLang's 0.9 × the group's most free memory.
func (c *checker) blockers(groups [][]gpuMem, r Result, leftover map[int]bool) []Blocker {
	var out []Blocker
	// Each GPU's holders, indexed once: a pass over every process per GPU would be quadratic
	// on a host with many of both.
	onGPU := map[int][]int{}
	for i, p := range r.Processes {
		for g, mem := range p.GPUMemoryMiB {
			if mem > 0 {
				onGPU[g] = append(onGPU[g], i)
			}
		}
	}
	for _, grp := range groups {
		if len(grp) < c.job.TP {
			continue
		}
		var maxAvail int64 = math.MinInt64
		for _, m := range grp {
			maxAvail = max(maxAvail, c.rankGPU(m.g).avail)
		}
		for _, m := range grp {
			g := c.rankGPU(m.g)
			if c.perGPUOK(g) && (!c.ratioApplies || g.avail >= sglangNeed(maxAvail)) {
				continue
			}
			b := Blocker{GPU: g.index, FreeMiB: g.free}
			var sum int64
			for _, i := range onGPU[g.index] {
				p := &r.Processes[i]
				mem := p.GPUMemoryMiB[g.index]
				b.Holders = append(b.Holders, Holder{PID: p.PID, Name: p.Name, MiB: mem, Leftover: leftover[p.PID]})
				sum += mem
			}
			slices.SortFunc(b.Holders, func(x, y Holder) int { return cmp.Or(cmp.Compare(y.MiB, x.MiB), cmp.Compare(x.PID, y.PID)) })
			if m.usedKnown {
				if rest := m.used - sum; rest > new(host).ghostBaseline(m.g) {
					b.UnattributedMiB = rest
				}
			}
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(x, y Blocker) int { return cmp.Compare(x.GPU, y.GPU) })
	return out
}

// normalize fills in the job's defaults; it returns why the job cannot be checked, or "".
func normalize(job Job) (Job, string) {
	if job.GPUMemoryUtilization == 0 {
		job.GPUMemoryUtilization = DefaultGPUMemoryUtilization
	}
	var engines []string
	for _, e := range job.Engines {
		e = strings.ToLower(strings.TrimSpace(e))
		if !slices.Contains(engines, e) {
			engines = append(engines, e)
		}
	}
	if len(engines) == 0 {
		engines = []string{EngineSGLang, EngineVLLM}
	}
	job.Engines = engines
	for _, e := range engines {
		if e != EngineSGLang && e != EngineVLLM {
			return job, fmt.Sprintf("unknown engine %q (known: sglang, vllm)", e)
		}
	}
	switch {
	case job.TP < 1:
		return job, fmt.Sprintf("the tensor-parallel size must be at least 1, not %d", job.TP)
	case !(job.GPUMemoryUtilization > 0 && job.GPUMemoryUtilization <= 1):
		return job, fmt.Sprintf("gpu_memory_utilization must be in (0, 1], not %v", job.GPUMemoryUtilization)
	case job.NeedMiB != nil && *job.NeedMiB < 0:
		return job, "the memory needed per GPU cannot be negative"
	case job.ContextOverheadMiB < 0:
		return job, "the context overhead cannot be negative"
	}
	return job, ""
}

var engineTitles = map[string]string{EngineSGLang: "SGLang", EngineVLLM: "vLLM"}

// engineList is "SGLang's and vLLM's" for the engines of vs.
func engineList(vs []EngineVerdict) string {
	var names []string
	for _, v := range vs {
		names = append(names, engineTitles[v.Engine]+"'s")
	}
	return strings.Join(names, " and ")
}

// CheckReadiness runs the job's engine checks on one host's snapshot. r is Diagnose's result
// for the same snapshot: it names the leftover processes and who holds each GPU's memory.
func CheckReadiness(s *parse.Snapshot, r Result, job Job) Readiness {
	job, bad := normalize(job)
	out := Readiness{Job: job}
	if reason, ok := unreadyReason(s, bad); ok {
		out.Reason = reason
		return out
	}
	c := &checker{job: job}
	c.sglang = slices.Contains(job.Engines, EngineSGLang)
	c.vllm = slices.Contains(job.Engines, EngineVLLM)
	c.ratioApplies = c.sglang && job.TP > 1

	gs := make([]*parse.GPU, len(s.GPUs))
	for i := range s.GPUs {
		gs[i] = &s.GPUs[i]
	}
	slices.SortStableFunc(gs, func(a, b *parse.GPU) int { return cmp.Compare(a.Index, b.Index) })
	var mixed bool
	out.Notes, mixed = readinessNotes(gs, job)
	if len(gs) < job.TP {
		out.Reason = fmt.Sprintf("Not ready: TP %d needs %d GPUs and this host has %d.", job.TP, job.TP, len(gs))
		return out
	}
	def := gs[:job.TP]
	for _, g := range def {
		out.GPUs = append(out.GPUs, g.Index)
	}
	out.Verdicts = c.defaultVerdicts(def)
	out.Ready = allPass(out.Verdicts)
	if out.Ready {
		out.Reason = readyReason(out)
		return out
	}
	leftover := map[int]bool{}
	for _, f := range r.Findings {
		if f.Code == CodeLeftoverProcess {
			for _, pid := range f.PIDs {
				leftover[pid] = true
			}
		}
	}
	groups := (&host{s: s}).gpuGroups()
	largest := 0
	for _, grp := range groups {
		largest = max(largest, len(grp))
	}
	if !c.findSubset(&out, groups, gs, mixed) && largest >= job.TP {
		out.Blockers = c.blockers(groups, r, leftover)
	}
	c.afterFix(&out, def, r, leftover)
	out.Reason = notReadyReason(out, largest)
	return out
}

// unreadyReason is why readiness cannot be checked at all (bad, a bad job), if it cannot.
func unreadyReason(s *parse.Snapshot, bad string) (string, bool) {
	switch {
	case bad != "":
		return "Cannot check readiness: " + bad + ".", true
	case s == nil:
		return "Not ready: the host was not probed.", true
	case s.SMI.Failure != nil:
		return smiUnreadyReason(s.SMI.Failure), true
	case len(s.GPUs) == 0:
		return "Not ready: nvidia-smi lists no GPUs.", true
	}
	return "", false
}

// readinessNotes say which GPUs are left out and whether their models differ (mixed).
func readinessNotes(gs []*parse.GPU, job Job) (notes []string, mixed bool) {
	var mig, unknown []int
	names := map[string]bool{}
	for _, g := range gs {
		names[g.Name] = true
		switch unusable(g) {
		case "MIG enabled":
			mig = append(mig, g.Index)
		case "memory unknown":
			unknown = append(unknown, g.Index)
		}
	}
	if len(mig) > 0 {
		notes = append(notes, fmt.Sprintf("%s %s MIG enabled and cannot hold a tensor-parallel rank: left out", FormatGPUs(mig), plural(len(mig), "has", "have")))
	}
	if len(unknown) > 0 {
		notes = append(notes, fmt.Sprintf("nvidia-smi did not report the memory of %s: left out", FormatGPUs(unknown)))
	}
	mixed = len(names) > 1
	if mixed {
		notes = append(notes, "the GPUs are of different models: CUDA numbers them fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID is set, so the default GPUs may not be nvidia-smi's 0.."+strconv.Itoa(job.TP-1))
	}
	return notes, mixed
}

// findSubset fills out's subset: the best GPUs that pass, and the environment that selects
// them; false when no subset passes.
func (c *checker) findSubset(out *Readiness, groups [][]gpuMem, gs []*parse.GPU, mixed bool) bool {
	sub, _, ok := c.bestSubset(groups)
	if !ok {
		return false
	}
	out.Subset = sub
	env := "CUDA_VISIBLE_DEVICES=" + joinInts(sub, ",")
	if mixed {
		env = "CUDA_DEVICE_ORDER=PCI_BUS_ID " + env
	}
	out.SubsetEnv = env
	var set []rankGPU
	for _, i := range sub {
		for _, g := range gs {
			if g.Index == i {
				set = append(set, c.rankGPU(g))
			}
		}
	}
	out.SubsetVerdicts = c.verdicts(set)
	return true
}

// afterFix gives back the leftover processes' memory and checks the default GPUs (def) again.
func (c *checker) afterFix(out *Readiness, def []*parse.GPU, r Result, leftover map[int]bool) {
	freed := map[int]int64{}
	for _, p := range r.Processes {
		if !leftover[p.PID] {
			continue
		}
		counted := false
		for g, mem := range p.GPUMemoryMiB {
			if mem > 0 {
				freed[g] += mem
				if !counted {
					counted = true
					out.FixPIDs = append(out.FixPIDs, p.PID)
				}
			}
		}
	}
	slices.Sort(out.FixPIDs)
	if len(freed) == 0 {
		return
	}
	fixed := make([]*parse.GPU, len(def))
	for i, g := range def {
		cp := *g
		if mem := freed[g.Index]; mem > 0 && cp.MemoryFreeMiB != nil {
			f := *cp.MemoryFreeMiB + mem
			if cp.MemoryTotalMiB != nil {
				f = min(f, *cp.MemoryTotalMiB)
			}
			cp.MemoryFreeMiB = &f
		}
		fixed[i] = &cp
	}
	out.AfterFix = allPass(c.defaultVerdicts(fixed))
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

// blockerSentence is "free memory on GPUs 0, 3 is held by PIDs 20629 (55,286 MiB), 777
// (10,000 MiB)": each PID with its memory on the blocking GPUs.
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
	s := "free memory on " + FormatGPUs(gpus) + " is "
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
