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
