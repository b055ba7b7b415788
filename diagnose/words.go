package diagnose

import (
	"cmp"
	"fmt"
	"strconv"
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
	case ReasonPodGone, ReasonPodEnded, ReasonPodTerminating, ReasonPodNotAllocated:
		return podReasonWords(r)
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
		return "it is a zombie (state Z): it has exited but its parent" + zombieParentWords(r) + " has not reaped it"
	case ReasonZombieLeader:
		return "its main thread has exited (state Z, no command line) but its other threads (" + r.Detail + ") still run and hold its memory"
	case ReasonOrphanedWorker, ReasonOlderGeneration:
		return treeWords(r)
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

// servedWords qualifies a cleaned-up reason that a running unit's service, or a user who
// could have made it (OthersMay), makes weak.
func servedWords(r Reason, s string) string {
	switch {
	case r.ServedBy != "":
		return s + "; but " + r.ServedBy + " is running with it as its main process or under it, so that alone does not make it abandoned"
	case r.OthersMay != nil:
		return s + "; but " + r.OthersMay.Words() + ", so that says nothing of whether the process is still needed"
	}
	return s
}

// Words says how a user other than the process's owner and root could have made a clue: "it
// lives in /srv/hf, a directory every user may write, ...".
func (o OthersMay) Words() string {
	uid := func(p *int) string {
		if p == nil {
			return "an owner the probe could not read"
		}
		return "uid " + strconv.Itoa(*p)
	}
	switch o.Code {
	case OthersWorldWritable:
		return "it lives in " + o.Dir + ", a directory every user may write, so any user could have deleted or renamed it"
	case OthersGroupWritable:
		gid := "?"
		if o.GID != nil {
			gid = strconv.Itoa(*o.GID)
		}
		return "it lives in " + o.Dir + ", a directory every member of group " + gid + " may write, so another user could have deleted or renamed it"
	case OthersOwnDir:
		return "it lives in " + o.Dir + ", a directory of another user (" + uid(o.UID) + "), who could have deleted or renamed it"
	case OthersStickyEntry:
		return "it lives in " + o.Dir + ", a shared directory where its entry's owner (" + uid(o.UID) + ") could have deleted or renamed it"
	case OthersDirGone:
		return "its directory " + o.Dir + " is gone too, so who could have deleted it is not known"
	case OthersSymlink:
		return "its path goes through " + o.Dir + ", a symbolic link, so who could have changed it is not known"
	}
	if o.Dir != "" {
		return "the probe could not read who may write " + o.Dir + ", so another user may have deleted or renamed it"
	}
	return "the probe could not read who may write its directories, so another user may have deleted or renamed it"
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

// ComposeWords composes f's words (Title, Explanation, Evidence, Fix) from its facts alone,
// within the bounds a result keeps (budget.go): what Diagnose gives a finding, and what a
// finding decoded from JSON gives again.
func ComposeWords(f *Finding) {
	f.Title, f.Explanation, f.Evidence, f.Fix = "", "", nil, nil
	composeWords(f)
	var fo folder
	fo.foldWords(f)
}

// composeWords composes f's words by its code.
func composeWords(f *Finding) {
	if f.Folded != nil {
		foldedWords(f)
		return
	}
	switch f.Code {
	case CodeMemoryImbalance:
		imbalanceWords(f)
	case CodeLeftoverProcess:
		leftoverWords(f)
	case CodeLeftoverUnconfirmed:
		unconfirmedWords(f)
	case CodeGPUOutsideAllocation:
		outsideAllocationWords(f)
	case CodeShmDeletedMapped:
		shmDeletedWords(f)
	case CodeDeadPIDMemory:
		deadPIDWords(f)
	case CodeGhostMemory:
		ghostWords(f)
	case CodeShmStale:
		shmStaleWords(f)
	case CodeShmFull:
		shmFullWords(f)
	case CodeGPUBusy:
		busyWords(f)
	case CodeSMIFailed:
		smiWords(f)
	case CodeProbeLimited:
		probeLimitedWords(f)
	}
}

// foldedWords composes the words of a finding that stands for the processes beyond
// maxDetailed; f.Folded says what they do ("look abandoned") and how many they are.
func foldedWords(f *Finding) {
	what, n, pids := f.Folded.What, f.Folded.Processes, f.PIDs
	f.Title = fmt.Sprintf("%s more %s %s (not detailed)", thousands(int64(n)), plural(n, "process", "processes"), what)
	f.Explanation = fmt.Sprintf("This host has more than %s such processes; the first %s are detailed above, and these are listed by PID only. Treat them the same way once the detailed ones are understood.",
		thousands(maxDetailed), thousands(maxDetailed))
	shown := firstN(pids, maxHolderLines)
	line := fmtPIDs(shown)
	if n > len(shown) {
		line += fmt.Sprintf(" and %s more", thousands(int64(n-len(shown))))
	}
	f.Evidence = []string{line}
}
