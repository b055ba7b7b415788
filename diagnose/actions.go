package diagnose

import (
	"maps"
	"slices"
	"strconv"

	"github.com/gputriage/gputriage/parse"
)

// Actions: what would make a process exit, as structured commands with what each gives back.
// Each acts only on what the evidence names: the container or pod the cgroup names, the job
// the cgroup or, without a Slurm cgroup, the nearest root-owned slurmstepd ancestor names, a
// unit its own manager ties to the process (see stoppableUnit), or else the PID itself. Every
// name from the host is quoted by shellArg and placed after "--". The same action built for
// the same process by several findings is equal, Frees included, so a report can merge it.

// verifyGPU is the command that shows whether a fix gave GPU memory back.
var verifyGPU = Command{Line: "nvidia-smi --query-compute-apps=pid,used_memory --format=csv"}

// verifyShm shows whether a fix gave /dev/shm back.
var verifyShm = Command{Line: "df -h /dev/shm"}

// sudo is the prefix a command needs when the probe's user was not root and the target is
// not its own.
func (h *host) sudo(owner *int) string {
	uid := h.s.Host.UID
	if uid == nil || *uid == 0 {
		return ""
	}
	if owner != nil && *owner == *uid {
		return ""
	}
	return "sudo "
}

// stopAction is what would make gp exit, through whatever owns it.
func (h *host) stopAction(gp *GPUProcess) Action {
	var c parse.Cgroup
	if p := h.procByPID[gp.PID]; p != nil {
		c = p.Cgroup
	}
	var a Action
	switch {
	case h.healthyBeside(gp):
		// Stopping its container, pod or job would end healthy GPU work too: the process alone.
		if gp.State == "Z" {
			return h.zombieAction(gp)
		}
		return h.killAction(gp)
	case gp.Pod != nil && !gp.Pod.live():
		return h.killAction(gp) // no live pod to delete (gone, ended, being deleted): its process, by PID
	case gp.Pod != nil:
		a = namedPodAction(gp.Pod)
	case c.PodUID != "":
		a = podAction(c.PodUID)
	case c.ContainerID != "" && (c.Runtime == "docker" || c.Runtime == "podman"):
		a = Action{Kind: ActionStopContainer, Target: containerName(c),
			Steps: []Command{{Line: c.Runtime + " stop -- " + shellArg(short(c.ContainerID))}}}
	case c.ContainerID != "" && (c.Runtime == "containerd" || c.Runtime == "cri-o" || c.Runtime == "crio"):
		a = Action{Kind: ActionStopContainer, Target: containerName(c),
			Steps: []Command{{Line: h.sudo(nil) + "crictl stop -- " + shellArg(c.ContainerID)}}}
	case gp.SlurmJob != "": // its cgroup's job, or its slurmstepd ancestor's (proctrack/linuxproc)
		if ka, ok := h.slurmAction(gp); ok {
			return ka // a stray of a job Slurm no longer runs here: its PID
		}
		a = Action{Kind: ActionCancelJob, Target: gp.SlurmJob, Steps: []Command{{Line: "scancel -- " + shellArg(gp.SlurmJob)}}}
	case gp.State == "Z":
		return h.zombieAction(gp)
	default:
		if u, ok := h.stoppableUnit(gp); ok {
			a = Action{Kind: ActionStopUnit, Target: h.unitLabel(u), Steps: []Command{h.unitStopCommand(u)}}
		} else {
			return h.killAction(gp)
		}
	}
	a.PIDs, a.Frees = h.groupFrees(a.Kind, a.Target)
	return a
}

// namedPodAction deletes the pod the API named, for the operator to run: fix never does.
func namedPodAction(p *PodFacts) Action {
	return Action{Kind: ActionDeletePod, Target: p.UID, Steps: []Command{
		{Line: "kubectl delete pod -n " + shellArg(p.Namespace) + " -- " + shellArg(p.Name), Note: "pod UID " + p.UID + ": check it is still that pod (kubectl get pod -o jsonpath='{.metadata.uid}')"},
	}}
}

func podAction(uid string) Action {
	return Action{Kind: ActionDeletePod, Target: uid, Steps: []Command{
		{Line: "kubectl get pods -A -o custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,UID:.metadata.uid | grep -F -- " + shellArg(uid)},
		{Line: "kubectl delete pod -n NAMESPACE -- NAME", Note: "NAMESPACE and NAME from the line above"},
	}}
}

// killAction stops one unmanaged process: SIGTERM, and SIGKILL if it is still there 30 s
// later.
func (h *host) killAction(gp *GPUProcess) Action {
	pid := strconv.Itoa(gp.PID)
	sudo := h.sudo(gp.UID)
	first := sudo + "kill " + pid
	if gp.State == "T" || gp.State == "t" {
		// A stopped process only acts on SIGTERM once continued.
		first += "; " + sudo + "kill -CONT " + pid
	}
	return Action{Kind: ActionKill, Target: pid, PIDs: []int{gp.PID}, Frees: h.frees([]int{gp.PID}),
		Steps: []Command{{Line: first}, {Line: "sleep 30; kill -0 " + pid + " 2>/dev/null && " + sudo + "kill -9 " + pid}}}
}

// zombieAction: a zombie leader whose other threads run on is a running process, and SIGKILL
// ends it. A true zombie cannot be killed, only reaped by its parent: killing the parent hands
// it to init, which reaps it, and that is suggested only when the parent is the same user's
// ordinary process (zombieParent), never PID 1, a container's init, a unit's main process or
// another user's process. A zombie that still holds GPU memory has threads stuck in the
// driver; those show as D in ps.
func (h *host) zombieAction(gp *GPUProcess) Action {
	pid := strconv.Itoa(gp.PID)
	if zombieLeader(h.procByPID[gp.PID]) {
		return Action{Kind: ActionKill, Target: pid, PIDs: []int{gp.PID}, Frees: h.frees([]int{gp.PID}),
			Steps: []Command{{Line: h.sudo(gp.UID) + "kill -9 " + pid, Note: "its main thread has exited: only SIGKILL reaches the threads that run on"}}}
	}
	a := Action{Kind: ActionReapZombie, Target: pid, PIDs: []int{gp.PID}}
	var r Reason
	if h.zombieParent(gp, &r); r.Detail == "" {
		a.PIDs = append(a.PIDs, r.Parent)
		a.Steps = append(a.Steps, Command{Line: h.sudo(gp.UID) + "kill " + strconv.Itoa(r.Parent), Note: "the parent, which should have reaped " + pid})
	}
	slices.Sort(a.PIDs)
	a.Frees = h.frees(a.PIDs)
	a.Steps = append(a.Steps,
		Command{Line: "ps -L -o pid,lwp,stat,wchan:32,cmd -p " + pid, Note: "threads in state D are stuck in the driver"},
		Command{Line: h.sudo(nil) + "dmesg -T | grep -iE 'NVRM|Xid'"})
	return a
}

// unitStopCommand stops u through its own manager: the system's, or as root the user's
// (systemctl --user --machine=USER@).
func (h *host) unitStopCommand(u unitRef) Command {
	if u.UserUID == nil {
		return Command{Line: h.sudo(nil) + "systemctl stop -- " + shellArg(u.Name)}
	}
	who := h.uidNames[*u.UserUID]
	if who == "" {
		who = strconv.Itoa(*u.UserUID)
	}
	return Command{Line: h.sudo(nil) + "systemctl --user --machine=" + shellWord(who+"@") + " stop -- " + shellArg(u.Name)}
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// groupFrees are the processes an action on a unit, container, pod or job ends (every live
// process the probe saw in it), and what that gives back. Computed once per action.
func (h *host) groupFrees(kind ActionKind, target string) ([]int, Impact) {
	key := string(kind) + "\x00" + target
	g, ok := h.groups[key]
	if !ok {
		for i := range h.s.Processes {
			if p := &h.s.Processes[i]; !p.Gone && h.inGroup(p, kind, target) {
				g.pids = append(g.pids, p.PID)
			}
		}
		slices.Sort(g.pids)
		g.frees = h.frees(g.pids)
		if h.groups == nil {
			h.groups = map[string]group{}
		}
		h.groups[key] = g
	}
	return slices.Clone(g.pids), cloneImpact(g.frees)
}

// group is what an action on a unit, container, pod or job ends.
type group struct {
	pids  []int
	frees Impact
}

func (h *host) inGroup(p *parse.Process, kind ActionKind, target string) bool {
	switch kind {
	case ActionStopUnit:
		u, ok := unitOf(p.Cgroup)
		return ok && h.unitLabel(u) == target
	case ActionStopContainer:
		return p.Cgroup.PodUID == "" && containerName(p.Cgroup) == target
	case ActionDeletePod:
		return p.Cgroup.PodUID == target
	case ActionCancelJob:
		return h.jobOf(p) == target
	}
	return false
}

// frees is what ending pids gives back: their GPU memory, and the deleted /dev/shm files
// that only they keep (a file another process still keeps stays in RAM).
func (h *host) frees(pids []int) Impact {
	var im Impact
	ended := setOf(pids)
	counted := map[string]bool{}
	keepers := h.deletedShmKeepers()
	for _, pid := range pids {
		if gp := h.gpByPID[pid]; gp != nil {
			for g, m := range gp.GPUMemoryMiB {
				if m > 0 {
					if im.GPUMiB == nil {
						im.GPUMiB = map[int]int64{}
					}
					im.GPUMiB[g] += m
				}
			}
		}
		p := h.procByPID[pid]
		if p == nil {
			continue
		}
		for _, u := range deletedShm(p) {
			k := shmFileKey(u)
			if counted[k] || u.Bytes == nil || !allIn(keepers[k], ended) {
				continue
			}
			counted[k] = true
			im.ShmBytes += *u.Bytes
		}
	}
	return im
}

func allIn(xs []int, set map[int]bool) bool {
	if len(xs) > len(set) {
		return false
	}
	for _, x := range xs {
		if !set[x] {
			return false
		}
	}
	return true
}

// deletedShmKeepers maps each deleted, non-transient /dev/shm file (shmFileKey) to every live
// process that keeps it, by PID; built once.
func (h *host) deletedShmKeepers() map[string][]int {
	if h.shmKeepers != nil {
		return h.shmKeepers
	}
	h.shmKeepers = map[string][]int{}
	for i := range h.s.Processes {
		p := &h.s.Processes[i]
		if p.Gone {
			continue
		}
		for _, u := range deletedShm(p) {
			k := shmFileKey(u)
			h.shmKeepers[k] = append(h.shmKeepers[k], p.PID)
		}
	}
	return h.shmKeepers
}

// addAction appends a to actions unless an action of the same Kind and Target is there.
func addAction(actions []Action, a Action) []Action {
	if slices.ContainsFunc(actions, func(b Action) bool { return b.Kind == a.Kind && b.Target == a.Target }) {
		return actions
	}
	return append(actions, a)
}

// actionKey is what makes two actions the same for addAction.
type actionKey struct {
	kind   ActionKind
	target string
}

// actionAdder appends actions, each Kind and Target once, in time linear in their number
// (addAction, called in a loop over a host's processes, would be quadratic).
type actionAdder struct {
	seen map[actionKey]bool
}

// add appends a to actions unless an action of the same Kind and Target was added or is there.
func (ad *actionAdder) add(actions []Action, a Action) []Action {
	if ad.seen == nil {
		ad.seen = map[actionKey]bool{}
		for _, b := range actions {
			ad.seen[actionKey{b.Kind, b.Target}] = true
		}
	}
	k := actionKey{a.Kind, a.Target}
	if ad.seen[k] {
		return actions
	}
	ad.seen[k] = true
	return append(actions, a)
}

// cloneImpact copies an impact, so that findings sharing an action do not share its map.
func cloneImpact(i Impact) Impact {
	return Impact{GPUMiB: maps.Clone(i.GPUMiB), ShmBytes: i.ShmBytes}
}
