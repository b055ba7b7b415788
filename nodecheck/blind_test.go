package nodecheck

import (
	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/snaptest"
	"slices"
	"testing"

	"github.com/gputriage/gputriage/parse"
)

// TestUndescribedHolderIsAWarning: a GPU holder the procs section left undescribed because the
// section was cut, stopped by its time limit, reached its bound on processes, or a holder's own
// description was stopped, may be any leftover: probe-limited is then a warning naming it, and
// node-check does not pass the node. A holder missing from a whole section (another PID
// namespace, exited) stays an informational limit.
func TestUndescribedHolderIsAWarning(t *testing.T) {
	rc := func(n int) *int { return &n }
	cases := []struct {
		name string
		edit func(s *parse.Snapshot)
		warn bool
	}{
		{"procs stopped by its time limit", func(s *parse.Snapshot) {
			s.Sections = append(s.Sections, parse.SectionInfo{Name: "procs", ExitCode: rc(124)})
		}, true},
		{"procs cut at its limit", func(s *parse.Snapshot) {
			s.Sections = append(s.Sections, parse.SectionInfo{Name: "procs", Truncated: true})
		}, true},
		{"a holder's description stopped", func(s *parse.Snapshot) {
			s.Sections = append(s.Sections, parse.SectionInfo{Name: "procs", ExitCode: rc(0)})
			s.ProcsCut = []int{4242}
		}, true},
		{"procs at its bound on processes", func(s *parse.Snapshot) {
			s.Sections = append(s.Sections, parse.SectionInfo{Name: "procs", ExitCode: rc(0)})
			s.Notes = append(s.Notes, parse.Note{Code: parse.NoteSectionTruncated, Message: "section procs describes at most 2000 processes: 5 more that use GPUs or deleted /dev/shm files were left out"})
		}, true},
		{"procs whole", func(s *parse.Snapshot) {
			s.Sections = append(s.Sections, parse.SectionInfo{Name: "procs", ExitCode: rc(0)})
		}, false},
	}
	for _, c := range cases {
		s := snaptest.Idle()
		s.GPUs[0].MemoryUsedMiB, s.GPUs[0].MemoryFreeMiB = snaptest.I64(55_296), snaptest.I64(42_000)
		s.Apps = append(s.Apps, parse.ComputeApp{PID: 4242, GPUUUID: s.GPUs[0].UUID, UsedMiB: snaptest.I64(55_286)})
		s.Sections = []parse.SectionInfo{{Name: "smi-gpu", ExitCode: rc(0)}, {Name: "smi-apps", ExitCode: rc(0)}}
		c.edit(s)
		r := diagnose.Diagnose(s, snaptest.RefTime)
		i := slices.IndexFunc(r.Findings, func(f diagnose.Finding) bool { return f.Code == diagnose.CodeProbeLimited })
		if i < 0 {
			t.Fatalf("%s: no probe-limited finding", c.name)
		}
		f := r.Findings[i]
		named := slices.ContainsFunc(f.Reasons, func(r diagnose.Reason) bool {
			return r.Code == diagnose.ReasonHolderUndescribed && r.PID == 4242 && r.Strong
		})
		problem := slices.ContainsFunc(Check(r, Scope{}), func(p Problem) bool { return p.Code == diagnose.CodeProbeLimited })
		if named != c.warn || (f.Severity == diagnose.Warning) != c.warn || problem != c.warn {
			t.Errorf("%s: holder-undescribed %v, severity %s, node-check problem %v; want %v\n%+v", c.name, named, f.Severity, problem, c.warn, f.Reasons)
		}
	}
}
