package diagnose

// maxDetailed bounds the findings of one code that describe one process or job each
// (leftover-process, shm-deleted-mapped, gpu-busy). On a host with more, the first
// maxDetailed by PID (or job) are detailed and the rest are folded into one finding that
// lists them all by PID: a report of hundreds of thousands of findings helps nobody, and
// building it would cost gigabytes.
const maxDetailed = 1000

// foldedFinding is the one finding that stands for the processes beyond maxDetailed. It
// carries the checks of its code but no actions: those would be as many as the processes,
// which is what folding avoids; each is the action its detailed finding would carry.
func foldedFinding(code string, sev Severity, what string, pids []int) Finding {
	f := Finding{Code: code, Severity: sev, PIDs: pids}
	switch code {
	case CodeLeftoverProcess:
		f.Checks = []Command{verifyGPU}
	case CodeShmDeletedMapped:
		f.Checks = []Command{verifyShm}
	}
	f.Folded = &Folded{What: what, Processes: len(pids)}
	foldedWords(&f)
	return f
}
