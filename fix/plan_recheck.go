package fix

import (
	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
)

// Details of refusals made on this side, before anything is sent to the host (Result.Detail,
// beside the apply script's own).
const (
	// DetailNotNamed: the probe just before applying names no problem with the process.
	DetailNotNamed = "not-named"
	// DetailActionDiffers: that probe names the same process, for another action (kind,
	// unit, container or job).
	DetailActionDiffers = "action-differs"
	// DetailNotReprobed: the host could not be probed again just before applying.
	DetailNotReprobed = "not-reprobed"
)

// Refusal is a planned target that is not applied, and why (a Result.Detail).
type Refusal struct {
	Target Target
	Detail string
}

// Recheck keeps the targets of planned that a probe of the same host, taken just before
// applying (s, diagnosed as r), names alike. A target's identity (boot id, PID, start time,
// uid, argv hash), which the host checks again, proves that it is the same process; only a
// fresh diagnosis says that it is still a problem: a stopped server its owner resumed, a
// leftover whose evidence went away, a unit that is healthy again. So a target is kept only
// when the plan BuildHost makes from s has a target of the same identity and the same action
// (kind, name, runtime), and kept as that plan has it (its state and memory as they are now).
// Every other target is refused: with the identity field that differs from the process as s
// describes it, else DetailNotNamed ("permission" for another user's process when the probe
// did not run as root), or DetailActionDiffers. A plan file edited after review
// can therefore only leave targets out, never add one or change what is done to it.
func Recheck(planned HostPlan, s *parse.Snapshot, r diagnose.Result) (keep HostPlan, refused []Refusal) {
	procs := map[int]*parse.Process{}
	for i := range s.Processes {
		if p := &s.Processes[i]; !p.Gone {
			procs[p.PID] = p
		}
	}
	keep, refused = recheck(planned, BuildHost(planned.Host, s, r), procs)
	// A probe that ran as another user than root cannot judge, and the apply script could not
	// signal, another user's process: say that, as the script would.
	if u := s.Host.UID; u != nil && *u != 0 {
		for i, x := range refused {
			if x.Detail == DetailNotNamed && x.Target.UID != *u {
				refused[i].Detail = "permission"
			}
		}
	}
	return keep, refused
}

// recheck is Recheck against fresh, the plan made from the probe, and the processes it
// describes by PID.
func recheck(planned, fresh HostPlan, procs map[int]*parse.Process) (keep HostPlan, refused []Refusal) {
	keep = planned
	keep.Targets = []Target{}
	byPID, judged := map[int]Target{}, map[int]Target{}
	for _, t := range fresh.Targets {
		byPID[t.PID], judged[t.PID] = t, t
	}
	// A target the operator named from the judge list stands when the fresh plan names it
	// there too; any other only when the fresh plan names it a target outright.
	for _, t := range fresh.Judge {
		t.Include = true
		judged[t.PID] = t
	}
	for _, t := range planned.Targets {
		d := ""
		if planned.BootID != fresh.BootID {
			d = "boot-id-differs"
		} else if d = identityDiffers(t, procs[t.PID]); d == "" && t.Include {
			d = actionDiffers(t, judged)
		} else if d == "" {
			d = actionDiffers(t, byPID)
		}
		if d != "" {
			refused = append(refused, Refusal{Target: t, Detail: d})
			continue
		}
		if t.Include {
			keep.Targets = append(keep.Targets, judged[t.PID])
		} else {
			keep.Targets = append(keep.Targets, byPID[t.PID])
		}
	}
	return keep, refused
}

// identityDiffers says which of t's identity fields p, the process the probe describes with
// t's PID, differs in, in the apply script's words; "" when none does or p is not described.
func identityDiffers(t Target, p *parse.Process) string {
	switch {
	case p == nil:
		return ""
	case p.StartTicks != nil && *p.StartTicks != t.StartTicks:
		return "start-time-differs"
	case p.UID != nil && *p.UID != t.UID:
		return "uid-differs"
	case p.ArgvSHA256 != "" && p.ArgvSHA256 != t.ArgvSHA256:
		return "argv-differs"
	}
	return ""
}

// actionDiffers says why the fresh plan's target of t's PID does not stand for t; "" when it
// names the same identity for the same action.
func actionDiffers(t Target, fresh map[int]Target) string {
	f, ok := fresh[t.PID]
	switch {
	case !ok || f.StartTicks != t.StartTicks || f.UID != t.UID || f.ArgvSHA256 != t.ArgvSHA256:
		return DetailNotNamed
	case f.Kind != t.Kind || f.Name != t.Name || f.Runtime != t.Runtime:
		return DetailActionDiffers
	}
	return ""
}
