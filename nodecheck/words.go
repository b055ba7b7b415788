package nodecheck

import (
	"fmt"
	"strings"

	"github.com/gputriage/gputriage/diagnose"
)

// Words of node-check: the titles of its own problems (gpu-not-free, gpu-missing) and the
// drain reason, written here from a Problem's facts. The findings' titles are diagnose's.

// notFreeTitle says which process holds memory on a GPU of the job.
func notFreeTitle(p Problem) string {
	t := fmt.Sprintf("PID %d (%s) holds %s on GPU %d, a GPU of the job that must be free",
		p.PID, p.Program, diagnose.FormatMiB(p.MiB), p.GPU)
	if p.Job != "" {
		t += "; it is of Slurm job " + p.Job
	}
	return t
}

// missingTitle says that a GPU Slurm gave the job is not there.
func missingTitle(p Problem) string {
	return fmt.Sprintf("GPU %s, given to the job by Slurm, is not listed by nvidia-smi", p.SlurmGPU)
}

// maxDrainReason is the longest drain reason DrainReason makes: sinfo -R shows it whole.
const maxDrainReason = 80

// DrainReason is the reason `scontrol update state=drain` gets for these problems (the first
// is the most severe): "gputriage: CODE (PROGRAM) PID N MIB MiB GPU G job J", with "+N more"
// when other problems have other culprits, at most 80 bytes of printable ASCII whatever the
// host's text: the program name keeps only [A-Za-z0-9._:/+-] and is shortened first, then
// dropped.
func DrainReason(problems []Problem) string {
	if len(problems) == 0 {
		return ""
	}
	p := problems[0]
	others := 0
	for _, q := range problems[1:] {
		if q.PID == 0 || q.PID != p.PID {
			others++
		}
	}
	more := ""
	if others > 0 {
		more = fmt.Sprintf(" +%d more", others)
	}
	var facts []string
	if p.PID > 0 {
		facts = append(facts, fmt.Sprintf("PID %d", p.PID))
	}
	if p.GPU >= 0 {
		facts = append(facts, fmt.Sprintf("%d MiB GPU %d", p.MiB, p.GPU))
	} else if len(p.GPUs) > 0 {
		facts = append(facts, "GPU "+diagnose.FormatGPUs(p.GPUs))
	}
	if j := reasonWord(p.Job, 12); j != "" {
		facts = append(facts, "job "+j)
	}
	head := "gputriage: " + reasonWord(p.Code, 24)
	tail := strings.Join(facts, " ") + more
	prog := reasonWord(p.Program, 24)
	compose := func(prog string) string {
		parts := []string{head}
		if prog != "" {
			parts = append(parts, "("+prog+")")
		}
		if tail != "" {
			parts = append(parts, tail)
		}
		return strings.Join(parts, " ")
	}
	r := compose(prog)
	for len(r) > maxDrainReason && prog != "" {
		prog = prog[:max(len(prog)-(len(r)-maxDrainReason), 0)]
		if len(prog) < 4 {
			prog = ""
		}
		r = compose(prog)
	}
	if len(r) > maxDrainReason {
		r = r[:maxDrainReason]
	}
	return r
}

// reasonWord keeps of host text only the bytes a drain reason may carry, at most n of them.
func reasonWord(s string, n int) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < n; i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._:/+-", c) >= 0 {
			b.WriteByte(c)
		} else if c == ' ' && b.Len() > 0 {
			b.WriteByte('_')
		}
	}
	return strings.TrimRight(b.String(), "_")
}
