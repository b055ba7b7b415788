package main

import _ "embed"

// Long fixed texts, kept in files of their own (text/): node-check's usage around its flags,
// and the man page's end (its @REPO@ is docs.Repo).
var (
	//go:embed text/node-check-usage.txt
	nodeCheckUsage string
	//go:embed text/node-check-tail.txt
	nodeCheckTail string
	//go:embed text/man-tail.roff
	manTail string
)
