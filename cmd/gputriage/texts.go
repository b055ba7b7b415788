package main

import _ "embed"

// Long fixed texts, kept in files of their own (text/): node-check's and fix's usage around
// their flags, and the man page's end (its @REPO@ is docs.Repo).
var (
	//go:embed text/fix-usage.txt
	fixUsage string
	//go:embed text/fix-tail.txt
	fixTail string
	//go:embed text/node-check-usage.txt
	nodeCheckUsage string
	//go:embed text/node-check-tail.txt
	nodeCheckTail string
	//go:embed text/man-tail.roff
	manTail string
)
