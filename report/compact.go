package report

import (
	"slices"

	"github.com/gputriage/gputriage/diagnose"
)

// The compact form of a finding, shared by text and Markdown: under its title, its reasons
// once as short bullets (the strong ones; all with -v), a pointer to the finding that
// explains it, its verdict in numbers, and its /dev/shm files folded. Its explanation, all its
// evidence and its files are the detail -v (text) or a <details> block (Markdown) adds.

// compactLines are the bullets under f's title, as plain text with the host's strings still
// to be sanitized or escaped by the format.
func compactLines(f diagnose.Finding, h Host, verbose bool) []string {
	var out []string
	shmListed := hasCode(h.Result.Findings, diagnose.CodeShmDeletedMapped)
	for _, r := range f.Reasons {
		if r.Code == diagnose.ReasonProbeNote {
			continue // the probe's notes are shown under probe-limited as they are
		}
		if r.Strong || verbose {
			out = append(out, diagnose.ReasonPhrase(r, shmListed, foldPaths))
		}
	}
	if p := diagnose.ExplainedBy(f, h.Result.Findings); p != "" {
		out = append(out, p)
	}
	out = append(out, diagnose.KeyLines(f)...)
	return append(out, shmLines(findingShm(f, h.Result.Processes))...)
}

// detailEvidence is the evidence -v and Markdown's details show: all of it but the key lines,
// which the compact form shows already, and the probe's notes, which are shown under
// probe-limited.
func detailEvidence(f diagnose.Finding) []string {
	notes := diagnose.NoteLines(f)
	var out []string
	for _, e := range f.Evidence {
		if !diagnose.IsKeyLine(f.Code, e) && !slices.Contains(notes, e) {
			out = append(out, e)
		}
	}
	return out
}

// hasCode reports whether fs holds a finding of code.
func hasCode(fs []diagnose.Finding, code string) bool {
	return slices.ContainsFunc(fs, func(f diagnose.Finding) bool { return f.Code == code })
}
