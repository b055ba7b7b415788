package diagnose

import (
	"fmt"
	"strconv"
)

// Words of the process tree's reasons (tree.go).

// treeWords is an orphaned-worker or older-generation reason as a clause.
func treeWords(r Reason) string {
	adopter := adopterWords(r.Parent, r.ParentName)
	switch r.Code {
	case ReasonOrphanedWorker:
		if r.Detail == torchrunRank {
			const env = "its environment carries the TORCHELASTIC_RUN_ID the elastic agent gives each rank it starts"
			if r.Other != 0 {
				return fmt.Sprintf("it is a process of torchrun rank PID %d (%s), and that rank's agent died: PID %d was re-parented to %s", r.Other, env, r.Other, adopter)
			}
			return "it is a torchrun rank (" + env + "), and its agent died: it was re-parented to " + adopter
		}
		if r.Other != 0 {
			return fmt.Sprintf("it is a %s, started by PID %d, a worker itself whose launcher died: PID %d was re-parented to %s", r.Detail, r.Other, r.Other, adopter)
		}
		return fmt.Sprintf("it is a %s, a process only a launcher starts, and its launcher died: it was re-parented to %s", r.Detail, adopter)
	case ReasonOlderGeneration:
		if r.Detail == restartAttempt {
			// Neither the newer rank nor the live agent is named: their PIDs would read as blame.
			return "it is a torchrun rank of an earlier attempt of its run: a newer rank of the same run under the same agent, which runs one attempt at a time, has a higher TORCHELASTIC_RESTART_COUNT, so it was left behind when the agent restarted its workers"
		}
		// The newer generation is healthy: it is not named here, lest its PID read as blame.
		return fmt.Sprintf("it runs exactly the command line of a newer process of the same user on the same GPU, which started %s later under a launcher that lives, while its own launcher died (it was re-parented to %s): it is the older generation, left behind by a restart",
			FormatAge(r.Age), adopter)
	}
	return string(r.Code)
}

// zombieParentWords names a true zombie's parent for the reason's clause: " (PID 812, bash)".
func zombieParentWords(r Reason) string {
	if r.Parent == 0 {
		return ""
	}
	s := " (PID " + strconv.Itoa(r.Parent)
	if r.ParentName != "" {
		s += ", " + r.ParentName
	}
	return s + ")"
}

// zombieFixWords says how a true zombie goes away, by its parent's role (zombieParent).
func zombieFixWords(r Reason) string {
	const stuck = " A zombie that still holds GPU memory usually has threads stuck in the driver; if that does not free it, only a reboot will."
	p := "PID " + strconv.Itoa(r.Parent)
	switch r.Detail {
	case parentInit:
		return "A zombie cannot be killed, and its parent is PID 1, which reaps zombies by itself: one that stays means init is stuck, or its threads are stuck in the driver; only a reboot frees it."
	case parentContainerInit:
		what := "its container"
		if r.Unit != "" {
			what = "container " + r.Unit
		}
		return "A zombie cannot be killed: its parent has to reap it. Its parent, " + p + ", is the init of " + what + ", so gputriage suggests no kill: only restarting " + what + " would reap it, and that also stops every process in it." + stuck
	case parentUnitMain:
		return "A zombie cannot be killed: its parent has to reap it. Its parent, " + p + ", is the main process of " + r.Unit + ", so gputriage suggests no kill: only restarting " + r.Unit + " would reap it, and that also stops its service." + stuck
	case parentOtherUser:
		return "A zombie cannot be killed: its parent has to reap it. Its parent, " + p + ", is another user's process, so gputriage suggests no kill: ask its owner, or an administrator, to end it." + stuck
	case parentUnknown:
		s := "A zombie cannot be killed: its parent has to reap it, and the probe could not describe its parent, so gputriage suggests no kill"
		if r.Parent > 0 {
			s += ": look at it first (ps -o pid,user,cmd -p " + strconv.Itoa(r.Parent) + ")"
		}
		return s + "." + stuck
	}
	return "A zombie cannot be killed: its parent has to reap it, which happens when the parent exits; its parent is the same user's process, which the commands below end." + stuck
}
