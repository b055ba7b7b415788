package readiness

import (
	"cmp"
	"github.com/gputriage/gputriage/diagnose"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gputriage/gputriage/parse"
)

// Readiness answers "will my deployment start on this host?" by running each inference
// engine's own startup memory check on the host's numbers. docs/readiness.md gives the
// formulas and the engine source they come from. This file judges, into typed facts;
// words.go writes the sentences from them.

// Engine names, as --engine takes them.
const (
	EngineSGLang = "sglang"
	EngineVLLM   = "vllm"
)

const (
	// DefaultGPUMemoryUtilization is vLLM's default --gpu-memory-utilization.
	DefaultGPUMemoryUtilization = diagnose.VLLMUtilization
	// DefaultContextOverheadMiB is the memory each rank takes on its GPU before the engine
	// measures free memory: the CUDA context, NCCL's buffers and the custom all-reduce
	// workspace. Both engines measure after the process group is up. On ct200 (RTX PRO 6000
	// Blackwell, TP 8) nvidia-smi showed 41,958 MiB free on GPU 0 and SGLang reported
	// 39.75 GiB (40,704 MiB): 1,254 MiB less. Rounded up to 1.25 GiB; the usual range is
	// 0.5-1.5 GiB depending on the GPU, driver and NCCL settings.
	DefaultContextOverheadMiB int64 = 1280
)

// IsEngine reports whether e is an engine whose startup check Check knows (lower case).
func IsEngine(e string) bool { return e == EngineSGLang || e == EngineVLLM }

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
	// Failing are the GPUs that make the check fail, sorted.
	Failing []int
	// Check is what the check compared: the numbers Formula is written from.
	Check EngineCheck
	// Formula is the check written out with the host's numbers, e.g. "min free 40,678 MiB
	// (GPU 0) < 0.9 × max free 95,972 MiB (GPU 1) = 86,375 MiB" (words.go).
	Formula string
}

// EngineCheck is what one engine's check compared. Free memory is nvidia-smi's less the
// context overhead: what the engine measures.
type EngineCheck struct {
	// Unusable are the GPUs of the set that cannot hold a rank at all; when there are any,
	// nothing else was checked.
	Unusable []UnusableGPU
	// Balance is SGLang's check, min free ≥ 0.9 × max free; nil for vLLM and with TP 1.
	Balance *BalanceCheck
	// PerGPU is vLLM's check, free ≥ utilization × total on every GPU; nil for SGLang.
	PerGPU *UtilizationCheck
	// NoRoom are the GPUs with less free than the CUDA context (ContextMiB).
	NoRoom     []int
	ContextMiB int64
	// Need is --need against the smallest free memory; nil without --need.
	Need *NeedCheck
	// TP1 is SGLang with TP 1: no balance check.
	TP1 bool
}

// GPUFree is one GPU's free memory as the engine measures it.
type GPUFree struct {
	GPU     int
	FreeMiB int64
}

// BalanceCheck is SGLang's check: the smallest free memory against 0.9 × the largest.
type BalanceCheck struct {
	Min, Max GPUFree
	NeedMiB  int64 // ceil(0.9 × Max.FreeMiB): the least Min that passes
}

// UtilizationCheck is vLLM's check, shown on the GPU with the least room to spare (Tight).
type UtilizationCheck struct {
	Utilization float64
	Tight       GPUFree
	// TotalMiB is Tight's total as CUDA sees it, ReservedMiB what the driver keeps (0 when
	// unknown), NeedMiB ceil(Utilization × TotalMiB).
	TotalMiB, ReservedMiB, NeedMiB int64
	Failing                        []int // the GPUs below their own need
}

// NeedCheck is --need against the smallest free memory.
type NeedCheck struct {
	Min     GPUFree
	NeedMiB int64
}

// UnusableGPU is a GPU that cannot hold a rank, and why.
type UnusableGPU struct {
	GPU int
	Why Unusable
}

// Unusable is why a GPU cannot hold a rank.
type Unusable string

// Why a GPU cannot hold a rank.
const (
	UnusableMIG           Unusable = "MIG enabled"
	UnusableMemoryUnknown Unusable = "memory unknown"
)

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
	// Unchecked says why the job could not be checked on this host ("" when it was), with
	// BadJob, SMIFailure or HostGPUs as its facts.
	Unchecked  Unchecked
	BadJob     *JobProblem
	SMIFailure *parse.SMIFailure
	HostGPUs   int // the GPUs nvidia-smi lists
	// LargestGroup is the most GPUs of one size that can hold ranks (MIG off, memory known).
	LargestGroup int
	// MIG and MemoryUnknown are the GPUs left out; MixedModels: the GPUs are of different models.
	MIG, MemoryUnknown []int
	MixedModels        bool
	// Notes are what the check could not use: MIG-enabled GPUs, GPUs with unknown memory,
	// mixed GPU models (words.go, from the facts above).
	Notes []string
	// Reason is one plain sentence saying why (words.go). It can quote nvidia-smi's message,
	// so it is host data.
	Reason string
}

// Unchecked is why a job could not be checked on a host.
type Unchecked string

// Why a job could not be checked on a host.
const (
	UncheckedBadJob     Unchecked = "bad-job"      // BadJob says what
	UncheckedNotProbed  Unchecked = "not-probed"   // no snapshot
	UncheckedSMIFailed  Unchecked = "smi-failed"   // SMIFailure
	UncheckedNoGPUs     Unchecked = "no-gpus"      // nvidia-smi lists none
	UncheckedTooFewGPUs Unchecked = "too-few-gpus" // HostGPUs < TP
)

// JobProblem is what makes a job impossible to check: Field names the setting (engine, tp,
// utilization, need, context), with the value given.
type JobProblem struct {
	Field       string
	Engine      string
	TP          int
	Utilization float64
}

// Host is one host's answer, for a fleet summary.
type Host struct {
	Host      string
	Readiness Readiness
}

// Fleet sorts hosts by what it takes to run the job on them. Every host is in
// exactly one list, in the order given.
type Fleet struct {
	ReadyNow        []string // the default GPUs pass
	ReadyWithSubset []string // passes now, with CUDA_VISIBLE_DEVICES set to Subset
	ReadyAfterFix   []string // passes once the leftover processes are stopped
	NotReady        []string
}

// Summarize sorts hosts into Fleet's lists.
func Summarize(hosts []Host) Fleet {
	var f Fleet
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
	smiFree  int64 // nvidia-smi's memory.free
	avail    int64 // free minus the context overhead: what the engine measures
}

// checker runs the engines' checks for one job.
type checker struct {
	job          Job
	sglang, vllm bool
	ratioApplies bool // SGLang's balance check runs only with TP > 1
}

// vllmNeed is the least free memory that passes vLLM's check on a GPU of CUDA total total.
func (c *checker) vllmNeed(total int64) int64 {
	return diagnose.CeilMul(c.job.GPUMemoryUtilization, total)
}

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

// needCheck checks --need against the smallest free memory of set, lo; nil when --need is
// unset. short are the GPUs below it.
func (c *checker) needCheck(lo rankGPU, set []rankGPU) (*NeedCheck, []int) {
	if c.job.NeedMiB == nil {
		return nil, nil
	}
	need := *c.job.NeedMiB
	var short []int
	for _, g := range set {
		if g.avail < need {
			short = append(short, g.index)
		}
	}
	return &NeedCheck{Min: lo.free(), NeedMiB: need}, short
}

// noRoom are the GPUs left with no room for a CUDA context.
func noRoom(set []rankGPU) []int {
	var none []int
	for _, g := range set {
		if g.avail <= 0 {
			none = append(none, g.index)
		}
	}
	return none
}

func (g rankGPU) free() GPUFree { return GPUFree{GPU: g.index, FreeMiB: g.avail} }

func verdictOf(engine string, check EngineCheck, failing []int) EngineVerdict {
	slices.Sort(failing)
	failing = slices.Compact(failing)
	if len(failing) == 0 {
		failing = nil
	}
	return EngineVerdict{Engine: engine, Pass: len(failing) == 0, Failing: failing, Check: check}
}

// minMax are the GPUs of set with the least and the most free memory, the first of each.
func minMax(set []rankGPU) (lo, hi rankGPU) {
	lo, hi = set[0], set[0]
	for _, g := range set[1:] {
		if g.avail < lo.avail {
			lo = g
		}
		if g.avail > hi.avail {
			hi = g
		}
	}
	return lo, hi
}

// sglangVerdict is SGLang's check: every rank takes the smallest free memory across ranks and
// fails when it is below 0.9 × its own; the strictest rank is the one with the most.
func (c *checker) sglangVerdict(set []rankGPU) EngineVerdict {
	lo, hi := minMax(set)
	check := EngineCheck{ContextMiB: c.job.ContextOverheadMiB, TP1: !c.ratioApplies}
	var failing []int
	if c.ratioApplies {
		need := diagnose.SGLangNeed(hi.avail)
		check.Balance = &BalanceCheck{Min: lo.free(), Max: hi.free(), NeedMiB: need}
		for _, g := range set {
			if g.avail < need {
				failing = append(failing, g.index)
			}
		}
	}
	check.NoRoom = noRoom(set)
	var short []int
	check.Need, short = c.needCheck(lo, set)
	return verdictOf(EngineSGLang, check, slices.Concat(failing, check.NoRoom, short))
}

// vllmVerdict is vLLM's check: each worker's free memory at startup must be at least
// gpu_memory_utilization × its GPU's total memory.
func (c *checker) vllmVerdict(set []rankGPU) EngineVerdict {
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
	lo, _ := minMax(set)
	check := EngineCheck{ContextMiB: c.job.ContextOverheadMiB, NoRoom: noRoom(set)}
	check.PerGPU = &UtilizationCheck{Utilization: c.job.GPUMemoryUtilization, Tight: tight.free(), TotalMiB: tight.total,
		ReservedMiB: tight.reserved, NeedMiB: c.vllmNeed(tight.total), Failing: failing}
	var short []int
	check.Need, short = c.needCheck(lo, set)
	return verdictOf(EngineVLLM, check, slices.Concat(failing, check.NoRoom, short))
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
	total := diagnose.CUDATotal(g)
	return rankGPU{index: g.Index, total: total, reserved: *g.MemoryTotalMiB - total,
		smiFree: *g.MemoryFreeMiB, avail: *g.MemoryFreeMiB - c.job.ContextOverheadMiB}
}

// unusable says why a GPU cannot hold a rank, or "" when it can.
func unusable(g *parse.GPU) Unusable {
	switch {
	case g.MIGMode == "Enabled":
		return UnusableMIG
	case g.MemoryTotalMiB == nil || *g.MemoryTotalMiB <= 0 || g.MemoryFreeMiB == nil:
		return UnusableMemoryUnknown
	}
	return ""
}

// defaultVerdicts checks the GPUs the engines use with CUDA_VISIBLE_DEVICES unset.
func (c *checker) defaultVerdicts(gs []*parse.GPU) []EngineVerdict {
	var set []rankGPU
	var bad []UnusableGPU
	var badIdx []int
	for _, g := range gs {
		if why := unusable(g); why != "" {
			bad = append(bad, UnusableGPU{GPU: g.Index, Why: why})
			badIdx = append(badIdx, g.Index)
			continue
		}
		set = append(set, c.rankGPU(g))
	}
	if len(bad) > 0 {
		var vs []EngineVerdict
		for _, e := range c.job.Engines {
			vs = append(vs, EngineVerdict{Engine: e, Failing: badIdx, Check: EngineCheck{Unusable: bad}})
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
func (c *checker) bestSubset(groups [][]*parse.GPU) (best []int, bestMin int64, ok bool) {
	tp := c.job.TP
	for _, grp := range groups {
		var cands []rankGPU
		for _, m := range grp {
			g := c.rankGPU(m)
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
			if !c.ratioApplies || lo >= diagnose.SGLangNeed(hi) {
				m, found = lo, true
				break
			}
		}
		if !found {
			continue
		}
		var within []rankGPU
		for _, g := range cands {
			if g.avail >= m && (!c.ratioApplies || diagnose.SGLangNeed(g.avail) <= m) {
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
func (c *checker) blockers(groups [][]*parse.GPU, r diagnose.Result, leftover map[int]bool) []Blocker {
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
			maxAvail = max(maxAvail, c.rankGPU(m).avail)
		}
		for _, m := range grp {
			g := c.rankGPU(m)
			if c.perGPUOK(g) && (!c.ratioApplies || g.avail >= diagnose.SGLangNeed(maxAvail)) {
				continue
			}
			b := Blocker{GPU: g.index, FreeMiB: g.smiFree}
			var sum int64
			for _, i := range onGPU[g.index] {
				p := &r.Processes[i]
				mem := p.GPUMemoryMiB[g.index]
				b.Holders = append(b.Holders, Holder{PID: p.PID, Name: p.Name, MiB: mem, Leftover: leftover[p.PID]})
				sum += mem
			}
			slices.SortFunc(b.Holders, func(x, y Holder) int { return cmp.Or(cmp.Compare(y.MiB, x.MiB), cmp.Compare(x.PID, y.PID)) })
			if m.MemoryUsedMiB != nil {
				if rest := *m.MemoryUsedMiB - sum; rest > diagnose.GhostBaseline(m) {
					b.UnattributedMiB = rest
				}
			}
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(x, y Blocker) int { return cmp.Compare(x.GPU, y.GPU) })
	return out
}

// normalize fills in the job's defaults; it returns why the job cannot be checked, or nil.
func normalize(job Job) (Job, *JobProblem) {
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
		if !IsEngine(e) {
			return job, &JobProblem{Field: "engine", Engine: e}
		}
	}
	switch {
	case job.TP < 1:
		return job, &JobProblem{Field: "tp", TP: job.TP}
	case !(job.GPUMemoryUtilization > 0 && job.GPUMemoryUtilization <= 1):
		return job, &JobProblem{Field: "utilization", Utilization: job.GPUMemoryUtilization}
	case job.NeedMiB != nil && *job.NeedMiB < 0:
		return job, &JobProblem{Field: "need"}
	case job.ContextOverheadMiB < 0:
		return job, &JobProblem{Field: "context"}
	}
	return job, nil
}

// Check runs the job's engine checks on one host's snapshot. r is Diagnose's result for the
// same snapshot: it names the leftover processes and who holds each GPU's memory.
func Check(s *parse.Snapshot, r diagnose.Result, job Job) Readiness {
	job, bad := normalize(job)
	out := Readiness{Job: job, BadJob: bad}
	if out.Unchecked = unchecked(s, bad); out.Unchecked != "" {
		if out.Unchecked == UncheckedSMIFailed {
			out.SMIFailure = s.SMI.Failure
		}
		return out.composed()
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
	out.HostGPUs = len(gs)
	out.leftOut(gs)
	if len(gs) < job.TP {
		out.Unchecked = UncheckedTooFewGPUs
		return out.composed()
	}
	def := gs[:job.TP]
	for _, g := range def {
		out.GPUs = append(out.GPUs, g.Index)
	}
	out.Verdicts = c.defaultVerdicts(def)
	out.Ready = allPass(out.Verdicts)
	if out.Ready {
		return out.composed()
	}
	leftover := map[int]bool{}
	for _, f := range r.Findings {
		if f.Code == diagnose.CodeLeftoverProcess {
			for _, pid := range f.PIDs {
				leftover[pid] = true
			}
		}
	}
	groups := diagnose.GPUGroups(s)
	for _, grp := range groups {
		out.LargestGroup = max(out.LargestGroup, len(grp))
	}
	if !c.findSubset(&out, groups, gs) && out.LargestGroup >= job.TP {
		out.Blockers = c.blockers(groups, r, leftover)
	}
	c.afterFix(&out, def, r, leftover)
	return out.composed()
}

// unchecked is why readiness cannot be checked at all (bad, a bad job), if it cannot.
func unchecked(s *parse.Snapshot, bad *JobProblem) Unchecked {
	switch {
	case bad != nil:
		return UncheckedBadJob
	case s == nil:
		return UncheckedNotProbed
	case s.SMI.Failure != nil:
		return UncheckedSMIFailed
	case len(s.GPUs) == 0:
		return UncheckedNoGPUs
	}
	return ""
}

// leftOut notes which GPUs are left out and whether their models differ.
func (out *Readiness) leftOut(gs []*parse.GPU) {
	names := map[string]bool{}
	for _, g := range gs {
		names[g.Name] = true
		switch unusable(g) {
		case UnusableMIG:
			out.MIG = append(out.MIG, g.Index)
		case UnusableMemoryUnknown:
			out.MemoryUnknown = append(out.MemoryUnknown, g.Index)
		}
	}
	out.MixedModels = len(names) > 1
}

// findSubset fills out's subset: the best GPUs that pass, and the environment that selects
// them; false when no subset passes.
func (c *checker) findSubset(out *Readiness, groups [][]*parse.GPU, gs []*parse.GPU) bool {
	sub, _, ok := c.bestSubset(groups)
	if !ok {
		return false
	}
	out.Subset = sub
	env := "CUDA_VISIBLE_DEVICES=" + joinInts(sub)
	if out.MixedModels {
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
func (c *checker) afterFix(out *Readiness, def []*parse.GPU, r diagnose.Result, leftover map[int]bool) {
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

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
