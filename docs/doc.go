// Package docs carries into the binary the user documentation that `gputriage help` prints, so
// that a gputriage built with `go install` has it without the source tree: findings.md (what
// each finding code means and what to do), fix.md (gputriage fix) and slurm.md (node-check on
// Slurm nodes). The Markdown files are the source, edited by hand; this package embeds them
// and renders them for a terminal (TerminalText; FindingsHelp and FindingHelp for the findings
// topic and help CODE). It does not carry the other documents, which the help names by their
// URL.
package docs

import _ "embed"

// Findings is findings.md: one "## CODE" section per finding code.
//
//go:embed findings.md
var Findings string

// Fix is fix.md.
//
//go:embed fix.md
var Fix string

// Slurm is slurm.md.
//
//go:embed slurm.md
var Slurm string
