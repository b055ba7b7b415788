package report

import (
	"strconv"
	"strings"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
)

// findings writes a host's findings in their compact form with their detail collapsed, the
// probe's notes under probe-limited, then the host's "what to do", then the notes no finding
// showed.
func (m *mdWriter) findings(h Host, gi int, d *details) {
	for _, f := range h.Result.Findings {
		m.finding(f, h, gi, d)
	}
	m.whatToDo(h, gi, d)
	if s := h.Snapshot; s != nil {
		m.notes(s, hasCode(h.Result.Findings, diagnose.CodeProbeLimited))
	}
}

// finding writes one finding: a heading, its compact lines as a list, and its explanation,
// evidence and files in a <details> block.
func (m *mdWriter) finding(f diagnose.Finding, h Host, gi int, d *details) {
	kind := ""
	if f.Kind != "" {
		kind = " (" + mdText(f.Kind) + ")"
	}
	m.p("#### %s: %s%s — %s\n\n", f.Severity, mdCode(f.Code), kind, mdText(f.Title))
	also, ref, first := d.findingRef(gi, f)
	if ref {
		m.p("The same finding as on %s, explained above.\n\n", mdHosts(first))
		return
	}
	if also != "" {
		m.p("On %s.\n\n", mdHosts(also))
	}
	var items []string
	if f.Code == diagnose.CodeProbeLimited && h.Snapshot != nil {
		for _, n := range h.Snapshot.Notes {
			items = append(items, mdCode(n.Code)+": "+mdText(diagnose.NoteText(f, n)))
		}
	}
	for _, l := range compactLines(f, h, false) {
		items = append(items, mdLine(l))
	}
	if len(items) > 0 {
		m.p("- %s\n\n", strings.Join(items, "\n- "))
	}
	m.findingDetails(f, h.Snapshot)
}

// findingDetails writes what -v adds in text: the explanation, all the evidence but what the
// compact lines show, the weak reasons and the files, collapsed. The summary is ours alone:
// no host string reaches HTML.
func (m *mdWriter) findingDetails(f diagnose.Finding, s *parse.Snapshot) {
	var b strings.Builder
	for _, l := range lines(f.Explanation) {
		b.WriteString(mdLine(l) + "\n")
	}
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	var ev []string
	for _, r := range f.Reasons {
		if !r.Strong && r.Code != diagnose.ReasonProbeNote {
			ev = append(ev, "weak reason: "+diagnose.ReasonPhrase(r, false, foldPaths))
		}
	}
	ev = append(ev, detailEvidence(f)...)
	for _, e := range ev {
		b.WriteString("- " + mdLine(e) + "\n")
	}
	if len(ev) > 0 {
		b.WriteString("\n")
	}
	if len(f.Files) > 0 {
		files := foldPaths(f.Files)
		for i, p := range files {
			files[i] = mdText(p)
		}
		b.WriteString("Files: " + strings.Join(files, ", ") + "\n\n")
	}
	if b.Len() == 0 {
		return
	}
	m.p("<details><summary>Details</summary>\n\n%s</details>\n\n", b.String())
}

// whatToDo writes the host's "what to do": numbered items, each a lead paragraph and its
// commands in sh blocks (a command's note is prose before its block), then the checks once.
func (m *mdWriter) whatToDo(h Host, gi int, d *details) {
	td := hostTodo(h.Result.Findings)
	if len(td.items) == 0 && len(td.checks) == 0 {
		return
	}
	if first, ok := d.allExplainedAbove(gi, h.Result.Findings); ok {
		m.p("**What to do:** as on %s, above.\n\n", mdHosts(first))
		return
	}
	m.p("**What to do:**\n\n")
	for i, it := range td.items {
		m.p("**%s.** %s\n\n", strconv.Itoa(i+1), mdText(it.lead(h.Result.Processes)))
		notes, blocks := stepBlocks(it.steps)
		for b, cmds := range blocks {
			if notes[b] != "" {
				m.p("%s\n\n", mdLine(noteLead(notes[b])))
			}
			m.commands(cmds)
		}
	}
	if len(td.checks) > 0 {
		m.p("Then check:\n\n")
		m.commands(commandLines(td.checks))
	}
}

// commands writes shell commands, sanitized, in one sh block whose fence none of them can
// close.
func (m *mdWriter) commands(cmds []string) {
	var body strings.Builder
	for _, c := range cmds {
		body.WriteString(Sanitize(c) + "\n")
	}
	fc := fence(body.String())
	m.p("%ssh\n%s%s\n\n", fc, body.String(), fc)
}

// notes writes the probe's notes unless probe-limited showed them, and says when the capture
// was cut short.
func (m *mdWriter) notes(s *parse.Snapshot, underProbeLimited bool) {
	if s.Truncated {
		m.p("**Capture truncated:** the probe's output ended before its last section; facts after the cut are missing.\n\n")
	}
	if len(s.Notes) == 0 || underProbeLimited {
		return
	}
	m.p("Probe notes:\n\n")
	for _, n := range s.Notes {
		m.p("- %s: %s\n", mdCode(n.Code), mdText(n.Message))
	}
	m.p("\n")
}
