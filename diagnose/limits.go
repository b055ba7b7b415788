package diagnose

import (
	"slices"
	"strings"

	"github.com/gputriage/gputriage/parse"
)

// probeLimitedFinding gathers what the probe could not see on this host. It is a warning
// when the gap hides something that matters: a truncated capture, an app list that failed,
// or ghost memory on a host the probe could not see as root.
func (h *host) probeLimitedFinding(ghost bool) (Finding, bool) {
	var rs []Reason
	add := func(r Reason) {
		if !slices.ContainsFunc(rs, func(o Reason) bool { return sameLimit(o, r) }) {
			rs = append(rs, r)
		}
	}
	for _, r := range h.captureLimits(ghost) {
		add(r)
	}
	for _, r := range h.viewLimits() {
		add(r)
	}
	if len(rs) == 0 {
		return Finding{}, false
	}
	f := Finding{Code: CodeProbeLimited, Severity: Info, Reasons: rs}
	if slices.ContainsFunc(rs, func(r Reason) bool { return r.Strong }) {
		f.Severity = Warning
	}
	h.probeLimitedWords(&f)
	return f, true
}

// sameLimit reports whether two limits say the same (the probe may note what is also seen).
func sameLimit(a, b Reason) bool {
	return a.Code == b.Code && a.Note == b.Note && a.Detail == b.Detail && a.PID == b.PID && a.Bytes == b.Bytes
}

// captureLimits are the probe's notes and what the capture's shape says: who the probe ran
// as, whether it was cut or tampered with.
func (h *host) captureLimits(ghost bool) []Reason {
	s := h.s
	var rs []Reason
	hasNote := map[string]bool{}
	for _, n := range s.Notes {
		hasNote[n.Code] = true
		r := Reason{Code: ReasonProbeNote, Note: n.Code, Detail: n.Message}
		switch n.Code {
		case parse.NoteCaptureTampered:
			r.Strong = true
		case "capture-truncated":
			r.Strong = s.Truncated
		case "not-root":
			r.Strong = ghost && h.notRoot()
		}
		rs = append(rs, r)
	}
	if h.notRoot() && !hasNote["not-root"] {
		who := "a user other than root"
		if s.Host.UID != nil {
			who = h.userName(s.Host.UID, s.Host.User)
		}
		rs = append(rs, Reason{Code: ReasonNotRoot, Detail: who, Strong: ghost})
	}
	if s.Truncated && !hasNote["capture-truncated"] {
		rs = append(rs, Reason{Code: ReasonCaptureTruncated, Strong: true})
	}
	if !hasNote["section-truncated"] {
		for _, sec := range s.Sections {
			if sec.Truncated {
				rs = append(rs, Reason{Code: ReasonSectionTruncated, Detail: sec.Name, Bytes: int64(sec.Limit)})
			}
		}
	}
	return rs
}

// viewLimits are what the probe's data says it could not see.
func (h *host) viewLimits() []Reason {
	s := h.s
	real := len(s.Sections) > 0 // built from a capture, not by hand
	var rs []Reason
	if s.SMI.Failure == nil && h.appsUnknown() {
		rs = append(rs, Reason{Code: ReasonAppsUnknown, Strong: true})
	}
	for _, a := range h.unmatched {
		rs = append(rs, Reason{Code: ReasonUnmatchedApp, PID: a.PID, Detail: a.GPUUUID})
	}
	if s.SMI.FieldFallback {
		rs = append(rs, Reason{Code: ReasonFieldFallback})
	}
	if real && !s.Shm.Listed {
		rs = append(rs, Reason{Code: ReasonShmUnlisted})
	}
	if s.Shm.Truncated {
		rs = append(rs, Reason{Code: ReasonShmTruncated})
	}
	if real && !s.Host.HasTimeout && !slices.ContainsFunc(s.Notes, func(n parse.Note) bool { return strings.Contains(n.Message, "timeout") }) {
		rs = append(rs, Reason{Code: ReasonNoTimeout})
	}
	gone := h.goneApps() // each has its dead-pid-memory finding
	for i := range h.procs {
		gp := &h.procs[i]
		p := h.procByPID[gp.PID]
		switch {
		case slices.Contains(gone, gp.PID):
		case p == nil && gp.Listed, slices.Contains(h.s.AppsGone, gp.PID), p != nil && p.Gone && gp.Listed && !h.s.AppsChecked:
			// Gone already right after the listing, or when nothing says when it went (a
			// capture without apps-alive): not known to have exited while the probe ran.
			rs = append(rs, Reason{Code: ReasonPIDUnreadable, PID: gp.PID})
		case p != nil && p.Gone:
			rs = append(rs, Reason{Code: ReasonPIDExited, PID: gp.PID})
		}
	}
	return rs
}
