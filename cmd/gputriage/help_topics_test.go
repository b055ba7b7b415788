package main

import (
	"github.com/gputriage/gputriage/docs"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestHelpListsTopics: `gputriage help` as typed lists every command and every topic, one
// line each, and says a finding code is a topic too.
func TestHelpListsTopics(t *testing.T) {
	out, _, code := cli(t, nil, "help")
	if code != exitOK {
		t.Fatalf("help: exit %d", code)
	}
	lines := strings.Split(out, "\n")
	count := func(re *regexp.Regexp) int {
		n := 0
		for _, l := range lines {
			if re.MatchString(l) {
				n++
			}
		}
		return n
	}
	for _, c := range commands() {
		if c.hidden {
			continue
		}
		if n := count(regexp.MustCompile(`^  gputriage ` + regexp.QuoteMeta(c.usage) + ` +\S`)); n != 1 {
			t.Errorf("gputriage help lists command %s on %d lines, want 1", c.name, n)
		}
	}
	for _, topic := range helpTopics() {
		if n := count(regexp.MustCompile(`^  ` + regexp.QuoteMeta(topic.name) + ` +` + regexp.QuoteMeta(topic.summary) + `$`)); n != 1 {
			t.Errorf("gputriage help lists topic %s on %d lines, want 1", topic.name, n)
		}
	}
	if !strings.Contains(out, "gputriage help leftover-process") {
		t.Error("gputriage help does not say a finding code is a topic")
	}
}

// emittedCodes are the finding codes diagnose can emit and the problem codes node-check adds:
// every untyped Code* string constant of those packages' sources.
func emittedCodes(t *testing.T) []string {
	t.Helper()
	var codes []string
	for _, dir := range []string{"diagnose", "nodecheck"} {
		pkgs, err := parser.ParseDir(token.NewFileSet(), filepath.Join(repoRoot(t), dir), func(fi os.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, pkg := range pkgs {
			ast.Inspect(pkg, func(n ast.Node) bool {
				decl, ok := n.(*ast.GenDecl)
				if !ok || decl.Tok != token.CONST {
					return true
				}
				for _, s := range decl.Specs {
					spec := s.(*ast.ValueSpec)
					for i, name := range spec.Names {
						if spec.Type != nil || i >= len(spec.Values) || !strings.HasPrefix(name.Name, "Code") {
							continue
						}
						if lit, ok := spec.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							s, _ := strconv.Unquote(lit.Value)
							codes = append(codes, s)
						}
					}
				}
				return false
			})
		}
	}
	sort.Strings(codes)
	if len(codes) < 12 {
		t.Fatalf("found only %d codes in diagnose and nodecheck: %v", len(codes), codes)
	}
	return codes
}

// TestHelpFindingsTopic: `gputriage help findings` lists every code diagnose can emit and
// node-check adds, each with its section of docs/findings.md; docs/findings.md has a section
// for each such code and no other, and the help carries that text as the file has it today.
func TestHelpFindingsTopic(t *testing.T) {
	out, _, code := cli(t, nil, "help", "findings")
	if code != exitOK {
		t.Fatalf("help findings: exit %d", code)
	}
	file, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "findings.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	for _, s := range strings.Split("\n"+string(file), "\n## ")[1:] {
		name, _, _ := strings.Cut(s, "\n")
		sections[name] = "## " + strings.TrimRight(s, "\n") + "\n"
	}
	codes := emittedCodes(t)
	for _, c := range codes {
		if sections[c] == "" {
			t.Errorf("docs/findings.md has no section ## %s", c)
			continue
		}
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(c) + `$`).MatchString(out) {
			t.Errorf("help findings does not list %s", c)
		}
		want := strings.TrimRight(docs.TerminalText(sections[c]), "\n")
		if !strings.Contains(out, want) {
			t.Errorf("help findings lacks the section of %s as docs/findings.md has it", c)
		}
		if one, _, code := cli(t, nil, "help", c); code != exitOK || strings.TrimRight(one, "\n") != want {
			t.Errorf("help %s: exit %d, or not docs/findings.md's section:\n%s", c, code, one)
		}
	}
	for name := range sections {
		if i := sort.SearchStrings(codes, name); i == len(codes) || codes[i] != name {
			t.Errorf("docs/findings.md has a section ## %s, which is no code diagnose or node-check emits", name)
		}
	}
}

// TestHelpFindingCode: `gputriage help leftover-process` as typed shows that code's entry,
// what it means and what to do; an unknown topic is a usage error that points at the codes.
func TestHelpFindingCode(t *testing.T) {
	out, _, code := cli(t, nil, "help", "leftover-process")
	if code != exitOK || !strings.HasPrefix(out, "leftover-process\n") {
		t.Fatalf("help leftover-process: exit %d\n%s", code, out)
	}
	for _, want := range []string{"looks abandoned", "strong", "kill"} {
		if !strings.Contains(out, want) {
			t.Errorf("help leftover-process lacks %q", want)
		}
	}
	if strings.Contains(out, "## ") || strings.Contains(out, "\nshm-stale\n") {
		t.Errorf("help leftover-process shows more than its entry, or Markdown headings:\n%s", out)
	}
	if _, errOut, code := cli(t, nil, "help", "leftover-proces"); code != exitUsage || !strings.Contains(errOut, "finding code") {
		t.Errorf("help leftover-proces: exit %d, %q", code, errOut)
	}
}

// TestHelpNamesNoSourceTree: no help text, topic, finding entry or man page line names a
// document by its path in the source tree (docs/fix.md, slurm.md): a user who ran go install
// has none. A document is named by the topic that carries it or by its full URL.
func TestHelpNamesNoSourceTree(t *testing.T) {
	texts := map[string]string{}
	add := func(name string, args ...string) {
		out, _, code := cli(t, nil, args...)
		if code != exitOK {
			t.Errorf("%s: exit %d", name, code)
		}
		texts[name] = out
	}
	add("help", "help")
	for _, topic := range helpTopicNames() {
		add("help "+topic, "help", topic)
	}
	for _, c := range commands() {
		if !c.hidden && c.name != "help" {
			add(c.name+" --help", "help", c.name)
		}
	}
	codes, _ := docs.FindingSections()
	for _, c := range codes {
		add("help "+c, "help", c)
	}
	add("__man", "__man")
	man, err := os.ReadFile(filepath.Join(repoRoot(t), manPath))
	if err != nil {
		t.Fatal(err)
	}
	texts[manPath] = string(man)
	docs, err := filepath.Glob(filepath.Join(repoRoot(t), "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	names := []string{`\bdocs/`, `\bREADME\.md\b`}
	for _, d := range docs {
		names = append(names, `\b`+regexp.QuoteMeta(filepath.Base(d))+`\b`)
	}
	ref := regexp.MustCompile(`\S*(` + strings.Join(names, "|") + `)\S*`)
	for name, text := range texts {
		for _, m := range ref.FindAllString(text, -1) {
			if !strings.Contains(m, "https://") {
				t.Errorf("%s names %q, a path in the source tree", name, m)
			}
		}
	}
}
