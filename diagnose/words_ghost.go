package diagnose

import (
	"fmt"
	"strconv"
	"strings"
)

// Words of ghost-memory.

// ghostWords composes a ghost-memory finding's words from its facts.
func (h *host) ghostWords(f *Finding, ghosts []ghostGPU, suspects []*GPUProcess) {
	var total int64
	allMIG, display := true, 0
	for _, gg := range ghosts {
		display += gg.display
		total += *gg.g.MemoryUsedMiB
		allMIG = allMIG && gg.g.MIGMode == "Enabled"
		f.Evidence = append(f.Evidence, h.ghostLines(gg)...)
	}
	f.Title = fmt.Sprintf("%s of GPU memory in use on %s with no process listed", fmtMiB(total), FormatGPUs(f.GPUs))
	var ex strings.Builder
	fmt.Fprintf(&ex, "nvidia-smi reports %s used on %s but lists no compute process there, so nothing says who holds it. ", fmtMiB(total), FormatGPUs(f.GPUs))
	if n := len(suspects); n > 0 {
		var who []string
		for _, gp := range suspects {
			who = append(who, fmt.Sprintf("PID %d (%s)", gp.PID, shortCmd(gp)))
		}
		fmt.Fprintf(&ex, "%s %s the GPU device open and %s the likely %s. nvidia-smi cannot name a process it cannot map to its own PID namespace (one in a container, or when nvidia-smi itself runs in one), nor, without root, some other users' processes. "+
			"If %s should not be running, stop %s with the commands below.",
			strings.Join(who, ", "), plural(n, "has", "have"), plural(n, "is", "are"), plural(n, "owner", "owners"),
			plural(n, "it", "they"), plural(n, "it", "them"))
	} else if display > 0 {
		ex.WriteString("Only the desktop (a display server, compositor or other graphics work, never to be stopped) holds these GPUs' device files; nvidia-smi's compute list never shows graphics memory, and its full listing was not read or did not name it. Other possible owners: ")
		ex.WriteString(strings.Join(h.ghostOwners(allMIG), "; "))
		ex.WriteString(". Find the holder with the commands below.")
	} else {
		ex.WriteString("The probe found no process holding these GPUs' device files. Possible owners: ")
		ex.WriteString(strings.Join(h.ghostOwners(allMIG), "; "))
		ex.WriteString(". Find the holder with the commands below; reset the GPU only once nothing uses it.")
	}
	f.Explanation = ex.String()
	f.Fix = fixWords(f.Actions, 0, f.Checks)
}

// ghostOwners are who may hold memory that no process on the host is seen to hold.
func (h *host) ghostOwners(allMIG bool) []string {
	var why []string
	if h.notRoot() {
		why = append(why, "processes of other users, which were invisible because the probe did not run as root (rerun gputriage with --sudo, or as root)")
	}
	why = append(why,
		"processes in another PID namespace (a container) that nvidia-smi cannot map to a PID",
		"a process that exited while the driver was still tearing down its context, or one whose threads are stuck in the driver (state D)")
	if allMIG {
		return append(why, "MIG instances, which reserve some memory with no process at all")
	}
	return append(why, "memory the driver itself reserves (a GPU that needs a reset after an error also shows this)")
}

// ghostLines are one ghost GPU's evidence: its memory, and who holds its device open.
func (h *host) ghostLines(gg ghostGPU) []string {
	g := gg.g
	line := fmt.Sprintf("GPU %d: %s used", g.Index, fmtMiBGiB(*g.MemoryUsedMiB))
	if g.MemoryTotalMiB != nil {
		line += " of " + fmtMiB(*g.MemoryTotalMiB)
	}
	line += ", no compute process listed"
	if g.MIGMode == "Enabled" {
		line += " (MIG enabled)"
	}
	ev := []string{line}
	dev := "/dev/nvidia" + strconv.Itoa(g.Index)
	for _, gp := range h.onGPU[g.Index] {
		if gp.Listed && gp.memMiB() > 0 {
			continue
		}
		who := fmt.Sprintf("PID %d, %s", gp.PID, h.userName(gp.UID, gp.User))
		if gp.Elapsed != nil {
			who += ", up " + FormatAge(*gp.Elapsed)
		}
		if owner := h.ownerEvidence(gp); len(owner) > 0 {
			who += ", " + strings.Join(owner, ", ")
		}
		l := fmt.Sprintf("GPU %d: %s open in %s: %s", g.Index, dev, who, h.cmdline(gp.PID))
		switch {
		case h.isDriverHelper(gp.PID):
			l += " (a driver helper; holds little or no memory)"
		case h.protected(gp):
			l += " (" + h.protectedWhy(gp) + ": never stopped)"
		}
		ev = append(ev, l)
	}
	if n := gg.elsewhere; n > 0 {
		ev = append(ev, fmt.Sprintf("GPU %d: %s is also open in %d %s that nvidia-smi lists with memory on other GPUs: CUDA opens every device it may use, so %s not the owner",
			g.Index, dev, n, plural(n, "process", "processes"), plural(n, "that one is", "those are")))
	}
	return ev
}
