package diagnose

import (
	"slices"
	"time"
)

// The facts a finding's words read beyond its reasons, actions and files: what they say of
// the processes and GPUs it names, and the numbers of its checks. The builders fill them from
// the host; the words (words*.go) read only them, never the host, and JSON carries each as
// it is (docs/json.md), so a finding's text can be composed again from its JSON alone.

// Process is what a finding's words say of one process it names.
type Process struct {
	PID int `json:"pid"`
	// Cmdline is its command line as words show it (quoted, "…" when cut), "[name]" when
	// only its name is known, or "[command line unknown]"; Command its short form
	// ("python3 -m sglang.launch_server"); Comm the kernel's name for it (nvidia-smi's when
	// the probe did not describe it).
	Cmdline string `json:"cmdline"`
	Command string `json:"command"`
	Comm    string `json:"comm,omitempty"`
	// User is who runs it: "alice (uid 1000)", "uid 1000" or "unknown user"; UserName its
	// login name alone ("alice"), "" when unknown.
	User           string     `json:"user"`
	UserName       string     `json:"user_name,omitempty"`
	ElapsedSeconds *int64     `json:"elapsed_seconds,omitempty"`
	Started        *time.Time `json:"started,omitempty"`
	State          string     `json:"state,omitempty"`
	PPID           *int       `json:"ppid,omitempty"`
	// ParentName is its parent's name, when the probe described the parent; ParentHealthy
	// is set when the parent is GPU work that looks healthy (a live process whose PID must
	// not read as blame); Orphaned when it was re-parented to PID 1 outside any service,
	// container or job.
	ParentName    string `json:"parent_name,omitempty"`
	ParentHealthy bool   `json:"parent_healthy,omitempty"`
	Orphaned      bool   `json:"orphaned,omitempty"`
	// GPUMemoryMiB is the memory nvidia-smi lists for it per GPU index; GPUs the GPUs it is
	// tied to (GPUProcess.GPUs).
	GPUMemoryMiB map[int]int64 `json:"gpu_memory_mib,omitempty"`
	GPUs         []int         `json:"gpus,omitempty"`
	// Unit is the systemd unit it runs in as people read it (GPUProcess.UnitLabel), with its
	// state as its own manager reported it (nil when unknown).
	Unit      string     `json:"unit,omitempty"`
	UnitState *UnitState `json:"unit_state,omitempty"`
	Container string     `json:"container,omitempty"`
	// K8s is its Kubernetes pod as the API named it (from the capture's Kubernetes block).
	K8s *PodFacts `json:"k8s,omitempty"`
	// SlurmJob and SlurmStep are the Slurm job and step it runs in; NoGPUGres is set when the
	// job's node (SlurmNode, "" for this one) has no GPU GRES, so Slurm allocates no GPUs.
	SlurmJob  string `json:"slurm_job,omitempty"`
	SlurmStep string `json:"slurm_step,omitempty"`
	NoGPUGres bool   `json:"no_gpu_gres,omitempty"`
	SlurmNode string `json:"slurm_node,omitempty"`
	// Verdict is the judgement on it: VerdictLeftover, VerdictHealthy (GPU work not judged
	// left over), VerdictDriverHelper, VerdictProtected (Protected says what it is), or ""
	// for a process that holds no GPU.
	Verdict   string `json:"verdict,omitempty"`
	Protected string `json:"protected,omitempty"`
	// Service is set on a keeper of a deleted /dev/shm file that is no fault of its own: the
	// running unit whose live service it is. ShmHealthy says it is such a keeper.
	Service    string `json:"service,omitempty"`
	ShmHealthy bool   `json:"shm_healthy,omitempty"`
}

// Process verdicts.
const (
	VerdictLeftover     = "leftover"
	VerdictHealthy      = "healthy"
	VerdictDriverHelper = "driver-helper"
	VerdictProtected    = "protected"
)

// UnitState is a systemd unit's state as its manager reported it.
type UnitState struct {
	Active string `json:"active"`
	Sub    string `json:"sub,omitempty"`
	Result string `json:"result,omitempty"`
}

// BusyJob is gpu-busy's job: Key how its processes were grouped ("ppid 812", "pid 900", a unit,
// a container, a Slurm job), Comm the name that titles it, Processes how many it has and
// GPUMiB the memory they hold per GPU index. The finding's Named are its first processes.
type BusyJob struct {
	Key  string `json:"key"`
	Comm string `json:"comm,omitempty"`
	// Launcher names the PID of a "ppid" key when every process is its worker, as program
	// and model ("vllm serve meta-llama/Llama-3.1-8B"; GPUProcess.Launcher).
	Launcher  string        `json:"launcher,omitempty"`
	Processes int           `json:"processes"`
	GPUMiB    map[int]int64 `json:"gpu_mib"`
}

// GPUMemory is one GPU's memory as the words give it (gpu-busy, ghost-memory): nvidia-smi's
// used and total (nil when unknown), whether MIG is on, and for ghost-memory who holds its
// device: DeviceOpen the processes holding it open that nvidia-smi lists no memory for,
// Elsewhere how many it lists with memory on other GPUs, Display how many of them are never
// stopped (a desktop, graphics work, a serving MPS daemon).
type GPUMemory struct {
	Index      int    `json:"index"`
	UsedMiB    *int64 `json:"used_mib"`
	TotalMiB   *int64 `json:"total_mib"`
	MIG        bool   `json:"mig,omitempty"`
	DeviceOpen []int  `json:"device_open,omitempty"`
	Elsewhere  int    `json:"elsewhere,omitempty"`
	Display    int    `json:"display,omitempty"`
}

// GroupCheck is memory-imbalance's startup checks on one group of same-size GPUs, with their
// numbers: each GPU's memory, the GPUs with least (Lo) and most (Hi) free, SGLang's need
// (0.9 × Hi's free), and vLLM's (0.9 × CUDAMiB, the total CUDA reports) with the GPUs that
// fail and pass it. PCIOrder is set when the host's GPUs are not all one model, so a launch
// names them in PCI bus order.
type GroupCheck struct {
	GPUs        []GroupGPU `json:"gpus"`
	Lo          int        `json:"lo_gpu"`
	Hi          int        `json:"hi_gpu"`
	NeedMiB     int64      `json:"need_mib"`
	CUDAMiB     int64      `json:"cuda_mib"`
	VLLMNeedMiB int64      `json:"vllm_need_mib"`
	VLLMFail    []int      `json:"vllm_fail"`
	VLLMPass    []int      `json:"vllm_pass"`
	PCIOrder    bool       `json:"pci_order,omitempty"`
}

// GroupGPU is one GPU of a GroupCheck: its model and memory (UsedMiB nil when unknown).
type GroupGPU struct {
	Index    int    `json:"index"`
	Name     string `json:"name,omitempty"`
	TotalMiB int64  `json:"total_mib"`
	FreeMiB  int64  `json:"free_mib"`
	UsedMiB  *int64 `json:"used_mib"`
}

// gpu is the group's GPU of index i.
func (c *GroupCheck) gpu(i int) GroupGPU {
	for _, g := range c.GPUs {
		if g.Index == i {
			return g
		}
	}
	return GroupGPU{Index: i}
}

// ShmUse is shm-full's /dev/shm: df's numbers, and who keeps deleted files there: Blamed
// the processes a finding may blame (the finding's PIDs), Healthy those that look healthy,
// each with those files' bytes.
type ShmUse struct {
	SizeBytes    int64 `json:"size_bytes"`
	UsedBytes    int64 `json:"used_bytes"`
	AvailBytes   int64 `json:"avail_bytes"`
	Pct          int   `json:"used_pct"`
	Blamed       []int `json:"blamed"`
	BlamedBytes  int64 `json:"blamed_bytes"`
	Healthy      []int `json:"healthy"`
	HealthyBytes int64 `json:"healthy_bytes"`
}

// SMIFailure is smi-failed's failure as nvidia-smi printed it, and where nvidia-smi is.
type SMIFailure struct {
	Message  string `json:"message"`
	ExitCode *int   `json:"exit_code"`
	BusID    string `json:"bus_id,omitempty"`
	Path     string `json:"path,omitempty"`
}

// Folded is a finding that stands for the processes beyond the detailed ones: What they do
// ("look abandoned"), and how many they are (the finding's PIDs list the first of them).
type Folded struct {
	What      string `json:"what"`
	Processes int    `json:"processes"`
}

// named is the finding's named process of pid; a bare one when it names none.
func (f *Finding) named(pid int) Process {
	if i := slices.IndexFunc(f.Named, func(p Process) bool { return p.PID == pid }); i >= 0 {
		return f.Named[i]
	}
	return Process{PID: pid, Cmdline: "[command line unknown]", Command: "process", User: "unknown user"}
}

// memMiB is the memory nvidia-smi lists for the process on all GPUs.
func (p Process) memMiB() int64 {
	var n int64
	for _, m := range p.GPUMemoryMiB {
		n += m
	}
	return n
}

// memGPUs are the GPU indexes where nvidia-smi lists memory for the process, sorted.
func (p Process) memGPUs() []int {
	var xs []int
	for g := range p.GPUMemoryMiB {
		xs = append(xs, g)
	}
	slices.Sort(xs)
	return xs
}

// elapsed is how long it has run, nil when unknown.
func (p Process) elapsed() *time.Duration {
	if p.ElapsedSeconds == nil {
		return nil
	}
	d := time.Duration(*p.ElapsedSeconds) * time.Second
	return &d
}
