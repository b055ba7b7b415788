package nodecheck

import (
	"errors"
	"fmt"
	"github.com/gputriage/gputriage/diagnose"
	"slices"
	"strconv"
	"strings"

	"github.com/gputriage/gputriage/parse"
)

// Problem codes a node check adds to the finding codes (docs/slurm.md).
const (
	// CodeGPUNotFree: a process holds memory on a GPU a job is about to get (prolog) or has
	// just given back (epilog).
	CodeGPUNotFree = "gpu-not-free"
	// CodeGPUMissing: Slurm gave the job a GPU that nvidia-smi does not list.
	CodeGPUMissing = "gpu-missing"
)

// Scope is what a node check (gputriage node-check, run by Slurm on the node) judges.
type Scope struct {
	// GPUs are the GPU indexes (nvidia-smi's) of the job the check runs for; nil: the whole
	// node (the health check).
	GPUs []int
	// Missing are GPUs Slurm named (as it names them) that the host does not list.
	Missing []string
	// RequireFree: every GPU in GPUs must be free, whoever holds it: the job that had it has
	// ended (epilog), or the job that gets it has not started (prolog).
	RequireFree bool
	// Unconstrained: a running job's process on GPUs it was not allocated
	// (gpu-outside-allocation) is a problem too. Without it, that is a note (Notes): the
	// job runs, and the node is fine for the jobs Slurm gives it.
	Unconstrained bool
}

// Problem is one reason a node is not fit for work, with the typed facts a drain reason
// is made of.
type Problem struct {
	Code     string // a finding code, gpu-not-free or gpu-missing
	Severity diagnose.Severity
	Title    string // for people; host text inside: sanitize before printing
	GPUs     []int
	// The culprit, when one process is: its PID, program (raw host text), memory on GPU, and
	// Slurm job.
	PID     int
	Program string
	MiB     int64
	GPU     int
	Job     string
	// SlurmGPU is, for gpu-missing, the GPU as Slurm named it (host text).
	SlurmGPU string
}

// Check judges a node for Slurm: the findings at warning or worse that concern the scope
// (every one, for the whole node; those naming its GPUs, and any nvidia-smi failure, for a
// job's GPUs), and with RequireFree every process holding memory on the scope's GPUs that no
// finding already names. Most severe first.
func Check(r diagnose.Result, scope Scope) []Problem {
	var out []Problem
	named := map[int]bool{}
	for _, f := range r.Findings {
		if f.Severity < diagnose.Warning || !scope.concerns(f) || scope.isNote(f) {
			continue
		}
		p := Problem{Code: f.Code, Severity: f.Severity, Title: f.Title, GPUs: f.GPUs, GPU: -1}
		// The culprit is one the finding blames: a memory imbalance names the healthy work on
		// its short GPUs too, as healthy, and a drain reason shows only its first PID.
		blamed := f.PIDs
		if f.Imbalance != nil {
			blamed = f.Imbalance.Leftover
		}
		if len(blamed) > 0 {
			p.culprit(r, blamed[0], f.GPUs)
		}
		for _, pid := range f.PIDs {
			named[pid] = true
		}
		out = append(out, p)
	}
	for _, m := range scope.Missing {
		p := Problem{Code: CodeGPUMissing, Severity: diagnose.Error, GPU: -1, SlurmGPU: m}
		p.Title = missingTitle(p)
		out = append(out, p)
	}
	if scope.RequireFree {
		out = append(out, notFree(r, scope.GPUs, named)...)
	}
	slices.SortStableFunc(out, func(a, b Problem) int { return int(b.Severity - a.Severity) })
	return out
}

// Notes are the findings Check leaves out as no problem of the node's (isNote), for a
// node check to print: gpu-outside-allocation without Unconstrained.
func Notes(r diagnose.Result, scope Scope) []Problem {
	var out []Problem
	for _, f := range r.Findings {
		if f.Severity >= diagnose.Warning && scope.concerns(f) && scope.isNote(f) {
			p := Problem{Code: f.Code, Severity: f.Severity, Title: f.Title, GPUs: f.GPUs}
			p.culprit(r, f.PIDs[0], f.GPUs)
			out = append(out, p)
		}
	}
	return out
}

// isNote reports whether a finding is left out of a node's problems: a running job's use of
// GPUs it was not allocated, unless the scope counts it.
func (sc Scope) isNote(f diagnose.Finding) bool {
	return f.Code == diagnose.CodeGPUOutsideAllocation && !sc.Unconstrained && len(f.PIDs) > 0
}

// concerns reports whether a finding is about the scope. For a job's GPUs, a memory
// imbalance is not: it compares them with the others, and what matters to the job, a GPU of
// its own that is not free, RequireFree checks directly.
func (sc Scope) concerns(f diagnose.Finding) bool {
	if sc.GPUs == nil || f.Code == diagnose.CodeSMIFailed {
		return true
	}
	if f.Code == diagnose.CodeMemoryImbalance {
		return false
	}
	for _, g := range f.GPUs {
		if slices.Contains(sc.GPUs, g) {
			return true
		}
	}
	return false
}

// notFree are the holders of memory on gpus that no finding names: one problem per process.
func notFree(r diagnose.Result, gpus []int, named map[int]bool) []Problem {
	var out []Problem
	for _, gp := range r.Processes {
		if named[gp.PID] {
			continue
		}
		var on []int
		for _, g := range gpus {
			if _, ok := gp.GPUMemoryMiB[g]; ok {
				on = append(on, g)
			}
		}
		if len(on) == 0 {
			continue
		}
		p := Problem{Code: CodeGPUNotFree, Severity: diagnose.Error, GPUs: on}
		p.culprit(r, gp.PID, on)
		p.Title = notFreeTitle(p)
		out = append(out, p)
	}
	return out
}

// culprit fills in what the process pid holds, on the first of gpus it has memory on.
func (p *Problem) culprit(r diagnose.Result, pid int, gpus []int) {
	p.PID, p.GPU = pid, -1
	i := slices.IndexFunc(r.Processes, func(gp diagnose.GPUProcess) bool { return gp.PID == pid })
	if i < 0 {
		return
	}
	gp := r.Processes[i]
	p.Program, p.Job = processLabel(gp), gp.SlurmJob
	for _, g := range append(slices.Clone(gpus), gp.GPUs...) {
		if mib, ok := gp.GPUMemoryMiB[g]; ok {
			p.GPU, p.MiB = g, mib
			return
		}
	}
}

// processLabel is the program a process runs, else its name.
func processLabel(gp diagnose.GPUProcess) string {
	if gp.Program != "" {
		return gp.Program
	}
	return gp.Name
}

// JobGPUs resolves the GPUs Slurm gave a job to nvidia-smi indexes. slurmGPUs is
// SLURM_JOB_GPUS: the N of each /dev/nvidiaN, matched to a GPU's minor number (its index when
// the minor number is unknown). cudaVisible, CUDA_VISIBLE_DEVICES, is read only when
// slurmGPUs is empty: indexes or GPU UUIDs. IDs no GPU matches are returned as missing; a
// value that is not an ID is an error. Both empty: nil, nil (no job GPUs known).
func JobGPUs(s *parse.Snapshot, slurmGPUs, cudaVisible string) (gpus []int, missing []string, err error) {
	list, byMinor := slurmGPUs, true
	if strings.TrimSpace(list) == "" {
		list, byMinor = cudaVisible, false
	}
	if strings.TrimSpace(list) == "" {
		return nil, nil, nil
	}
	gpus = []int{}
	for _, id := range strings.Split(list, ",") {
		id = strings.TrimSpace(id)
		g, ok, err := gpuByID(s, id, byMinor)
		switch {
		case err != nil:
			return nil, nil, err
		case !ok:
			missing = append(missing, id)
		case !slices.Contains(gpus, g):
			gpus = append(gpus, g)
		}
	}
	slices.Sort(gpus)
	return gpus, missing, nil
}

// gpuByID finds the GPU an ID names: a number (a minor number, or an index), or a UUID.
func gpuByID(s *parse.Snapshot, id string, byMinor bool) (int, bool, error) {
	if strings.HasPrefix(id, "GPU-") || strings.HasPrefix(id, "MIG-") {
		for _, g := range s.GPUs {
			if strings.EqualFold(g.UUID, id) {
				return g.Index, true, nil
			}
		}
		return 0, false, nil
	}
	n, err := strconv.Atoi(id)
	if err != nil || n < 0 || len(id) > 6 {
		return 0, false, fmt.Errorf("%w: a GPU id is a number or a UUID, got %q", ErrBadGPUList, id)
	}
	for _, g := range s.GPUs {
		minor := g.Index
		if byMinor && g.MinorNumber != nil {
			minor = *g.MinorNumber
		}
		if minor == n {
			return g.Index, true, nil
		}
	}
	return 0, false, nil
}

// ErrBadGPUList is a job GPU list (SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES) that is not one.
var ErrBadGPUList = errors.New("bad GPU list")
