package diagnose

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gputriage/gputriage/parse"
)

// Words of probe-limited.

// limitLine is one limit as an evidence line.
func limitLine(r Reason) string {
	switch r.Code {
	case ReasonProbeNote:
		if r.Note == parse.NoteFDsUnreadable && r.Links > 0 {
			return r.Note + ": " + fdsUnreadableWords(r)
		}
		if r.Detail == "" {
			return r.Note + ": " + r.Note
		}
		return r.Note + ": " + r.Detail
	case ReasonNotRoot:
		return "not-root: the probe ran as " + r.Detail + ": other users' processes and open files were hidden"
	case ReasonCaptureTruncated:
		return "the capture ended before the probe's final marker: everything after the cut is missing"
	case ReasonSectionTruncated:
		return fmt.Sprintf("section %s was cut at its limit of %s bytes", r.Detail, thousands(r.Bytes))
	case ReasonAppsUnknown:
		return "nvidia-smi's compute-app query failed or did not run: which process holds GPU memory is unknown"
	case ReasonFieldFallback:
		return "the driver does not know memory.reserved or mig.mode.current (an older driver): reserved memory and MIG mode are unknown"
	case ReasonShmUnlisted:
		return "/dev/shm could not be listed: stale files there were not checked"
	case ReasonShmTruncated:
		return "the /dev/shm listing was cut at its bound: some entries are missing and directory sizes may be low"
	case ReasonNoTimeout:
		return "the host has no timeout(1): the probe's steps were not bounded in time"
	case ReasonPIDUnreadable:
		return fmt.Sprintf("PID %d is listed by nvidia-smi but the probe could not read /proc/%d (another PID namespace, hidden, or exited)", r.PID, r.PID)
	case ReasonPIDExited:
		return fmt.Sprintf("PID %d exited while the probe ran", r.PID)
	case ReasonHolderUndescribed:
		return fmt.Sprintf("PID %d holds a GPU but the probe did not describe it (%s): it was not checked", r.PID, r.Detail)
	case ReasonDetailFolded:
		return fmt.Sprintf("%s more %s were folded: a report details only the first of each kind", thousands(int64(r.Folded)), r.Detail)
	}
	return string(r.Code)
}

// NoteLines are the evidence lines of probe-limited that are the probe's own notes, as it
// printed them (a report shows them apart).
func NoteLines(f Finding) []string {
	var out []string
	for _, r := range f.Reasons {
		if r.Code == ReasonProbeNote {
			out = append(out, limitLine(r))
		}
	}
	return out
}

// NoteText is a probe note's words under probe-limited f: composed from the facts diagnose
// attached to it (fds-unreadable), else the probe's own message.
func NoteText(f Finding, n parse.Note) string {
	for _, r := range f.Reasons {
		if r.Code == ReasonProbeNote && r.Note == n.Code && r.Detail == n.Message && r.Note == parse.NoteFDsUnreadable && r.Links > 0 {
			return fdsUnreadableWords(r)
		}
	}
	return n.Message
}

// limitWhy is why a strong limit matters, and its rank among the others.
func limitWhy(r Reason) (rank int, why string) {
	switch {
	case r.Code == ReasonNotRoot || r.Code == ReasonProbeNote && r.Note == "not-root":
		return 0, "GPU memory is in use with no visible owner, and the probe did not run as root: rerun gputriage with --sudo (or as root) to see every process"
	case r.Code == ReasonProbeNote && r.Note == parse.NoteCaptureTampered:
		return 1, "the capture held twice what the probe prints once (see capture-tampered): that data was not used, so findings about it may be missing"
	case r.Code == ReasonCaptureTruncated || r.Code == ReasonProbeNote && r.Note == "capture-truncated":
		return 2, "the capture was cut short, so findings may be missing"
	case r.Code == ReasonAppsUnknown:
		return 3, "nvidia-smi did not list compute processes, so leftovers and ghost memory could not be checked"
	case r.Code == ReasonHolderUndescribed:
		return 4, "processes holding GPUs were left undescribed when the probe's process scan was cut, so any of them may be a leftover"
	case r.Code == ReasonDetailFolded:
		return 5, "the host has more findings of a kind than a report details: the first of them are shown, the rest are counted"
	}
	return 6, string(r.Code)
}

// limitExplanation is probe-limited's explanation when no limit matters to the verdict.
const limitExplanation = "These are limits of what the probe saw, not problems of the host. Findings above rest only on what it could see."

// limitTitle is probe-limited's title for n limitations.
func limitTitle(n int) string {
	return fmt.Sprintf("the probe could not see everything on this host (%d %s)", n, plural(n, "limitation", "limitations"))
}

// probeLimitedWords composes a probe-limited finding's words from its limits.
func probeLimitedWords(f *Finding) {
	var unmatched []string
	at := -1 // where the one line of unmatched apps goes
	whys := map[int]string{}
	for _, r := range f.Reasons {
		if r.Code == ReasonUnmatchedApp {
			if at < 0 {
				at = len(f.Evidence)
				f.Evidence = append(f.Evidence, "")
			}
			unmatched = append(unmatched, fmt.Sprintf("PID %d on %s", r.PID, r.Detail))
			continue
		}
		f.Evidence = append(f.Evidence, limitLine(r))
		if r.Strong {
			rank, why := limitWhy(r)
			whys[rank] = why
		}
	}
	if at >= 0 {
		slices.Sort(unmatched)
		f.Evidence[at] = "compute apps on a GPU UUID missing from the GPU list (MIG devices?), so ghost memory was not checked: " + strings.Join(unmatched, ", ")
	}
	f.Title = limitTitle(len(f.Evidence))
	f.Explanation = limitExplanation
	if len(whys) > 0 {
		var why []string
		for rank := range 7 {
			if w, ok := whys[rank]; ok {
				why = append(why, w)
			}
		}
		f.Explanation = "The probe's view of this host is incomplete in a way that matters: " + strings.Join(why, "; ") + "."
	}
	if f.NotRoot && !strings.Contains(f.Explanation, "--sudo") {
		f.Explanation += " Rerunning gputriage with --sudo (or as root) lets the probe see every process."
	}
}

// fdsUnreadableWords says which fd links the probe could not read, why root may not read
// them, and what to do.
func fdsUnreadableWords(r Reason) string {
	s := fmt.Sprintf("%s %s under /proc could not be read (permission denied)", thousands(int64(r.Links)), plural(r.Links, "fd link", "fd links"))
	if len(r.PIDs) > 0 {
		pids := make([]string, len(r.PIDs))
		for i, p := range r.PIDs {
			pids[i] = strconv.Itoa(p)
		}
		s = fmt.Sprintf("%s %s of %s %s could not be read (permission denied)", thousands(int64(r.Links)),
			plural(r.Links, "fd link", "fd links"), plural(len(r.PIDs), "PID", "PIDs"), strings.Join(pids, ", "))
	}
	if !r.AsRoot {
		return s + ": processes using GPUs or /dev/shm may be missing"
	}
	look := "PID"
	if len(r.PIDs) == 1 {
		look = strconv.Itoa(r.PIDs[0])
	}
	whose := "the processes they belong to"
	if len(r.PIDs) > 0 {
		whose = plural(len(r.PIDs), "that process", "those processes")
	}
	return s + ", though the probe ran as root: the kernel refused root a ptrace-mode read of " + whose +
		" (an LSM such as AppArmor, SELinux or Landlock, the agent of a sandbox or virtual machine guarding itself, a user namespace root does not own, or /proc mounted with hidepid)." +
		" A GPU or /dev/shm user among them is not seen: check it with ls -l /proc/" + look + "/fd on the host, and the kernel or audit log for the denial"
}
