package diagnose

// gpu-outside-allocation: a process of a job Slurm runs on this node holds memory on a GPU
// the job was not allocated, on a node where Slurm allocates GPUs (GRES). The job runs: it is
// no leftover, and nothing of it is stopped; the finding is about the job's use of GPUs it was
// not given, which Slurm lets happen only where it does not confine jobs to their devices.

// outsideAllocationFindings reports, per process, GPU memory held outside its job's allocation.
func (h *host) outsideAllocationFindings() []Finding {
	var out []Finding
	var folded []int
	for i := range h.procs {
		gp := &h.procs[i]
		if p := h.procByPID[gp.PID]; p == nil || p.Gone {
			continue
		}
		r, ok := h.outsideAllocation(gp)
		if !ok {
			r, ok = h.podAllocation(gp)
		}
		switch {
		case !ok:
		case len(out) == maxDetailed:
			folded = append(folded, gp.PID)
		default:
			out = append(out, h.outsideAllocationFinding(gp, r))
		}
	}
	if len(folded) > 0 {
		out = append(out, foldedFinding(CodeGPUOutsideAllocation, Warning, "use GPUs their Slurm jobs were not allocated", folded))
	}
	return out
}

// outsideAllocationFinding is the finding for one process on GPUs its job was not allocated:
// what to look at, never a kill or a scancel (the job is running, and may be healthy work).
// On Kubernetes (r a pod-not-allocated), what to look at is the pod (podInspect).
func (h *host) outsideAllocationFinding(gp *GPUProcess, r Reason) Finding {
	look := Action{Kind: ActionInspect, Target: "Slurm job " + r.Job, Steps: []Command{
		{Line: "scontrol show job -d " + shellArg(r.Job), Note: "the GPUs Slurm gave the job: GRES=gpu:N(IDX:...) on each node"},
		{Line: "scontrol show config | grep -E 'ConstrainDevices|TaskPlugin'", Note: "Slurm keeps jobs off the GPUs they were not given only with ConstrainDevices=yes (cgroup.conf) and task/cgroup in TaskPlugin"},
	}}
	if r.Code == ReasonPodNotAllocated {
		look = podInspect(r.Pod)
	}
	f := Finding{
		Code:     CodeGPUOutsideAllocation,
		Severity: Warning,
		GPUs:     r.GPUs,
		PIDs:     []int{gp.PID},
		Reasons:  []Reason{r},
		Actions:  []Action{look},
	}
	h.name(&f, gp.PID)
	outsideAllocationWords(&f)
	return f
}
