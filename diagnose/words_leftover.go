package diagnose

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Words of leftover-process, and the lines that describe a process in any finding.

// holdsWords is what a process holds, for a sentence: "holds 55,286 MiB on GPU 0".
func holdsWords(gp *GPUProcess) string {
	if mem := gp.memMiB(); mem > 0 {
		return "holds " + fmtMiB(mem) + " on " + FormatGPUs(gp.memGPUs())
	}
	return "holds " + FormatGPUs(gp.GPUs)
}

// leftoverWords composes a leftover-process finding's words from its facts.
func (h *host) leftoverWords(f *Finding, gp *GPUProcess) {
	holds := holdsWords(gp)
	f.Title = fmt.Sprintf("PID %d looks abandoned: %s %s", gp.PID, shortCmd(gp), holds)
	var ex strings.Builder
	fmt.Fprintf(&ex, "PID %d %s, but it looks left over from an earlier run: %s. ", gp.PID, holds, reasonsWords(f.Reasons))
	ex.WriteString("Until it exits, that GPU memory is unavailable to new jobs, and a tensor-parallel job that spans these GPUs will refuse to start or run out of memory. ")
	if i := slices.IndexFunc(f.Reasons, func(r Reason) bool { return r.Code == ReasonZombie }); i >= 0 {
		ex.WriteString(zombieFixWords(f.Reasons[i]))
	} else {
		ex.WriteString("Stop it with the commands below (gputriage never runs them); check first that nobody still needs it.")
	}
	f.Explanation = ex.String()
	f.Evidence = h.processLines(gp)
	f.Evidence = append(f.Evidence, h.ownerEvidence(gp)...)
	for _, g := range gp.memGPUs() {
		f.Evidence = append(f.Evidence, fmt.Sprintf("GPU %d: %s", g, fmtMiBGiB(gp.GPUMemoryMiB[g])))
	}
	f.Evidence = append(f.Evidence, reasonLines(f.Reasons)...)
	f.Fix = fixWords(f.Actions, 0, f.Checks)
}

// processLines describe a process: its command line, user, age, state and parent.
func (h *host) processLines(gp *GPUProcess) []string {
	ev := []string{"cmdline: " + h.cmdline(gp.PID), "user: " + h.userName(gp.UID, gp.User)}
	p := h.procByPID[gp.PID]
	if gp.Elapsed != nil {
		line := "running for " + FormatAge(*gp.Elapsed)
		if p != nil && p.StartTime != nil {
			line += " (started " + fmtTime(*p.StartTime) + ")"
		}
		ev = append(ev, line)
	}
	if gp.State != "" {
		line := "state: " + gp.State
		if n := stateNames[gp.State]; n != "" {
			line += " (" + n + ")"
		}
		ev = append(ev, line)
	}
	if gp.PPID != nil {
		ev = append(ev, h.parentLine(gp))
	}
	return ev
}

// parentLine names gp's parent; a parent that is GPU work judged healthy is said to be so,
// lest its PID read as blame.
func (h *host) parentLine(gp *GPUProcess) string {
	line := "parent: PID " + strconv.Itoa(*gp.PPID)
	if *gp.PPID == 1 && !managed(gp) {
		return line + " (orphaned: re-parented to init)"
	}
	pp := h.procByPID[*gp.PPID]
	if pp == nil || pp.Comm == "" {
		return line
	}
	_, bad := h.leftovers[pp.PID]
	if parent := h.gpByPID[pp.PID]; parent != nil && !bad && gp.State != "Z" && parent.memMiB() > 0 {
		return line + " (" + pp.Comm + ", looks healthy)"
	}
	return line + " (" + pp.Comm + ")"
}

// ownerEvidence names the unit, container and job a process runs in.
func (h *host) ownerEvidence(gp *GPUProcess) []string {
	var ev []string
	if ref, ok := h.procUnit(gp); ok {
		line := "systemd unit: " + h.unitLabel(ref)
		if u := h.unitState(ref); u != nil {
			line += " (" + u.ActiveState
			if u.SubState != "" {
				line += "/" + u.SubState
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
	if gp.Container != "" {
		ev = append(ev, "container: "+gp.Container)
	}
	if gp.SlurmJob != "" {
		line := "Slurm job: " + gp.SlurmJob
		if p := h.procByPID[gp.PID]; p != nil && p.Cgroup.SlurmStep != "" {
			line += " step " + p.Cgroup.SlurmStep
		}
		ev = append(ev, line)
		if l := h.slurmGresEvidence(gp); l != "" {
			ev = append(ev, l)
		}
	}
	return ev
}

// keepersText names the other processes that keep a deleted /dev/shm file, the live service
// of a running unit as healthy: another user may keep its files too (having mapped them
// before they were deleted), and that is no fault of the service.
func (h *host) keepersText(pids []int) string {
	var plain, healthy []string
	for _, pid := range pids {
		p := h.procByPID[pid]
		if p == nil || h.shmBlamed(p) {
			plain = append(plain, strconv.Itoa(pid))
			continue
		}
		gp := h.gpByPID[pid]
		if gp == nil {
			gp = h.plainProcess(pid)
		}
		u, _ := h.servedUnit(gp)
		healthy = append(healthy, fmt.Sprintf("PID %d (the live service of %s: looks healthy)", pid, h.unitLabel(u)))
	}
	if len(plain) > 0 {
		healthy = append([]string{plural(len(plain), "PID ", "PIDs ") + strings.Join(plain, ", ")}, healthy...)
	}
	return strings.Join(healthy, ", ")
}

// shmFileLine describes one deleted /dev/shm file a process keeps.
func (h *host) shmFileLine(sf ShmFile) string {
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
		line += h.keepersText(sf.PIDs[1:])
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

// shmDeletedWords composes a shm-deleted-mapped finding's words from its facts; served names
// the running unit whose live service the process is, and others how another user could have
// deleted its files, when that makes it Info.
func (h *host) shmDeletedWords(f *Finding, gp *GPUProcess, served string, others *OthersMay) {
	pid, n := gp.PID, len(f.Shm)
	amount := shmAmount(f.Shm)
	f.Title = fmt.Sprintf("PID %d keeps %s of deleted /dev/shm %s in RAM", pid, amount, plural(n, "file", "files"))
	f.Evidence = []string{"held by PID " + strconv.Itoa(pid) + ": " + h.cmdline(pid), "user: " + h.userName(gp.UID, gp.User)}
	f.Evidence = append(f.Evidence, h.ownerEvidence(gp)...)
	for _, sf := range f.Shm {
		f.Evidence = append(f.Evidence, h.shmFileLine(sf))
	}
	f.Evidence = append(f.Evidence, "total: "+amount)
	f.Explanation = fmt.Sprintf("%d %s under /dev/shm %s deleted (with rm, or by the program itself) while PID %d still maps or holds %s open. "+
		"/dev/shm is RAM: deleting a file there only removes its name, and the memory is freed when the last process using it exits. "+
		"Running rm again, or dropping caches, does not help; nor does it give back any GPU memory the process holds. "+
		"The RAM comes back only when PID %d (and any other process listed) exits.",
		n, plural(n, "file", "files"), plural(n, "was", "were"), pid, plural(n, "it", "them"), pid)
	if served != "" {
		f.Explanation += fmt.Sprintf(" PID %d is the live service of %s, which its manager reports running: it looks healthy, and nothing here stops it.", pid, served)
	} else if others != nil {
		f.Explanation += fmt.Sprintf(" A user other than its owner and root could have deleted %s (%s): that is no sign that PID %d is abandoned, and nothing here stops it.", plural(n, "it", "them"), others.Words(), pid)
	}
	f.Fix = fixWords(f.Actions, 0, f.Checks)
}

// unconfirmedWords composes a leftover-unconfirmed finding's words from its facts.
func (h *host) unconfirmedWords(f *Finding, gp *GPUProcess) {
	f.Title = fmt.Sprintf("PID %d (%s) %s: files it uses are gone, but another user could have removed them; only you can judge whether it is still needed", gp.PID, shortCmd(gp), holdsWords(gp))
	f.Explanation = fmt.Sprintf("PID %d %s. What would mark it left over rests on evidence that a user other than its owner and root could have made: %s. "+
		"A healthy server looks just the same after another user deletes its files or renames its model directory, so gputriage does not call it abandoned: "+
		"gputriage fix shows it as needing your judgement and stops it only if you name it (--include %d). "+
		"Ask its owner, or look at what it is doing, first.", gp.PID, holdsWords(gp), reasonsWords(f.Reasons), gp.PID)
	f.Evidence = h.processLines(gp)
	f.Evidence = append(f.Evidence, h.ownerEvidence(gp)...)
	f.Evidence = append(f.Evidence, reasonLines(f.Reasons)...)
	f.Fix = fixWords(f.Actions, 0, f.Checks)
}
