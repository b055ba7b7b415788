package remote

import (
	"context"
	"fmt"
	"time"

	"github.com/gputriage/gputriage/fix"
	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/triage"
	"github.com/gputriage/gputriage/watch"
)

// watchRelease re-probes the host once a second over one kept SSH connection, after the
// apply script stopped targets, until watch reports each stopped target's memory back on
// every GPU the plan says it frees, or until Wait has passed since the apply session ended
// (the targets' exits, not the session's own length, start the wait: a slow link or a late
// SIGKILL must not leave the memory no time to come back). base is the host as it was at
// start, before the session. It returns each release as watch words it, and whether all came
// back.
func (r *Runner) watchRelease(ctx context.Context, run hostRun, base baseline, start time.Time) (lines []string, ok bool) {
	deadline := time.Now().Add(r.Wait)
	want := map[[2]int]bool{} // {pid, gpu} still to see released
	for j, res := range run.results {
		if res.Outcome == fix.Stopped {
			for g, m := range run.hp.Targets[j].FreesMiB {
				if m > 0 {
					want[[2]int{run.hp.Targets[j].PID, g}] = true
				}
			}
		}
	}
	if len(want) == 0 {
		return nil, true
	}
	pool, err := r.pool(run.hp.Host)
	if err != nil {
		return []string{fmt.Sprintf("%s: not watched: %v", report.Sanitize(run.hp.Host), err)}, false
	}
	defer pool.Close()
	wh := watch.NewHost(watch.Config{})
	wh.Observe(watch.Round{At: start, Snapshot: base.snap, Result: base.result})
	// At least one round, however long dialing took: the release may be there already.
	for n := 0; n == 0 || time.Now().Before(deadline) && len(want) > 0 && ctx.Err() == nil; n++ {
		var evs []watch.Event
		pool.Probe(ctx, 0, func(pr triage.Round) { _, evs = wh.Observe(watch.RoundOf(pr)) })
		for _, ev := range evs {
			if ev.Kind == watch.Released && ev.Holder != nil && ev.GPU != nil && want[[2]int{ev.Holder.PID, *ev.GPU}] {
				delete(want, [2]int{ev.Holder.PID, *ev.GPU})
				lines = append(lines, report.Sanitize(run.hp.Host)+": "+r.Clean(ev.String()))
			}
		}
		if len(want) > 0 {
			sleepCtx(ctx, time.Second)
		}
	}
	for k := range want {
		lines = append(lines, fmt.Sprintf("%s: PID %d: memory still held on GPU %d after %s", report.Sanitize(run.hp.Host), k[0], k[1], r.Wait))
	}
	return lines, len(want) == 0
}

// pool reaches a plan's host, as the operator named it, for repeated probes.
func (r *Runner) pool(label string) (*triage.Pool, error) {
	c := r.Config()
	h, err := c.ResolveOne(label)
	if err != nil {
		return nil, err
	}
	return triage.NewPool(c, []triage.Host{h})
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
