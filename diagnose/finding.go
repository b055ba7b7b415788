// Package diagnose turns one host's Snapshot into findings: what is wrong with its GPU memory,
// who holds it, and the commands that would fix it. It is pure: no I/O, no clock (the caller
// passes now), no randomness; the same snapshot always gives the same result.
package diagnose

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gputriage/gputriage/parse"
)

// Severity orders findings. Warning and above make gputriage exit 1.
type Severity int

// Severities, lowest first.
const (
	Info Severity = iota
	Warning
	Error
	Critical
)

var severityNames = [...]string{"info", "warning", "error", "critical"}

func (s Severity) String() string {
	if s < 0 || int(s) >= len(severityNames) {
		return fmt.Sprintf("severity(%d)", int(s))
	}
	return severityNames[s]
}

// MarshalText makes severities readable in JSON.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText is the inverse of MarshalText.
func (s *Severity) UnmarshalText(b []byte) error {
	for i, n := range severityNames {
		if strings.EqualFold(string(b), n) {
			*s = Severity(i)
			return nil
		}
	}
	return fmt.Errorf("unknown severity %q", b)
}

// Finding codes. They are stable: users grep for them and paste them into tickets. Each is
// documented in docs/findings.md.
const (
	CodeMemoryImbalance  = "memory-imbalance"
	CodeLeftoverProcess  = "leftover-process"
	CodeShmDeletedMapped = "shm-deleted-mapped"
	// CodeLeftoverUnconfirmed: info: it would look abandoned, but on evidence a user other
	// than its owner and root could have made (Reason.OthersMay); the operator judges.
	CodeLeftoverUnconfirmed = "leftover-unconfirmed"
	CodeGhostMemory         = "ghost-memory"
	CodeShmStale            = "shm-stale"
	CodeShmFull             = "shm-full"
	CodeSMIFailed           = "smi-failed"
	CodeGPUBusy             = "gpu-busy"      // info: healthy GPU work
	CodeProbeLimited        = "probe-limited" // info/warning: what the probe could not see
	// CodeGPUOutsideAllocation: warning: a running Slurm job's process holds memory on a GPU
	// the job was not allocated, on a node with GPU GRES (slurm_alloc.go).
	CodeGPUOutsideAllocation = "gpu-outside-allocation"
)

// Finding is one diagnosis.
type Finding struct {
	Code        string
	Severity    Severity
	Title       string
	Explanation string // plain words, one paragraph (no line breaks) of one or more sentences
	// The evidence the finding rests on.
	GPUs     []int    // GPU indexes
	PIDs     []int    // process IDs
	Files    []string // paths on the host
	Evidence []string // one fact per line, with its numbers
	// Fix lists shell commands that would fix the problem. gputriage never runs them.
	Fix []string
	// Kind refines the code where it has variants (smi-failed: missing, no-driver, ...).
	Kind string
	// Imbalance is the judgement behind a memory-imbalance finding; nil for other codes.
	Imbalance *Imbalance

	// Typed facts (see facts.go); the strings above are composed from them.
	// Reasons are the evidence, strong ones first; probe-limited's limits stand in the order
	// of its evidence lines.
	Reasons []Reason
	// Actions are what to do, in the order a person would do them (a report ranks them by
	// Frees); Fix lists their commands' lines.
	Actions []Action
	// Checks are the commands that show whether the actions worked; Fix ends with them.
	Checks []Command
	// IfAbandoned stops the process of a leftover-unconfirmed finding, for an operator who
	// judges it abandoned; never among Actions, so no report suggests it.
	IfAbandoned []Action
	// Shm are the /dev/shm files the finding names (shm-deleted-mapped, shm-stale, shm-full).
	Shm []ShmFile

	// What the words say beyond the facts above (facts_named.go): the processes they name,
	// and per code the numbers they give. The words read only a finding's facts.
	Named []Process
	// Job is gpu-busy's job; Memory the GPUs' memory gpu-busy and ghost-memory give.
	Job    *BusyJob
	Memory []GPUMemory
	// Check is memory-imbalance's checks; Omitted the leftovers its actions leave out.
	Check   *GroupCheck
	Omitted int
	// ShmUse is shm-full's /dev/shm; ShmTruncated is set when the /dev/shm listing was cut
	// (shm-stale), HoldersUnknown when the probe's view of open files and mappings was
	// (shm-full).
	ShmUse                       *ShmUse
	ShmTruncated, HoldersUnknown bool
	// ServedBy and OthersMay are why a shm-deleted-mapped finding is Info: the running unit
	// whose live service its process is, or how another user could have deleted its files.
	ServedBy  string
	OthersMay *OthersMay
	// SMI is smi-failed's failure.
	SMI *SMIFailure
	// NotRoot is set when the probe did not run as root (ghost-memory, shm-stale and
	// probe-limited say what that hides).
	NotRoot bool
	// Folded is set on a finding that stands for the processes beyond the detailed ones.
	Folded *Folded
}

// GPUProcess is one process that holds GPU memory or a GPU device, with everything the probe
// learned about it joined in.
type GPUProcess struct {
	PID  int
	User string
	UID  *int
	Argv []string
	// Program is what runs, not the interpreter that runs it: "sglang.launch_server",
	// "vllm serve", "torchrun train.py", "ray::RayWorker". A multiprocessing worker whose
	// parent the probe captured is named after the parent ("vllm serve worker"); one whose
	// parent it did not is "multiprocessing worker". Raw host text, bounded to 64 bytes.
	Program string
	// Engine is the known engine Program belongs to: SGLang, vLLM, TGI, Triton, Ray,
	// torchrun or JAX; "" for any other program.
	Engine string
	// ParentArgv is the parent's command line of a multiprocessing worker or of a fork that
	// kept its parent's command line, when the probe captured the parent (it describes the
	// parents of the processes it describes, one level up).
	ParentArgv []string
	// Launcher is what started a worker (a multiprocessing child, a vLLM, SGLang or Ray
	// worker process, a fork), when the probe described it: the nearest ancestor that is not
	// a worker itself, as program and model ("vllm serve meta-llama/Llama-3.1-8B"), with its
	// PID, the worker's place among that launcher's GPU processes (by PID, from 0) and their
	// number. LauncherGone is set instead when the worker's launcher died (orphaned-worker).
	Launcher             string
	LauncherPID          int
	WorkerIndex, Workers int
	LauncherGone         bool
	// Name is nvidia-smi's process_name, or the kernel's comm when nvidia-smi did not list it.
	Name    string
	State   string
	PPID    *int
	Elapsed *time.Duration
	// GPUMemoryMiB is the memory nvidia-smi reports per GPU index.
	GPUMemoryMiB map[int]int64
	// GPUs are the GPU indexes the process is tied to: those nvidia-smi lists it on; for a
	// process it lists on no GPU, those whose /dev/nvidiaN it holds open (DeviceGPUs). A
	// CUDA process opens every device file it can see, so a listed process is never tied to
	// a GPU by its device files alone.
	GPUs []int
	// DeviceGPUs are the GPU indexes whose /dev/nvidiaN the process holds open.
	DeviceGPUs []int
	// Listed is true when nvidia-smi listed it as a compute app.
	Listed bool
	// Graphics is set when nvidia-smi's full listing types it graphics work alone (G; C+G
	// holds a compute context too, and is judged as compute work);
	// MPSClient when it types it an MPS client (M+C).
	Graphics, MPSClient bool
	Unit                string
	// UnitUserUID is set when Unit belongs to that user's systemd manager (user@UID.service),
	// not to the system's: a user's "sshd.service" is not the host's sshd.
	UnitUserUID *int
	Container   string // runtime:id, e.g. "docker:b708f3d89365"
	// Pod is what the capture's Kubernetes block says of its pod; nil without one.
	Pod      *PodFacts
	SlurmJob string
	Shm      []parse.ShmUse
}

// Result is the diagnosis of one host.
type Result struct {
	Findings  []Finding // most severe first, then by code, then by first GPU/PID
	Processes []GPUProcess
	// Memory is each GPU's memory reconciled (AccountMemory), of every process, before
	// Retain folds Processes.
	Memory []MemoryAccount
}

// Worst returns the highest severity among findings, or -1 when there are none.
func (r Result) Worst() Severity {
	w := Severity(-1)
	for _, f := range r.Findings {
		if f.Severity > w {
			w = f.Severity
		}
	}
	return w
}

// UnitLabel names the process's systemd unit for people: "vllm.service", or for a unit of a
// user's own manager "user unit sshd.service of alice (uid 1000)", so that it can never be
// read as the system's unit of the same name. Empty when the process is in no unit.
func (p GPUProcess) UnitLabel() string {
	if p.Unit == "" || p.UnitUserUID == nil {
		return p.Unit
	}
	uid := strconv.Itoa(*p.UnitUserUID)
	if p.UID != nil && *p.UID == *p.UnitUserUID && p.User != "" {
		return "user unit " + p.Unit + " of " + p.User + " (uid " + uid + ")"
	}
	return "user unit " + p.Unit + " of uid " + uid
}
