package diagnose

import "fmt"

// Words of gpu-busy.

// busyWords composes a gpu-busy finding's words: the job (key) and its processes.
func (h *host) busyWords(f *Finding, key string, procs []*GPUProcess) {
	perGPU := map[int]int64{}
	var total int64
	for _, gp := range procs {
		for g, m := range gp.GPUMemoryMiB {
			perGPU[g] += m
			total += m
		}
	}
	title := h.jobTitle(key, procs)
	f.Title = fmt.Sprintf("%s in use by %s: %s in %d %s", FormatGPUs(f.GPUs), title, fmtMiB(total), len(procs), plural(len(procs), "process", "processes"))
	f.Explanation = fmt.Sprintf("This GPU memory is held by %s, and nothing suggests %s abandoned. This is information about the host, not a problem.",
		title, plural(len(procs), "it is", "they are"))
	f.Evidence = append(f.Evidence, h.ownerEvidence(procs[0])...)
	for _, g := range f.GPUs {
		line := fmt.Sprintf("GPU %d: %s used by this job", g, fmtMiB(perGPU[g]))
		if gg := h.gpuByIndex[g]; gg != nil && gg.MemoryUsedMiB != nil && gg.MemoryTotalMiB != nil {
			line += fmt.Sprintf(" (GPU: %s of %s used)", thousands(*gg.MemoryUsedMiB), fmtMiB(*gg.MemoryTotalMiB))
		}
		f.Evidence = append(f.Evidence, line)
	}
	const maxLines = 10
	for i, gp := range procs {
		if i == maxLines {
			f.Evidence = append(f.Evidence, fmt.Sprintf("… and %d more processes", len(procs)-maxLines))
			break
		}
		age := "age unknown"
		if gp.Elapsed != nil {
			age = "up " + FormatAge(*gp.Elapsed)
		}
		f.Evidence = append(f.Evidence, fmt.Sprintf("PID %d (%s, %s, %s on %s): %s", gp.PID, h.userName(gp.UID, gp.User), age,
			fmtMiB(gp.memMiB()), FormatGPUs(gp.memGPUs()), h.cmdline(gp.PID)))
	}
}
