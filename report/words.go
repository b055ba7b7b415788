package report

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gputriage/gputriage/diagnose"
)

// The report's own words: the short phrases the compact layout builds from a finding's typed
// facts (a reason in a few words, the lead of a "what to do" item, a pointer from one finding
// to the one that explains it). Findings' sentences are composed in diagnose; this file is the
// one place the report composes any, and only from facts. The texts are the host's where they
// carry its strings: callers sanitize them for their format.

// reasonPhrase is one reason in a few words: "orphaned: parent PID 1, outside any service,
// container or Slurm job". shmListed is set when another finding of the host lists the
// deleted /dev/shm files the reason names, which it then points to instead of naming them.
func reasonPhrase(r diagnose.Reason, shmListed bool) string {
	var s string
	switch r.Code {
	case diagnose.ReasonUnitStopped:
		s = "its unit " + r.Unit + " is " + r.State
		if r.Result != "" {
			s += " (" + r.Result + ")"
		}
	case diagnose.ReasonSessionEnded:
		s = "the login session that started it has ended"
	case diagnose.ReasonStrayInUnit:
		s = "it runs in " + r.Unit + "'s cgroup but not under its main process"
		if r.Older {
			s += ", and started before it"
		}
	case diagnose.ReasonZombie:
		s = "it is a zombie (state Z)"
	case diagnose.ReasonZombieLeader:
		s = "its main thread exited (state Z) while its other threads run on"
	case diagnose.ReasonOrphanedWorker:
		s = "a " + r.Detail + " whose launcher died (re-parented to PID " + strconv.Itoa(r.Parent) + ")"
	case diagnose.ReasonOlderGeneration:
		s = "an older generation of a live process with its command line; its launcher died"
	case diagnose.ReasonStopped:
		s = "it is stopped (state T)"
	case diagnose.ReasonTraced:
		s = "it is stopped by a debugger (state t)"
	case diagnose.ReasonShmDeleted, diagnose.ReasonScratchDeleted:
		what := "files it maps from /dev/shm were deleted"
		if r.Code == diagnose.ReasonScratchDeleted {
			what = "scratch " + what
		}
		s = countWord(len(r.Paths)) + what
		switch {
		case shmListed:
			s += " (see " + diagnose.CodeShmDeletedMapped + ")"
		case len(r.Paths) > 0:
			s += ": " + strings.Join(foldPaths(r.Paths), ", ")
		}
	case diagnose.ReasonModelPathGone:
		s = "the model path on its command line no longer exists"
		if len(r.Paths) > 0 {
			s = "its model path " + r.Paths[0] + " no longer exists"
		}
	case diagnose.ReasonOrphaned:
		s = "orphaned: parent PID 1, outside any service, container or Slurm job"
	case diagnose.ReasonMuchOlder:
		s = "it has run for " + diagnose.FormatAge(r.Age) + ", much longer than the other GPU work (" +
			diagnose.FormatAge(r.Than) + ")"
		if r.Orphaned {
			s += ", and is orphaned"
		}
	default:
		s = limitPhrase(r)
	}
	if r.ServedBy != "" {
		s += " (but " + r.ServedBy + " still serves it)"
	} else if r.OthersMay != nil {
		s += " (but another user could have done that)"
	}
	return s
}

// limitPhrase is a reason of probe-limited in a few words: what the probe could not see.
func limitPhrase(r diagnose.Reason) string {
	switch r.Code {
	case diagnose.ReasonProbeNote:
		return r.Note + ": " + r.Detail
	case diagnose.ReasonNotRoot:
		return "the probe ran as " + r.Detail + ", not root: other users' processes were hidden"
	case diagnose.ReasonCaptureTruncated:
		return "the capture was cut short: findings may be missing"
	case diagnose.ReasonSectionTruncated:
		return "section " + r.Detail + " was cut at " + mib(r.Bytes) + " bytes"
	case diagnose.ReasonAppsUnknown:
		return "nvidia-smi did not list compute processes: who holds GPU memory is unknown"
	case diagnose.ReasonUnmatchedApp:
		return "PID " + strconv.Itoa(r.PID) + " runs on " + r.Detail + ", a GPU not in the GPU list"
	case diagnose.ReasonFieldFallback:
		return "an older driver: reserved memory and MIG mode are unknown"
	case diagnose.ReasonShmUnlisted:
		return "/dev/shm could not be listed"
	case diagnose.ReasonShmTruncated:
		return "the /dev/shm listing was cut short"
	case diagnose.ReasonNoTimeout:
		return "no timeout(1) on the host: the probe's steps were not bounded in time"
	case diagnose.ReasonPIDUnreadable:
		return "PID " + strconv.Itoa(r.PID) + " is listed by nvidia-smi, but /proc could not show it"
	case diagnose.ReasonPIDExited:
		return "PID " + strconv.Itoa(r.PID) + " exited while the probe ran"
	case diagnose.ReasonDetailFolded:
		return strconv.Itoa(r.Folded) + " more " + r.Detail + " folded"
	case diagnose.ReasonListedPIDGone:
		return "PID " + strconv.Itoa(r.PID) + " is listed by nvidia-smi but no longer exists"
	case diagnose.ReasonHoldsDevice:
		switch r.Detail {
		case "process-group":
			return "PID " + strconv.Itoa(r.PID) + ", of its process group, still holds the device"
		case "session":
			return "PID " + strconv.Itoa(r.PID) + ", of its session, still holds the device"
		}
		return "PID " + strconv.Itoa(r.PID) + " holds the device (nothing ties it to the gone PID)"
	}
	return string(r.Code)
}

// countWord is "12 " for a count worth saying, "" for none or one.
func countWord(n int) string {
	if n < 2 {
		return ""
	}
	return strconv.Itoa(n) + " "
}

// keyLinePrefixes name, per code, the evidence lines that carry a finding's verdict in
// numbers: the compact layout shows them, the rest of the evidence only with -v.
var keyLinePrefixes = map[string][]string{
	diagnose.CodeMemoryImbalance: {"SGLang TP check:", "vLLM check"},
}

// keyLines are the evidence lines of f that keyLinePrefixes selects, in evidence order.
func keyLines(f diagnose.Finding) []string {
	var out []string
	for _, e := range f.Evidence {
		if isKeyLine(f.Code, e) {
			out = append(out, e)
		}
	}
	return out
}

func isKeyLine(code, e string) bool {
	for _, p := range keyLinePrefixes[code] {
		if strings.HasPrefix(e, p) {
			return true
		}
	}
	return false
}

// explainedBy points from a memory-imbalance finding to the findings that explain it, in a few
// words: "caused by PID 20629 (see leftover-process)"; "" for other findings and when none does.
func explainedBy(f diagnose.Finding, all []diagnose.Finding) string {
	im := f.Imbalance
	if im == nil {
		return ""
	}
	var parts []string
	if len(im.Leftover) > 0 && hasCode(all, diagnose.CodeLeftoverProcess) {
		parts = append(parts, "caused by "+pidList(im.Leftover)+" (see "+diagnose.CodeLeftoverProcess+")")
	}
	if unlistedMiB(im) > 0 && hasCode(all, diagnose.CodeGhostMemory) {
		parts = append(parts, "caused by memory no listed process holds (see "+diagnose.CodeGhostMemory+")")
	}
	return strings.Join(parts, "; ")
}

// unlistedMiB is the memory on an imbalance's short GPUs that no listed process accounts for.
func unlistedMiB(im *diagnose.Imbalance) int64 {
	var n int64
	for _, s := range im.Short {
		n += s.UnlistedMiB
	}
	return n
}

// pidList is "PID 7" or "PIDs 7, 9".
func pidList(pids []int) string {
	if len(pids) == 1 {
		return "PID " + strconv.Itoa(pids[0])
	}
	return "PIDs " + strings.ReplaceAll(joinInts(pids), ",", ", ")
}

// actionLead says what an item of "what to do" does, before what it frees: "Stop PID 20629
// (sglang.launch_server, root)". procs are the host's GPU processes, to name a PID's program.
func actionLead(it todoItem, procs []diagnose.GPUProcess) string {
	t := it.target
	switch it.kind {
	case diagnose.ActionKill:
		return "Stop PID " + t + processWho(it.pids, procs)
	case diagnose.ActionStopUnit:
		return "Stop " + t
	case diagnose.ActionStopContainer:
		return "Stop container " + t
	case diagnose.ActionDeletePod:
		return "Delete pod " + t
	case diagnose.ActionCancelJob:
		return "Cancel Slurm job " + t
	case diagnose.ActionReapZombie:
		return "Reap zombie PID " + t
	case diagnose.ActionRemoveFiles:
		return "Remove " + t
	case diagnose.ActionInspect:
		if t == "" {
			return "Look closer"
		}
		return "Inspect " + t
	case diagnose.ActionNarrowLaunch:
		return "Launch only on the GPUs with room: " + t
	case diagnose.ActionResizeShm:
		return "Enlarge " + t
	case diagnose.ActionDriver:
		if t == "" {
			return "Repair the driver"
		}
		return "Repair " + t
	case "":
		return "For " + strings.Join(it.codes, ", ")
	}
	return string(it.kind) + " " + t
}

// processWho is " (sglang.launch_server, root)" for a single known PID, "" otherwise.
func processWho(pids []int, procs []diagnose.GPUProcess) string {
	if len(pids) != 1 {
		return ""
	}
	p, ok := processByPID(procs, pids[0])
	if !ok {
		return ""
	}
	who := programText(p)
	if p.User != "" {
		who += ", " + p.User
	}
	return " (" + who + ")"
}

// impactText is what an item gives back: "frees 55,286 MiB on GPU 0 and 48 MiB of /dev/shm";
// "" when nothing is known.
func impactText(im diagnose.Impact) string {
	var parts []string
	if g := gpuImpact(im.GPUMiB); g != "" {
		parts = append(parts, g)
	}
	if im.ShmBytes > 0 {
		parts = append(parts, sizeText(im.ShmBytes)+" of /dev/shm")
	}
	if len(parts) == 0 {
		return ""
	}
	return "frees " + strings.Join(parts, " and ")
}

// gpuImpact is "55,286 MiB on GPU 0", "1,024 MiB on each of GPUs 0-3", or for uneven
// amounts the total: "3,072 MiB on GPUs 0, 2".
func gpuImpact(m map[int]int64) string {
	var gpus []int
	var total int64
	same := true
	for g, v := range m {
		if v <= 0 {
			continue
		}
		if len(gpus) > 0 && v != m[gpus[0]] {
			same = false
		}
		gpus = append(gpus, g)
		total += v
	}
	if len(gpus) == 0 {
		return ""
	}
	slices.Sort(gpus)
	switch {
	case len(gpus) == 1:
		return mib(total) + " MiB on " + diagnose.FormatGPUs(gpus)
	case same:
		return mib(m[gpus[0]]) + " MiB on each of " + diagnose.FormatGPUs(gpus)
	}
	return mib(total) + " MiB on " + diagnose.FormatGPUs(gpus)
}

// sizeText is a byte count for people, without a needless ".0": "4 MiB", "1.5 GiB".
func sizeText(b int64) string {
	s := bytesHuman(b)
	return strings.Replace(s, ".0 ", " ", 1)
}

// shmState is how a /dev/shm file is kept: "deleted, mapped and open".
func shmState(f diagnose.ShmFile) string {
	how := shmHow(f.Deleted, f.Mapped, f.Open)
	switch len(how) {
	case 0:
		return ""
	case 1:
		return how[0]
	}
	return strings.Join(how[:len(how)-1], ", ") + " and " + how[len(how)-1]
}

// resolvesText lists the codes an item resolves, then those it only helps with: "resolves
// leftover-process, shm-deleted-mapped; helps with memory-imbalance".
func resolvesText(codes, partly []string) string {
	var all, some []string
	for _, c := range codes {
		if slices.Contains(partly, c) {
			some = append(some, c)
		} else {
			all = append(all, c)
		}
	}
	var parts []string
	if len(all) > 0 {
		parts = append(parts, "resolves "+strings.Join(all, ", "))
	}
	if len(some) > 0 {
		parts = append(parts, "helps with "+strings.Join(some, ", "))
	}
	return strings.Join(parts, "; ")
}

// shmHow lists how a /dev/shm file is kept, in the order people read it.
func shmHow(deleted, mapped, open bool) []string {
	var how []string
	for _, w := range []struct {
		on   bool
		word string
	}{{deleted, "deleted"}, {mapped, "mapped"}, {open, "open"}} {
		if w.on {
			how = append(how, w.word)
		}
	}
	return how
}
