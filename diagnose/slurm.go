package diagnose

import (
	"slices"
	"strings"
	"time"

	"github.com/gputriage/gputriage/hostlist"
	"github.com/gputriage/gputriage/parse"
)

// Reason codes of processes in Slurm jobs.
const (
	// ReasonJobEnded: Slurm no longer runs its job here (the job ended, was purged, was
	// requeued, or has been completing for longer than Slurm waits for its processes), yet
	// the process holds GPU memory.
	ReasonJobEnded ReasonCode = "job-ended"
	// ReasonGPUNotAllocated: it holds memory on a GPU its running job was not allocated, on a
	// node with GPU GRES (the reason of gpu-outside-allocation).
	ReasonGPUNotAllocated ReasonCode = "gpu-not-allocated"
)

// How long a job may stay COMPLETING before its remaining processes are its leftovers: Slurm
// signals them, waits KillWait before SIGKILL, then waits UnkillableStepTimeout for them to
// go before it calls the step unkillable. completingMargin adds what Slurm's messages about
// it take (MessageTimeout, 10 s by default) and clock skew between controller and node, which
// write EndTime and the capture's time. Where the host's values are unknown, Slurm's defaults
// apply: 30 s + 60 s + 30 s, two minutes.
const (
	defaultKillWait       = 30 * time.Second
	defaultUnkillableStep = 60 * time.Second
	completingMargin      = 30 * time.Second
)

// completingGrace is KillWait + UnkillableStepTimeout + completingMargin, with the host's
// values where the probe read them.
func (h *host) completingGrace() time.Duration {
	kw, us := defaultKillWait, defaultUnkillableStep
	if d := h.s.SlurmTimeouts.KillWait; d != nil {
		kw = *d
	}
	if d := h.s.SlurmTimeouts.UnkillableStep; d != nil {
		us = *d
	}
	return kw + us + completingMargin
}

// activeJobStates are the states in which a job's processes may run on its nodes.
var activeJobStates = []string{"RUNNING", "SUSPENDED", "CONFIGURING", "COMPLETING", "SIGNALING", "STAGE_OUT", "RESIZING", "STOPPED"}

// slurmTie is the Slurm job a GPU process runs in, and what Slurm said of it.
type slurmTie struct {
	ID, Step string
	// ByCgroup is set when the process's own cgroup names the job; else its nearest
	// slurmstepd ancestor does.
	ByCgroup bool
	// Node is the node whose allocation applies (see jobNode); NodeNamed is set when the
	// cgroup names it (several slurmd on one host), which alone can say the job runs on
	// other nodes only.
	Node      string
	NodeNamed bool
	Job       *parse.SlurmJob
}

// slurmTieOf finds gp's job: from its cgroup, or else from its nearest ancestor that is a
// root-owned slurmstepd (the probe walks up to the first one). Job is nil when Slurm was not
// asked or its record could not be read.
func (h *host) slurmTieOf(gp *GPUProcess) (slurmTie, bool) {
	p := h.procByPID[gp.PID]
	if p == nil {
		return slurmTie{}, false
	}
	t := slurmTie{ID: p.Cgroup.SlurmJob, Step: p.Cgroup.SlurmStep, ByCgroup: p.Cgroup.SlurmJob != "", Node: p.Cgroup.SlurmNode}
	if !t.ByCgroup {
		t.ID, t.Step = h.stepdAncestor(p)
	}
	if t.ID == "" {
		return slurmTie{}, false
	}
	for i := range h.s.SlurmJobs {
		if j := &h.s.SlurmJobs[i]; j.ID == t.ID && j.Asked && !j.Ambiguous {
			t.Job = j
		}
	}
	t.NodeNamed = t.Node != ""
	if !t.NodeNamed && t.Job != nil {
		t.Node = h.jobNode(t.Job)
	}
	return t, true
}

// jobNode is which of a job's nodes this host is, on a host that runs one slurmd (whose
// cgroups do not name the node): the job's only node, or the one named as the host is.
func (h *host) jobNode(j *parse.SlurmJob) string {
	nodes, err := hostlist.Expand(j.NodeList)
	if err != nil || len(nodes) == 0 {
		return ""
	}
	if len(nodes) == 1 {
		return nodes[0].Host
	}
	short, _, _ := strings.Cut(h.s.Host.Hostname, ".")
	for _, n := range nodes {
		if n.Host == short {
			return short
		}
	}
	return ""
}

// jobOf is the Slurm job p runs in: its cgroup's, or without a Slurm cgroup (process
// tracking without cgroups) its nearest slurmstepd ancestor's; "" when neither names one.
func (h *host) jobOf(p *parse.Process) string {
	if p.Cgroup.SlurmJob != "" {
		return p.Cgroup.SlurmJob
	}
	job, _ := h.stepdAncestor(p)
	return job
}

// stepdAncestor is the job and step of p's nearest slurmstepd ancestor, at most 32 up.
func (h *host) stepdAncestor(p *parse.Process) (job, step string) {
	anc := h.s.Ancestors
	pid := p.PPID
	for d := 0; pid != nil && d < 32; d++ {
		i, ok := slices.BinarySearchFunc(anc, *pid, func(a parse.Ancestor, pid int) int { return a.PID - pid })
		if !ok {
			return "", ""
		}
		if anc[i].SlurmJob != "" {
			return anc[i].SlurmJob, anc[i].SlurmStep
		}
		pid = &anc[i].PPID
	}
	return "", ""
}

// slurmReasons are the reasons gp's Slurm job gives to judge it a leftover: job-ended when
// Slurm no longer runs the job here. A running job's process is no leftover, on its own GPUs
// or on others (that is gpu-outside-allocation, a finding about the job: see outsideAllocation).
func (h *host) slurmReasons(gp *GPUProcess) []Reason {
	t, ok := h.slurmTieOf(gp)
	if !ok || t.Job == nil || gp.memMiB() == 0 {
		return nil
	}
	if ended, since := h.jobEnded(t); ended {
		r := h.slurmReason(gp, t)
		r.Code, r.Age = ReasonJobEnded, since
		return []Reason{r}
	}
	return nil
}

// slurmReason is the facts of gp's job t that every Slurm reason carries.
func (h *host) slurmReason(gp *GPUProcess, t slurmTie) Reason {
	return Reason{Strong: true, PID: gp.PID, Job: t.ID, State: t.Job.State, User: t.Job.User, Node: t.Node,
		Purged: t.Job.Purged, Ended: t.Job.EndTime != nil, MiB: gp.memMiB(), Held: gp.memGPUs()}
}

// outsideAllocation is the gpu-not-allocated reason when gp, a process of a job Slurm runs
// on this node, holds memory on GPUs that job was not allocated here. A job's GPU allocation
// is known only on a node with GPU GRES (nodeGPUGres): elsewhere Slurm hands out no GPUs and
// any job may use any GPU, so there is no reason at all.
func (h *host) outsideAllocation(gp *GPUProcess) (Reason, bool) {
	t, ok := h.slurmTieOf(gp)
	if !ok || t.Job == nil || gp.memMiB() == 0 || !slices.Contains(activeJobStates, t.Job.State) || t.Job.State == "COMPLETING" {
		return Reason{}, false
	}
	if ended, _ := h.jobEnded(t); ended {
		return Reason{}, false
	}
	if gres := h.nodeGPUGres(t.Node); gres == nil || !*gres {
		return Reason{}, false
	}
	bad := h.unallocatedGPUs(gp, t)
	if len(bad) == 0 {
		return Reason{}, false
	}
	r := h.slurmReason(gp, t)
	r.Code, r.GPUs = ReasonGPUNotAllocated, bad
	r.ConstrainDevices, r.TaskCgroup = h.s.SlurmGRES.ConstrainDevices, h.s.SlurmGRES.TaskCgroup
	return r, true
}

// nodeGPUGres says whether Slurm manages GPUs as GRES on node: false when GresTypes has no
// gpu or the node's Gres names none; nil when unknown (the node was not asked about, Slurm
// did not answer, or node is "").
func (h *host) nodeGPUGres(node string) *bool {
	if g := h.s.SlurmGRES; g.TypesKnown && !slices.Contains(g.Types, "gpu") {
		no := false
		return &no
	}
	if node == "" {
		return nil
	}
	for i := range h.s.SlurmNodes {
		if n := &h.s.SlurmNodes[i]; n.Name == node {
			return n.GPUGres
		}
	}
	return nil
}

// jobEnded says whether Slurm no longer runs t's job on this node, and since when (0 when
// unknown): the controller no longer knows it, its state is not an active one (a requeued
// job is PENDING again), it has been completing for longer than completingGrace, or it runs
// on other nodes only.
func (h *host) jobEnded(t slurmTie) (bool, time.Duration) {
	j := t.Job
	since := time.Duration(0)
	if j.EndTime != nil && h.ref.After(*j.EndTime) {
		since = h.ref.Sub(*j.EndTime)
	}
	switch {
	case j.Purged:
		return true, 0
	case j.State == "":
		return false, 0
	case j.State == "COMPLETING":
		return j.EndTime != nil && since > h.completingGrace(), since
	case !slices.Contains(activeJobStates, j.State):
		return true, since
	}
	if nodes, err := hostlist.Expand(j.NodeList); err == nil && len(nodes) > 0 && t.NodeNamed {
		for _, n := range nodes {
			if n.Host == t.Node {
				return false, 0
			}
		}
		return true, 0
	}
	return false, 0
}

// unallocatedGPUs are the GPUs gp holds memory on that its job was not allocated on t.Node:
// Slurm's GRES index i is taken to be the GPU whose /dev/nvidiaN has N = i (its minor number,
// or its index when unknown), as gres.conf lists the device files in order (AutoDetect=nvml
// does). Nil when the allocation on this node is not known.
func (h *host) unallocatedGPUs(gp *GPUProcess, t slurmTie) []int {
	var alloc *parse.SlurmAlloc
	for i := range t.Job.Alloc {
		a := &t.Job.Alloc[i]
		nodes, err := hostlist.Expand(a.Nodes)
		if err != nil {
			return nil
		}
		for _, n := range nodes {
			if n.Host == t.Node {
				if alloc != nil {
					return nil // named twice: not trusted
				}
				alloc = a
			}
		}
	}
	if alloc == nil || !alloc.GPUsKnown {
		return nil
	}
	var bad []int
	for _, g := range gp.memGPUs() {
		minor := g
		if gpu := h.gpuByIndex[g]; gpu != nil && gpu.MinorNumber != nil {
			minor = *gpu.MinorNumber
		}
		if !slices.Contains(alloc.GPUs, minor) {
			bad = append(bad, g)
		}
	}
	return bad
}

// slurmAction is the fix for gp when its job gives one: for a stray of a job that ended, the
// PID (scancel reaches nothing any more). ok is false when the job gives no fix of its own:
// then whatever owns the process is stopped (scancel for a job Slurm still runs).
func (h *host) slurmAction(gp *GPUProcess) (Action, bool) {
	if len(h.slurmReasons(gp)) == 0 {
		return Action{}, false
	}
	return h.killAction(gp), true
}
