package report

import (
	"strconv"
	"strings"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
)

// findings writes a host's findings in their compact form (see compact.go), the probe's notes
// under probe-limited, then one "what to do" for the host, then the notes no finding showed.
func (t *textWriter) findings(h Host, gi int, d *details) {
	fs := h.Result.Findings
	for i, f := range fs {
		if i == 0 || t.o.Verbose {
			t.line("")
		}
		t.finding(f, h, gi, d)
	}
	t.whatToDo(h, gi, d)
	if s := h.Snapshot; s != nil {
		t.notes(s, hasCode(fs, diagnose.CodeProbeLimited))
	}
}

// finding writes one finding: its badge line, and unless it is informational (without -v) or
// explained above for another host, its compact lines; with -v its whole detail too.
func (t *textWriter) finding(f diagnose.Finding, h Host, gi int, d *details) {
	indent := strings.Repeat(" ", findingIndent)
	badge := "  " + t.sevStyle(f.Severity).Render(fit(strings.ToUpper(f.Severity.String()), badgeWidth)) + "  "
	code := Sanitize(f.Code)
	if f.Kind != "" {
		code += " (" + Sanitize(f.Kind) + ")"
	}
	t.wrap(badge+t.st.bold.Render(code)+"  ", indent, Sanitize(f.Title))
	if f.Code == diagnose.CodeProbeLimited && h.Snapshot != nil {
		for _, n := range h.Snapshot.Notes {
			t.wrap(indent+t.st.dim.Render("note ("+Sanitize(n.Code)+"):")+" ", indent+"  ", Sanitize(diagnose.NoteText(f, n)))
		}
	}
	if f.Severity == diagnose.Info && !t.o.Verbose {
		return
	}
	also, ref, first := d.findingRef(gi, f)
	if ref {
		t.wrap(indent, indent, "the same finding as on "+Sanitize(first)+", explained above")
		return
	}
	if also != "" {
		t.wrap(indent+t.st.dim.Render("on:")+" ", indent+"  ", Sanitize(also))
	}
	for _, l := range compactLines(f, h, t.o.Verbose) {
		t.wrap(indent+"- ", indent+"  ", Sanitize(l))
	}
	if !t.o.Verbose {
		return
	}
	for _, l := range lines(f.Explanation) {
		t.wrap(indent, indent, l)
	}
	for _, e := range detailEvidence(f) {
		t.wrap(indent+"- ", indent+"  ", Sanitize(e))
	}
	if len(f.Files) > 0 {
		t.wrap(indent+t.st.dim.Render("files: "), indent+"  ", strings.Join(foldPaths(f.Files), " "))
	}
}

// whatToDo writes the host's "what to do": its findings' actions merged and ordered by what
// they give back, numbered, each with a lead line and its commands, then the checks once.
// Commands are written whole, never wrapped or cut, whatever the width: they are copied.
func (t *textWriter) whatToDo(h Host, gi int, d *details) {
	td := hostTodo(h.Result.Findings)
	if len(td.items) == 0 && len(td.checks) == 0 {
		return
	}
	t.line("")
	if first, ok := d.allExplainedAbove(gi, h.Result.Findings); ok {
		t.wrap("  "+t.st.bold.Render("what to do:")+" ", "    ", "as on "+Sanitize(first)+", above")
		return
	}
	t.line("  " + t.st.bold.Render("what to do"))
	for i, it := range td.items {
		num := strconv.Itoa(i+1) + ". "
		t.wrap("  "+num, "  "+strings.Repeat(" ", len(num)), Sanitize(it.lead(h.Result.Processes)))
		notes, blocks := stepBlocks(it.steps)
		for b, cmds := range blocks {
			if notes[b] != "" {
				pad := "  " + strings.Repeat(" ", len(num))
				t.wrap(pad, pad, noteLead(Sanitize(notes[b])))
			}
			t.commands(cmds)
		}
	}
	if len(td.checks) > 0 {
		t.line("  then check:")
		t.commands(commandLines(td.checks))
	}
}

// commandIndent is where commands start: under the items' text, a little in.
const commandIndent = "       "

// commands writes shell commands one per line, sanitized, whole: a command is never wrapped
// or cut, even past the width, so that it pastes as it runs.
func (t *textWriter) commands(cmds []string) {
	for _, c := range cmds {
		t.buf.WriteString(commandIndent + strings.TrimRight(Sanitize(c), " ") + "\n")
	}
}

// notes writes the probe's notes, unless probe-limited showed them (underProbeLimited), and
// says when the capture was cut short.
func (t *textWriter) notes(s *parse.Snapshot, underProbeLimited bool) {
	if s.Truncated {
		t.line("")
		t.wrap("  "+t.sevStyle(diagnose.Warning).Render("capture truncated:")+" ", "    ",
			"the probe's output ended before its last section; facts after the cut are missing")
	}
	if len(s.Notes) == 0 || underProbeLimited {
		return
	}
	t.line("")
	for _, n := range s.Notes {
		t.wrap("  "+t.st.dim.Render("note ("+Sanitize(n.Code)+"):")+" ", "    ", Sanitize(n.Message))
	}
}

// noteLead is a command's note as the prose line before it: ending in a colon.
func noteLead(note string) string {
	if strings.HasSuffix(note, ":") {
		return note
	}
	return note + ":"
}
