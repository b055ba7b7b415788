package diagnose

import (
	"fmt"
	"slices"
)

// slurmWords says a Slurm reason for people: "Slurm job 4242 of alice ended 2h00m ago
// (CANCELLED); its PID 20629 still holds 55,286 MiB on GPU 0".
func slurmWords(r Reason) string {
	job := "Slurm job " + r.Job
	if r.User != "" {
		job += " of " + r.User
	}
	holds := fmt.Sprintf("its PID %d still holds %s on %s", r.PID, fmtMiB(r.MiB), FormatGPUs(r.Held))
	switch {
	case r.Code == ReasonGPUNotAllocated:
		return fmt.Sprintf("%s (%s) was not allocated %s on node %s, yet its PID %d holds memory there", job, r.State, FormatGPUs(r.GPUs), r.Node, r.PID)
	case r.Purged:
		return job + " ended long enough ago that Slurm no longer knows it (MinJobAge, 300 s by default); " + holds
	case r.State == "COMPLETING":
		return fmt.Sprintf("%s ended %s ago and is still completing, past the time Slurm waits for its processes to exit; %s", job, FormatAge(r.Age), holds)
	case slices.Contains(activeJobStates, r.State) || r.State == "PENDING":
		return fmt.Sprintf("%s (%s) no longer runs on node %s; %s", job, r.State, r.Node, holds)
	case r.Ended:
		return fmt.Sprintf("%s ended %s ago (%s); %s", job, FormatAge(r.Age), r.State, holds)
	}
	return fmt.Sprintf("%s ended (%s); %s", job, r.State, holds)
}

// outsideAllocationWords composes a gpu-outside-allocation finding's words: the job, the
// GPUs it was not given, that it runs (no leftover), and why Slurm let it.
func outsideAllocationWords(f *Finding) {
	p, r := f.named(f.PIDs[0]), f.Reasons[0]
	if r.Code == ReasonPodNotAllocated {
		podOutsideWords(f)
		return
	}
	job := "Slurm job " + r.Job
	if r.User != "" {
		job += " of " + r.User
	}
	f.Title = fmt.Sprintf("%s uses %s, which it was not allocated on node %s: PID %d (%s)", job, FormatGPUs(r.GPUs), r.Node, p.PID, p.Command)
	f.Explanation = fmt.Sprintf("%s. The job is running: this is not a leftover but work outside its allocation, which takes memory and compute from the jobs Slurm gives %s. %s "+
		"Ask the job's user to use only the GPUs Slurm gives it (Slurm sets CUDA_VISIBLE_DEVICES to them), and have Slurm confine jobs to their GPUs.",
		capitalize(slurmWords(r)), plural(len(r.GPUs), "that GPU", "those GPUs"), confinementWords(r))
	outsideEvidence(f, p, r, "the job")
}

// outsideEvidence fills a gpu-outside-allocation finding's evidence and fix: the process,
// what it holds on each GPU (those not allocated to whom said so), and the reasons.
func outsideEvidence(f *Finding, p Process, r Reason, whom string) {
	f.Evidence = processLines(p)
	f.Evidence = append(f.Evidence, ownerEvidence(p)...)
	for _, g := range p.memGPUs() {
		line := fmt.Sprintf("GPU %d: %s", g, fmtMiBGiB(p.GPUMemoryMiB[g]))
		if slices.Contains(r.GPUs, g) {
			line += " (not allocated to " + whom + ")"
		}
		f.Evidence = append(f.Evidence, line)
	}
	f.Evidence = append(f.Evidence, reasonLines(f.Reasons)...)
	f.Fix = fixWords(f.Actions, 0, f.Checks)
}

// confinementWords says why Slurm let a job's process reach a GPU it was not given.
func confinementWords(r Reason) string {
	const how = "with ConstrainDevices=yes in cgroup.conf and task/cgroup in TaskPlugin, a job sees only its own GPUs"
	switch {
	case r.ConstrainDevices != nil && !*r.ConstrainDevices:
		return "Slurm does not confine jobs to their GPUs here: devices are not constrained (ConstrainDevices=no in cgroup.conf; " + how + ")."
	case r.TaskCgroup != nil && !*r.TaskCgroup:
		return "Slurm does not confine jobs to their GPUs here: devices are not constrained (TaskPlugin lacks task/cgroup, which enforces ConstrainDevices; " + how + ")."
	case r.ConstrainDevices != nil && r.TaskCgroup != nil:
		return "Slurm is set to confine jobs to their GPUs (ConstrainDevices=yes, task/cgroup), yet this process reached another: it may have left its job's cgroup, or gres.conf may list the GPUs' device files in another order than their minor numbers."
	}
	return "Slurm did not confine it to its GPUs: devices are not constrained for it (" + how + ")."
}

// capitalize upper-cases s's first byte.
func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// slurmGresEvidence is a line for a Slurm job's process on a node without GPU GRES: Slurm
// allocates no GPUs there, so its GPU use is its own business. "" otherwise.
func slurmGresEvidence(p Process) string {
	if !p.NoGPUGres {
		return ""
	}
	where := "this node"
	if p.SlurmNode != "" {
		where = "node " + p.SlurmNode
	}
	return "Slurm: GPUs are not configured as GRES on " + where + ": Slurm allocates no GPUs here, and any job may use any GPU"
}
