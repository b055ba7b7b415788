package diagnose

import (
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gputriage/gputriage/parse"
)

// host is one snapshot with the indexes every check needs, built once.
type host struct {
	s   *parse.Snapshot
	ref time.Time // the host's clock when the probe ran

	gpuByUUID  map[string]int // upper-cased UUID -> GPU index
	gpuByIndex map[int]*parse.GPU
	procByPID  map[int]*parse.Process
	units      map[string]*parse.Unit // by unitRef.key: the manager and the name
	uidNames   map[int]string

	procs   []GPUProcess // sorted by PID
	gpByPID map[int]*GPUProcess
	// onGPU lists, per GPU index, the processes tied to it (GPUs) or holding its device file
	// open (DeviceGPUs), by PID: every per-GPU question is answered from it in time linear in
	// its answer. A process listed with memory elsewhere that merely opened the device is
	// there too, and each check tells the two apart (gp.GPUMemoryMiB, gp.Listed).
	onGPU     map[int][]*GPUProcess
	unmatched []parse.ComputeApp // compute apps whose GPU UUID names no GPU
	folded    folder             // what the result folded (budget.go)
	shmIx     *shmIndex          // the /dev/shm listing indexed, built on first use
	// smiListed are the GPU indexes nvidia-smi's full listing (smi-pids) names a process on
	// that the probe believes (joinSMIProcs).
	smiListed map[int]bool
	// mpsLive counts the live MPS clients, per GPU index (-1: typed M+C anywhere, -2: any
	// listed with memory); nil until mpsServes first needs it.
	mpsLive map[int]int
	keepers *keepers // device holders without listed memory, indexed (gonepid.go)

	leftovers map[int]leftoverVerdict // PID -> why it looks abandoned (strong reasons only)
	// unconfirmed holds the processes that would look abandoned but for evidence another user
	// could have made (Reason.OthersMay), with why: the operator judges them.
	unconfirmed map[int]leftoverVerdict
	// healthyUnits holds, per unit (unitRef.key), up to two GPU processes in it that are not
	// left over; built on first use, after the leftovers are judged.
	healthyUnits map[string][]int
	// healthyGroups is the same per container, pod and Slurm job (groupKeys).
	healthyGroups map[string][]int
	// undescribed holds up to two GPU processes with memory, not judged left over, that the
	// capture does not describe (undescribedBeside); nil until built.
	undescribed *[]int

	// oldestJobs are, per age class (see ageClass), the two oldest jobs holding GPU memory,
	// oldest first, each by its oldest process: enough to answer "how old is the oldest other
	// job" in O(1). Built on first use.
	oldestJobs map[string][]jobAge
	// newestLive is, per user and command line and then per GPU, the newest GPU process
	// whose launcher lives (olderGeneration); built on first use.
	newestLive map[string]map[int]*GPUProcess
	// latestAttempt is, per user, torchrun run id and agent, the GPU process of the highest
	// TORCHELASTIC_RESTART_COUNT (olderAttempt); built on first use.
	latestAttempt map[attemptKey]*parse.Process

	// groups are, per action on a unit, container, pod or job (Kind and Target), the GPU
	// processes it ends and what it frees; shmKeepers, per deleted /dev/shm file, the live
	// processes that keep it. Both built on first use.
	groups     map[string]group
	shmKeepers map[string][]int
	// shmDirs indexes the capture's shm-dirs records (shmOthersMay); built on first use.
	shmDirs map[shmDirKey]*parse.ShmDirs
}

type jobAge struct {
	key     string
	elapsed time.Duration
}

func newHost(s *parse.Snapshot, now time.Time) *host {
	h := &host{
		s:           s,
		ref:         now,
		gpuByUUID:   map[string]int{},
		gpuByIndex:  map[int]*parse.GPU{},
		procByPID:   map[int]*parse.Process{},
		units:       map[string]*parse.Unit{},
		uidNames:    map[int]string{},
		gpByPID:     map[int]*GPUProcess{},
		leftovers:   map[int]leftoverVerdict{},
		unconfirmed: map[int]leftoverVerdict{},
	}
	if s.Host.Time != nil {
		h.ref = *s.Host.Time
	}
	for i := range s.GPUs {
		g := &s.GPUs[i]
		h.gpuByIndex[g.Index] = g
		if g.UUID != "" {
			h.gpuByUUID[strings.ToUpper(g.UUID)] = g.Index
		}
	}
	for i := range s.Processes {
		p := &s.Processes[i]
		h.procByPID[p.PID] = p
		if p.UID != nil && p.User != "" {
			h.uidNames[*p.UID] = p.User
		}
	}
	if s.Host.UID != nil && s.Host.User != "" {
		h.uidNames[*s.Host.UID] = s.Host.User
	}
	for i := range s.Units {
		u := &s.Units[i]
		h.units[unitKey(u.Name, u.UserManagerUID)] = u
	}
	h.joinProcesses()
	h.setPrograms()
	return h
}

// deviceGPU is the minor number of a GPU device node: /dev/nvidia3 -> 3. /dev/nvidiactl,
// /dev/nvidia-uvm and the other control nodes name no GPU. nvidia-smi's minor_number maps it
// to the GPU's index; without it the two are taken to be equal, as they are when the driver
// enumerates GPUs in PCI order (the default).
func deviceGPU(dev string) (int, bool) {
	rest, ok := strings.CutPrefix(dev, "/dev/nvidia")
	if !ok || rest == "" {
		return 0, false
	}
	for i := 0; i < len(rest); i++ {
		if rest[i] < '0' || rest[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(rest)
	if err != nil {
		return 0, false
	}
	return n, true
}

// joinProcesses builds one GPUProcess per PID that nvidia-smi listed or that holds a
// /dev/nvidia* device open.
func (h *host) joinProcesses() {
	h.joinApps()
	h.joinHolders()
	h.joinSMIProcs()
	for pid, gp := range h.gpByPID {
		slices.Sort(gp.GPUs)
		gp.GPUs = slices.Compact(gp.GPUs)
		slices.Sort(gp.DeviceGPUs)
		gp.DeviceGPUs = slices.Compact(gp.DeviceGPUs)
		if len(gp.GPUs) == 0 {
			// nvidia-smi ties it to no GPU: the device files it holds are all that does.
			gp.GPUs = slices.Clone(gp.DeviceGPUs)
		}
		if p := h.procByPID[pid]; p != nil {
			h.fillFromProc(gp, p)
		}
	}
	h.procs = make([]GPUProcess, 0, len(h.gpByPID))
	for _, gp := range h.gpByPID {
		h.procs = append(h.procs, *gp)
	}
	slices.SortFunc(h.procs, func(a, b GPUProcess) int { return a.PID - b.PID })
	h.onGPU = map[int][]*GPUProcess{}
	for i := range h.procs {
		gp := &h.procs[i]
		h.gpByPID[gp.PID] = gp
		for _, g := range gp.GPUs {
			h.onGPU[g] = append(h.onGPU[g], gp)
		}
		for _, g := range gp.DeviceGPUs {
			if !slices.Contains(gp.GPUs, g) {
				h.onGPU[g] = append(h.onGPU[g], gp)
			}
		}
	}
}

// gpuProcess is the GPUProcess being joined for pid, made on first use.
func (h *host) gpuProcess(pid int) *GPUProcess {
	if gp, ok := h.gpByPID[pid]; ok {
		return gp
	}
	gp := &GPUProcess{PID: pid}
	h.gpByPID[pid] = gp
	return gp
}

// joinApps joins nvidia-smi's compute apps: their GPUs and memory.
func (h *host) joinApps() {
	for _, a := range h.s.Apps {
		gp := h.gpuProcess(a.PID)
		gp.Listed = true
		if gp.Name == "" {
			gp.Name = a.ProcessName
		}
		idx, ok := h.gpuByUUID[strings.ToUpper(a.GPUUUID)]
		if !ok {
			h.unmatched = append(h.unmatched, a)
			continue
		}
		gp.GPUs = append(gp.GPUs, idx)
		if a.UsedMiB != nil {
			if gp.GPUMemoryMiB == nil {
				gp.GPUMemoryMiB = map[int]int64{}
			}
			gp.GPUMemoryMiB[idx] += *a.UsedMiB
		}
	}
}

// joinHolders joins the processes holding /dev/nvidiaN open, as DeviceGPUs. /dev/nvidiaN is
// the GPU whose minor number is N; where nvidia-smi did not say, N is taken to be the index.
// A device file ties a process to a GPU only when nvidia-smi ties it to none (joinProcesses):
// CUDA opens every /dev/nvidiaN the process may see, whichever GPU it then uses.
func (h *host) joinHolders() {
	byMinor := map[int]int{}
	for _, g := range h.s.GPUs {
		if g.MinorNumber != nil {
			byMinor[*g.MinorNumber] = g.Index
		}
	}
	for _, d := range h.s.Holders {
		gp := h.gpuProcess(d.PID)
		if minor, ok := deviceGPU(d.Device); ok {
			idx, known := byMinor[minor]
			if !known {
				idx = minor
			}
			gp.DeviceGPUs = append(gp.DeviceGPUs, idx)
		}
	}
}

// fillFromProc joins what /proc says of the process.
func (h *host) fillFromProc(gp *GPUProcess, p *parse.Process) {
	gp.User = p.User
	gp.UID = p.UID
	gp.Argv = p.Argv
	if gp.Name == "" {
		gp.Name = p.Comm
	}
	gp.State = p.State
	gp.PPID = p.PPID
	if p.StartTime != nil {
		e := max(h.ref.Sub(*p.StartTime), 0)
		gp.Elapsed = &e
	}
	if u, ok := unitOf(p.Cgroup); ok {
		gp.Unit, gp.UnitUserUID = u.Name, u.UserUID
	}
	gp.Container = containerName(p.Cgroup)
	gp.Pod = h.podFacts(p)
	gp.SlurmJob = h.jobOf(p)
	gp.Shm = p.Shm
}

// containerName is "docker:<12 hex>", "containerd:<12 hex>" or "k8s pod <uid>".
func containerName(c parse.Cgroup) string {
	if c.PodUID != "" {
		return "k8s pod " + c.PodUID
	}
	if c.ContainerID == "" {
		return ""
	}
	rt := c.Runtime
	if rt == "" {
		rt = "container"
	}
	id := c.ContainerID
	if len(id) > 12 {
		id = id[:12]
	}
	return rt + ":" + id
}

// memMiB is the memory nvidia-smi lists for the process on all GPUs together.
func (gp *GPUProcess) memMiB() int64 {
	var n int64
	for _, m := range gp.GPUMemoryMiB {
		n += m
	}
	return n
}

// memGPUs are the GPU indexes where nvidia-smi lists memory for the process, sorted.
func (gp *GPUProcess) memGPUs() []int {
	var xs []int
	for g := range gp.GPUMemoryMiB {
		xs = append(xs, g)
	}
	slices.Sort(xs)
	return xs
}

// cmdline is the argv for display, or the name when argv is unknown (a kernel thread, an
// unreadable /proc entry, a process in a namespace the probe could not see).
func (h *host) cmdline(pid int) string {
	if p := h.procByPID[pid]; p != nil && len(p.Argv) > 0 {
		return fmtArgv(p.Argv, p.ArgvTruncated)
	}
	if gp := h.gpByPID[pid]; gp != nil && gp.Name != "" {
		return "[" + gp.Name + "]"
	}
	return "[command line unknown]"
}

// userName is "alice (uid 1000)", "uid 1000" or "unknown user".
func (h *host) userName(uid *int, name string) string {
	switch {
	case uid == nil && name == "":
		return "unknown user"
	case uid == nil:
		return name
	}
	if name == "" {
		name = h.uidNames[*uid]
	}
	if name == "" {
		return "uid " + strconv.Itoa(*uid)
	}
	return name + " (uid " + strconv.Itoa(*uid) + ")"
}

// notRoot reports whether the probe ran without root, so other users' /proc entries and
// file descriptors were hidden from it.
func (h *host) notRoot() bool {
	if h.s.Host.UID != nil && *h.s.Host.UID != 0 {
		return true
	}
	for _, n := range h.s.Notes {
		if n.Code == "not-root" {
			return true
		}
	}
	return false
}

// appsUnknown reports whether nvidia-smi's compute-app query did not run or failed, so an
// empty app list proves nothing.
func (h *host) appsUnknown() bool {
	if len(h.s.Sections) == 0 {
		return false // a snapshot built without section envelopes: trust the lists
	}
	for _, sec := range h.s.Sections {
		if sec.Name == "smi-apps" {
			return sec.ExitCode != nil && *sec.ExitCode != 0
		}
	}
	return true
}

// driverHelpers are daemons that keep /dev/nvidia* open on healthy hosts and hold little or
// no GPU memory, and the monitors people leave running (NVML opens every device); comm is
// cut at 15 bytes by the kernel, so names are prefixes.
var driverHelpers = []string{
	"nvidia-persiste", "nv-hostengine", "dcgm-exporter", "dcgmi", "nvidia-smi",
	"nv-fabricmanage", "nvidia-device-p", "nvidia_gpu_expo", "nvidia-dcgm", "gpu-feature-dis",
	"nvtop", "nvitop", "gpustat",
}

// isDriverHelper reports whether pid is a driver helper: named as one, and holding no memory
// nvidia-smi lists. Any user can give a process a helper's name; a helper holds little or no
// memory, so a process listed with memory is judged as any other.
func (h *host) isDriverHelper(pid int) bool {
	p := h.procByPID[pid]
	if p == nil {
		return false
	}
	if gp := h.gpByPID[pid]; gp != nil && gp.memMiB() > 0 {
		return false
	}
	return driverHelper(p.Comm, p.Argv)
}

// driverHelper reports whether a process of this comm and command line is a driver helper.
func driverHelper(comm string, argv []string) bool {
	names := []string{comm}
	if len(argv) > 0 {
		names = append(names, path.Base(argv[0]))
	}
	for _, n := range names {
		if n == "" {
			continue
		}
		for _, d := range driverHelpers {
			if strings.HasPrefix(n, d) {
				return true
			}
		}
	}
	return false
}

// isSessionScope reports whether a unit is a login session (session-N.scope): a process
// there was started by hand from a shell, not managed by a service.
func isSessionScope(unit string) bool {
	return strings.HasPrefix(unit, "session-") && strings.HasSuffix(unit, ".scope")
}

// jobKey names the job a process belongs to, for grouping healthy work and telling a
// process's own siblings from the host's other work.
func (h *host) jobKey(gp *GPUProcess) string {
	switch {
	case gp.Container != "":
		return gp.Container
	case gp.SlurmJob != "":
		return "slurm job " + gp.SlurmJob
	}
	if u, ok := h.procUnit(gp); ok && !isLoginUnit(u) {
		return h.unitLabel(u)
	}
	// A hand-started job: its topmost ancestor the probe described, so a launcher and its
	// per-GPU workers read as one; when the parent was not described in its own right (it
	// holds no GPU device: at most described as a parent), the workers group under their
	// common parent.
	cur := h.procByPID[gp.PID]
	if cur == nil {
		return "pid " + strconv.Itoa(gp.PID)
	}
	seen := map[int]bool{cur.PID: true}
	for steps := 0; cur.PPID != nil && *cur.PPID > 1 && !seen[*cur.PPID] && steps < maxAncestry; steps++ {
		parent := h.procByPID[*cur.PPID]
		if parent == nil || parent.ParentOnly {
			return "ppid " + strconv.Itoa(*cur.PPID)
		}
		pc := parent.Cgroup
		if u, ok := unitOf(pc); pc.ContainerID != "" || pc.PodUID != "" || pc.SlurmJob != "" || (ok && !isLoginUnit(u)) {
			break
		}
		seen[parent.PID] = true
		cur = parent
	}
	return "pid " + strconv.Itoa(cur.PID)
}

// busyJob is gpu-busy's job of key: its key, and the name that titles it (the first
// process's for the children of a PID, the leader's for a PID's tree).
func (h *host) busyJob(key string, procs []*GPUProcess) *BusyJob {
	j := &BusyJob{Key: key, Processes: len(procs), GPUMiB: map[int]int64{}}
	for _, gp := range procs {
		for g, m := range gp.GPUMemoryMiB {
			j.GPUMiB[g] += m
		}
	}
	if rest, ok := strings.CutPrefix(key, "pid "); ok {
		pid, _ := strconv.Atoi(rest)
		if p := h.procByPID[pid]; p != nil {
			j.Comm = p.Comm
		}
		return j
	}
	if rest, ok := strings.CutPrefix(key, "ppid "); ok && len(procs) > 0 {
		j.Launcher = procs[0].Launcher
		for _, gp := range procs {
			if strconv.Itoa(gp.LauncherPID) != rest || gp.Launcher != j.Launcher {
				j.Launcher = ""
			}
		}
		j.Comm = procs[0].Name
		if p := h.procByPID[procs[0].PID]; p != nil && p.Comm != "" {
			j.Comm = p.Comm
		}
	}
	return j
}
