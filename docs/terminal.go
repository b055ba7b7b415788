package docs

import (
	"regexp"
	"strings"
)

// Repo is the repository of the module (go.mod); docsURL is where the documents the binary
// does not carry are read.
const (
	Repo    = "https://github.com/gputriage/gputriage"
	docsURL = Repo + "/blob/main/docs/"
)

// carriedDocs are the documents a help topic carries, by file name: a reference to one in the
// help reads as the topic.
var carriedDocs = map[string]string{
	"findings.md": "gputriage help findings",
	"fix.md":      "gputriage help fix-guide",
	"slurm.md":    "gputriage help slurm",
}

// FindingSections are the "## CODE" sections of docs/findings.md, in its order.
func FindingSections() (codes []string, text map[string]string) {
	text = map[string]string{}
	code := ""
	for _, l := range strings.SplitAfter(Findings, "\n") {
		if rest, ok := strings.CutPrefix(l, "## "); ok {
			code = strings.TrimSpace(rest)
			codes = append(codes, code)
		}
		if code != "" {
			text[code] += l
		}
	}
	return codes, text
}

// FindingsHelp is `gputriage help findings`: every code's section.
func FindingsHelp() string {
	codes, text := FindingSections()
	var b strings.Builder
	b.WriteString("Findings: each finding gputriage reports has one of these codes (JSON \"code\"),\n" +
		"what it means and what to do. gputriage help CODE shows one.\n\n")
	for _, c := range codes {
		b.WriteString("  " + c + "\n")
	}
	for _, c := range codes {
		b.WriteString("\n" + TerminalText(text[c]))
	}
	return b.String()
}

// FindingHelp is `gputriage help CODE`; "" for no such code.
func FindingHelp(code string) string {
	_, text := FindingSections()
	if text[code] == "" {
		return ""
	}
	return TerminalText(text[code])
}

var (
	mdLink    = regexp.MustCompile(`\[([^\]]+)\]\(([^)\s]*)\)`)
	docsPath  = regexp.MustCompile(`(^|[^/\w])docs/([a-z-]+\.md)`)
	mdEmphasi = regexp.MustCompile(`\*\*([^*]+)\*\*`)
)

// TerminalText renders a document's Markdown for a terminal: code fences dropped (their lines
// indented), links by their text, and every other document named as the help topic that
// carries it or by its full URL, never by a path in a source tree the user may not have.
func TerminalText(md string) string {
	md = mdLink.ReplaceAllStringFunc(md, func(m string) string {
		sub := mdLink.FindStringSubmatch(m)
		file, _, _ := strings.Cut(sub[2], "#")
		switch {
		case file == "" || strings.Contains(file, "://"):
			return sub[1]
		case sub[1] == file:
			return docRef(file)
		}
		return sub[1] + " (" + docRef(file) + ")"
	})
	md = docsPath.ReplaceAllStringFunc(md, func(m string) string {
		sub := docsPath.FindStringSubmatch(m)
		return sub[1] + docRef(sub[2])
	})
	md = mdEmphasi.ReplaceAllString(md, "$1")
	var b strings.Builder
	fence := false
	for _, l := range strings.SplitAfter(md, "\n") {
		if strings.HasPrefix(l, "```") {
			fence = !fence
			continue
		}
		if fence && strings.TrimSpace(l) != "" {
			l = "  " + l
		}
		if !fence && strings.HasPrefix(l, "#") {
			l = strings.TrimLeft(l, "# ")
		}
		b.WriteString(l)
	}
	return b.String()
}

// docRef names a document of docs/ for a user who has only the binary.
func docRef(file string) string {
	if topic, ok := carriedDocs[file]; ok {
		return topic
	}
	return docsURL + file
}
