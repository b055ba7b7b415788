package diagnose

import (
	"maps"
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

// ghostGPU is one GPU with memory used and no compute process listed, and who holds its
// device open: suspects (unlisted holders other than driver helpers), and how many processes
// listed with memory on other GPUs (CUDA opens every device it may use: not owners).
type ghostGPU struct {
	g         *parse.GPU
	suspects  []*GPUProcess
	elsewhere int
	// display counts the holders never to stop (protected): a desktop, graphics work, a
	// serving MPS daemon. The GPU is in use by them: no reset is suggested.
	display int
}

// ghostFinding reports GPUs whose memory is in use while nvidia-smi lists no compute process
// on them. It returns false when there are none, or when the app list cannot be trusted.
func (h *host) ghostFinding() (Finding, bool) {
	ghosts := h.ghostGPUs()
	if len(ghosts) == 0 {
		return Finding{}, false
	}
	f := Finding{Code: CodeGhostMemory, Severity: Warning}
	var suspects []*GPUProcess
	suspected := map[int]bool{}
	for _, gg := range ghosts {
		f.GPUs = append(f.GPUs, gg.g.Index)
		for _, gp := range gg.suspects {
			if !suspected[gp.PID] {
				suspected[gp.PID] = true
				suspects = append(suspects, gp)
			}
		}
	}
	slices.SortFunc(suspects, func(a, b *GPUProcess) int { return a.PID - b.PID })
	var ad actionAdder
	for _, gp := range suspects {
		f.PIDs = append(f.PIDs, gp.PID)
		f.Actions = ad.add(f.Actions, h.stopAction(gp))
	}
	if len(suspects) > 0 {
		f.Checks = []Command{verifyGPU}
	} else {
		f.Actions = h.ghostInspect(ghosts)
	}
	for _, gg := range ghosts {
		m := h.gpuMemory(gg.g.Index)
		m.Elsewhere, m.Display = gg.elsewhere, gg.display
		for _, gp := range h.onGPU[gg.g.Index] {
			if !gp.Listed || gp.memMiB() <= 0 {
				m.DeviceOpen = append(m.DeviceOpen, gp.PID)
			}
		}
		f.Memory = append(f.Memory, m)
		h.name(&f, m.DeviceOpen...)
	}
	h.name(&f, f.PIDs...)
	f.NotRoot = h.notRoot()
	ghostWords(&f)
	return f, true
}

// ghostGPUs are the GPUs with memory used beyond the baseline and no compute process listed,
// by index, with who holds each one's device; none when the app list cannot be trusted.
func (h *host) ghostGPUs() []ghostGPU {
	if h.s.SMI.Failure != nil || h.appsUnknown() || len(h.unmatched) > 0 {
		return nil
	}
	listed := maps.Clone(h.smiListed) // graphics and MPS clients: listed, not ghosts
	for _, a := range h.s.Apps {
		if idx, ok := h.gpuByUUID[strings.ToUpper(a.GPUUUID)]; ok {
			listed[idx] = true
		}
	}
	var out []ghostGPU
	for i := range h.s.GPUs {
		g := &h.s.GPUs[i]
		if g.MemoryUsedMiB == nil || listed[g.Index] || *g.MemoryUsedMiB <= h.ghostBaseline(g) {
			continue
		}
		gg := ghostGPU{g: g}
		for _, gp := range h.onGPU[g.Index] {
			switch {
			case gp.Listed && gp.memMiB() > 0:
				// nvidia-smi maps this process and lists its memory on other GPUs: it is not
				// hidden from it, and CUDA opens every device node it may use.
				gg.elsewhere++
			case h.protected(gp):
				gg.display++
			case !h.isDriverHelper(gp.PID):
				gg.suspects = append(gg.suspects, gp)
			}
		}
		out = append(out, gg)
	}
	slices.SortFunc(out, func(a, b ghostGPU) int { return a.g.Index - b.g.Index })
	return out
}

// ghostInspect are the actions when nothing is known to hold the memory: find the holder,
// and reset each GPU once nothing uses it.
func (h *host) ghostInspect(ghosts []ghostGPU) []Action {
	sudo := h.sudo(nil)
	out := []Action{{Kind: ActionInspect, Target: "/dev/nvidia*", Steps: []Command{
		{Line: sudo + "fuser -v /dev/nvidia*"},
		{Line: sudo + "nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv"},
		{Line: "ps -eo pid,stat,wchan:32,cmd | awk '$2 ~ /D/'"},
	}}}
	for _, gg := range ghosts {
		if gg.display > 0 {
			continue // a desktop runs on it: a reset would end it
		}
		i := strconv.Itoa(gg.g.Index)
		out = append(out, Action{Kind: ActionDriver, Target: "GPU " + i, Steps: []Command{{
			Line: sudo + "nvidia-smi --gpu-reset -i " + i, Note: "only once nothing uses GPU " + i + "; a reboot also clears it"}}})
	}
	return out
}
