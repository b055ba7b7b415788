// Command testsum reads `go test -json` on its stdin and prints what `go test` prints without
// -json in package-list mode (a line per package; the output of failed tests and of failed
// packages), then one line naming each suite skipped for a missing prerequisite, with what
// provides it (testenv.SkipSuite's marker), so that a run without -v says what it did not
// test. scripts/test, the README's test command, runs it. Only the test runner uses it.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/gputriage/gputriage/internal/testenv"
)

// event is one line of `go test -json` (see `go doc test2json`).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output, build-fail
	Test       string
	Output     string
}

// pkgOut is what one package has said so far: its own lines, and each test's.
type pkgOut struct {
	lines  []string            // output outside any test, in order
	tests  map[string][]string // by test name, until the test passes or skips
	failed []string            // the tests that failed, in the order they started
	order  map[string]int      // a test's place in the order tests started
}

// skipped is one suite skipped for a missing prerequisite: its install line and tests.
type skipped struct {
	install string
	tests   int
}

func main() {
	run(os.Stdin, os.Stdout)
}

// run copies in to out as described above. A line of in that is no event (go test printed
// something else on its stdout) is passed through as it is.
func run(in io.Reader, out io.Writer) {
	pkgs := map[string]*pkgOut{}
	suites := map[string]*skipped{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(out, sc.Text())
			continue
		}
		if e.Action == "build-output" {
			fmt.Fprint(out, e.Output)
			continue
		}
		p := pkgs[e.Package]
		if p == nil {
			p = &pkgOut{tests: map[string][]string{}, order: map[string]int{}}
			pkgs[e.Package] = p
		}
		if e.Test == "" {
			if e.Action == "output" {
				p.lines = append(p.lines, e.Output)
			} else if e.Action == "pass" || e.Action == "skip" || e.Action == "fail" {
				p.print(out, e.Action == "fail")
				delete(pkgs, e.Package)
			}
			continue
		}
		switch e.Action {
		case "run":
			p.order[e.Test] = len(p.order)
		case "output":
			p.tests[e.Test] = append(p.tests[e.Test], e.Output)
		case "fail":
			p.failed = append(p.failed, e.Test)
		case "skip":
			noteSkip(suites, p.tests[e.Test])
			delete(p.tests, e.Test)
		case "pass":
			delete(p.tests, e.Test)
		}
	}
	if line := summary(suites); line != "" {
		fmt.Fprintln(out, line)
	}
}

// print prints what go test prints of a package without -v: only the summary line ("ok",
// "?") of one that passed; of one that failed, what it printed outside tests, each failed
// test (its "--- FAIL" line, then its log, a subtest under its parent, indented) and the
// FAIL lines. A test that never ended (the package timed out, or crashed) counts as failed.
func (p *pkgOut) print(out io.Writer, failed bool) {
	var last []string
	for _, l := range p.lines {
		switch {
		case strings.HasPrefix(l, "ok  \t") || strings.HasPrefix(l, "?   \t"):
			fmt.Fprint(out, l)
		case l == "FAIL\n" || strings.HasPrefix(l, "FAIL\t"):
			last = append(last, l)
		case failed && l != "PASS\n" && !strings.HasPrefix(l, "=== "):
			fmt.Fprint(out, l)
		}
	}
	for test := range p.tests {
		if failed && !slices.Contains(p.failed, test) {
			p.failed = append(p.failed, test)
		}
	}
	sort.SliceStable(p.failed, func(i, j int) bool { return p.order[p.failed[i]] < p.order[p.failed[j]] })
	for _, test := range p.failed {
		printTest(out, test, p.tests[test])
	}
	for _, l := range last {
		fmt.Fprint(out, l)
	}
}

// printTest prints a failed test's output as go test does without -v: its "--- FAIL" line
// first, then its log, indented by its depth among subtests, without the framing lines that
// only -v shows.
func printTest(out io.Writer, test string, lines []string) {
	indent := strings.Repeat("    ", strings.Count(test, "/"))
	var log []string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "=== "):
		case strings.HasPrefix(strings.TrimLeft(l, " "), "--- FAIL: "+test+" "):
			fmt.Fprint(out, indent+strings.TrimLeft(l, " "))
		default:
			log = append(log, l)
		}
	}
	for _, l := range log {
		fmt.Fprint(out, indent+l)
	}
}

// noteSkip counts a skipped test under its suite when its output carries the marker.
func noteSkip(suites map[string]*skipped, lines []string) {
	for _, l := range lines {
		if suite, install, ok := testenv.ParseSkip(l); ok {
			s := suites[suite]
			if s == nil {
				s = &skipped{install: install}
				suites[suite] = s
			}
			s.tests++
			return
		}
	}
}

// summary is the line naming each skipped suite, e.g. "skipped, prerequisite missing: the
// Slurm suite (apt-get install slurmctld slurmd slurm-client munge; 12 tests), ..."; "" when
// none was.
func summary(suites map[string]*skipped) string {
	if len(suites) == 0 {
		return ""
	}
	names := make([]string, 0, len(suites))
	for n := range suites {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		s := suites[n]
		plural := "s"
		if s.tests == 1 {
			plural = ""
		}
		parts[i] = fmt.Sprintf("the %s suite (%s; %d test%s)", n, s.install, s.tests, plural)
	}
	return "skipped, prerequisite missing: " + strings.Join(parts, ", ")
}
