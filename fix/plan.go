// Package fix owns `gputriage fix`: the plan built from a host's findings (what to stop, and
// the exact identity each target was judged on), its versioned JSON form, the one fixed
// script that re-checks each identity on the host and signals it, the reading of that
// script's results, and the audit records of what was done. It is pure: no I/O beyond the
// readers and writers it is given, no clock (the caller passes times in). Carrying a plan out
// on hosts (sweep, confirmation, recheck, apply over SSH, the release watch) is fix/remote's.
//
// A plan is built from diagnose's typed facts only (Finding.Actions and Reasons of
// leftover-process findings), never from the words of a finding, and never names a process
// no finding names.
package fix

import (
	"path"
	"slices"
	"strings"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
)

// Version is the plan format's version; docs/fix.md documents it. A plan of another version
// is refused.
const Version = 1

// Plan is what fix would do, on one or more hosts.
type Plan struct {
	Version int `json:"version"`
	// ID names the plan in audit records and in the hosts' syslog lines: 16 hex digits.
	ID    string     `json:"id"`
	Hosts []HostPlan `json:"hosts"`
}

// HostPlan is the plan for one host.
type HostPlan struct {
	// Host is the host as the operator named it: what fix --apply connects to.
	Host string `json:"host"`
	// Hostname is what the host called itself when it was probed (display only).
	Hostname string `json:"hostname,omitempty"`
	// BootID is the host's boot id when it was probed (32 hex digits).
	BootID  string   `json:"boot_id"`
	Targets []Target `json:"targets"`
	// Judge are the targets whose evidence a user other than the process's owner and root
	// could have made (leftover-unconfirmed): never applied unless the operator names them
	// (Include), each with why in its Judge.
	Judge []Target `json:"judge,omitempty"`
	// Explained are the holders fix will not signal, each with what to do instead.
	Explained []Explained `json:"explained,omitempty"`
}

// Kind is what applying a target does once its identity is confirmed.
type Kind string

// Kinds of target.
const (
	KindKill          Kind = "kill"           // SIGTERM to the PID (SIGCONT too when it is stopped)
	KindStopUnit      Kind = "stop-unit"      // systemctl stop -- UNIT (a system unit)
	KindStopContainer Kind = "stop-container" // docker|podman|crictl stop -- ID
	KindCancelJob     Kind = "cancel-job"     // scancel -- JOB
)

// Target is one action and the process it was judged on.
type Target struct {
	Kind Kind `json:"kind"`
	// Name is the unit, the container id or the job id the action acts on; empty for kill.
	Name string `json:"name,omitempty"`
	// Runtime is the container runtime of stop-container: docker, podman or crictl.
	Runtime string `json:"runtime,omitempty"`
	// The identity: the PID, its start time in clock ticks since boot (field 22 of
	// /proc/PID/stat), its real uid, and the SHA-256 of its raw /proc/PID/cmdline.
	PID        int    `json:"pid"`
	StartTicks int64  `json:"start_ticks"`
	UID        int    `json:"uid"`
	ArgvSHA256 string `json:"argv_sha256"`
	// Stopped is set when the process was stopped (state T or t): SIGCONT follows SIGTERM.
	Stopped bool `json:"stopped,omitempty"`
	// PodUID is the Kubernetes pod its cgroup names (the audit log records it); "" outside
	// a pod. The pod itself is never acted on.
	PodUID string `json:"pod_uid,omitempty"`
	// For people: the program, its user, the finding's code and reasons, what it frees.
	Program  string        `json:"program"`
	User     string        `json:"user,omitempty"`
	Finding  string        `json:"finding"`
	Reasons  []string      `json:"reasons"`
	FreesMiB map[int]int64 `json:"frees_mib,omitempty"` // GPU index -> MiB
	// Judge says, on a target of leftover-unconfirmed, why it needs the operator's judgement:
	// how another user could have made its evidence. Include is set when the operator names it
	// (--include PID, or "include": true in a plan file's judge list): only then is it applied.
	Judge   string `json:"judge,omitempty"`
	Include bool   `json:"include,omitempty"`
}

// Explained is a holder a finding names that fix does not signal, and why.
type Explained struct {
	PID     int    `json:"pid"`
	Program string `json:"program,omitempty"`
	Why     string `json:"why"`
	// Instead is what a person can do; Steps are diagnose's commands for it.
	Instead string   `json:"instead"`
	Steps   []string `json:"steps,omitempty"`
}

// BuildHost is the plan for one diagnosed host, named host by the operator. A host whose boot
// id the probe did not capture gets no targets: every holder is explained instead.
func BuildHost(host string, s *parse.Snapshot, r diagnose.Result) HostPlan {
	hp := HostPlan{Host: host, Hostname: s.Host.Hostname, BootID: s.Host.BootID, Targets: []Target{}}
	procs := map[int]*parse.Process{}
	for i := range s.Processes {
		procs[s.Processes[i].PID] = &s.Processes[i]
	}
	gps := map[int]*diagnose.GPUProcess{}
	for i := range r.Processes {
		gps[r.Processes[i].PID] = &r.Processes[i]
	}
	for _, f := range r.Findings {
		into := &hp.Targets
		switch {
		case f.Code == diagnose.CodeLeftoverUnconfirmed && len(f.PIDs) == 1 && len(f.IfAbandoned) > 0:
			// Acted on only when the operator names it: its stop is in IfAbandoned.
			f.Actions, into = f.IfAbandoned, &hp.Judge
		case f.Code != diagnose.CodeLeftoverProcess || len(f.PIDs) != 1 || len(f.Actions) == 0:
			continue // a folded finding names many PIDs without judging each: never a target
		}
		pid := f.PIDs[0]
		t, ex := target(f, procs[pid], gps[pid], hp.BootID != "")
		switch {
		case ex != nil:
			hp.Explained = append(hp.Explained, *ex)
		case !slices.ContainsFunc(*into, func(o Target) bool { return o.PID == t.PID }):
			if into == &hp.Judge {
				t.Judge = judgeWhy(f)
			}
			*into = append(*into, t)
		}
	}
	return hp
}

// judgeWhy says why a leftover-unconfirmed target needs the operator's judgement: how another
// user could have made each reason it rests on.
func judgeWhy(f diagnose.Finding) string {
	var why []string
	for _, r := range f.Reasons {
		if r.OthersMay != nil {
			why = append(why, string(r.Code)+": "+r.OthersMay.Words())
		}
	}
	return strings.Join(why, "; ")
}

// Include marks the targets of hp.Judge whose PID is in pids as named by the operator, and
// moves every named one into Targets: applied like the others from then on.
func (hp HostPlan) Include(pids []int) HostPlan {
	judge := hp.Judge
	hp.Judge, hp.Targets = nil, slices.Clone(hp.Targets)
	for _, t := range judge {
		if t.Include = t.Include || slices.Contains(pids, t.PID); t.Include {
			hp.Targets = append(hp.Targets, t)
		} else {
			hp.Judge = append(hp.Judge, t)
		}
	}
	return hp
}

// target turns one leftover-process finding into a target, or explains why it is not one.
func target(f diagnose.Finding, p *parse.Process, gp *diagnose.GPUProcess, bootKnown bool) (Target, *Explained) {
	pid := f.PIDs[0]
	a := f.Actions[0]
	ex := &Explained{PID: pid, Program: program(p, gp)}
	for _, c := range a.Steps {
		ex.Steps = append(ex.Steps, c.Line)
	}
	if why, instead := unsafeTarget(p, bootKnown); why != "" {
		ex.Why, ex.Instead = why, instead
		return Target{}, ex
	}
	t := Target{PID: pid, StartTicks: *p.StartTicks, UID: *p.UID, ArgvSHA256: p.ArgvSHA256,
		Stopped: p.State == "T" || p.State == "t", Program: ex.Program, User: p.User, Finding: f.Code,
		FreesMiB: a.Frees.GPUMiB}
	if gp != nil && gp.Pod != nil { // a Kubernetes node's (its capture has the API's pods)
		t.PodUID = gp.Pod.UID
		if a.Kind == diagnose.ActionDeletePod {
			ex.Why = "it runs in a Kubernetes pod the API still lists: fix never deletes a pod"
			ex.Instead = "if the pod should go, delete it yourself with the step below, after checking it is the pod the finding names"
			return Target{}, ex
		}
	}
	for _, rs := range f.Reasons {
		t.Reasons = append(t.Reasons, string(rs.Code))
	}
	switch a.Kind {
	case diagnose.ActionKill:
		t.Kind = KindKill
	case diagnose.ActionStopUnit:
		t.Kind, t.Name = KindStopUnit, a.Target
	case diagnose.ActionCancelJob:
		t.Kind, t.Name = KindCancelJob, a.Target
	case diagnose.ActionStopContainer:
		t.Kind, t.Name, t.Runtime = KindStopContainer, p.Cgroup.ContainerID, runtimeCLI(p.Cgroup.Runtime)
	case diagnose.ActionReapZombie:
		ex.Why = "a zombie: it has exited and cannot be signalled; its parent has not reaped it"
		ex.Instead = "end its parent (the first step), or if its memory stays held, look for threads stuck in the driver (state D) and reset the GPU or reboot"
		return Target{}, ex
	default:
		ex.Why = "the evidence supports " + string(a.Kind) + ", which fix does not apply"
		ex.Instead = "run the steps yourself after reading them"
		return Target{}, ex
	}
	if err := t.Validate(); err != nil {
		ex.Why, ex.Instead = err.Error(), "stop it by hand after checking it is the process the finding names"
		return Target{}, ex
	}
	return t, nil
}

// unsafeTarget says why p may not be signalled at all, and what to do instead; "" when it may.
func unsafeTarget(p *parse.Process, bootKnown bool) (why, instead string) {
	switch {
	case p == nil || p.Gone:
		return "the probe could not describe it", "probe the host again"
	case !bootKnown:
		return "the probe did not capture the host's boot id, so a reused PID could not be told apart", "update gputriage on this side (the probe sends boot_id) and probe again"
	case p.PID <= 1:
		return "PID 1 is the host's init", "never signal it; reboot the host if you must"
	case p.State == "Z" && p.Threads != nil && *p.Threads > 1:
		return "a zombie leader: its main thread exited while its other threads run on, so its command line is gone and fix cannot check it is the process the finding names",
			"check its threads (ps -L -p PID), then kill -9 it by hand: SIGKILL reaches them"
	case p.State == "Z":
		return "a zombie: it has exited and cannot be signalled", "end its parent, which should reap it"
	case p.State == "D":
		return "in uninterruptible sleep (state D), most likely stuck in the driver: a signal waits until the driver lets go", "look for Xid errors (dmesg -T | grep -iE 'NVRM|Xid'); a GPU reset or a reboot frees it"
	case len(p.Argv) == 0 || p.ArgvSHA256 == "":
		return "no command line (a kernel thread, or one too long to hash)", "inspect it by hand"
	case p.StartTicks == nil || p.UID == nil:
		return "its start time or owner is unknown", "probe the host again"
	case isSSHD(p):
		return "sshd: stopping it could cut every session to the host", "never signal it from fix"
	}
	return "", ""
}

func isSSHD(p *parse.Process) bool {
	return strings.HasPrefix(p.Comm, "sshd") || strings.HasPrefix(path.Base(p.Argv[0]), "sshd")
}

func runtimeCLI(rt string) string {
	switch rt {
	case "docker", "podman":
		return rt
	case "containerd", "cri-o", "crio":
		return "crictl"
	}
	return ""
}

// program names the process for people: diagnose's Program, else its comm.
func program(p *parse.Process, gp *diagnose.GPUProcess) string {
	if gp != nil && gp.Program != "" {
		return gp.Program
	}
	if p != nil {
		return p.Comm
	}
	return ""
}

// ApplyHosts counts the hosts that have something to apply.
func (p Plan) ApplyHosts() int {
	n := 0
	for _, h := range p.Hosts {
		if len(h.Targets) > 0 {
			n++
		}
	}
	return n
}

// Targets counts the targets of the whole plan.
func (p Plan) Targets() int {
	n := 0
	for _, h := range p.Hosts {
		n += len(h.Targets)
	}
	return n
}
