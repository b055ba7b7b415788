package diagnose

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gputriage/gputriage/parse"
)

const (
	// ghostBaselineMiB is the memory.used an idle GPU may show with no process: driver
	// bookkeeping on older drivers that fold the reserved memory into "used".
	ghostBaselineMiB = 300
	// With MIG on, each GPU or compute instance costs some memory with no process at all.
	ghostMIGBaselineMiB  = 1024
	ghostMIGBaselineFrac = 0.02
)

// ghostBaseline is the memory.used a GPU may show with no process on it.
func (h *host) ghostBaseline(g *parse.GPU) int64 {
	if g.MIGMode == "Enabled" {
		b := int64(ghostMIGBaselineMiB)
		if g.MemoryTotalMiB != nil {
			b = max(b, int64(ghostMIGBaselineFrac*float64(*g.MemoryTotalMiB)))
		}
		return b
	}
	return ghostBaselineMiB
}

// ghostFinding reports GPUs whose memory is in use while nvidia-smi lists no compute process
// on them. It returns false when there are none, or when the app list cannot be trusted.
func (h *host) ghostFinding() (Finding, bool) {
	if h.s.SMI.Failure != nil || h.appsUnknown() || len(h.unmatched) > 0 {
		return Finding{}, false
	}
	listed := map[int]bool{}
	for _, a := range h.s.Apps {
		if idx, ok := h.gpuByUUID[strings.ToUpper(a.GPUUUID)]; ok {
			listed[idx] = true
		}
	}
	var ghosts []*parse.GPU
	for i := range h.s.GPUs {
		g := &h.s.GPUs[i]
		if g.MemoryUsedMiB == nil || listed[g.Index] || *g.MemoryUsedMiB <= h.ghostBaseline(g) {
			continue
		}
		ghosts = append(ghosts, g)
	}
	if len(ghosts) == 0 {
		return Finding{}, false
	}
	slices.SortFunc(ghosts, func(a, b *parse.GPU) int { return a.Index - b.Index })

	f := Finding{Code: CodeGhostMemory, Severity: Warning}
	var total int64
	var suspects []*GPUProcess // non-helper holders of a ghost GPU's device
	suspected := map[int]bool{}
	for _, g := range ghosts {
		f.GPUs = append(f.GPUs, g.Index)
		total += *g.MemoryUsedMiB
		line := fmt.Sprintf("GPU %d: %s used", g.Index, fmtMiBGiB(*g.MemoryUsedMiB))
		if g.MemoryTotalMiB != nil {
			line += " of " + fmtMiB(*g.MemoryTotalMiB)
		}
		line += ", no compute process listed"
		if g.MIGMode == "Enabled" {
			line += " (MIG enabled)"
		}
		f.Evidence = append(f.Evidence, line)
		dev := "/dev/nvidia" + strconv.Itoa(g.Index)
		elsewhere := 0
		for _, gp := range h.onGPU[g.Index] {
			if gp.Listed && gp.memMiB() > 0 {
				// nvidia-smi maps this process and lists its memory on other GPUs: it is not
				// hidden from it, and CUDA opens every device node it may use.
				elsewhere++
				continue
			}
			who := fmt.Sprintf("PID %d, %s", gp.PID, h.userName(gp.UID, gp.User))
			if gp.Elapsed != nil {
				who += ", up " + FormatAge(*gp.Elapsed)
			}
			if owner := h.ownerEvidence(gp); len(owner) > 0 {
				who += ", " + strings.Join(owner, ", ")
			}
			if h.isDriverHelper(gp.PID) {
				f.Evidence = append(f.Evidence, fmt.Sprintf("GPU %d: %s open in %s: %s (a driver helper; holds little or no memory)", g.Index, dev, who, h.cmdline(gp.PID)))
				continue
			}
			f.Evidence = append(f.Evidence, fmt.Sprintf("GPU %d: %s open in %s: %s", g.Index, dev, who, h.cmdline(gp.PID)))
			if !suspected[gp.PID] {
				suspected[gp.PID] = true
				suspects = append(suspects, gp)
			}
		}
		if elsewhere > 0 {
			f.Evidence = append(f.Evidence, fmt.Sprintf("GPU %d: %s is also open in %d %s that nvidia-smi lists with memory on other GPUs: CUDA opens every device it may use, so %s not the owner",
				g.Index, dev, elsewhere, plural(elsewhere, "process", "processes"), plural(elsewhere, "that one is", "those are")))
		}
	}
	slices.SortFunc(suspects, func(a, b *GPUProcess) int { return a.PID - b.PID })
	for _, gp := range suspects {
		f.PIDs = append(f.PIDs, gp.PID)
	}
	allMIG := true
	for _, g := range ghosts {
		allMIG = allMIG && g.MIGMode == "Enabled"
	}

	f.Title = fmt.Sprintf("%s of GPU memory in use on %s with no process listed", fmtMiB(total), FormatGPUs(f.GPUs))
	var ex strings.Builder
	fmt.Fprintf(&ex, "nvidia-smi reports %s used on %s but lists no compute process there, so nothing says who holds it. ", fmtMiB(total), FormatGPUs(f.GPUs))
	if len(suspects) > 0 {
		var who []string
		for _, gp := range suspects {
			who = append(who, fmt.Sprintf("PID %d (%s)", gp.PID, shortCmd(gp)))
		}
		fmt.Fprintf(&ex, "%s %s the GPU device open and %s the likely %s. nvidia-smi cannot name a process it cannot map to its own PID namespace (one in a container, or when nvidia-smi itself runs in one), nor, without root, some other users' processes. "+
			"If %s should not be running, stop %s with the commands below.",
			strings.Join(who, ", "), plural(len(suspects), "has", "have"), plural(len(suspects), "is", "are"), plural(len(suspects), "owner", "owners"),
			plural(len(suspects), "it", "they"), plural(len(suspects), "it", "them"))
		for _, gp := range suspects {
			f.Actions = addAction(f.Actions, h.stopAction(gp))
		}
		f.Checks = []Command{verifyGPU}
		f.Fix = fixWords(f.Actions, 0, f.Checks)
		f.Explanation = ex.String()
		return f, true
	}
	ex.WriteString("The probe found no process holding these GPUs' device files. Possible owners: ")
	var why []string
	if h.notRoot() {
		why = append(why, "processes of other users, which were invisible because the probe did not run as root (rerun gputriage with --sudo, or as root)")
	}
	why = append(why,
		"processes in another PID namespace (a container) that nvidia-smi cannot map to a PID",
		"a process that exited while the driver was still tearing down its context, or one whose threads are stuck in the driver (state D)")
	if allMIG {
		why = append(why, "MIG instances, which reserve some memory with no process at all")
	} else {
		why = append(why, "memory the driver itself reserves (a GPU that needs a reset after an error also shows this)")
	}
	ex.WriteString(strings.Join(why, "; "))
	ex.WriteString(". Find the holder with the commands below; reset the GPU only once nothing uses it.")
	sudo := h.sudo(nil)
	f.Fix = append(f.Fix,
		sudo+"fuser -v /dev/nvidia*",
		sudo+"nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv",
		"ps -eo pid,stat,wchan:32,cmd | awk '$2 ~ /D/'",
	)
	for _, g := range ghosts {
		f.Fix = append(f.Fix, fmt.Sprintf("%snvidia-smi --gpu-reset -i %d  # only once nothing uses GPU %d; a reboot also clears it", sudo, g.Index, g.Index))
	}
	f.Explanation = ex.String()
	return f, true
}
