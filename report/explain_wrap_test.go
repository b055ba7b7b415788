package report

import (
	"strings"
	"testing"

	"github.com/gputriage/gputriage/explain"
	"github.com/gputriage/gputriage/internal/testenv"
)

// At every width from 40 to 120, explain's text never parts a number from its unit (nor a
// factor from its ×), keeps every word, and keeps every line but a command within the width.
func TestExplainWrapKeepsUnitsAtEveryWidth(t *testing.T) {
	for _, msg := range testenv.ExplainCorpus(t, "..") {
		ex := explain.Explain(msg)
		if len(ex) == 0 {
			t.Fatalf("not explained: %.80q", msg)
		}
		var wide strings.Builder
		if err := Explanations(&wide, ex, nil, nil, "text", Options{Width: 100000}); err != nil {
			t.Fatal(err)
		}
		for width := 40; width <= 120; width++ {
			var b strings.Builder
			if err := Explanations(&b, ex, nil, nil, "text", Options{Width: width}); err != nil {
				t.Fatal(err)
			}
			got := b.String()
			for _, p := range testenv.PartedUnits(got) {
				t.Errorf("width %d: a number parted from its unit: %q", width, p)
			}
			if strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(wide.String()), " ") {
				t.Errorf("width %d: wrapping changed the words:\n%s", width, got)
			}
			for _, l := range overWidth(got, width) {
				t.Errorf("width %d: line of %d cells: %q", width, len([]rune(l)), l)
			}
		}
	}
}

// overWidth returns the lines wider than width, but for the commands under "next:" (never
// wrapped, so they run as pasted) and a line of one word (which no break can shorten).
func overWidth(text string, width int) []string {
	var bad []string
	inNext := false
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.TrimSpace(l) == "next:":
			inNext = true
			continue
		case !strings.HasPrefix(l, "    "):
			inNext = false
		}
		if inNext || len([]rune(l)) <= width || len(strings.Fields(l)) == 1 {
			continue
		}
		bad = append(bad, l)
	}
	return bad
}
