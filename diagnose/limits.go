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
	lb := limitBuilder{seen: map[limitKey]bool{}, count: map[ReasonCode]int{}, folded: map[ReasonCode]int{}}
	for _, r := range h.captureLimits(ghost) {
		lb.add(r)
	}
	h.viewLimits(lb.add)
	for _, r := range h.folded.reasons {
		lb.add(r)
	}
	rs := slices.Clone(lb.rs) // not an array grown for more
	if len(rs) == 0 {
		return Finding{}, false
	}
	f := Finding{Code: CodeProbeLimited, Severity: Info, Reasons: rs}
	if slices.ContainsFunc(rs, func(r Reason) bool { return r.Strong }) {
		f.Severity = Warning
	}
	f.NotRoot = h.notRoot()
	probeLimitedWords(&f)
	return f, true
}

// limitKey is what makes two limits say the same (the probe may note what is also seen).
type limitKey struct {
	code         ReasonCode
	note, detail string
	pid          int
	bytes        int64
}

func keyOfLimit(r Reason) limitKey { return limitKey{r.Code, r.Note, r.Detail, r.PID, r.Bytes} }

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
		case parse.NoteFDsUnreadable:
			if d := s.FDsDenied; d != nil {
				r.Links, r.PIDs = d.Links, d.PIDs
			}
			r.AsRoot = !h.notRoot() && s.Host.UID != nil
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

// viewLimits adds what the probe's data says it could not see.
func (h *host) viewLimits(add func(Reason)) {
	s := h.s
	real := len(s.Sections) > 0 // built from a capture, not by hand
	if s.SMI.Failure == nil && h.appsUnknown() {
		add(Reason{Code: ReasonAppsUnknown, Strong: true})
	}
	for _, a := range h.unmatched {
		add(Reason{Code: ReasonUnmatchedApp, PID: a.PID, Detail: a.GPUUUID})
	}
	if s.SMI.FieldFallback {
		add(Reason{Code: ReasonFieldFallback})
	}
	if real && !s.Shm.Listed {
		add(Reason{Code: ReasonShmUnlisted})
	}
	if s.Shm.Truncated {
		add(Reason{Code: ReasonShmTruncated})
	}
	if real && !s.Host.HasTimeout && !slices.ContainsFunc(s.Notes, func(n parse.Note) bool { return strings.Contains(n.Message, "timeout") }) {
		add(Reason{Code: ReasonNoTimeout})
	}
	cut := h.procsCut()
	gone := map[int]bool{} // each has its dead-pid-memory finding
	for _, pid := range h.goneApps() {
		gone[pid] = true
	}
	goneEarly := map[int]bool{}
	for _, pid := range h.s.AppsGone {
		goneEarly[pid] = true
	}
	for i := range h.procs {
		gp := &h.procs[i]
		p := h.procByPID[gp.PID]
		switch {
		case gone[gp.PID]:
		case p == nil && cut != "" && (gp.Listed || len(gp.GPUs) > 0):
			add(Reason{Code: ReasonHolderUndescribed, PID: gp.PID, Detail: cut, Strong: true})
		case p == nil && gp.Listed, goneEarly[gp.PID], p != nil && p.Gone && gp.Listed && !h.s.AppsChecked:
			// Gone already right after the listing, or when nothing says when it went (a
			// capture without apps-alive): not known to have exited while the probe ran.
			add(Reason{Code: ReasonPIDUnreadable, PID: gp.PID})
		case p != nil && p.Gone:
			add(Reason{Code: ReasonPIDExited, PID: gp.PID})
		}
	}
}

// procsCut says how the procs section was left incomplete ("" when it was not): a GPU holder it
// did not describe may then be one it never reached, whatever it holds, not one that exited. A
// capture cut whole is a strong limit of its own (capture-truncated).
func (h *host) procsCut() string {
	s := h.s
	if len(s.ProcsCut) > 0 {
		return "a GPU holder's description was stopped by its own time limit"
	}
	for _, sec := range s.Sections {
		if sec.Name == "procs" && !sec.Complete() {
			if sec.Truncated {
				return "the procs section was cut at its limit"
			}
			return "the procs section was stopped by its time limit or failed"
		}
	}
	for _, n := range s.Notes {
		if n.Code == parse.NoteSectionTruncated && strings.HasPrefix(n.Message, "section procs ") {
			return "the procs section reached its bound on processes"
		}
	}
	return ""
}
