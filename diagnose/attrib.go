package diagnose

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gputriage/gputriage/parse"
)

// Attribution: which systemd unit a process belongs to, whose manager runs that unit, and
// whether the evidence ties the unit to the process firmly enough to stop the unit for it.
// The rule behind every command this package writes: a command acts only on what the evidence
// names. A unit is stopped only when its own manager's state shows it running with a main
// process that is the holder or the holder's ancestor; everything else gets the PID.

// maxAncestry bounds every walk up a process's parents, so that a hostile capture with a
// parent chain as long as its process list costs linear time, not quadratic.
const maxAncestry = 64

// unitRef is a systemd unit as a process's cgroup names it, with the manager that runs it.
type unitRef struct {
	Name string
	// UserUID is nil for a unit of the system manager, and the uid of the user whose
	// systemd --user manager (user@UID.service) runs the unit.
	UserUID *int
}

func (u unitRef) key() string {
	if u.UserUID == nil {
		return "system\x00" + u.Name
	}
	return "user\x00" + strconv.Itoa(*u.UserUID) + "\x00" + u.Name
}

func unitKey(name string, userUID *int) string { return unitRef{name, userUID}.key() }

// unitOf is the unit c names, with the manager that runs it, as parse read them from the
// cgroup path (parse.CgroupUnit's rule, systemd's own).
func unitOf(c parse.Cgroup) (unitRef, bool) {
	if c.Unit == "" {
		return unitRef{}, false
	}
	return unitRef{Name: c.Unit, UserUID: c.UserManagerUID}, true
}

// isLoginUnit reports whether a unit holds what people start by hand rather than a service:
// a login session, sshd (without pam_systemd, sessions stay in sshd's cgroup), a user's
// manager itself, a getty. A process there is "started by hand": stopping the unit would end
// other people's sessions, never only this process.
func isLoginUnit(u unitRef) bool {
	n := u.Name
	if u.UserUID != nil {
		return n == "init.scope"
	}
	switch {
	case isSessionScope(n), n == "ssh.service", n == "sshd.service", n == "init.scope",
		strings.HasPrefix(n, "sshd@"), strings.HasPrefix(n, "ssh@"),
		strings.HasPrefix(n, "user@"), strings.HasPrefix(n, "user-runtime-dir@"),
		strings.HasPrefix(n, "getty@"), strings.HasPrefix(n, "serial-getty@"),
		strings.HasPrefix(n, "console-getty"), strings.HasPrefix(n, "container-getty@"):
		return true
	}
	return false
}

// neverStop lists system units that are never sensible to stop for one process: they carry
// logins, the host's management, container runtimes or schedulers whose other work would die
// with them.
func neverStop(u unitRef) bool {
	if isLoginUnit(u) {
		return true
	}
	if u.UserUID != nil {
		return strings.HasPrefix(u.Name, "dbus")
	}
	n := u.Name
	if strings.HasPrefix(n, "systemd-") || strings.HasPrefix(n, "dbus") {
		return true
	}
	switch strings.TrimSuffix(strings.TrimSuffix(n, ".service"), ".scope") {
	case "slurmstepd", "slurmd", "slurmctld", "cron", "crond", "atd", "anacron", "containerd",
		"docker", "podman", "crio", "cri-o", "kubelet", "polkit", "polkitd", "NetworkManager",
		"networkd-dispatcher", "rsyslog", "snapd", "tmux", "screen":
		return true
	}
	return false
}

// unitLabel names a unit for people: "vllm.service", or for a user's unit
// "user unit sshd.service of alice (uid 1000)", so it can never be read as the system's.
func (h *host) unitLabel(u unitRef) string {
	if u.UserUID == nil {
		return u.Name
	}
	return "user unit " + u.Name + " of " + h.userName(u.UserUID, "")
}

// unitState is the unit's state as its own manager reported it, or nil when unknown: not
// queried, queried from another manager, or not known to its manager (LoadState not-found,
// where systemctl's "inactive" means only that it has never heard of the unit).
func (h *host) unitState(u unitRef) *parse.Unit {
	s := h.units[u.key()]
	if s == nil || s.ActiveState == "" {
		return nil
	}
	switch s.LoadState {
	case "not-found", "error", "bad-setting":
		return nil
	}
	return s
}

// procUnit is the unit gp runs in, from its cgroup.
func (h *host) procUnit(gp *GPUProcess) (unitRef, bool) {
	if gp.Unit == "" {
		return unitRef{}, false
	}
	return unitRef{Name: gp.Unit, UserUID: gp.UnitUserUID}, true
}

// descendsFrom reports whether pid is anc or runs below it, walking parents the probe
// described (at most maxAncestry steps). False when the chain breaks: not known to descend.
func (h *host) descendsFrom(pid, anc int) bool {
	cur := pid
	for range maxAncestry {
		if cur == anc {
			return true
		}
		p := h.procByPID[cur]
		if p == nil || p.PPID == nil || *p.PPID <= 0 || *p.PPID == cur {
			return false
		}
		cur = *p.PPID
	}
	return false
}

// running reports whether the unit's manager says it is running.
func running(s *parse.Unit) bool {
	switch s.ActiveState {
	case "active", "reloading", "activating":
		return true
	}
	return false
}

// servedUnit is the unit gp is the live service of: a unit that is not a login or
// infrastructure unit, whose own manager reports it running with a main process that is gp or
// one of gp's ancestors. That manager vouches for gp.
func (h *host) servedUnit(gp *GPUProcess) (unitRef, bool) {
	u, ok := h.procUnit(gp)
	if !ok || neverStop(u) {
		return unitRef{}, false
	}
	s := h.unitState(u)
	if s == nil || !running(s) || s.MainPID == nil || *s.MainPID <= 1 || !h.descendsFrom(gp.PID, *s.MainPID) {
		return unitRef{}, false
	}
	return u, true
}

// stoppableUnit is the unit whose stop would end gp, when the evidence ties them: the unit gp
// serves (servedUnit), whose main process runs as gp's own user, when no other GPU work in it
// looks healthy. A service that starts its users' work as those users (a notebook hub, a batch
// system's starter) is vouched for by its manager, not what a user runs below it, and that
// user can make their own process look left over (SIGSTOP): stopping the service for it would
// end everyone's work there, so such a process gets its PID.
func (h *host) stoppableUnit(gp *GPUProcess) (unitRef, bool) {
	u, ok := h.servedUnit(gp)
	if !ok || h.healthyInUnit(u, gp.PID) {
		return unitRef{}, false
	}
	main := h.uidOf(*h.unitState(u).MainPID)
	if gp.UID == nil || main == nil || *gp.UID != *main {
		return unitRef{}, false
	}
	return u, true
}

// uidOf is pid's real uid as the probe read it (its own record, or the ancestors it walked);
// nil when unknown.
func (h *host) uidOf(pid int) *int {
	if p := h.procByPID[pid]; p != nil && p.UID != nil {
		return p.UID
	}
	anc := h.s.Ancestors
	if i, ok := slices.BinarySearchFunc(anc, pid, func(a parse.Ancestor, pid int) int { return a.PID - pid }); ok {
		return &anc[i].UID
	}
	return nil
}

// healthyInUnit reports whether GPU work other than pid that is not judged left over runs in
// u, or may (undescribedBeside): stopping u would stop it too, so the PID is the handle then.
// The index is built once, after the leftovers are judged.
func (h *host) healthyInUnit(u unitRef, pid int) bool {
	if h.healthyUnits == nil {
		h.healthyUnits = map[string][]int{}
		for i := range h.procs {
			gp := &h.procs[i]
			ref, ok := h.procUnit(gp)
			if _, bad := h.leftovers[gp.PID]; !ok || bad || gp.memMiB() <= 0 {
				continue
			}
			if k := ref.key(); len(h.healthyUnits[k]) < 2 {
				h.healthyUnits[k] = append(h.healthyUnits[k], gp.PID)
			}
		}
	}
	for _, other := range h.healthyUnits[u.key()] {
		if other != pid {
			return true
		}
	}
	return h.undescribedBeside(pid)
}

// groupKeys name the groups of gp that one command stops whole: its container, its pod, its
// Slurm job.
func (h *host) groupKeys(gp *GPUProcess) []string {
	var ks []string
	if gp.Container != "" {
		ks = append(ks, "container\x00"+gp.Container)
	}
	if p := h.procByPID[gp.PID]; p != nil && p.Cgroup.PodUID != "" {
		ks = append(ks, "pod\x00"+p.Cgroup.PodUID)
	}
	if gp.SlurmJob != "" {
		ks = append(ks, "job\x00"+gp.SlurmJob)
	}
	return ks
}

// healthyBeside reports whether GPU work other than gp that is not judged left over runs in
// one of gp's groups (groupKeys): stopping the group would stop it too (a dev container
// running several servers, one started with docker exec; a job whose earlier step left a
// server behind beside its running one), so the PID is the handle then. The index is built
// once, after the leftovers are judged.
func (h *host) healthyBeside(gp *GPUProcess) bool {
	if h.healthyGroups == nil {
		h.healthyGroups = map[string][]int{}
		for i := range h.procs {
			o := &h.procs[i]
			if _, bad := h.leftovers[o.PID]; bad || o.memMiB() <= 0 {
				continue
			}
			for _, k := range h.groupKeys(o) {
				if len(h.healthyGroups[k]) < 2 {
					h.healthyGroups[k] = append(h.healthyGroups[k], o.PID)
				}
			}
		}
	}
	keys := h.groupKeys(gp)
	for _, k := range keys {
		for _, other := range h.healthyGroups[k] {
			if other != gp.PID {
				return true
			}
		}
	}
	return len(keys) > 0 && h.undescribedBeside(gp.PID)
}

// undescribedBeside reports whether GPU work other than pid that is not judged left over is
// not described by the capture (its procs section cut, its /proc unreadable): it may run in
// any unit, container, pod or job, so none that holds pid is known to hold nothing else, and
// the PID is the handle. A user's flood of described processes must not turn a leftover's
// handle into the group of a healthy server the cut left out.
func (h *host) undescribedBeside(pid int) bool {
	if h.undescribed == nil {
		var u []int
		for i := range h.procs {
			o := &h.procs[i]
			if _, bad := h.leftovers[o.PID]; !bad && o.memMiB() > 0 && h.procByPID[o.PID] == nil && len(u) < 2 {
				u = append(u, o.PID)
			}
		}
		h.undescribed = &u
	}
	for _, other := range *h.undescribed {
		if other != pid {
			return true
		}
	}
	return false
}

// strayInUnit reports a process that runs in a running unit's cgroup but outside its main
// process's tree: left behind by an earlier stop or restart of the unit (KillMode=process or
// mixed leaves children running). It is a strong sign when the process started before the
// unit's current main process did. The main process itself is healthy and is not named.
func (h *host) strayInUnit(gp *GPUProcess) (u unitRef, older, ok bool) {
	u, ok = h.procUnit(gp)
	if !ok || isLoginUnit(u) {
		return unitRef{}, false, false
	}
	s := h.unitState(u)
	if s == nil || !running(s) || s.MainPID == nil || *s.MainPID <= 1 || h.descendsFrom(gp.PID, *s.MainPID) {
		return unitRef{}, false, false
	}
	// Only an orphan is known to be outside the tree: a chain that merely breaks proves nothing.
	if gp.PPID == nil || *gp.PPID != 1 {
		return unitRef{}, false, false
	}
	self, main := h.procByPID[gp.PID], h.procByPID[*s.MainPID]
	if self != nil && main != nil && self.StartTime != nil && main.StartTime != nil && self.StartTime.Before(*main.StartTime) {
		older = true
	}
	return u, older, true
}

// shellArg quotes a name for a command line: single-quoted when it starts with "-" or holds
// anything a shell would interpret, as is otherwise. Callers still place it after "--", so
// that no name can be read as an option. It is the one helper every command uses for a name
// that came from the host.
func shellArg(s string) string {
	if strings.HasPrefix(s, "-") {
		return shellQuote(s)
	}
	return shellWord(s)
}
