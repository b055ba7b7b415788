package diagnose

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/gputriage/gputriage/parse"
)

// Diagnose analyses one host's snapshot. now is the host's clock when the probe ran (so a
// replay gives the same ages as the live run); it is used only when the snapshot has no time.
func Diagnose(s *parse.Snapshot, now time.Time) Result {
	if s == nil {
		return Result{}
	}
	h := newHost(s, now)
	h.judgeLeftovers()

	var fs []Finding
	one := func(f Finding, ok bool) {
		if ok {
			fs = append(fs, f)
		}
	}
	one(h.smiFinding())
	fs = append(fs, h.imbalanceFindings()...)
	fs = append(fs, h.leftoverFindings()...)
	fs = append(fs, h.outsideAllocationFindings()...)
	fs = append(fs, h.unconfirmedFindings()...)
	fs = append(fs, h.shmDeletedFindings()...)
	fs = append(fs, h.deadPIDFindings()...)
	ghost, hasGhost := h.ghostFinding()
	one(ghost, hasGhost)
	one(h.shmStaleFinding())
	one(h.shmFullFinding())
	fs = append(fs, h.busyFindings()...)
	sortFindings(fs)
	fs = h.folded.foldFindings(fs)
	one(h.probeLimitedFinding(hasGhost))

	sortFindings(fs)
	return Result{Findings: fs, Processes: h.procs, Memory: AccountMemory(s.GPUs, h.procs)}
}

// sortFindings orders findings most severe first, then by code, first GPU, first PID and
// title; a finding without GPUs (or PIDs) sorts before those with.
func sortFindings(fs []Finding) {
	first := func(xs []int) int {
		if len(xs) == 0 {
			return -1
		}
		return xs[0]
	}
	slices.SortStableFunc(fs, func(a, b Finding) int {
		return cmp.Or(
			cmp.Compare(b.Severity, a.Severity),
			strings.Compare(a.Code, b.Code),
			cmp.Compare(first(a.GPUs), first(b.GPUs)),
			cmp.Compare(first(a.PIDs), first(b.PIDs)),
			strings.Compare(a.Title, b.Title),
		)
	})
}
