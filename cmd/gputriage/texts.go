package main

import _ "embed"

// Long fixed texts, kept in files of their own (text/): node-check's, fix's and collect's
// usage around their flags, the exit statuses, completion's help, and the man page's end (its
// @REPO@ is docs.Repo).
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
	//go:embed text/exit-status.txt
	exitStatusHelp string
	//go:embed text/collect-usage.txt
	collectUsage string
	//go:embed text/collect-tail.txt
	collectTail string
	//go:embed text/completion-help.txt
	completionHelp string
)
