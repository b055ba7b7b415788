package diagnose

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Words of leftover-process, and the lines that describe a process in any finding.

// holdsWords is what a process holds, for a sentence: "holds 55,286 MiB on GPU 0".
func holdsWords(p Process) string {
	if mem := p.memMiB(); mem > 0 {
		return "holds " + fmtMiB(mem) + " on " + FormatGPUs(p.memGPUs())
	}
	return "holds " + FormatGPUs(p.GPUs)
}

// leftoverWords composes a leftover-process finding's words from its facts.
func leftoverWords(f *Finding) {
	p := f.named(f.PIDs[0])
	holds := holdsWords(p)
	f.Title = fmt.Sprintf("PID %d looks abandoned: %s %s", p.PID, p.Command, holds)
	var ex strings.Builder
	fmt.Fprintf(&ex, "PID %d %s, but it looks left over from an earlier run: %s. ", p.PID, holds, reasonsWords(f.Reasons))
	ex.WriteString("Until it exits, that GPU memory is unavailable to new jobs, and a tensor-parallel job that spans these GPUs will refuse to start or run out of memory. ")
	if i := slices.IndexFunc(f.Reasons, func(r Reason) bool { return r.Code == ReasonZombie }); i >= 0 {
		ex.WriteString(zombieFixWords(f.Reasons[i]))
	} else {
		ex.WriteString("Stop it with the commands below (gputriage never runs them); check first that nobody still needs it.")
	}
	f.Explanation = ex.String()
	f.Evidence = processLines(p)
	f.Evidence = append(f.Evidence, ownerEvidence(p)...)
	for _, g := range p.memGPUs() {
		f.Evidence = append(f.Evidence, fmt.Sprintf("GPU %d: %s", g, fmtMiBGiB(p.GPUMemoryMiB[g])))
	}
	f.Evidence = append(f.Evidence, reasonLines(f.Reasons)...)
	f.Fix = fixWords(f.Actions, 0, f.Checks)
}

// processLines describe a process: its command line, user, age, state and parent.
func processLines(p Process) []string {
	ev := []string{"cmdline: " + p.Cmdline, "user: " + p.User}
	if e := p.elapsed(); e != nil {
		line := "running for " + FormatAge(*e)
		if p.Started != nil {
			line += " (started " + fmtTime(*p.Started) + ")"
		}
		ev = append(ev, line)
	}
	if p.State != "" {
		line := "state: " + p.State
		if n := stateNames[p.State]; n != "" {
			line += " (" + n + ")"
		}
		ev = append(ev, line)
	}
	if p.PPID != nil {
		ev = append(ev, parentLine(p))
	}
	return ev
}

// parentLine names p's parent; a parent that is GPU work judged healthy is said to be so,
// lest its PID read as blame.
func parentLine(p Process) string {
	line := "parent: PID " + strconv.Itoa(*p.PPID)
	switch {
	case p.Orphaned:
		return line + " (orphaned: re-parented to init)"
	case p.ParentName == "":
		return line
	case p.ParentHealthy:
		return line + " (" + p.ParentName + ", looks healthy)"
	}
	return line + " (" + p.ParentName + ")"
}

// ownerEvidence names the unit, container and job a process runs in; a Kubernetes pod's
// process its pod, not its container's runtime scope.
func ownerEvidence(p Process) []string {
	var ev []string
	if p.Unit != "" && p.K8s == nil {
		line := "systemd unit: " + p.Unit
		if u := p.UnitState; u != nil {
			line += " (" + u.Active
			if u.Sub != "" {
				line += "/" + u.Sub
			}
			if u.Result != "" && u.Result != "success" {
				line += ", result " + u.Result
			}
			line += ")"
		} else {
			line += " (state unknown: its manager's answer for it was not in the capture)"
		}
		ev = append(ev, line)
	}
	switch {
	case p.K8s != nil:
		ev = append(ev, podLine(p.K8s))
	case p.Container != "":
		ev = append(ev, "container: "+p.Container)
	}
	if p.SlurmJob != "" {
		line := "Slurm job: " + p.SlurmJob
		if p.SlurmStep != "" {
			line += " step " + p.SlurmStep
		}
		ev = append(ev, line)
		if l := slurmGresEvidence(p); l != "" {
			ev = append(ev, l)
		}
	}
	return ev
}

// keepersText names the other processes that keep a deleted /dev/shm file, the live service
// of a running unit as healthy: another user may keep its files too (having mapped them
// before they were deleted), and that is no fault of the service.
func keepersText(f *Finding, pids []int) string {
	var plain, healthy []string
	for _, pid := range pids {
		p := f.named(pid)
		if !p.ShmHealthy {
			plain = append(plain, strconv.Itoa(pid))
			continue
		}
		healthy = append(healthy, fmt.Sprintf("PID %d (the live service of %s: looks healthy)", pid, p.Service))
	}
	if len(plain) > 0 {
		healthy = append([]string{plural(len(plain), "PID ", "PIDs ") + strings.Join(plain, ", ")}, healthy...)
	}
	return strings.Join(healthy, ", ")
}

// shmFileLine describes one deleted /dev/shm file a process keeps.
func shmFileLine(f *Finding, sf ShmFile) string {
	size := "size unknown"
	if sf.Bytes != nil {
		size = fmtBytes(*sf.Bytes)
	}
	line := fmt.Sprintf("%s (deleted): %s", sf.Path, size)
	var how []string
	if sf.Mapped {
		how = append(how, "mapped")
	}
	if sf.Open {
		how = append(how, "open")
	}
	if len(how) > 0 {
		line += ", " + strings.Join(how, " and ")
	}
	if len(sf.PIDs) > 1 {
		if sf.ByName {
			line += ", a deleted file of this name (the probe could not tell whether the same file) also kept by "
		} else {
			line += ", also kept by "
		}
		line += keepersText(f, sf.PIDs[1:])
		if sf.MorePIDs > 0 {
			line += fmt.Sprintf(" and %d more", sf.MorePIDs)
		}
	}
	return line
}

// shmAmount is the size of files for a sentence: "48 MiB", "at least 48 MiB", "an unknown
// amount".
func shmAmount(files []ShmFile) string {
	var total int64
	unknown := 0
	for _, sf := range files {
		if sf.Bytes != nil {
			total += *sf.Bytes
		} else {
			unknown++
		}
	}
	switch {
	case unknown > 0 && total == 0:
		return "an unknown amount"
	case unknown > 0:
		return "at least " + fmtBytes(total)
	}
	return fmtBytes(total)
}

// shmDeletedWords composes a shm-deleted-mapped finding's words from its facts; ServedBy
// names the running unit whose live service the process is, and OthersMay how another user
// could have deleted its files, when that makes it Info.
func shmDeletedWords(f *Finding) {
	p := f.named(f.PIDs[0])
	pid, n := p.PID, len(f.Shm)
	amount := shmAmount(f.Shm)
	f.Title = fmt.Sprintf("PID %d keeps %s of deleted /dev/shm %s in RAM", pid, amount, plural(n, "file", "files"))
	f.Evidence = []string{"held by PID " + strconv.Itoa(pid) + ": " + p.Cmdline, "user: " + p.User}
	f.Evidence = append(f.Evidence, ownerEvidence(p)...)
	for _, sf := range f.Shm {
		f.Evidence = append(f.Evidence, shmFileLine(f, sf))
	}
	f.Evidence = append(f.Evidence, "total: "+amount)
	f.Explanation = fmt.Sprintf("%d %s under /dev/shm %s deleted (with rm, or by the program itself) while PID %d still maps or holds %s open. "+
		"/dev/shm is RAM: deleting a file there only removes its name, and the memory is freed when the last process using it exits. "+
		"Running rm again, or dropping caches, does not help; nor does it give back any GPU memory the process holds. "+
		"The RAM comes back only when PID %d (and any other process listed) exits.",
		n, plural(n, "file", "files"), plural(n, "was", "were"), pid, plural(n, "it", "them"), pid)
	if f.ServedBy != "" {
		f.Explanation += fmt.Sprintf(" PID %d is the live service of %s, which its manager reports running: it looks healthy, and nothing here stops it.", pid, f.ServedBy)
	} else if f.OthersMay != nil {
		f.Explanation += fmt.Sprintf(" A user other than its owner and root could have deleted %s (%s): that is no sign that PID %d is abandoned, and nothing here stops it.", plural(n, "it", "them"), f.OthersMay.Words(), pid)
	}
	f.Fix = fixWords(f.Actions, 0, f.Checks)
}

// unconfirmedWords composes a leftover-unconfirmed finding's words from its facts.
func unconfirmedWords(f *Finding) {
	p := f.named(f.PIDs[0])
	f.Title = fmt.Sprintf("PID %d (%s) %s: files it uses are gone, but another user could have removed them; only you can judge whether it is still needed", p.PID, p.Command, holdsWords(p))
	f.Explanation = fmt.Sprintf("PID %d %s. What would mark it left over rests on evidence that a user other than its owner and root could have made: %s. "+
		"A healthy server looks just the same after another user deletes its files or renames its model directory, so gputriage does not call it abandoned: "+
		"gputriage fix shows it as needing your judgement and stops it only if you name it (--include %d). "+
		"Ask its owner, or look at what it is doing, first.", p.PID, holdsWords(p), reasonsWords(f.Reasons), p.PID)
	f.Evidence = processLines(p)
	f.Evidence = append(f.Evidence, ownerEvidence(p)...)
	f.Evidence = append(f.Evidence, reasonLines(f.Reasons)...)
	f.Fix = fixWords(f.Actions, 0, f.Checks)
}
