package diagnose

import (
	"fmt"
	"strconv"
	"strings"
)

// Words of ghost-memory.

// ghostWords composes a ghost-memory finding's words from its facts: its GPUs' memory and
// who holds their devices (f.Memory), the suspects (f.PIDs).
func ghostWords(f *Finding) {
	var total int64
	allMIG, display := true, 0
	for _, m := range f.Memory {
		display += m.Display
		total += *m.UsedMiB
		allMIG = allMIG && m.MIG
		f.Evidence = append(f.Evidence, ghostLines(f, m)...)
	}
	f.Title = fmt.Sprintf("%s of GPU memory in use on %s with no process listed", fmtMiB(total), FormatGPUs(f.GPUs))
	var ex strings.Builder
	fmt.Fprintf(&ex, "nvidia-smi reports %s used on %s but lists no compute process there, so nothing says who holds it. ", fmtMiB(total), FormatGPUs(f.GPUs))
	if n := len(f.PIDs); n > 0 {
		var who []string
		for _, pid := range f.PIDs {
			who = append(who, fmt.Sprintf("PID %d (%s)", pid, f.named(pid).Command))
		}
		fmt.Fprintf(&ex, "%s %s the GPU device open and %s the likely %s. nvidia-smi cannot name a process it cannot map to its own PID namespace (one in a container, or when nvidia-smi itself runs in one), nor, without root, some other users' processes. "+
			"If %s should not be running, stop %s with the commands below.",
			strings.Join(who, ", "), plural(n, "has", "have"), plural(n, "is", "are"), plural(n, "owner", "owners"),
			plural(n, "it", "they"), plural(n, "it", "them"))
	} else if display > 0 {
		ex.WriteString("Only the desktop (a display server, compositor or other graphics work, never to be stopped) holds these GPUs' device files; nvidia-smi's compute list never shows graphics memory, and its full listing was not read or did not name it. Other possible owners: ")
		ex.WriteString(strings.Join(ghostOwners(allMIG, f.NotRoot), "; "))
		ex.WriteString(". Find the holder with the commands below.")
	} else {
		ex.WriteString("The probe found no process holding these GPUs' device files. Possible owners: ")
		ex.WriteString(strings.Join(ghostOwners(allMIG, f.NotRoot), "; "))
		ex.WriteString(". Find the holder with the commands below; reset the GPU only once nothing uses it.")
	}
	f.Explanation = ex.String()
	f.Fix = fixWords(f.Actions, 0, f.Checks)
}

// ghostOwners are who may hold memory that no process on the host is seen to hold.
func ghostOwners(allMIG, notRoot bool) []string {
	var why []string
	if notRoot {
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
func ghostLines(f *Finding, m GPUMemory) []string {
	line := fmt.Sprintf("GPU %d: %s used", m.Index, fmtMiBGiB(*m.UsedMiB))
	if m.TotalMiB != nil {
		line += " of " + fmtMiB(*m.TotalMiB)
	}
	line += ", no compute process listed"
	if m.MIG {
		line += " (MIG enabled)"
	}
	ev := []string{line}
	dev := "/dev/nvidia" + strconv.Itoa(m.Index)
	for _, pid := range m.DeviceOpen {
		p := f.named(pid)
		who := fmt.Sprintf("PID %d, %s", p.PID, p.User)
		if e := p.elapsed(); e != nil {
			who += ", up " + FormatAge(*e)
		}
		if owner := ownerEvidence(p); len(owner) > 0 {
			who += ", " + strings.Join(owner, ", ")
		}
		l := fmt.Sprintf("GPU %d: %s open in %s: %s", m.Index, dev, who, p.Cmdline)
		switch p.Verdict {
		case VerdictDriverHelper:
			l += " (a driver helper; holds little or no memory)"
		case VerdictProtected:
			l += " (" + p.Protected + ": never stopped)"
		}
		ev = append(ev, l)
	}
	if n := m.Elsewhere; n > 0 {
		ev = append(ev, fmt.Sprintf("GPU %d: %s is also open in %d %s that nvidia-smi lists with memory on other GPUs: CUDA opens every device it may use, so %s not the owner",
			m.Index, dev, n, plural(n, "process", "processes"), plural(n, "that one is", "those are")))
	}
	return ev
}
