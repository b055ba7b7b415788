package diagnose

import (
	"fmt"
	"strings"
)

// Words of gpu-busy.

// jobTitle is a gpu-busy job for people: "python3 processes started by PID 812", "the workers
// of vllm serve meta-llama/Llama-3.1-8B (PID 812)".
func jobTitle(j BusyJob) string {
	if rest, ok := strings.CutPrefix(j.Key, "ppid "); ok {
		if j.Launcher != "" {
			return "the workers of " + j.Launcher + " (PID " + rest + ")"
		}
		if j.Comm == "" {
			return "the children of PID " + rest
		}
		return j.Comm + " processes started by PID " + rest
	}
	if rest, ok := strings.CutPrefix(j.Key, "pid "); ok {
		if j.Comm == "" {
			return "PID " + rest
		}
		return j.Comm + " (PID " + rest + ")"
	}
	return j.Key
}

// gpuMemory is the finding's memory facts of GPU g.
func (f *Finding) gpuMemory(g int) GPUMemory {
	for _, m := range f.Memory {
		if m.Index == g {
			return m
		}
	}
	return GPUMemory{Index: g}
}

// busyWords composes a gpu-busy finding's words: its job (f.Job) and processes (f.Named).
func busyWords(f *Finding) {
	j, n := f.Job, f.Job.Processes
	var total int64
	for _, m := range j.GPUMiB {
		total += m
	}
	title := jobTitle(*j)
	if k := f.Named[0].K8s; k != nil && !k.Gone {
		title = "Kubernetes pod " + podName(k)
	}
	f.Title = fmt.Sprintf("%s in use by %s: %s in %d %s", FormatGPUs(f.GPUs), title, fmtMiB(total), n, plural(n, "process", "processes"))
	f.Explanation = fmt.Sprintf("This GPU memory is held by %s, and nothing suggests %s abandoned. This is information about the host, not a problem.",
		title, plural(n, "it is", "they are"))
	f.Evidence = append(f.Evidence, ownerEvidence(f.Named[0])...)
	for _, g := range f.GPUs {
		line := fmt.Sprintf("GPU %d: %s used by this job", g, fmtMiB(j.GPUMiB[g]))
		if m := f.gpuMemory(g); m.UsedMiB != nil && m.TotalMiB != nil {
			line += fmt.Sprintf(" (GPU: %s of %s used)", thousands(*m.UsedMiB), fmtMiB(*m.TotalMiB))
		}
		f.Evidence = append(f.Evidence, line)
	}
	for _, p := range f.Named {
		age := "age unknown"
		if e := p.elapsed(); e != nil {
			age = "up " + FormatAge(*e)
		}
		f.Evidence = append(f.Evidence, fmt.Sprintf("PID %d (%s, %s, %s on %s): %s", p.PID, p.User, age,
			fmtMiB(p.memMiB()), FormatGPUs(p.memGPUs()), p.Cmdline))
	}
	if n > maxBusyLines {
		f.Evidence = append(f.Evidence, fmt.Sprintf("… and %d more processes", n-maxBusyLines))
	}
}

// maxBusyLines bounds the processes a gpu-busy finding describes.
const maxBusyLines = 10
