package diagnose

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// The builders' side of facts_named.go: what the host says of the processes a finding names,
// gathered once so that the words need not read the host.

// name adds to f.Named the processes of pids it does not name yet.
func (h *host) name(f *Finding, pids ...int) {
	named := make(map[int]bool, len(f.Named)+len(pids))
	for _, p := range f.Named {
		named[p.PID] = true
	}
	for _, pid := range pids {
		if !named[pid] {
			named[pid] = true
			f.Named = append(f.Named, h.describe(pid))
		}
	}
}

// describe is what the words may say of pid: a GPU process, a process the probe described
// that holds no GPU, or a PID it knows no more of.
func (h *host) describe(pid int) Process {
	gp := h.gpByPID[pid]
	if gp == nil && h.procByPID[pid] != nil {
		gp = h.plainProcess(pid)
	}
	if gp == nil {
		return Process{PID: pid, Cmdline: h.cmdline(pid), Command: "process", User: "unknown user"}
	}
	p := h.procByPID[pid]
	// Copies, never pointers into the snapshot: a result outlives its snapshot's processes
	// (TestHostBudget), and one pointer would keep a whole parsed process alive.
	d := Process{PID: pid, Cmdline: h.cmdline(pid), Command: shortCmd(gp), Comm: gp.Name, User: h.userName(gp.UID, gp.User),
		State: gp.State, PPID: clonePtr(gp.PPID), GPUs: slices.Clone(gp.GPUs), Container: gp.Container, SlurmJob: gp.SlurmJob}
	if p != nil && p.Comm != "" {
		d.Comm = p.Comm
	}
	if d.UserName = gp.User; d.UserName == "" && gp.UID != nil {
		d.UserName = h.uidNames[*gp.UID]
	}
	if gp.Elapsed != nil {
		s := int64(*gp.Elapsed / time.Second)
		d.ElapsedSeconds = &s
	}
	if p != nil {
		d.Started = clonePtr(p.StartTime)
	}
	if len(gp.GPUMemoryMiB) > 0 {
		d.GPUMemoryMiB = maps.Clone(gp.GPUMemoryMiB)
	}
	if gp.Pod != nil {
		k := *gp.Pod
		d.K8s = &k
	}
	h.describeParent(&d, gp)
	h.describeOwner(&d, gp)
	h.describeVerdict(&d, gp)
	d.cloneStrings()
	return d
}

// cloneStrings gives d strings of its own: a substring of the host's text (a units section
// is parsed as one string) would keep the whole of it alive as long as the result.
func (d *Process) cloneStrings() {
	for _, s := range []*string{&d.Cmdline, &d.Command, &d.Comm, &d.User, &d.UserName, &d.State, &d.ParentName, &d.Unit,
		&d.Container, &d.SlurmJob, &d.SlurmStep, &d.SlurmNode, &d.Protected, &d.Service} {
		*s = strings.Clone(*s)
	}
}

// describeParent fills what the words say of gp's parent; a parent that is GPU work judged
// healthy is said to be so, lest its PID read as blame.
func (h *host) describeParent(d *Process, gp *GPUProcess) {
	if gp.PPID == nil {
		return
	}
	if *gp.PPID == 1 && !managed(gp) {
		d.Orphaned = true
		return
	}
	pp := h.procByPID[*gp.PPID]
	if pp == nil || pp.Comm == "" {
		return
	}
	d.ParentName = pp.Comm
	_, bad := h.leftovers[pp.PID]
	parent := h.gpByPID[pp.PID]
	d.ParentHealthy = parent != nil && !bad && gp.State != "Z" && parent.memMiB() > 0
}

// describeOwner fills the unit, the Slurm step and GRES of gp.
func (h *host) describeOwner(d *Process, gp *GPUProcess) {
	if ref, ok := h.procUnit(gp); ok {
		d.Unit = h.unitLabel(ref)
		if u := h.unitState(ref); u != nil {
			d.UnitState = &UnitState{Active: strings.Clone(u.ActiveState), Sub: strings.Clone(u.SubState), Result: strings.Clone(u.Result)}
		}
	}
	if gp.SlurmJob == "" {
		return
	}
	if p := h.procByPID[gp.PID]; p != nil {
		d.SlurmStep = p.Cgroup.SlurmStep
	}
	if t, ok := h.slurmTieOf(gp); ok && t.Job != nil {
		if g := h.nodeGPUGres(t.Node); g != nil && !*g {
			d.NoGPUGres, d.SlurmNode = true, t.Node
		}
	}
}

// describeVerdict fills the judgement on gp, and for a keeper of deleted /dev/shm files
// whether it keeps them through no fault of its own.
func (h *host) describeVerdict(d *Process, gp *GPUProcess) {
	_, bad := h.leftovers[gp.PID]
	switch {
	case h.gpByPID[gp.PID] == nil:
	case h.isDriverHelper(gp.PID):
		d.Verdict = VerdictDriverHelper
	case h.protected(gp):
		d.Verdict, d.Protected = VerdictProtected, h.protectedWhy(gp)
	case bad:
		d.Verdict = VerdictLeftover
	default:
		d.Verdict = VerdictHealthy
	}
	if p := h.procByPID[gp.PID]; p != nil && len(deletedShm(p)) > 0 && !h.shmBlamed(p) {
		u, _ := h.servedUnit(gp)
		d.ShmHealthy, d.Service = true, h.unitLabel(u)
	}
}

// gpuMemory is GPU g's memory as nvidia-smi reported it.
func (h *host) gpuMemory(g int) GPUMemory {
	m := GPUMemory{Index: g}
	if gg := h.gpuByIndex[g]; gg != nil {
		m.UsedMiB, m.TotalMiB, m.MIG = gg.MemoryUsedMiB, gg.MemoryTotalMiB, gg.MIGMode == "Enabled"
	}
	return m
}

// clonePtr is a pointer to a copy of *p; nil for nil.
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
