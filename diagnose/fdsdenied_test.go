package diagnose

import (
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/parse"
)

// TestFDsUnreadableWords: the fds-unreadable note under probe-limited is composed from its
// facts: how many links, whose, and, as root, why root may be refused and what to do; not as
// root it says only what may be missing (not-root says the rest).
func TestFDsUnreadableWords(t *testing.T) {
	uid := func(n int) *int { return &n }
	for _, tc := range []struct {
		name     string
		uid      *int
		denied   *parse.FDsDenied
		want     []string
		notWant  []string
		wantPIDs []int
	}{
		{"root, one PID", uid(0), &parse.FDsDenied{Links: 293, PIDs: []int{1}},
			[]string{"293 fd links of PID 1 could not be read", "though the probe ran as root", "ptrace-mode read of that process", "LSM", "hidepid", "ls -l /proc/1/fd"}, nil, []int{1}},
		{"root, PIDs unknown (older capture)", uid(0), &parse.FDsDenied{Links: 263},
			[]string{"263 fd links under /proc could not be read", "of the processes they belong to", "ls -l /proc/PID/fd"}, nil, nil},
		{"root, two PIDs", uid(0), &parse.FDsDenied{Links: 1, PIDs: []int{7, 9}},
			[]string{"1 fd link of PIDs 7, 9", "those processes"}, nil, []int{7, 9}},
		{"not root", uid(1000), &parse.FDsDenied{Links: 40, PIDs: []int{1, 2}},
			[]string{"40 fd links of PIDs 1, 2 could not be read", "may be missing"}, []string{"though the probe ran as root", "LSM"}, []int{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &parse.Snapshot{FDsDenied: tc.denied, Notes: []parse.Note{{Code: parse.NoteFDsUnreadable, Message: "parse's words"}}}
			s.Host.UID = tc.uid
			res := Diagnose(s, time.Unix(1e9, 0))
			var f *Finding
			for i := range res.Findings {
				if res.Findings[i].Code == CodeProbeLimited {
					f = &res.Findings[i]
				}
			}
			if f == nil {
				t.Fatalf("no probe-limited: %+v", res.Findings)
			}
			words := NoteText(*f, s.Notes[0])
			for _, w := range tc.want {
				if !strings.Contains(words, w) {
					t.Errorf("%q lacks %q", words, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(words, w) {
					t.Errorf("%q says %q", words, w)
				}
			}
			if !strings.Contains(strings.Join(f.Evidence, "\n"), words) {
				t.Errorf("evidence %q lacks the note's words", f.Evidence)
			}
			for _, r := range f.Reasons {
				if r.Note == parse.NoteFDsUnreadable && (r.Links != tc.denied.Links || len(r.PIDs) != len(tc.wantPIDs) || r.AsRoot != (*tc.uid == 0)) {
					t.Errorf("reason facts %+v", r)
				}
			}
		})
	}
}
