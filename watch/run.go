package watch

import (
	"context"
	"io"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/triage"
)

// Exit statuses of a watch.
const (
	ExitHolds       = 0   // the condition holds on every host (or the timeout passed, none awaited)
	ExitHoldsNot    = 1   // the timeout passed before the condition held
	ExitHostsFailed = 3   // a host could not be reached at its first round, or at the timeout
	ExitInterrupted = 130 // interrupted (Ctrl-C)
)

// Watcher runs one watch: a goroutine per host probes it every Interval over its kept
// connection (Pool), and the rounds are judged and shown here, one at a time, as they come.
type Watcher struct {
	Config   Config
	Hosts    []triage.Host
	Pool     *triage.Pool
	Interval time.Duration
	Timeout  time.Duration // the whole watch's; 0: none
	Until    string        // the condition as the operator named it (--until), "" for none
	// Format is "json" for JSON Lines, "screen" for one screen redrawn in place (a terminal
	// that takes escapes), else one timestamped line per change.
	Format         string
	Stdout, Stderr io.Writer
}

// Run follows every host's rounds (triage.Pool.Watch) until the condition holds on all of
// them (0), a host cannot be reached at its first round (3), Timeout passes (1; 0 without
// a condition; 3 when a host is down then) or ctx is cancelled (130). It closes Pool.
func (w *Watcher) Run(ctx context.Context) int {
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if w.Timeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, w.Timeout)
	}
	defer cancel()
	defer w.Pool.Close()
	out := newOutput(w)
	hs := make([]*Host, len(w.Hosts))
	st := make([]*Status, len(w.Hosts))
	for i := range hs {
		hs[i] = NewHost(w.Config)
	}
	code, why := -1, ""
	w.Pool.Watch(wctx, w.Interval, func(i int, r triage.Round) bool {
		for _, n := range r.Notes {
			out.note(i, n)
		}
		s, evs := hs[i].Observe(RoundOf(r))
		first := st[i] == nil
		st[i] = &s
		out.round(i, r.At, s, evs, st)
		switch {
		case first && !s.Reachable:
			code, why = ExitHostsFailed, w.Hosts[i].Label+" cannot be reached"
		case w.Config.Until != UntilNone && allHold(st):
			code, why = ExitHolds, "--until "+w.Until+" holds on every host"
		}
		return code < 0
	})
	if code < 0 {
		code, why = ExitHoldsNot, "--timeout "+w.Timeout.String()+" passed before --until "+w.Until+" held"
		switch {
		case ctx.Err() != nil:
			code, why = ExitInterrupted, "interrupted"
		case anyDown(st):
			code, why = ExitHostsFailed, "--timeout passed with a host unreachable"
		case w.Config.Until == UntilNone:
			code, why = ExitHolds, "--timeout "+w.Timeout.String()+" passed"
		}
	}
	out.end(time.Now(), code, why)
	return code
}

func allHold(st []*Status) bool {
	for _, s := range st {
		if s == nil || !s.Holds {
			return false
		}
	}
	return true
}

func anyDown(st []*Status) bool {
	for _, s := range st {
		if s != nil && !s.Reachable {
			return true
		}
	}
	return false
}

// worstName is a severity for people, "" for none.
func worstName(s diagnose.Severity) string {
	if s < 0 {
		return ""
	}
	return s.String()
}
