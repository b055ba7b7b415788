package diagnose

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gputriage/gputriage/parse"
)

// probeLimitedFinding gathers what the probe could not see on this host. It is a warning
// when the gap hides something that matters: a truncated capture, an app list that failed,
// or ghost memory on a host the probe could not see as root.
func (h *host) probeLimitedFinding(ghost bool) (Finding, bool) {
	s := h.s
	real := len(s.Sections) > 0 // built from a capture, not by hand
	var ev []string
	warn := false
	var why []string

	seen := map[string]bool{}
	add := func(line string) {
		if !seen[line] {
			seen[line] = true
			ev = append(ev, line)
		}
	}
	hasNote := map[string]bool{}
	for _, n := range s.Notes {
		hasNote[n.Code] = true
		msg := n.Message
		if msg == "" {
			msg = n.Code
		}
		add(n.Code + ": " + msg)
	}
	if h.notRoot() {
		if !hasNote["not-root"] {
			who := "a user other than root"
			if s.Host.UID != nil {
				who = h.userName(s.Host.UID, s.Host.User)
			}
			add("not-root: the probe ran as " + who + ": other users' processes and open files were hidden")
		}
		if ghost {
			warn = true
			why = append(why, "GPU memory is in use with no visible owner, and the probe did not run as root: rerun gputriage with --sudo (or as root) to see every process")
		}
	}
	if hasNote[parse.NoteCaptureTampered] {
		warn = true
		why = append(why, "the capture held twice what the probe prints once (see capture-tampered): that data was not used, so findings about it may be missing")
	}
	if s.Truncated {
		warn = true
		if !hasNote["capture-truncated"] {
			add("the capture ended before the probe's final marker: everything after the cut is missing")
		}
		why = append(why, "the capture was cut short, so findings may be missing")
	}
	for _, sec := range s.Sections {
		if sec.Truncated && !hasNote["section-truncated"] {
			add(fmt.Sprintf("section %s was cut at its limit of %s bytes", sec.Name, thousands(int64(sec.Limit))))
		}
	}
	if s.SMI.Failure == nil && h.appsUnknown() {
		warn = true
		add("nvidia-smi's compute-app query failed or did not run: which process holds GPU memory is unknown")
		why = append(why, "nvidia-smi did not list compute processes, so leftovers and ghost memory could not be checked")
	}
	if len(h.unmatched) > 0 {
		var ids []string
		for _, a := range h.unmatched {
			ids = append(ids, fmt.Sprintf("PID %d on %s", a.PID, a.GPUUUID))
		}
		slices.Sort(ids)
		add("compute apps on a GPU UUID missing from the GPU list (MIG devices?), so ghost memory was not checked: " + strings.Join(ids, ", "))
	}
	if s.SMI.FieldFallback {
		add("the driver does not know memory.reserved or mig.mode.current (an older driver): reserved memory and MIG mode are unknown")
	}
	if real && !s.Shm.Listed {
		add("/dev/shm could not be listed: stale files there were not checked")
	}
	if s.Shm.Truncated {
		add("the /dev/shm listing was cut at its bound: some entries are missing and directory sizes may be low")
	}
	if real && !s.Host.HasTimeout && !slices.ContainsFunc(s.Notes, func(n parse.Note) bool { return strings.Contains(n.Message, "timeout") }) {
		add("the host has no timeout(1): the probe's steps were not bounded in time")
	}
	for i := range h.procs {
		gp := &h.procs[i]
		p := h.procByPID[gp.PID]
		switch {
		case p == nil && gp.Listed:
			add(fmt.Sprintf("PID %d is listed by nvidia-smi but the probe could not read /proc/%d (another PID namespace, hidden, or exited)", gp.PID, gp.PID))
		case p != nil && p.Gone:
			add(fmt.Sprintf("PID %d exited while the probe ran", gp.PID))
		}
	}
	if len(ev) == 0 {
		return Finding{}, false
	}
	f := Finding{Code: CodeProbeLimited, Severity: Info, Evidence: ev}
	f.Title = fmt.Sprintf("the probe could not see everything on this host (%d %s)", len(ev), plural(len(ev), "limitation", "limitations"))
	f.Explanation = "These are limits of what the probe saw, not problems of the host. Findings above rest only on what it could see."
	if warn {
		f.Severity = Warning
		f.Explanation = "The probe's view of this host is incomplete in a way that matters: " + strings.Join(why, "; ") + "."
	}
	if h.notRoot() && !strings.Contains(f.Explanation, "--sudo") {
		f.Explanation += " Rerunning gputriage with --sudo (or as root) lets the probe see every process."
	}
	return f, true
}
