package diagnose

import "time"

// Typed facts. A Finding's verdict is judged here, in diagnose, as the values below: the
// reasons it rests on as codes with their data, the actions that would fix it as structured
// commands with what each gives back, and the files it names, and what the words say of the
// processes and GPUs it names (facts_named.go). The words people read (Title, Explanation,
// Evidence, Fix) are composed from these facts alone in one place (words*.go, ComposeWords),
// JSON carries every one of them, and
// every report format renders from the same facts: the text report folds repeated files,
// merges the same action across findings and orders "what to do" by impact.

// ReasonCode names one kind of evidence. The codes are stable: JSON carries them.
type ReasonCode string

// Reason codes of leftover-process.
const (
	ReasonUnitStopped    ReasonCode = "unit-stopped"    // its unit is inactive, failed or deactivating
	ReasonSessionEnded   ReasonCode = "session-ended"   // the login session that started it has ended
	ReasonStrayInUnit    ReasonCode = "stray-in-unit"   // in a unit's cgroup, not under its main process
	ReasonZombie         ReasonCode = "zombie"          // state Z
	ReasonStopped        ReasonCode = "stopped"         // state T
	ReasonTraced         ReasonCode = "traced"          // state t
	ReasonShmDeleted     ReasonCode = "shm-deleted"     // weights/checkpoints it maps were deleted
	ReasonScratchDeleted ReasonCode = "scratch-deleted" // other deleted /dev/shm files it maps
	ReasonModelPathGone  ReasonCode = "model-path-gone" // the model path on its command line is gone
	ReasonOrphaned       ReasonCode = "orphaned"        // parent PID 1, outside any service, container or job
	ReasonMuchOlder      ReasonCode = "much-older"      // much older than the comparable GPU work
	// ReasonOrphanedWorker: a launcher's child by its nature (Detail: "vLLM worker", "Ray
	// worker", "multiprocessing worker", or "torchrun rank" by its environment) whose launcher died: it, or its launcher's worker
	// Other, was re-parented to Parent (PID 1, a namespace's init, a service manager or shell;
	// ParentName its name).
	ReasonOrphanedWorker ReasonCode = "orphaned-worker"
	// ReasonOlderGeneration: an older copy of PID Other (the same command line, the same user,
	// on a GPU both hold) whose launcher died (re-parented to Parent, ParentName) while
	// Other's lives; Age is how much earlier it started.
	ReasonOlderGeneration ReasonCode = "older-generation"
	// ReasonZombieLeader: state Z with Detail threads still running (Threads: in
	// /proc/PID/status): its main thread exited, the process runs on and SIGKILL ends it.
	ReasonZombieLeader ReasonCode = "zombie-leader"
)

// Reason codes of probe-limited: what the probe could not see. A strong one makes the
// finding a warning: the gap hides something that matters.
const (
	ReasonProbeNote        ReasonCode = "probe-note"        // a note the probe printed: Note, Detail its message
	ReasonNotRoot          ReasonCode = "not-root"          // the probe ran as Detail, not root
	ReasonCaptureTruncated ReasonCode = "capture-truncated" // the capture ended before the probe's final marker
	ReasonSectionTruncated ReasonCode = "section-truncated" // section Detail was cut at its limit of Bytes
	ReasonAppsUnknown      ReasonCode = "apps-unknown"      // nvidia-smi's compute-app query failed or did not run
	ReasonUnmatchedApp     ReasonCode = "unmatched-app"     // PID's compute app is on GPU UUID Detail, not in the GPU list
	ReasonFieldFallback    ReasonCode = "field-fallback"    // the driver lacks memory.reserved and mig.mode.current
	ReasonShmUnlisted      ReasonCode = "shm-unlisted"      // /dev/shm could not be listed
	ReasonShmTruncated     ReasonCode = "shm-truncated"     // the /dev/shm listing was cut at its bound
	ReasonNoTimeout        ReasonCode = "no-timeout"        // the host has no timeout(1)
	ReasonPIDUnreadable    ReasonCode = "pid-unreadable"    // nvidia-smi lists PID, /proc/PID could not be read
	ReasonPIDExited        ReasonCode = "pid-exited"        // PID exited while the probe ran
	// PID holds a GPU (nvidia-smi lists it, or it holds a GPU's device) and was left
	// undescribed by a procs section that was cut or stopped by a time limit (Detail: how).
	ReasonHolderUndescribed ReasonCode = "holder-undescribed"
	// ReasonDetailFolded (budget.go): Folded items of Detail were left out of the result.
)

// Reason is one piece of evidence behind a finding, with the data its words are made of.
type Reason struct {
	Code ReasonCode
	// Strong reasons are enough for the verdict on their own; weak ones only support it.
	Strong bool
	PID    int
	// Unit is the unit's label for people (UnitLabel), State its ActiveState or the
	// process's state letter, Result the unit's result when not "success".
	Unit, State, Result string
	// Paths are the files the reason names (deleted /dev/shm files, a missing model path).
	Paths []string
	// Age is how long the process has run; Than the age of the oldest work it is compared
	// with (much-older), or the unit's main process's (stray-in-unit, when older).
	Age, Than time.Duration
	// Older is set on stray-in-unit when the process started before the unit's main process.
	Older bool
	// ServedBy is the running unit that serves the process, which makes a cleaned-up reason
	// (shm-deleted, model-path-gone) weak: anyone who may write the directory can delete it.
	ServedBy string
	// OthersMay is set on a cleaned-up reason that a user other than the process's owner and
	// root could have made (a file in a directory every user may write): it is weak then.
	OthersMay *OthersMay
	// Orphaned is set on much-older when the process is orphaned too (the two are one
	// strong reason together).
	Orphaned bool
	// Parent is the PID that adopted the process or its launcher's worker (orphaned-worker,
	// older-generation), or a zombie's parent (zombie); ParentName its name (comm). Other is
	// the newer generation's PID (older-generation), or the launcher's worker that was
	// re-parented when it is not the process itself (orphaned-worker).
	Parent     int
	ParentName string
	Other      int
	// Note is a probe note's code (probe-note); Detail the text the reason names: the
	// note's message, the probe's user (not-root), a section's name, a GPU UUID.
	Note, Detail string
	// Bytes is a size the reason names: a section's limit (section-truncated).
	Bytes int64
	// Job is the Slurm job (job-ended, gpu-not-allocated), with its state in State and, on
	// job-ended, the time since it ended in Age (0 when unknown); GPUs are the GPUs it was
	// not allocated (gpu-not-allocated).
	Job  string
	GPUs []int
	// User is the job's user, Node the node whose allocation applies; Purged is set when
	// Slurm no longer knows the job, Ended when Slurm gave its end time; MiB is the GPU
	// memory the process holds, on the GPUs in Held (job-ended, gpu-not-allocated).
	User, Node    string
	Purged, Ended bool
	MiB           int64
	Held          []int
	// ConstrainDevices and TaskCgroup are the host's Slurm's ConstrainDevices (cgroup.conf)
	// and whether its TaskPlugin includes task/cgroup, which together keep a job's processes
	// off the GPUs it was not allocated; nil when unknown (gpu-not-allocated).
	ConstrainDevices, TaskCgroup *bool
	// Folded is how many items of what Detail names a result left out (detail-folded).
	Folded int
	// Links is how many fd links under /proc the probe could not read, PIDs the first
	// processes they belong to, AsRoot whether it ran as root (probe-note fds-unreadable).
	Links  int
	PIDs   []int
	AsRoot bool
	// Pod is the process's Kubernetes pod (pod-gone, pod-ended, pod-not-allocated).
	Pod *PodFacts
}

// ActionKind names what an action does. The kinds are stable: JSON carries them.
type ActionKind string

// Action kinds.
const (
	ActionKill          ActionKind = "kill"           // SIGTERM, then SIGKILL, one process
	ActionStopUnit      ActionKind = "stop-unit"      // systemctl stop, through the unit's own manager
	ActionStopContainer ActionKind = "stop-container" // docker/podman stop, crictl stop
	ActionDeletePod     ActionKind = "delete-pod"     // kubectl delete pod
	ActionCancelJob     ActionKind = "cancel-job"     // scancel
	ActionReapZombie    ActionKind = "reap-zombie"    // end a zombie's parent, look for stuck threads
	ActionRemoveFiles   ActionKind = "remove-files"   // rm files nothing uses
	ActionInspect       ActionKind = "inspect"        // commands that look, for a person to judge
	ActionDriver        ActionKind = "driver"         // driver, module or hardware repair
	// ActionNarrowLaunch launches only on the GPUs with room (CUDA_VISIBLE_DEVICES); Target
	// is the environment it sets. It frees nothing.
	ActionNarrowLaunch ActionKind = "narrow-launch"
	// ActionResizeShm enlarges /dev/shm; Target is "/dev/shm". It frees nothing by itself.
	ActionResizeShm ActionKind = "resize-shm"
)

// Action is one thing to do about a finding, as structured commands. Kind and Target are its
// identity: the same action suggested by several findings is the same fix, shown once.
type Action struct {
	Kind ActionKind
	// Target is what it acts on, as its commands name it: "20629", "vllm.service",
	// "user unit x.service of alice (uid 1000)", "docker:b708f3d89365", a job id, a path.
	Target string
	// PIDs are the processes it ends.
	PIDs []int
	// Frees is what comes back once it is done.
	Frees Impact
	// Steps are its commands, in order.
	Steps []Command
}

// Command is one shell command exactly as it runs, and what a person should know about it.
type Command struct {
	// Line is printed as is: never wrapped, never commented.
	Line string
	// Note says what the command does or what to fill in. It is shown as prose beside the
	// command block, never inside it.
	Note string
}

// Impact is what an action gives back.
type Impact struct {
	GPUMiB   map[int]int64 // GPU index -> MiB of GPU memory
	ShmBytes int64         // RAM held by /dev/shm files
}

// TotalGPUMiB is the GPU memory the impact gives back on all GPUs.
func (i Impact) TotalGPUMiB() int64 {
	var n int64
	for _, v := range i.GPUMiB {
		n += v
	}
	return n
}

// ShmFile is one /dev/shm file a finding names, with what the probe saw of it.
type ShmFile struct {
	Path         string
	Bytes        *int64 // nil when the size is unknown
	Deleted      bool
	Mapped, Open bool
	PIDs         []int // the processes that keep it (shm-deleted-mapped) or use it (shm-full)
	// MorePIDs counts the keepers left out of PIDs, which names the finding's process and
	// at most ten others, so that a file thousands of processes keep costs linear size.
	MorePIDs int
	// ByName is set when other keepers are named and the probe could not read the file's
	// identity (device and inode): they keep a deleted file of the same name, which may be
	// another file, since a deleted name is free for anyone to use again.
	ByName bool
	Owner  string
	Age    *time.Duration // since last modified, for stale files
	// Dir is set for a directory; Bytes is then the size of every file below it.
	Dir bool
	// Modified is when it, or anything below it, was last modified (shm-stale, shm-full).
	Modified *time.Time
}
