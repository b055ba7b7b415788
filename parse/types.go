// Package parse owns the probe script that runs on each GPU host and turns the text it prints
// (a capture) into typed records. It uses the standard library only, does no I/O beyond the
// readers it is given, and never panics on any input: a value it cannot read is recorded as
// unknown (a nil pointer or an empty string), never as zero.
package parse

import (
	"errors"
	"slices"
	"time"
)

// ErrParse is wrapped by every error this package returns for malformed input.
var ErrParse = errors.New("parse error")

// Snapshot is everything one probe run learned about one host.
type Snapshot struct {
	Host HostFacts
	// SMI says how nvidia-smi answered. SMI.Failure is nil when the GPU query worked.
	SMI  SMIResult
	GPUs []GPU
	Apps []ComputeApp
	// AppsGone are the PIDs of Apps that had no /proc entry when the probe looked, right
	// after nvidia-smi listed them (section apps-alive); AppsChecked is set when it looked.
	AppsGone    []int
	AppsChecked bool
	// SMIProcs is nvidia-smi's full process listing (nvidia-smi -q -d PIDS): graphics
	// processes and MPS clients too, with their types. SMIProcsKnown is set when the
	// listing was read whole.
	SMIProcs      []SMIProcess
	SMIProcsKnown bool
	Holders       []DeviceHolder // open file descriptors on /dev/nvidia*
	// FDsDenied is what the fds section could not read (its "denied" line); nil when the
	// capture has no such line.
	FDsDenied *FDsDenied
	Processes []Process // sorted by PID
	// ProcsCut are the PIDs whose description the probe's own time bound for each GPU holder
	// cut (a field "cut"): left out of Processes, as undescribed, with a note.
	ProcsCut []int
	Shm      Shm
	Units    []Unit
	// Ancestors are the ancestors of the described processes that have no Slurm cgroup, up
	// to the first slurmstepd, sorted by PID; SlurmJobs what Slurm said of the jobs the
	// processes run in, SlurmTimeouts how long Slurm waits for a job's processes to end.
	Ancestors     []Ancestor
	SlurmJobs     []SlurmJob
	SlurmTimeouts SlurmTimeouts
	// SlurmNodes are what Slurm said of the nodes this host serves, SlurmGRES how it
	// manages GPUs: whether a job's GPU allocation means anything here.
	SlurmNodes []SlurmNode
	SlurmGRES  SlurmGRES
	// ShmDirs are the deleted /dev/shm files' owners and directories (section shm-dirs);
	// ShmDirsProbed is set when the capture has that section (an older probe's has not).
	ShmDirs       []ShmDirs
	ShmDirsProbed bool
	// Notes are the probe's limitations on this host: what it could not see, what was cut.
	Notes []Note
	// Sections lists every section of the capture with its exit status and truncation, in
	// the order the probe printed them.
	Sections []SectionInfo
	// Truncated is set when the capture ended before the probe's final marker.
	Truncated bool
	// K8s is what the Kubernetes API and the node's kubelet said of the node's pods, from
	// the block the client appends after the probe's final marker (k8s.go); nil without it.
	K8s *K8s
}

// HostFacts are the host section's key=value lines.
type HostFacts struct {
	ProbeVersion  string
	Hostname      string
	Kernel        string
	Time          *time.Time // the host's clock when the probe started
	UptimeSeconds *float64
	BootTime      *time.Time
	// BootID is /proc/sys/kernel/random/boot_id as 32 lower-case hex digits (dashes dropped):
	// it changes at every boot, so it tells a PID of this boot from the same PID of another.
	// Empty when unknown.
	BootID        string
	ClockTicks    int // USER_HZ; 100 when unknown
	UID           *int
	User          string
	NvidiaSMIPath string // empty when nvidia-smi was not found
	HasTimeout    bool   // the host has timeout(1), so every step was bounded in time
	// ShmDev is the device of the probe's /dev/shm as a FileID's prefix ("MAJ:MIN:"); "" when
	// unknown. A deleted file whose identity names another device is on another /dev/shm (a
	// container's own), and fills not this one.
	ShmDev string
}

// SMIFailureKind classifies how nvidia-smi failed.
type SMIFailureKind string

// The failure kinds; documented in docs/json.md.
const (
	SMIMissing         SMIFailureKind = "missing"          // no nvidia-smi binary
	SMINoDriver        SMIFailureKind = "no-driver"        // couldn't communicate with the driver
	SMIVersionMismatch SMIFailureKind = "version-mismatch" // Driver/library version mismatch
	SMIGPULost         SMIFailureKind = "gpu-lost"         // GPU is lost. Reboot the system
	SMIDeviceHandle    SMIFailureKind = "device-handle"    // Unable to determine the device handle
	SMINoDevices       SMIFailureKind = "no-devices"       // No devices were found
	SMITimeout         SMIFailureKind = "timeout"          // killed by the probe's timeout
	SMIOther           SMIFailureKind = "other"
)

// SMIResult is the outcome of the nvidia-smi queries.
type SMIResult struct {
	Failure *SMIFailure
	// FieldFallback is set when the driver refused the extended query fields and the probe
	// asked again with the base set.
	FieldFallback bool
}

// SMIFailure describes a failed nvidia-smi query.
type SMIFailure struct {
	Kind     SMIFailureKind
	Message  string // nvidia-smi's own words, first lines
	ExitCode *int
	BusID    string // the PCI bus id named in the message, if any
}

// GPU is one row of --query-gpu.
type GPU struct {
	Index             int
	UUID              string
	Name              string
	BusID             string
	MemoryTotalMiB    *int64
	MemoryUsedMiB     *int64
	MemoryFreeMiB     *int64
	MemoryReservedMiB *int64
	UtilizationPct    *int
	ComputeMode       string // e.g. "Default", "Exclusive_Process"; "" when unknown
	DriverVersion     string
	MIGMode           string // "Enabled", "Disabled"; "" when unknown or not supported
	// MinorNumber is N of the GPU's /dev/nvidiaN; nil when unknown (then N is taken to be
	// the index, as it is when the driver enumerates in PCI order).
	MinorNumber *int
}

// ComputeApp is one row of --query-compute-apps.
type ComputeApp struct {
	PID         int
	GPUUUID     string
	UsedMiB     *int64
	ProcessName string
}

// DeviceHolder is one open file descriptor on a /dev/nvidia* device node.
type DeviceHolder struct {
	PID    int
	FD     int
	Device string // e.g. /dev/nvidia0, /dev/nvidiactl, /dev/nvidia-uvm
}

// Process describes one PID the probe looked at: a compute app, a /dev/nvidia* holder, or a
// holder of a deleted /dev/shm file.
type Process struct {
	PID  int
	Gone bool // exited between the scan and the read
	// ParentOnly marks a process described only as an ancestor of a described one (the probe
	// goes up to PID 1): context for naming what a worker runs and whether its launcher
	// lives, not a user of GPUs or /dev/shm in its own right.
	ParentOnly bool
	// Cut: the probe's time bound for this process ran out before its description ended
	// (field "cut"): the fields after the cut are missing. Parse leaves such a process out
	// of Snapshot.Processes (see ProcsCut).
	Cut  bool
	PPID *int
	// State is the one-letter state from /proc/PID/stat: R, S, D, Z, T, t, I, X.
	State string
	// PGID and SID are its process group and session (fields 5 and 6 of /proc/PID/stat);
	// nil when unknown. Children a process forked keep its group: they outlive it there.
	PGID, SID *int
	Comm      string
	UID       *int
	User      string // "" when the uid has no name on the host
	// StartTime is when the process started, by the host's clock; nil when unknown.
	StartTime *time.Time
	// StartTicks is field 22 of /proc/PID/stat, the start time in clock ticks since boot: with
	// the boot id and the PID it names one process for the life of the host. nil when unknown.
	StartTicks *int64
	// ArgvSHA256 is the hex SHA-256 of /proc/PID/cmdline's raw bytes as the probe read them;
	// empty when argv was cut (ArgvTruncated) or not read.
	ArgvSHA256 string
	// Argv is the full argument vector with NUL boundaries preserved.
	Argv          []string
	ArgvTruncated bool
	Cwd           string
	NSPIDs        []int // PID in each nested namespace, outermost first
	// Threads is the kernel's count of the process's threads (Threads: in /proc/PID/status):
	// a zombie leader (state Z) with more than one still runs in its other threads.
	Threads     *int
	RSSKiB      *int64
	RssShmemKiB *int64
	Cgroup      Cgroup
	// Shm lists the /dev/shm files the process maps or holds open.
	Shm []ShmUse
	// ModelPaths are the absolute paths given to --model, --model-path and similar flags, and
	// whether each still exists on the host.
	ModelPaths []PathCheck
	// Launch is what the process's environment says of who launched it: the few variables
	// the torchrun elastic agent gives each rank, the only ones the probe reads (fields "env
	// NAME=VALUE"); nil when it read none (an ancestor, another user's process for a probe
	// that is not root, or none set).
	Launch *LaunchEnv
}

// LaunchEnv holds the torchrun elastic agent's variables in a process's environment, as
// torch.distributed.elastic's local agent sets them for each rank it starts. Any user may set
// them in their own process: they say what the process claims to be, never more.
type LaunchEnv struct {
	// RunID is TORCHELASTIC_RUN_ID: the rendezvous id of the run (a UUID for a standalone
	// torchrun, --rdzv-id otherwise); "" when not set.
	RunID string
	// RestartCount is TORCHELASTIC_RESTART_COUNT, the agent's restart of the worker group
	// the rank belongs to (0 for the first); LocalRank and GroupRank are LOCAL_RANK (the rank
	// on its node) and GROUP_RANK (its node's rank). Each nil when not set.
	RestartCount, LocalRank, GroupRank *int
}

// Cgroup is what a process's /proc/PID/cgroup says about who started it.
type Cgroup struct {
	Lines []CgroupLine
	// Path is the unified (v2) path, or on v1 the name=systemd or first non-root path.
	Path string
	// Unit is the systemd unit (a .service or .scope) the process runs in, if any.
	// UserManagerUID is set when that unit belongs to a user's systemd manager (the path runs
	// through user@UID.service): then Unit names user UID's unit, not a system unit.
	Unit           string
	UserManagerUID *int
	// ContainerID and Runtime name the container (docker, containerd, cri-o, podman, lxc).
	ContainerID string
	Runtime     string
	PodUID      string // Kubernetes pod UID, with dashes
	SlurmJob    string
	SlurmStep   string // "0", "batch", "extern", ...
	// SlurmNode is the node name the cgroup carries on a host that runs several slurmd
	// ("slurm_node2", "node2_slurmstepd.scope"); "" otherwise.
	SlurmNode string
}

// CgroupLine is one line of /proc/PID/cgroup: "hierarchy-ID:controller-list:cgroup-path".
type CgroupLine struct {
	HierarchyID int
	Controllers []string
	Path        string
}

// ShmUse is one /dev/shm file a process maps or holds open.
type ShmUse struct {
	Path    string // without the " (deleted)" suffix
	Deleted bool
	Mapped  bool // mapped into memory (from /proc/PID/maps)
	Open    bool // held by an open fd
	// Bytes is the file's size (from the open fd), or else the total size of its mappings;
	// nil when neither is known.
	Bytes *int64
	// File is the file's identity, its device and inode (see FileID); "" when unknown. Two
	// uses of one path are of one file only when their identities agree: a deleted file's
	// name is free for anyone to use again, and another mount namespace's /dev/shm has the
	// same paths.
	File string
}

// PathCheck records whether a path named on a process's command line exists.
type PathCheck struct {
	Path   string
	Exists bool
	// Dirs are the directories above a missing path that exist, deepest first (DirInfo);
	// nil when the probe did not read them.
	Dirs []DirInfo
}

// DirInfo is a directory above a path, as the probe saw it: who may remove or rename what it
// holds.
type DirInfo struct {
	Path     string // as the process sees it (the probe's /proc/PID/root prefix dropped)
	UID, GID int
	Mode     uint32 // st_mode, the type bits included
	Dev      uint64 // st_dev: a directory on another device than its parent's is a mount point
}

// ShmDirs is who could have deleted a deleted /dev/shm file a process keeps (shm-dirs).
type ShmDirs struct {
	PID  int
	Path string
	// Owner is the file's owner, when the probe could read it through the process.
	Owner *int
	// Dirs are the file's directories that exist, deepest first, up to /.
	Dirs []DirInfo
}

// Shm is /dev/shm on the host.
type Shm struct {
	SizeBytes  *int64
	UsedBytes  *int64
	AvailBytes *int64
	Entries    []ShmEntry // in the order find printed them
	// Truncated is set when the listing was cut at its bound.
	Truncated bool
	// Listed is false when the probe could not list /dev/shm (no GNU find, no access).
	Listed bool
}

// ShmEntry is one file, directory or link under /dev/shm.
type ShmEntry struct {
	Path  string
	Type  byte // 'f' file, 'd' directory, 'l' symlink, as find %y prints it
	Bytes int64
	// TreeBytes is, for a directory, the bytes of all regular files listed below it; for a
	// file, its own size.
	TreeBytes int64
	MTime     time.Time
	UID       int
	// Holders are the PIDs that map or hold open this path (or, for a directory, a path
	// below it).
	Holders []int
}

// Unit is one systemd unit's state from systemctl show.
type Unit struct {
	Name string
	// UserManagerUID is nil for a unit of the system manager, and the user's uid for a unit
	// whose state came from that user's manager (systemctl --user --machine=USER@).
	UserManagerUID *int
	LoadState      string
	ActiveState    string
	SubState       string
	Result         string
	MainPID        *int
}

// Note is a limitation of the probe on this host, with a stable code.
type Note struct {
	Code    string // e.g. "not-root", "section-truncated", "tool-missing", "fds-unreadable"
	Message string
}

// SectionInfo is the envelope of one capture section.
type SectionInfo struct {
	Name      string
	ExitCode  *int
	Bytes     int
	Limit     int
	Truncated bool // cut at its byte bound, or at its cap on records (Dropped)
	// Dropped is how many records past the client's cap on records (RecordCap) were dropped
	// unread; the section is then Truncated.
	Dropped int
}

// Complete reports whether the section was whole and its step did not fail: not cut at its
// bound, and an exit status the probe's step counts as success.
func (s SectionInfo) Complete() bool {
	if s.Truncated || s.ExitCode == nil {
		return false
	}
	ok, known := sectionOK[s.Name]
	return !known || slices.Contains(ok, *s.ExitCode)
}

// Capture is a capture split into its sections, before any section is parsed.
type Capture struct {
	// Version is the format version the header declares: 1 or 2 (0 when unreadable).
	Version  int
	Nonce    string
	Sections []Section // in the order the probe printed them
	// Contested lists, sorted, the names of sections that appear more than once: the probe
	// prints each once, so none of their copies is trusted.
	Contested []string
	// TooMany is set when the capture held more sections than any probe prints; the rest
	// was not read.
	TooMany bool
	// Done is set when the probe's final marker was seen; DoneEnd is the offset just past
	// the first such line: what the host sent ends there, and what follows is the client's
	// (the Kubernetes block, k8s.go).
	Done    bool
	DoneEnd int
}

// Section returns the first section called name, or nil.
func (c *Capture) Section(name string) *Section {
	for i := range c.Sections {
		if c.Sections[i].Name == name {
			return &c.Sections[i]
		}
	}
	return nil
}

// Section is one section of a capture: its body exactly as the probe printed it.
type Section struct {
	Name     string
	Body     []byte
	ExitCode *int // nil when the rc trailer is missing or unreadable
	Limit    int  // the client's byte bound for the body (SectionLimit), whatever the host declared
	// Truncated is set when the body was cut: no rc trailer, or no end marker.
	Truncated bool
}

// OpenFD is one line of the fds section: a descriptor open on a /dev/nvidia* device or a
// /dev/shm file.
type OpenFD struct {
	PID     int
	FD      int
	Target  string // without the " (deleted)" suffix
	Deleted bool
}

// ShmMapping is the total of one process's mappings of one /dev/shm file (maps section).
type ShmMapping struct {
	PID     int
	Path    string // without the " (deleted)" suffix
	Deleted bool
	Bytes   int64  // sum of the distinct address ranges mapped
	File    string // the first mapping's file identity (FileID); "" when unreadable
}

// FDSize is one line of the fdstat section: the size of the file behind /proc/PID/fd/FD.
type FDSize struct {
	PID   int
	FD    int
	Bytes int64
	// Links is the file's link count (0: deleted); nil in version 1 captures, which lack it.
	Links *int
	// File is the file's identity (FileID); "" in captures whose fdstat lacks it.
	File string
}

// FDsDenied is the fd links under /proc the probe could not read: Links how many (a directory
// it could not open counts as one), PIDs the first processes they belong to (at most 16; none
// in a version 1 capture).
type FDsDenied struct {
	Links int
	PIDs  []int
}
