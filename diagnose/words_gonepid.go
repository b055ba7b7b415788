package diagnose

import (
	"fmt"
	"strings"
)

// Words of dead-pid-memory.

// deadPIDWords composes a dead-pid-memory finding's words from its facts: the gone PID's
// listed-pid-gone reason, then its device keepers' holds-device reasons, those tied to it
// (by process group or session) first.
func deadPIDWords(f *Finding) {
	dead := f.Reasons[0]
	var tied, others []Reason
	for _, r := range f.Reasons[1:] {
		if r.Strong {
			tied = append(tied, r)
		} else {
			others = append(others, r)
		}
	}
	mem := "memory"
	if dead.MiB > 0 {
		mem = fmtMiB(dead.MiB)
	}
	on := FormatGPUs(f.GPUs)
	var ex strings.Builder
	fmt.Fprintf(&ex, "nvidia-smi charges %s on %s to PID %d, but PID %d no longer exists: it was already gone when the probe looked, right after nvidia-smi's listing. ", mem, on, dead.PID, dead.PID)
	ex.WriteString("The driver frees a process's GPU memory only once every file descriptor on its device is closed, and processes it forked (DataLoader workers, other children) inherit them: ")
	switch {
	case len(tied) > 0:
		f.Title = fmt.Sprintf("%s on %s is charged to PID %d, which is gone; %s it forked still %s the device", mem, on, dead.PID, fmtPIDs(f.PIDs), plural(len(f.PIDs), "holds", "hold"))
		fmt.Fprintf(&ex, "%s, of PID %d's %s, still %s the device open and so %s the memory. Stop %s with the commands below (gputriage never runs them).",
			fmtPIDs(f.PIDs), dead.PID, tieWords(tied), plural(len(f.PIDs), "holds", "hold"), plural(len(f.PIDs), "keeps", "keep"), plural(len(f.PIDs), "it", "them"))
	case len(others) > 0:
		f.Title = fmt.Sprintf("%s on %s is charged to PID %d, which is gone", mem, on, dead.PID)
		fmt.Fprintf(&ex, "nothing the probe saw ties a survivor to PID %d (no process in its process group or session holds the device). Other processes hold the device open and nvidia-smi lists no memory of theirs; one may keep it, or may just have opened every device as CUDA does. Look before stopping anything.", dead.PID)
	default:
		f.Title = fmt.Sprintf("%s on %s is charged to PID %d, which is gone", mem, on, dead.PID)
		fmt.Fprintf(&ex, "no process the probe saw holds the device but live GPU jobs nvidia-smi lists with memory of their own, their workers, and driver helpers or GPU monitors. The driver may still be tearing the context down; if PID %d stays listed, a process the probe could not see (another user's without root, another PID namespace) keeps it.", dead.PID)
	}
	f.Explanation = ex.String()
	f.Evidence = append(f.Evidence, fmt.Sprintf("PID %d: listed by nvidia-smi with %s on %s; /proc/%d did not exist right after the listing", dead.PID, mem, on, dead.PID))
	for _, r := range f.Reasons[1:] {
		f.Evidence = append(f.Evidence, keeperLine(f.named(r.PID), r))
	}
	f.Fix = fixWords(f.Actions, 0, f.Checks)
}

// tieWords is what ties the keepers to the gone PID: "process group", "session".
func tieWords(tied []Reason) string {
	group, session := false, false
	for _, r := range tied {
		group = group || r.Detail == tieGroup
		session = session || r.Detail == tieSession
	}
	switch {
	case group && session:
		return "process group and session"
	case session:
		return "session"
	}
	return "process group"
}

// keeperLine is one holds-device reason as an evidence line; p is its process.
func keeperLine(p Process, r Reason) string {
	who := fmt.Sprintf("PID %d, %s", r.PID, p.User)
	if e := p.elapsed(); e != nil {
		who += ", up " + FormatAge(*e)
	}
	if p.PPID != nil {
		who += fmt.Sprintf(", parent PID %d", *p.PPID)
	}
	tie := "not in its process group or session"
	switch r.Detail {
	case tieGroup:
		tie = "in its process group"
	case tieSession:
		tie = "in its session"
	}
	return fmt.Sprintf("%s (%s) holds the device of %s open: %s", who, tie, FormatGPUs(r.GPUs), p.Cmdline)
}
