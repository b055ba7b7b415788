package nodecheck

import (
	"fmt"
	"github.com/gputriage/gputriage/diagnose"
	"strings"

	"github.com/gputriage/gputriage/parse"
)

// IdleFacts are what node-check's idle gate reads of a node before it decides whether the
// probe must run: the probe's own nvidia-smi queries, and a few things /proc and /dev/shm say
// at once. ReadIdleFacts gathers them on this node; IdleGate judges them.
type IdleFacts struct {
	// SMI is what the probe's nvidia-smi queries answered (the same arguments, bounds and
	// fallback), parsed from sections as the probe's are: GPUs, Apps, SMI and Sections.
	SMI *parse.Snapshot
	// SMIUnparsed: those answers did not parse whole.
	SMIUnparsed bool
	// ShmSizeBytes, ShmUsedBytes and ShmAvailBytes are /dev/shm's size, use and free space
	// as `df -kP /dev/shm` reports them; nil when unknown.
	ShmSizeBytes, ShmUsedBytes, ShmAvailBytes *int64
	// ShmFileBytes is the sum of the sizes of the regular files under /dev/shm that the
	// probe's listing would show (one file system, 8 deep); ShmListed says it is the sum of
	// all of them: the listing was whole.
	ShmFileBytes int64
	ShmListed    bool
	// DeletedShm are the deleted /dev/shm files a process holds open or maps, as its
	// /proc/PID/fd links and /proc/PID/maps lines name them.
	DeletedShm []IdleShmUse
	// Devices are the processes that hold a /dev/nvidia* device open.
	Devices []IdleDevice
	// Unseen says what the caller could not look at; any of it is doubt.
	Unseen []string
}

// IdleShmUse is one process's fd or mapping of a deleted /dev/shm file.
type IdleShmUse struct {
	PID  int
	Path string // as /proc shows it, " (deleted)" included
}

// IdleDevice is one process's fd on a /dev/nvidia* device, with what names the process
// (its comm and command line, read as the probe reads them), to tell the driver's helpers.
type IdleDevice struct {
	PID    int
	Device string // the fd's link target
	Comm   string
	Argv   []string
	// Known is false when the process's comm could not be read.
	Known bool
}

// IdleScope is what node-check judges: the whole node, or (Job) the GPUs of a job, named
// as Slurm names them (see JobGPUs).
type IdleScope struct {
	Job                    bool
	SlurmGPUs, CUDAVisible string
}

// IdleDoubt is one reason the gate cannot prove a node clean: the probe must run.
type IdleDoubt struct {
	Code   string // smi, apps, gpu-used, imbalance, device, shm-deleted, shm-full, shm-files, job-gpus, unseen
	GPU    int    // -1 when none
	PID    int    // 0 when none
	Detail string // for people; host text inside: sanitize before printing
}

func (d IdleDoubt) String() string { return d.Code + ": " + d.Detail }

// idleShmFileBytes is the most the files under /dev/shm may hold in all for the gate: below
// the smallest size shm-stale reports, no file or directory can be stale, whoever holds it.
const idleShmFileBytes = diagnose.StaleSegmentMinBytes

// IdleGate decides whether CheckNode, on the probe of this node, could report anything for
// scope. It returns no doubt only when it proves that none of the findings at warning or
// worse can fire; at the slightest doubt it returns why, and node-check runs the probe. It
// may send a clean node to the probe, never a node with a problem past it. The proof, finding
// by finding (docs/slurm.md keeps the same list):
//
//   - smi-failed (warning to critical) comes from the GPU query's failure: the gate runs that
//     query and its fallback as the probe does, parses it the same way, and wants no failure,
//     exit status 0 and nothing cut.
//   - probe-limited is a warning only for a strong limit: the app query failing (the gate
//     wants it run, exit 0, whole), not-root with ghost memory (no ghost, below), or a capture
//     cut or tampered with. No capture is made on the fast path, and one of a node that
//     passes holds a few small sections, far below the client's bound.
//   - ghost-memory wants a GPU whose memory.used passes diagnose.GhostBaseline: the gate wants every
//     GPU's memory.used known and within it.
//   - memory-imbalance is judged from nvidia-smi's numbers alone: the gate runs the same
//     SGLang check (diagnose.Imbalances) on the same GPUs, and wants it to pass on every group.
//   - leftover-process wants a GPU process that is not a driver helper: one that nvidia-smi
//     lists (the gate wants no compute app at all) or one holding /dev/nvidiaN open (the gate
//     wants every such holder to be a driver helper, named as diagnose names them). Its
//     Slurm reason (job-ended) is a reason of such a process too.
//   - gpu-outside-allocation wants a process with GPU memory, which only the app list gives:
//     the gate wants no compute app at all.
//   - shm-deleted-mapped wants a process that maps or holds open a deleted /dev/shm file:
//     the gate wants none in any process's fds or maps, in whatever mount namespace.
//   - shm-stale wants an unheld entry of at least 64 MiB (1 GiB for most): the gate wants
//     all regular files under /dev/shm, as the probe lists them, to hold less than 64 MiB.
//   - shm-full is judged from df's numbers alone: the gate runs the same judgement on the
//     same numbers (statfs, as df -kP reports them) and wants it silent.
//   - gpu-not-free (a job's scope with RequireFree) wants a process holding memory on a GPU
//     of the job, which only nvidia-smi's app list gives: no compute app, none.
//   - gpu-missing: the gate resolves the job's GPUs on the same GPU list and wants none
//     missing and the list well-formed.
//
// Info findings (gpu-busy, an Info memory-imbalance or shm-deleted-mapped, a weak
// probe-limited) do not count in CheckNode. Anything the caller could not look at (Unseen:
// not root, an fd table it could not read) is doubt.
func IdleGate(f IdleFacts, scope IdleScope) []IdleDoubt {
	var out []IdleDoubt
	for _, u := range f.Unseen {
		out = append(out, IdleDoubt{Code: "unseen", GPU: -1, Detail: u})
	}
	if f.SMI == nil {
		return append(out, IdleDoubt{Code: "smi", GPU: -1, Detail: "nvidia-smi was not asked"})
	}
	s := idleSnapshot(f)
	out = append(out, idleSMIDoubts(s, f.SMIUnparsed)...)
	out = append(out, idleGPUDoubts(s)...)
	out = append(out, idleProcessDoubts(f)...)
	out = append(out, idleShmDoubts(s, f)...)
	if scope.Job {
		out = append(out, idleJobDoubts(f.SMI, scope)...)
	}
	return out
}

// idleSnapshot is the snapshot the gate's judgements read: nvidia-smi's answers and df's
// numbers of /dev/shm, nothing of the processes.
func idleSnapshot(f IdleFacts) *parse.Snapshot {
	s := &parse.Snapshot{Host: f.SMI.Host, SMI: f.SMI.SMI, GPUs: f.SMI.GPUs, Apps: f.SMI.Apps,
		Sections: f.SMI.Sections, Truncated: f.SMI.Truncated}
	s.Shm = parse.Shm{SizeBytes: f.ShmSizeBytes, UsedBytes: f.ShmUsedBytes, AvailBytes: f.ShmAvailBytes}
	return s
}

// idleSMIDoubts: the GPU and app queries must have run, exited 0, whole, and parsed; no
// compute app may be listed.
func idleSMIDoubts(s *parse.Snapshot, unparsed bool) []IdleDoubt {
	var out []IdleDoubt
	doubt := func(code, format string, args ...any) {
		out = append(out, IdleDoubt{Code: code, GPU: -1, Detail: fmt.Sprintf(format, args...)})
	}
	if kind, failed := diagnose.SMIFailed(s); failed {
		doubt("smi", "nvidia-smi failed (%s)", kind)
	}
	if unparsed {
		doubt("smi", "nvidia-smi's answers did not parse")
	}
	if s.Truncated {
		doubt("smi", "nvidia-smi's answers were cut")
	}
	gpuQuery := false
	for _, sec := range s.Sections {
		if !strings.HasPrefix(sec.Name, "smi-") {
			continue
		}
		gpuQuery = gpuQuery || sec.Name != "smi-apps"
		switch {
		case sec.Dropped > 0:
			doubt("smi", "nvidia-smi's %s answer was cut at the client's cap on records (%d more dropped)", sec.Name, sec.Dropped)
		case sec.Truncated:
			doubt("smi", "nvidia-smi's %s answer was cut at %d bytes", sec.Name, sec.Limit)
		case sec.ExitCode == nil || *sec.ExitCode != 0 && !(sec.Name == "smi-gpu" && s.SMI.FieldFallback):
			doubt("smi", "nvidia-smi's %s query did not exit 0", sec.Name)
		}
	}
	if !gpuQuery {
		doubt("smi", "nvidia-smi's GPU query did not run")
	}
	if diagnose.AppsUnknown(s) || !hasSection(s, "smi-apps") {
		doubt("apps", "nvidia-smi's compute-app query did not run or failed")
	}
	if n := len(s.Apps); n > 0 {
		doubt("apps", "nvidia-smi lists %d compute app(s)", n)
	}
	return out
}

func hasSection(s *parse.Snapshot, name string) bool {
	for _, sec := range s.Sections {
		if sec.Name == name {
			return true
		}
	}
	return false
}

// idleGPUDoubts: every GPU's memory.used known and within what diagnose treats as idle, and
// SGLang's check passing on every group of same-size GPUs.
func idleGPUDoubts(s *parse.Snapshot) []IdleDoubt {
	var out []IdleDoubt
	for i := range s.GPUs {
		g := &s.GPUs[i]
		switch {
		case g.MemoryUsedMiB == nil:
			out = append(out, IdleDoubt{Code: "gpu-used", GPU: g.Index, Detail: fmt.Sprintf("GPU %d's memory.used is unknown", g.Index)})
		case *g.MemoryUsedMiB > diagnose.GhostBaseline(g):
			out = append(out, IdleDoubt{Code: "gpu-used", GPU: g.Index, Detail: fmt.Sprintf("GPU %d has %s used, above the %s an idle GPU shows",
				g.Index, diagnose.FormatMiB(*g.MemoryUsedMiB), diagnose.FormatMiB(diagnose.GhostBaseline(g)))})
		}
	}
	for _, c := range diagnose.Imbalances(s) {
		out = append(out, IdleDoubt{Code: "imbalance", GPU: c.Lo, Detail: fmt.Sprintf("GPU %d has %s free, less than 0.9 × GPU %d's %s",
			c.Lo, diagnose.FormatMiB(c.LoMiB), c.Hi, diagnose.FormatMiB(c.HiMiB))})
	}
	return out
}

// idleProcessDoubts: no process holds a deleted /dev/shm file, and only driver helpers hold
// a GPU's device.
func idleProcessDoubts(f IdleFacts) []IdleDoubt {
	var out []IdleDoubt
	for _, u := range f.DeletedShm {
		out = append(out, IdleDoubt{Code: "shm-deleted", GPU: -1, PID: u.PID,
			Detail: fmt.Sprintf("PID %d keeps %s", u.PID, u.Path)})
	}
	for _, d := range f.Devices {
		dev, _ := strings.CutSuffix(d.Device, " (deleted)")
		if _, gpu := diagnose.DeviceGPU(dev); !gpu {
			continue // /dev/nvidiactl, /dev/nvidia-uvm...: no GPU of its own, no GPU process
		}
		if d.Known && diagnose.DriverHelper(d.Comm, d.Argv) {
			continue
		}
		out = append(out, IdleDoubt{Code: "device", GPU: -1, PID: d.PID,
			Detail: fmt.Sprintf("PID %d (%s) holds %s open", d.PID, d.Comm, dev)})
	}
	return out
}

// idleShmDoubts: shm-full silent on df's numbers, and too little in /dev/shm for anything
// there to be stale.
func idleShmDoubts(s *parse.Snapshot, f IdleFacts) []IdleDoubt {
	var out []IdleDoubt
	if title, known, full := diagnose.ShmFull(s); !known {
		out = append(out, IdleDoubt{Code: "shm-full", GPU: -1, Detail: "/dev/shm's size and use are unknown"})
	} else if full {
		out = append(out, IdleDoubt{Code: "shm-full", GPU: -1, Detail: "/dev/shm: " + title})
	}
	switch {
	case !f.ShmListed:
		out = append(out, IdleDoubt{Code: "shm-files", GPU: -1, Detail: "/dev/shm could not be listed whole"})
	case f.ShmFileBytes >= idleShmFileBytes:
		out = append(out, IdleDoubt{Code: "shm-files", GPU: -1, Detail: fmt.Sprintf("the files under /dev/shm hold %s, %s or more",
			diagnose.FormatBytesAuto(f.ShmFileBytes), diagnose.FormatBytesAuto(idleShmFileBytes))})
	}
	return out
}

// idleJobDoubts: the job's GPUs resolve on the same GPU list, none missing.
func idleJobDoubts(s *parse.Snapshot, scope IdleScope) []IdleDoubt {
	_, missing, err := JobGPUs(s, scope.SlurmGPUs, scope.CUDAVisible)
	switch {
	case err != nil:
		return []IdleDoubt{{Code: "job-gpus", GPU: -1, Detail: err.Error()}}
	case len(missing) > 0:
		return []IdleDoubt{{Code: "job-gpus", GPU: -1, Detail: "GPU " + strings.Join(missing, ", ") + " of the job is not listed by nvidia-smi"}}
	}
	return nil
}
