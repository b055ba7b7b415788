package report

import (
	"slices"

	"github.com/gputriage/gputriage/diagnose"
)

// processByPID finds pid among a host's processes (diagnose.Result.Processes, sorted by PID)
// by binary search, so that naming each of thousands of items costs a logarithm, not a scan;
// only a PID the search misses (a list built out of order by hand) is looked for by a scan.
func processByPID(procs []diagnose.GPUProcess, pid int) (diagnose.GPUProcess, bool) {
	if i, ok := slices.BinarySearchFunc(procs, pid, func(p diagnose.GPUProcess, pid int) int { return p.PID - pid }); ok {
		return procs[i], true
	}
	if i := slices.IndexFunc(procs, func(p diagnose.GPUProcess) bool { return p.PID == pid }); i >= 0 {
		return procs[i], true
	}
	return diagnose.GPUProcess{}, false
}
