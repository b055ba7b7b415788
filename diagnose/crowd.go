package diagnose

import "fmt"

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
	f.Title = fmt.Sprintf("%s more %s %s (not detailed)", thousands(int64(len(pids))), plural(len(pids), "process", "processes"), what)
	f.Explanation = fmt.Sprintf("This host has more than %s such processes; the first %s are detailed above, and these are listed by PID only. Treat them the same way once the detailed ones are understood.",
		thousands(maxDetailed), thousands(maxDetailed))
	shown := pids
	if len(shown) > maxHolderLines {
		shown = shown[:maxHolderLines]
	}
	line := fmtPIDs(shown)
	if len(pids) > len(shown) {
		line += fmt.Sprintf(" and %s more", thousands(int64(len(pids)-len(shown))))
	}
	f.Evidence = []string{line}
	return f
}
