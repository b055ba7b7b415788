package diagnose

import (
	"slices"
	"strconv"
	"strings"
)

// Phrases: the short words a report's compact layout shows of a finding's facts (a reason in
// a few words, the lead of a "what to do" item, what it frees and resolves, a pointer from one
// finding to the one that explains it). They are composed here, beside the findings' sentences,
// from the same facts; a report only renders them. The texts are the host's where they carry
// its strings: a report sanitizes them for its format.

// ReasonPhrase is one reason in a few words: "orphaned: parent PID 1, outside any service,
// container or Slurm job". shmListed is set when another finding of the host lists the
// deleted /dev/shm files the reason names, which it then points to instead of naming them;
// paths lists the files as the report shows them (series folded).
func ReasonPhrase(r Reason, shmListed bool, paths func([]string) []string) string {
	var s string
	switch r.Code {
	case ReasonUnitStopped:
		s = "its unit " + r.Unit + " is " + r.State
		if r.Result != "" {
			s += " (" + r.Result + ")"
		}
	case ReasonSessionEnded:
		s = "the login session that started it has ended"
	case ReasonStrayInUnit:
		s = "it runs in " + r.Unit + "'s cgroup but not under its main process"
		if r.Older {
			s += ", and started before it"
		}
	case ReasonZombie:
		s = "it is a zombie (state Z)"
	case ReasonZombieLeader:
		s = "its main thread exited (state Z) while its other threads run on"
	case ReasonOrphanedWorker:
		s = "a " + r.Detail + " whose launcher died (re-parented to PID " + strconv.Itoa(r.Parent) + ")"
	case ReasonOlderGeneration:
		s = "an older generation of a live process with its command line; its launcher died"
	case ReasonStopped:
		s = "it is stopped (state T)"
	case ReasonTraced:
		s = "it is stopped by a debugger (state t)"
	case ReasonShmDeleted, ReasonScratchDeleted:
		what := "files it maps from /dev/shm were deleted"
		if r.Code == ReasonScratchDeleted {
			what = "scratch " + what
		}
		s = countWord(len(r.Paths)) + what
		switch {
		case shmListed:
			s += " (see " + CodeShmDeletedMapped + ")"
		case len(r.Paths) > 0:
			s += ": " + strings.Join(paths(r.Paths), ", ")
		}
	case ReasonModelPathGone:
		s = "the model path on its command line no longer exists"
		if len(r.Paths) > 0 {
			s = "its model path " + r.Paths[0] + " no longer exists"
		}
	case ReasonOrphaned:
		s = "orphaned: parent PID 1, outside any service, container or Slurm job"
	case ReasonMuchOlder:
		s = "it has run for " + FormatAge(r.Age) + ", much longer than the other GPU work (" +
			FormatAge(r.Than) + ")"
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
func limitPhrase(r Reason) string {
	switch r.Code {
	case ReasonProbeNote:
		return r.Note + ": " + r.Detail
	case ReasonNotRoot:
		return "the probe ran as " + r.Detail + ", not root: other users' processes were hidden"
	case ReasonCaptureTruncated:
		return "the capture was cut short: findings may be missing"
	case ReasonSectionTruncated:
		return "section " + r.Detail + " was cut at " + thousands(r.Bytes) + " bytes"
	case ReasonAppsUnknown:
		return "nvidia-smi did not list compute processes: who holds GPU memory is unknown"
	case ReasonUnmatchedApp:
		return "PID " + strconv.Itoa(r.PID) + " runs on " + r.Detail + ", a GPU not in the GPU list"
	case ReasonFieldFallback:
		return "an older driver: reserved memory and MIG mode are unknown"
	case ReasonShmUnlisted:
		return "/dev/shm could not be listed"
	case ReasonShmTruncated:
		return "the /dev/shm listing was cut short"
	case ReasonNoTimeout:
		return "no timeout(1) on the host: the probe's steps were not bounded in time"
	case ReasonPIDUnreadable:
		return "PID " + strconv.Itoa(r.PID) + " is listed by nvidia-smi, but /proc could not show it"
	case ReasonPIDExited:
		return "PID " + strconv.Itoa(r.PID) + " exited while the probe ran"
	case ReasonDetailFolded:
		return strconv.Itoa(r.Folded) + " more " + r.Detail + " folded"
	case ReasonListedPIDGone:
		return "PID " + strconv.Itoa(r.PID) + " is listed by nvidia-smi but no longer exists"
	case ReasonHoldsDevice:
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
	CodeMemoryImbalance: {"SGLang TP check:", "vLLM check"},
}

// KeyLines are the evidence lines of f that carry its verdict in numbers, in evidence order.
func KeyLines(f Finding) []string {
	var out []string
	for _, e := range f.Evidence {
		if IsKeyLine(f.Code, e) {
			out = append(out, e)
		}
	}
	return out
}

// IsKeyLine reports whether e is a key line of a finding of code.
func IsKeyLine(code, e string) bool {
	for _, p := range keyLinePrefixes[code] {
		if strings.HasPrefix(e, p) {
			return true
		}
	}
	return false
}

// ExplainedBy points from a memory-imbalance finding to the findings that explain it, in a few
// words: "caused by PID 20629 (see leftover-process)"; "" for other findings and when none does.
func ExplainedBy(f Finding, all []Finding) string {
	im := f.Imbalance
	if im == nil {
		return ""
	}
	var parts []string
	if len(im.Leftover) > 0 && hasCode(all, CodeLeftoverProcess) {
		parts = append(parts, "caused by "+fmtPIDs(im.Leftover)+" (see "+CodeLeftoverProcess+")")
	}
	if im.unlisted() > 0 && hasCode(all, CodeGhostMemory) {
		parts = append(parts, "caused by memory no listed process holds (see "+CodeGhostMemory+")")
	}
	return strings.Join(parts, "; ")
}

// hasCode reports whether a finding of code is among fs.
func hasCode(fs []Finding, code string) bool {
	return slices.ContainsFunc(fs, func(f Finding) bool { return f.Code == code })
}

// ActionLead says what an item of "what to do" does, before what it frees: "Stop PID 20629
// (sglang.launch_server, root)", "Stop vllm.service (vllm serve, alice)". who describes the
// one process it ends, when it ends one the report knows (its program, its user), whatever
// ends it; codes are the findings an item of a finding's Fix lines without typed actions
// (kind "") is for.
func ActionLead(kind ActionKind, target string, who []string, codes []string) string {
	t := target
	switch kind {
	case ActionKill, ActionStopUnit, ActionStopContainer, ActionDeletePod, ActionCancelJob, ActionReapZombie:
		if len(who) > 0 {
			t += " (" + strings.Join(who, ", ") + ")"
		}
	}
	switch kind {
	case ActionKill:
		return "Stop PID " + t
	case ActionStopUnit:
		return "Stop " + t
	case ActionStopContainer:
		return "Stop container " + t
	case ActionDeletePod:
		return "Delete pod " + t
	case ActionCancelJob:
		return "Cancel Slurm job " + t
	case ActionReapZombie:
		return "Reap zombie PID " + t
	case ActionRemoveFiles:
		return "Remove " + t
	case ActionInspect:
		if t == "" {
			return "Look closer"
		}
		return "Inspect " + t
	case ActionNarrowLaunch:
		return "Launch only on the GPUs with room: " + t
	case ActionResizeShm:
		return "Enlarge " + t
	case ActionDriver:
		if t == "" {
			return "Repair the driver"
		}
		return "Repair " + t
	case "":
		return "For " + strings.Join(codes, ", ")
	}
	return string(kind) + " " + t
}

// ImpactWords is what an action gives back: "frees 55,286 MiB on GPU 0 and 48 MiB of
// /dev/shm"; "" when nothing is known.
func ImpactWords(im Impact) string {
	var parts []string
	if g := gpuImpact(im.GPUMiB); g != "" {
		parts = append(parts, g)
	}
	if im.ShmBytes > 0 {
		parts = append(parts, FormatSize(im.ShmBytes)+" of /dev/shm")
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
		return thousands(total) + " MiB on " + FormatGPUs(gpus)
	case same:
		return thousands(m[gpus[0]]) + " MiB on each of " + FormatGPUs(gpus)
	}
	return thousands(total) + " MiB on " + FormatGPUs(gpus)
}

// ShmState is how a /dev/shm file is kept: "deleted, mapped and open".
func ShmState(f ShmFile) string {
	how := ShmHow(f.Deleted, f.Mapped, f.Open)
	switch len(how) {
	case 0:
		return ""
	case 1:
		return how[0]
	}
	return strings.Join(how[:len(how)-1], ", ") + " and " + how[len(how)-1]
}

// ResolvesWords lists the codes an item resolves, then those it only helps with: "resolves
// leftover-process, shm-deleted-mapped; helps with memory-imbalance".
func ResolvesWords(codes, partly []string) string {
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

// ShmHow lists how a /dev/shm file is kept, in the order people read it.
func ShmHow(deleted, mapped, open bool) []string {
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
