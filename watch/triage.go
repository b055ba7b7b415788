package watch

import (
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/triage"
)

// RoundOf is a pipeline's round as watch observes it.
func RoundOf(r triage.Round) Round {
	wr := Round{At: r.At, Dialed: r.Dialed}
	if r.Host.Err != nil {
		wr.Err = r.Host.Err.Phase + ": " + r.Host.Err.Kind + ": " + r.Host.Err.Message
		return wr
	}
	wr.Snapshot, wr.Result = r.Host.Snapshot, r.Host.Result
	if wr.Snapshot == nil {
		wr.Snapshot = &parse.Snapshot{}
	}
	return wr
}
