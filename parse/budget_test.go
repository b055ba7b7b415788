package parse

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// cutRecords keeps a section's first RecordCap records and counts the rest, whatever ends
// them: lines, NUL-terminated records (keeping the fds section's last "denied" line), procs
// blocks ending in an "end" field (a value ending in "end" is not one) and units blocks
// ending in an empty line (the last may lack it).
func TestCutRecords(t *testing.T) {
	lines := func(n int, last string) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "/proc/%d/maps:7f0000000000-7f0000001000 rw-s 0 00:1a %d /dev/shm/s%d\n", i, i, i)
		}
		return b.String() + last
	}
	proc := func(pid int) string {
		return fmt.Sprintf("pid %d\x00status Name:\tbackend\x00argv ZW5kend\x00end\x00", pid)
	}
	procs := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(proc(i))
		}
		return b.String()
	}
	unit := func(i int) string { return fmt.Sprintf("Id=u%d.service\nMainPID=%d\n", i, i) }
	units := func(n int, lastEnded bool) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(unit(i))
			if i < n-1 || lastEnded {
				b.WriteString("\n")
			}
		}
		return b.String()
	}
	mc, pc, uc, fc := RecordCap("maps"), RecordCap("procs"), RecordCap("units"), RecordCap("fds")
	fds := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "/proc/%d/fd\t4\t/dev/nvidia0\x00", i)
		}
		return b.String() + "denied 3\n"
	}
	for _, tt := range []struct {
		name, section string
		sep           byte
		body, want    string
		dropped       int
	}{
		{"lines at the cap", "maps", '\n', lines(mc, ""), lines(mc, ""), 0},
		{"lines at the cap, the last unended", "maps", '\n', lines(mc-1, "x"), lines(mc-1, "x"), 0},
		{"lines past the cap", "maps", '\n', lines(mc+3, ""), lines(mc, ""), 3},
		{"lines past the cap, the last unended", "maps", '\n', lines(mc+2, "x"), lines(mc, ""), 3},
		{"procs at the cap", "procs", 0, procs(pc), procs(pc), 0},
		{"procs past the cap", "procs", 0, procs(pc + 2), procs(pc), 2},
		{"units at the cap", "units", '\n', units(uc, false), units(uc, false), 0},
		{"units past the cap", "units", '\n', units(uc+2, false), units(uc, true), 2},
		{"fds past the cap keep their denied line", "fds", 0, fds(fc + 5), fds(fc), 5},
		{"no cap", "host", '\n', lines(mc+5, ""), lines(mc+5, ""), 0},
	} {
		got, dropped := cutRecords(tt.section, []byte(tt.body), tt.sep)
		if string(got) != tt.want || dropped != tt.dropped {
			t.Errorf("%s: kept %d bytes (want %d), dropped %d (want %d)", tt.name, len(got), len(tt.want), dropped, tt.dropped)
		}
	}
}

// A section past its cap on records reads as cut: Truncated, not Complete, its dropped
// records counted and noted by name; what was kept is parsed.
func TestRecordCapIsACut(t *testing.T) {
	var b strings.Builder
	n := RecordCap("fdstat") + 7
	for i := range n {
		fmt.Fprintf(&b, "0 4194304 1a %d /proc/%d/fd/5\n", 1000+i, 100+i)
	}
	raw := "gputriage-capture v2 nonce=" + testNonce + "\n" + sec("fdstat", SectionLimit("fdstat"), b.String(), 0) + "@@gputriage " + testNonce + " done\n"
	s, err := Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(s.Sections, func(x SectionInfo) bool { return x.Name == "fdstat" })
	if i < 0 {
		t.Fatal("no fdstat section")
	}
	si := s.Sections[i]
	if !si.Truncated || si.Complete() || si.Dropped != 7 {
		t.Errorf("fdstat: truncated %v complete %v dropped %d, want a cut of 7", si.Truncated, si.Complete(), si.Dropped)
	}
	want := fmt.Sprintf("section fdstat holds more records than the client reads: the first %d were read, 7 more dropped", RecordCap("fdstat"))
	if !slices.ContainsFunc(s.Notes, func(n Note) bool { return n.Code == NoteSectionTruncated && n.Message == want }) {
		t.Errorf("notes %v, want %q", s.Notes, want)
	}
}
