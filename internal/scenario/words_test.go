package scenario_test

import (
	"slices"
	"testing"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/report"
)

// checkWordsFromFacts holds, for every staged situation, that each finding's words are
// composed from its JSON facts alone: decoded from the JSON report and composed again, they
// are the report's words.
func checkWordsFromFacts(t *testing.T, doc string) {
	t.Helper()
	hosts, err := report.ReadFindings([]byte(doc))
	if err != nil {
		t.Fatalf("read findings: %v", err)
	}
	for _, h := range hosts {
		for _, want := range h.Findings {
			got := want
			diagnose.ComposeWords(&got)
			if got.Title != want.Title || got.Explanation != want.Explanation ||
				!slices.Equal(got.Evidence, want.Evidence) || !slices.Equal(got.Fix, want.Fix) {
				t.Errorf("%s: the words composed from its JSON facts differ from the report's:\n got: %q\n%q\n%q\n%q\nwant: %q\n%q\n%q\n%q",
					want.Code, got.Title, got.Explanation, got.Evidence, got.Fix, want.Title, want.Explanation, want.Evidence, want.Fix)
			}
		}
	}
}
