package diagnose

import (
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/gputriage/gputriage/parse"
)

// The process tree: what a GPU holder's ancestors (the probe describes them up to PID 1) say
// of it. A launcher's child by its nature (a multiprocessing spawn worker, a Ray worker, a
// vLLM or SGLang worker process) whose parent is not a launcher but a process that adopts
// orphans was left behind when its launcher died: the kernel re-parented it. That is strong
// evidence only the kernel gives, and only about the process's own tree: a parent counts only
// when it started before the child (not a PID reused since) and is root's or the child's own
// user's, so no user can make another user's process look orphaned.

// childKind is what a process is when by its nature it is a launcher's child ("vLLM worker",
// "Ray worker", "multiprocessing worker"), or "".
func childKind(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	// A process title ("ray::IDLE", "VLLM::Worker_TP0", "sglang::scheduler_TP0") replaces
	// the whole command line.
	if before, _, ok := strings.Cut(argv[0], "::"); ok && !strings.Contains(before, "/") {
		switch strings.ToLower(before) {
		case "ray":
			return "Ray worker"
		case "vllm":
			return "vLLM worker"
		case "sglang", "sgl_diffusion":
			return "SGLang worker"
		}
		return ""
	}
	if prog, _ := programOf(argv, ""); prog == workerProgram {
		return workerProgram
	}
	return ""
}

// torchrunRank is the kind of a process the torchrun elastic agent started: its environment
// carries the TORCHELASTIC_RUN_ID the agent gives each rank (parse.LaunchEnv). LOCAL_RANK
// alone is not enough: users set it by hand to run one rank's script, and launchers that
// do not supervise their ranks (mpirun, deepspeed's ssh runner) set it too.
const torchrunRank = "torchrun rank"

// kindOf is what p is when by its nature it is a launcher's child: childKind of its command
// line, or torchrunRank by its environment (a rank's argv is the user's script: python -u
// train.py). Anyone may set the variable in their own process, which only makes their own
// process read as a launcher's child: adoptedBy judges the parent by its owner.
func kindOf(p *parse.Process) string {
	if k := childKind(p.Argv); k != "" {
		return k
	}
	if p.Launch != nil && p.Launch.RunID != "" {
		return torchrunRank
	}
	return ""
}

// adopters are the names (comm) of the inits and subreapers that take in orphans and never
// launch a worker themselves: a container's init, systemd (the user's manager too). A shell,
// sshd, sudo or tmux adopts nothing (none sets PR_SET_CHILD_SUBREAPER): a process whose
// parent is one was started by it, as everything started by hand is, unless that shell is
// the init of a PID namespace of its own (a container run with bash as its command), which
// adopts every orphan there whatever its name.
var adopters = []string{
	"systemd", "init", "tini", "dumb-init", "docker-init", "catatonit", "s6-svscan", "runsvdir",
	"containerd-shim", "conmon",
}

// namespaceInit reports whether p is PID 1 of a PID namespace below the host's.
func namespaceInit(p *parse.Process) bool {
	return len(p.NSPIDs) > 1 && p.NSPIDs[len(p.NSPIDs)-1] == 1
}

// mayLaunchWorkers reports whether p could itself have started child: for a worker of a
// known engine (a vLLM, SGLang or Ray worker), a process of that engine (vllm/vllm-openai's
// entrypoint run without --init is its container's PID 1, and launched its engine core);
// for any other, a Python interpreter (a console script runs as python3 SCRIPT), a process
// titled as a worker, or an engine's program. Such a process as PID 1 is the child's own
// launcher as likely as an init that took it in, so its children prove no death; a
// supervisord or a shell as PID 1 launches no vLLM engine core.
func mayLaunchWorkers(p, child *parse.Process) bool {
	_, engine := programOf(p.Argv, p.Comm)
	if _, childEngine := programOf(child.Argv, child.Comm); childKind(child.Argv) != "" && childEngine != "" {
		return engine == childEngine
	}
	if len(p.Argv) == 0 {
		return isPython(p.Comm) || engine != ""
	}
	return isPython(path.Base(p.Argv[0])) || childKind(p.Argv) != "" || engine != ""
}

// adoptedBy is the process p was re-parented to, when its parent is not a launcher but one
// that adopts orphans (adopters, PID 1, or the init of a PID namespace that could not have
// launched p itself: mayLaunchWorkers), and that parent's name ("" for an undescribed PID 1).
func (h *host) adoptedBy(p *parse.Process) (pid int, name string, ok bool) {
	if p == nil || p.PPID == nil {
		return 0, "", false
	}
	pp := *p.PPID
	parent := h.procByPID[pp]
	if pp == 1 {
		if parent == nil {
			return 1, "", true
		}
		if mayLaunchWorkers(parent, p) {
			return 0, "", false // the probe's own namespace's PID 1 is a launcher (it ran in its container)
		}
		return 1, parent.Comm, true
	}
	if parent == nil || parent.Gone || !(slices.Contains(adopters, parent.Comm) || namespaceInit(parent) && !mayLaunchWorkers(parent, p)) {
		return 0, "", false
	}
	if parent.StartTime == nil || p.StartTime == nil || parent.StartTime.After(*p.StartTime) {
		return 0, "", false // a PID reused since, or not known not to be
	}
	if parent.UID == nil || p.UID == nil || (*parent.UID != 0 && *parent.UID != *p.UID) {
		return 0, "", false
	}
	return pp, parent.Comm, true
}

// orphanedWorker is the orphaned-worker reason for gp, when gp is a launcher's child by its
// nature and it, or the nearest ancestor of its kind it runs under (a vLLM engine core
// whose API server died), was re-parented to an adopter.
func (h *host) orphanedWorker(gp *GPUProcess) (Reason, bool) {
	p := h.procByPID[gp.PID]
	kind := ""
	if p != nil {
		kind = kindOf(p)
	}
	if kind == "" {
		return Reason{}, false
	}
	cur := p
	for range maxAncestry {
		if pid, name, ok := h.adoptedBy(cur); ok {
			r := Reason{Code: ReasonOrphanedWorker, Strong: true, PID: gp.PID, Detail: kind, Parent: pid, ParentName: name}
			if cur.PID != gp.PID {
				r.Other = cur.PID
			}
			return r, true
		}
		parent := h.parentOf(cur)
		if parent == nil || kindOf(parent) == "" || !sameOwner(parent, cur) {
			return Reason{}, false
		}
		cur = parent
	}
	return Reason{}, false
}

func sameOwner(a, b *parse.Process) bool {
	return a.UID != nil && b.UID != nil && *a.UID == *b.UID
}

// olderGeneration is the older-generation reason for gp: another GPU process of the same
// user runs exactly gp's command line on a GPU gp holds too, started later, under a launcher
// that lives, while gp's launcher died (gp was re-parented to an adopter). A torchrun
// restart or a redeployment left gp behind; the newer one is the live generation.
func (h *host) olderGeneration(gp *GPUProcess) (Reason, bool) {
	p := h.procByPID[gp.PID]
	key, ok := generationKey(p)
	if !ok {
		return Reason{}, false
	}
	adopter, name, orphan := h.adoptedBy(p)
	if !orphan {
		return Reason{}, false
	}
	for _, g := range gp.GPUs {
		o := h.newestLiveGeneration()[key][g]
		// A process's own forked children (DataLoader workers) share its command line: they
		// are its work, never its next generation.
		if o == nil || o.PID == gp.PID || gp.GPUMemoryMiB[g] <= 0 || h.descendsFrom(o.PID, gp.PID) {
			continue
		}
		q := h.procByPID[o.PID]
		if q.StartTime.After(*p.StartTime) {
			return Reason{Code: ReasonOlderGeneration, Strong: true, PID: gp.PID, Other: o.PID, Parent: adopter, ParentName: name,
				Age: q.StartTime.Sub(*p.StartTime)}, true
		}
	}
	return Reason{}, false
}

// olderAttempt is the older-generation reason for gp when its environment says it is a rank
// of an earlier attempt of its torchrun run: another GPU process of the same user under the
// same live agent, of the same run id, has a higher TORCHELASTIC_RESTART_COUNT. An agent runs
// one attempt of its workers at a time, and stops the old ones before it starts the next: a
// rank that outlived that (stuck in the driver) is left from an earlier attempt. Detail is
// restartAttempt; Parent stays 0: gp was not re-parented.
func (h *host) olderAttempt(gp *GPUProcess) (Reason, bool) {
	p := h.procByPID[gp.PID]
	key, ok := h.attemptKeyOf(p)
	if !ok {
		return Reason{}, false
	}
	if q := h.latestAttempts()[key]; q != nil && *q.Launch.RestartCount > *p.Launch.RestartCount {
		return Reason{Code: ReasonOlderGeneration, Strong: true, PID: gp.PID, Other: q.PID, Detail: restartAttempt}, true
	}
	return Reason{}, false
}

// restartAttempt is the Detail of an older-generation reason found by restart counts.
const restartAttempt = "torchrun-restart"

// attemptKey names the ranks one torchrun agent runs for one user and run id.
type attemptKey struct {
	uid, agent int
	runID      string
}

// attemptKeyOf is p's attemptKey; ok when p is a torchrun rank with its restart count, its
// user known and its agent described, alive and not an adopter (a rank re-parented to one is
// an orphaned-worker already).
func (h *host) attemptKeyOf(p *parse.Process) (attemptKey, bool) {
	if p == nil || p.Gone || p.UID == nil || kindOf(p) != torchrunRank || p.Launch.RestartCount == nil {
		return attemptKey{}, false
	}
	agent := h.parentOf(p)
	if agent == nil || agent.Gone || !sameOwner(agent, p) {
		return attemptKey{}, false
	}
	if _, _, adopted := h.adoptedBy(p); adopted {
		return attemptKey{}, false
	}
	return attemptKey{uid: *p.UID, agent: agent.PID, runID: p.Launch.RunID}, true
}

// latestAttempts indexes, by attemptKey, the GPU process of the highest restart count.
func (h *host) latestAttempts() map[attemptKey]*parse.Process {
	if h.latestAttempt != nil {
		return h.latestAttempt
	}
	h.latestAttempt = map[attemptKey]*parse.Process{}
	for i := range h.procs {
		q := h.procByPID[h.procs[i].PID]
		if key, ok := h.attemptKeyOf(q); ok {
			if cur := h.latestAttempt[key]; cur == nil || *q.Launch.RestartCount > *cur.Launch.RestartCount {
				h.latestAttempt[key] = q
			}
		}
	}
	return h.latestAttempt
}

// generationKey is what two generations of one program share: the user and the whole
// command line; ok is false when either is unknown, or the start time is.
func generationKey(p *parse.Process) (string, bool) {
	if p == nil || p.Gone || len(p.Argv) == 0 || p.ArgvTruncated || p.StartTime == nil || p.UID == nil {
		return "", false
	}
	return strconv.Itoa(*p.UID) + "\x00" + strings.Join(p.Argv, "\x00"), true
}

// newestLiveGeneration indexes, by generationKey and GPU, the newest GPU process whose
// launcher is described and lives (not re-parented to an adopter).
func (h *host) newestLiveGeneration() map[string]map[int]*GPUProcess {
	if h.newestLive != nil {
		return h.newestLive
	}
	h.newestLive = map[string]map[int]*GPUProcess{}
	for i := range h.procs {
		o := &h.procs[i]
		q := h.procByPID[o.PID]
		key, ok := generationKey(q)
		if !ok || h.parentOf(q) == nil {
			continue
		}
		if _, _, dead := h.adoptedBy(q); dead {
			continue
		}
		byGPU := h.newestLive[key]
		if byGPU == nil {
			byGPU = map[int]*GPUProcess{}
			h.newestLive[key] = byGPU
		}
		for _, g := range o.GPUs {
			if o.GPUMemoryMiB[g] <= 0 {
				continue // a generation is one that holds memory there, not one that opened the device
			}
			if cur := byGPU[g]; cur == nil || q.StartTime.After(*h.procByPID[cur.PID].StartTime) {
				byGPU[g] = o
			}
		}
	}
	return h.newestLive
}

// adopterWords names the process a worker was re-parented to: "PID 1 (systemd)", "bash (PID 812)".
func adopterWords(pid int, name string) string {
	switch {
	case name == "":
		return "PID " + strconv.Itoa(pid)
	case pid == 1:
		return "PID 1 (" + path.Base(name) + ")"
	}
	return name + " (PID " + strconv.Itoa(pid) + ")"
}

// Roles of a zombie's parent (Reason.Detail on zombie), which say whether ending the parent
// is a fix to suggest: only for the same user's ordinary process ("").
const (
	parentInit          = "init"           // PID 1: it reaps by itself; a zombie that stays has it stuck
	parentContainerInit = "container-init" // a PID namespace's init (Unit: its container, if known)
	parentUnitMain      = "unit-main"      // a running unit's main process (Unit: the unit)
	parentOtherUser     = "other-user"     // another user's process
	parentUnknown       = "unknown"        // not described: gone, or past the probe's bound
)

// zombieParent judges a true zombie's parent: the reason's Parent, ParentName, and Detail
// (its role) with Unit (the container or unit that would have to restart).
func (h *host) zombieParent(gp *GPUProcess, r *Reason) {
	if gp.PPID == nil {
		r.Detail = parentUnknown
		return
	}
	r.Parent = *gp.PPID
	parent := h.procByPID[r.Parent]
	if parent != nil {
		r.ParentName = parent.Comm
	}
	switch {
	case r.Parent <= 1:
		r.Detail = parentInit
	case parent == nil || parent.Gone:
		r.Detail = parentUnknown
	case namespaceInit(parent):
		r.Detail = parentContainerInit
		if parent.Cgroup.ContainerID != "" {
			r.Unit = containerName(parent.Cgroup)
		}
	case h.unitMainOf(parent.PID) != "":
		r.Detail, r.Unit = parentUnitMain, h.unitMainOf(parent.PID)
	case parent.UID == nil || gp.UID == nil || *parent.UID != *gp.UID:
		r.Detail = parentOtherUser
	}
}

// unitMainOf is the label of the running unit whose main process pid is, or "".
func (h *host) unitMainOf(pid int) string {
	for _, u := range h.s.Units {
		if u.MainPID != nil && *u.MainPID == pid && u.ActiveState == "active" {
			return h.unitLabel(unitRef{Name: u.Name, UserUID: u.UserManagerUID})
		}
	}
	return ""
}

// zombieLeader reports whether a process in state Z still runs: its main thread exited while
// others run on (Threads: above 1).
func zombieLeader(p *parse.Process) bool {
	return p != nil && p.State == "Z" && p.Threads != nil && *p.Threads > 1
}
