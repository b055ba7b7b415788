package diagnose

import (
	"cmp"
	"fmt"
	"strings"
)

// Words: the sentences people read, composed from the typed facts (facts.go) in one place.
// Builders judge and fill facts; only the functions here and in words_*.go turn them into
// prose, so a sentence cannot say more, or other, than the facts do.

// reasonWords is one reason as a clause: "it is a zombie (state Z): ...".
func reasonWords(r Reason) string {
	switch r.Code {
	case ReasonJobEnded, ReasonGPUNotAllocated:
		return slurmWords(r)
	case ReasonUnitStopped:
		s := "its systemd unit " + r.Unit + " is " + r.State
		if r.Result != "" {
			s += " (result: " + r.Result + ")"
		}
		return s + ", yet the process is still running"
	case ReasonSessionEnded:
		return "the login session that started it (" + r.Unit + ") has ended"
	case ReasonStrayInUnit:
		s := "it runs in " + r.Unit + "'s cgroup but not under the unit's current main process: it was orphaned (parent PID 1)"
		if r.Older {
			s += " and started before that main process, so an earlier stop or restart of the unit left it behind (KillMode=process)"
		}
		return s
	case ReasonZombie:
		return "it is a zombie (state Z): it has exited but its parent has not reaped it"
	case ReasonStopped:
		return "it is stopped (state T, e.g. suspended with Ctrl-Z or SIGSTOP)"
	case ReasonTraced:
		return "it is stopped by a debugger (state t)"
	case ReasonScratchDeleted:
		return "it maps deleted /dev/shm files (" + listSome(r.Paths, 2) + ")"
	case ReasonShmDeleted:
		return servedWords(r, "files it maps from /dev/shm were deleted ("+listSome(r.Paths, 2)+"): someone cleaned up after it as if it were gone")
	case ReasonModelPathGone:
		return servedWords(r, "the model path on its command line, "+strings.Join(r.Paths, ", ")+", no longer exists")
	case ReasonOrphaned:
		return "it is orphaned: parent PID 1, outside any service, container or Slurm job"
	case ReasonListedPIDGone:
		return fmt.Sprintf("nvidia-smi lists PID %d with %s on %s, and it no longer exists", r.PID, fmtMiB(r.MiB), FormatGPUs(r.Held))
	case ReasonHoldsDevice:
		return fmt.Sprintf("PID %d holds the device of %s open (%s)", r.PID, FormatGPUs(r.GPUs), strings.ReplaceAll(cmp.Or(r.Detail, "no tie"), "-", " "))
	case ReasonMuchOlder:
		s := fmt.Sprintf("it has run for %s, while the other GPU work of its user and of the host's services started at most %s ago", FormatAge(r.Age), FormatAge(r.Than))
		if r.Orphaned {
			s = "it is orphaned (parent PID 1, outside any service, container or Slurm job) and " + s
		}
		return s
	}
	return string(r.Code)
}

// servedWords qualifies a cleaned-up reason that a running unit's service makes weak.
func servedWords(r Reason, s string) string {
	if r.ServedBy == "" {
		return s
	}
	return s + "; but " + r.ServedBy + " is running with it as its main process or under it, so that alone does not make it abandoned"
}

// reasonsWords joins reasons into one clause list, in their order (strong first).
func reasonsWords(rs []Reason) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = reasonWords(r)
	}
	return strings.Join(parts, "; ")
}

// reasonLines are the "reason: ..." evidence lines, one per reason.
func reasonLines(rs []Reason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = "reason: " + reasonWords(r)
	}
	return out
}

// commandWords is a command as a Fix line: the line, and its note as a shell comment after
// it, as Fix has always printed them.
func commandWords(c Command) string {
	if c.Note == "" {
		return c.Line
	}
	return c.Line + "  # " + c.Note
}

// fixWords is a finding's Fix: every step of its actions, in order, then its checks. Each
// line appears once (two actions may share a step, e.g. a dmesg check). omitted, when
// positive, says how many more actions the finding left out, after the shown ones.
func fixWords(actions []Action, omitted int, checks []Command) []string {
	var out []string
	seen := map[string]bool{}
	add := func(c Command) {
		if l := commandWords(c); !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	for _, a := range actions {
		if a.Kind == ActionNarrowLaunch {
			continue
		}
		for _, c := range a.Steps {
			add(c)
		}
	}
	if omitted > 0 {
		out = append(out, fmt.Sprintf("# and %s more leftover processes: their commands are in their leftover-process findings", thousands(int64(omitted))))
	}
	for _, a := range actions {
		if a.Kind == ActionNarrowLaunch {
			for _, c := range a.Steps {
				add(c)
			}
		}
	}
	for _, c := range checks {
		add(c)
	}
	return out
}

// foldedWords composes the words of a finding that stands for the processes beyond
// maxDetailed; what says what they do ("look abandoned").
func foldedWords(f *Finding, what string) {
	pids := f.PIDs
	f.Title = fmt.Sprintf("%s more %s %s (not detailed)", thousands(int64(len(pids))), plural(len(pids), "process", "processes"), what)
	f.Explanation = fmt.Sprintf("This host has more than %s such processes; the first %s are detailed above, and these are listed by PID only. Treat them the same way once the detailed ones are understood.",
		thousands(maxDetailed), thousands(maxDetailed))
	shown := firstN(pids, maxHolderLines)
	line := fmtPIDs(shown)
	if len(pids) > len(shown) {
		line += fmt.Sprintf(" and %s more", thousands(int64(len(pids)-len(shown))))
	}
	f.Evidence = []string{line}
}
