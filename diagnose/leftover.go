package diagnose

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gputriage/gputriage/parse"
)

// A process is "much older than the host's other GPU work" when it has run at least
// olderFactor times as long as the oldest GPU process of any other job, and at least
// olderMargin longer.
const (
	olderFactor = 2
	olderMargin = time.Hour
)

// verifyGPU is the command that shows whether a fix gave GPU memory back.
const verifyGPU = "nvidia-smi --query-compute-apps=pid,used_memory --format=csv"

// transientShmPrefixes name /dev/shm files that runtimes create and unlink at once by design
// (NCCL, PyTorch's file_descriptor sharing, POSIX semaphores, Python's SharedMemory, Ray's
// object store, MPI/UCX transports): a live process mapping such a deleted file is normal.
var transientShmPrefixes = []string{
	"nccl-", "torch_", "sem.", "psm_", "plasma", "pulse-shm-", "cuda.shm", "vader", "ucx",
	"mpi", "__KMP", "wayland", "xshmfence", ".org.chromium", "lttng", "jack", "pym-",
}

// shmTop is the first path element below /dev/shm ("" when p is not under /dev/shm) and
// whether p is deeper than that.
func shmTop(p string) (top string, nested bool) {
	rest, ok := strings.CutPrefix(p, "/dev/shm/")
	if !ok {
		return "", false
	}
	top, _, nested = strings.Cut(rest, "/")
	return top, nested
}

// isTransientShm reports whether a /dev/shm file is a runtime's unlinked-by-design segment.
func isTransientShm(p string) bool {
	top, nested := shmTop(p)
	if nested || top == "" {
		return false
	}
	for _, pre := range transientShmPrefixes {
		if strings.HasPrefix(top, pre) {
			return true
		}
	}
	return false
}

// weightsExt are file extensions of model weights and checkpoints.
var weightsExt = []string{
	".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".npy", ".npz", ".h5", ".onnx",
	".msgpack", ".index",
}

// isDeliberatelyDeleted reports whether a deleted /dev/shm file looks like data someone
// removed by hand (a weights directory, a checkpoint), not a runtime's scratch segment.
func isDeliberatelyDeleted(p string) bool {
	if _, nested := shmTop(p); nested {
		return true
	}
	ext := strings.ToLower(path.Ext(p))
	return slices.Contains(weightsExt, ext)
}

// deletedShm are the process's deleted, non-transient /dev/shm files, one per path (the
// largest size seen wins), sorted by path.
func deletedShm(p *parse.Process) []parse.ShmUse {
	byPath := map[string]parse.ShmUse{}
	for _, u := range p.Shm {
		if !u.Deleted || isTransientShm(u.Path) {
			continue
		}
		prev, ok := byPath[u.Path]
		if !ok {
			byPath[u.Path] = u
			continue
		}
		prev.Mapped = prev.Mapped || u.Mapped
		prev.Open = prev.Open || u.Open
		if u.Bytes != nil && (prev.Bytes == nil || *u.Bytes > *prev.Bytes) {
			prev.Bytes = u.Bytes
		}
		byPath[u.Path] = prev
	}
	out := make([]parse.ShmUse, 0, len(byPath))
	for _, u := range byPath {
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b parse.ShmUse) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// leftoverVerdict is why a process looks abandoned. It is a leftover only with at least one
// strong reason; weak ones are shown alongside.
type leftoverVerdict struct {
	strong, weak []string
}

func (v leftoverVerdict) reasons() []string { return append(slices.Clone(v.strong), v.weak...) }

// managed reports whether something other than a login shell owns the process: a service, a
// container, a pod or a Slurm job. Orphaned processes there are normal (daemons re-parent).
func managed(gp *GPUProcess) bool {
	return gp.Container != "" || gp.SlurmJob != "" || (gp.Unit != "" && !isLoginUnit(unitRef{gp.Unit, gp.UnitUserUID}))
}

// judgeLeftovers fills h.leftovers for every GPU process that looks abandoned.
func (h *host) judgeLeftovers() {
	for i := range h.procs {
		gp := &h.procs[i]
		if len(gp.GPUs) == 0 || h.isDriverHelper(gp.PID) {
			continue
		}
		p := h.procByPID[gp.PID]
		if p == nil || p.Gone {
			continue
		}
		v := h.leftoverReasons(gp, p)
		if len(v.strong) > 0 {
			h.leftovers[gp.PID] = v
		}
	}
}

func (h *host) leftoverReasons(gp *GPUProcess, p *parse.Process) leftoverVerdict {
	var v leftoverVerdict
	ref, inUnit := h.procUnit(gp)
	if u := h.unitState(ref); inUnit && u != nil {
		switch u.ActiveState {
		case "inactive", "failed", "deactivating":
			s := fmt.Sprintf("its systemd unit %s is %s", h.unitLabel(ref), u.ActiveState)
			if u.Result != "" && u.Result != "success" {
				s += " (result: " + u.Result + ")"
			}
			v.strong = append(v.strong, s+", yet the process is still running")
		}
		if isSessionScope(u.Name) && u.SubState == "abandoned" {
			v.weak = append(v.weak, "the login session that started it ("+h.unitLabel(ref)+") has ended")
		}
	}
	if ref, older, ok := h.strayInUnit(gp); ok {
		s := fmt.Sprintf("it runs in %s's cgroup but not under the unit's current main process: it was orphaned (parent PID 1)", h.unitLabel(ref))
		if older {
			v.strong = append(v.strong, s+" and started before that main process, so an earlier stop or restart of the unit left it behind (KillMode=process)")
		} else {
			v.weak = append(v.weak, s)
		}
	}
	switch p.State {
	case "Z":
		v.strong = append(v.strong, "it is a zombie (state Z): it has exited but its parent has not reaped it")
	case "T":
		v.strong = append(v.strong, "it is stopped (state T, e.g. suspended with Ctrl-Z or SIGSTOP)")
	case "t":
		v.weak = append(v.weak, "it is stopped by a debugger (state t)")
	}
	h.cleanedUpReasons(&v, gp, p)
	h.addSlurmReasons(&v, gp)
	orphan := gp.PPID != nil && *gp.PPID == 1 && !managed(gp)
	older, olderBy := h.muchOlder(gp)
	switch {
	case orphan && older:
		v.strong = append(v.strong, "it is orphaned (parent PID 1, outside any service, container or Slurm job) and "+olderBy)
	case orphan:
		v.weak = append(v.weak, "it is orphaned: parent PID 1, outside any service, container or Slurm job")
	case older:
		v.weak = append(v.weak, olderBy)
	}
	return v
}

// cleanedUpReasons adds what says someone cleaned up after gp as if it were gone: deleted
// /dev/shm files it maps, a model path on its command line that no longer exists. Anyone who
// may write the directory can delete those, so they do not make abandoned the live service of
// a unit its own manager reports running (servedUnit): there they are weak reasons only.
func (h *host) cleanedUpReasons(v *leftoverVerdict, gp *GPUProcess, p *parse.Process) {
	var cleaned []string
	var deliberate, other []string
	for _, u := range deletedShm(p) {
		if isDeliberatelyDeleted(u.Path) {
			deliberate = append(deliberate, u.Path)
		} else {
			other = append(other, u.Path)
		}
	}
	if len(deliberate) > 0 {
		cleaned = append(cleaned, "files it maps from /dev/shm were deleted ("+listSome(deliberate, 2)+"): someone cleaned up after it as if it were gone")
	}
	if len(other) > 0 {
		v.weak = append(v.weak, "it maps deleted /dev/shm files ("+listSome(other, 2)+")")
	}
	// Inside a container the path is resolved in the container's mount namespace, which the
	// probe did not look into: a missing path proves nothing there.
	if gp.Container == "" {
		for _, m := range p.ModelPaths {
			if !m.Exists {
				cleaned = append(cleaned, "the model path on its command line, "+m.Path+", no longer exists")
			}
		}
	}
	if u, ok := h.servedUnit(gp); ok {
		for _, c := range cleaned {
			v.weak = append(v.weak, c+"; but "+h.unitLabel(u)+" is running with it as its main process or under it, so that alone does not make it abandoned")
		}
		return
	}
	v.strong = append(v.strong, cleaned...)
}

// muchOlder reports whether gp has run much longer than every GPU process of the other
// jobs it is compared with: its own user's and the system's services' (see ageClass). Another
// user's work is no yardstick: anyone can start a GPU process at any time, and that must not
// make a healthy long-running server look abandoned.
func (h *host) muchOlder(gp *GPUProcess) (bool, string) {
	if gp.Elapsed == nil {
		return false, ""
	}
	key := h.jobKey(gp)
	classes := []string{systemClass}
	if gp.UID != nil {
		classes = append(classes, uidClass(*gp.UID))
	}
	var oldest time.Duration
	found := false
	for _, c := range classes {
		for _, j := range h.twoOldestJobs()[c] {
			if j.key != key {
				if !found || j.elapsed > oldest {
					oldest, found = j.elapsed, true
				}
				break
			}
		}
	}
	if !found {
		return false, ""
	}
	if *gp.Elapsed >= olderFactor*oldest && *gp.Elapsed-oldest >= olderMargin {
		return true, fmt.Sprintf("it has run for %s, while the other GPU work of its user and of the host's services started at most %s ago", FormatAge(*gp.Elapsed), FormatAge(oldest))
	}
	return false, ""
}

func listSome(xs []string, n int) string {
	if len(xs) <= n {
		return strings.Join(xs, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(xs[:n], ", "), len(xs)-n)
}

// shortCmd is a process's command in a few words: "python3 -m sglang.launch_server".
func shortCmd(gp *GPUProcess) string {
	if len(gp.Argv) == 0 {
		if gp.Name != "" {
			return path.Base(gp.Name)
		}
		return "process"
	}
	words := []string{path.Base(gp.Argv[0])}
	if strings.HasPrefix(words[0], "python") && len(gp.Argv) > 2 && gp.Argv[1] == "-m" {
		words = append(words, "-m", gp.Argv[2])
	} else if strings.HasPrefix(words[0], "python") && len(gp.Argv) > 1 && !strings.HasPrefix(gp.Argv[1], "-") {
		words = append(words, path.Base(gp.Argv[1]))
	}
	return fmtArgv(words, false)
}

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

// killCommands are the commands to stop one unmanaged process: SIGTERM, and SIGKILL if it is
// still there 30 s later.
func (h *host) killCommands(gp *GPUProcess) []string {
	pid := strconv.Itoa(gp.PID)
	sudo := h.sudo(gp.UID)
	cmds := []string{sudo + "kill " + pid}
	if gp.State == "T" || gp.State == "t" {
		// A stopped process only acts on SIGTERM once continued.
		cmds[0] += "; " + sudo + "kill -CONT " + pid
	}
	return append(cmds, "sleep 30; kill -0 "+pid+" 2>/dev/null && "+sudo+"kill -9 "+pid)
}

// stopCommands are the commands that would make gp exit, through whatever owns it. Each acts
// only on what the evidence names: the container, pod or job the cgroup names, a unit its own
// manager ties to gp (see stoppableUnit), or else the PID itself. Every name from the host is
// quoted by shellArg and placed after "--".
func (h *host) stopCommands(gp *GPUProcess) []string {
	p := h.procByPID[gp.PID]
	var c parse.Cgroup
	if p != nil {
		c = p.Cgroup
	}
	switch {
	case c.PodUID != "":
		return []string{
			"kubectl get pods -A -o custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,UID:.metadata.uid | grep -F -- " + shellArg(c.PodUID),
			"kubectl delete pod -n NAMESPACE -- NAME  # NAMESPACE and NAME from the line above",
		}
	case c.ContainerID != "" && (c.Runtime == "docker" || c.Runtime == "podman"):
		return []string{c.Runtime + " stop -- " + shellArg(short(c.ContainerID))}
	case c.ContainerID != "" && (c.Runtime == "containerd" || c.Runtime == "cri-o" || c.Runtime == "crio"):
		return []string{h.sudo(nil) + "crictl stop -- " + shellArg(c.ContainerID)}
	case c.SlurmJob != "":
		return h.slurmStopCommands(gp, c.SlurmJob)
	case gp.State == "Z":
		return h.zombieCommands(gp)
	}
	if u, ok := h.stoppableUnit(gp); ok {
		return []string{h.unitStopCommand(u)}
	}
	return h.killCommands(gp)
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// zombieCommands: a zombie cannot be killed, only reaped by its parent. Killing the parent
// hands it to init, which reaps it. A zombie that still holds GPU memory has threads stuck
// in the driver; those show as D in ps.
func (h *host) zombieCommands(gp *GPUProcess) []string {
	pid := strconv.Itoa(gp.PID)
	var cmds []string
	if gp.PPID != nil && *gp.PPID > 1 {
		pp := strconv.Itoa(*gp.PPID)
		var owner *int
		if parent := h.procByPID[*gp.PPID]; parent != nil {
			owner = parent.UID
		}
		cmds = append(cmds, h.sudo(owner)+"kill "+pp+"  # the parent, which should have reaped "+pid)
	}
	return append(cmds,
		"ps -L -o pid,lwp,stat,wchan:32,cmd -p "+pid+"  # threads in state D are stuck in the driver",
		h.sudo(nil)+"dmesg -T | grep -iE 'NVRM|Xid'")
}

// stateNames are the /proc/PID/stat states, for people.
var stateNames = map[string]string{
	"R": "running", "S": "sleeping", "D": "uninterruptible wait, usually in the kernel or a driver",
	"Z": "zombie", "T": "stopped", "t": "stopped by a debugger", "I": "idle kernel thread", "X": "dead",
}

// leftoverFindings reports each process judgeLeftovers flagged.
func (h *host) leftoverFindings() []Finding {
	var out []Finding
	var folded []int
	for i := range h.procs {
		gp := &h.procs[i]
		v, ok := h.leftovers[gp.PID]
		switch {
		case !ok:
		case len(out) == maxDetailed:
			folded = append(folded, gp.PID)
		default:
			out = append(out, h.leftoverFinding(gp, v))
		}
	}
	if len(folded) > 0 {
		out = append(out, foldedFinding(CodeLeftoverProcess, Error, "look abandoned", folded))
	}
	return out
}

func (h *host) leftoverFinding(gp *GPUProcess, v leftoverVerdict) Finding {
	p := h.procByPID[gp.PID]
	holds := "holds " + FormatGPUs(gp.GPUs)
	if mem := gp.memMiB(); mem > 0 {
		holds = "holds " + fmtMiB(mem) + " on " + FormatGPUs(gp.memGPUs())
	}
	f := Finding{
		Code:     CodeLeftoverProcess,
		Severity: Error,
		Title:    fmt.Sprintf("PID %d looks abandoned: %s %s", gp.PID, shortCmd(gp), holds),
		GPUs:     slices.Clone(gp.GPUs),
		PIDs:     []int{gp.PID},
	}
	reasons := v.reasons()
	var ex strings.Builder
	fmt.Fprintf(&ex, "PID %d %s, but it looks left over from an earlier run: %s. ", gp.PID, holds, strings.Join(reasons, "; "))
	ex.WriteString("Until it exits, that GPU memory is unavailable to new jobs, and a tensor-parallel job that spans these GPUs will refuse to start or run out of memory. ")
	if gp.State == "Z" {
		ex.WriteString("A zombie cannot be killed: its parent has to reap it, which happens when the parent exits. A zombie that still holds GPU memory usually has threads stuck in the driver; if killing the parent does not free it, only a reboot will.")
	} else {
		ex.WriteString("Stop it with the commands below (gputriage never runs them); check first that nobody still needs it.")
	}
	f.Explanation = ex.String()

	f.Evidence = append(f.Evidence, "cmdline: "+h.cmdline(gp.PID))
	f.Evidence = append(f.Evidence, "user: "+h.userName(gp.UID, gp.User))
	if gp.Elapsed != nil {
		line := "running for " + FormatAge(*gp.Elapsed)
		if p != nil && p.StartTime != nil {
			line += " (started " + fmtTime(*p.StartTime) + ")"
		}
		f.Evidence = append(f.Evidence, line)
	}
	if gp.State != "" {
		line := "state: " + gp.State
		if n := stateNames[gp.State]; n != "" {
			line += " (" + n + ")"
		}
		f.Evidence = append(f.Evidence, line)
	}
	if gp.PPID != nil {
		line := "parent: PID " + strconv.Itoa(*gp.PPID)
		if *gp.PPID == 1 && !managed(gp) {
			line += " (orphaned: re-parented to init)"
		} else if pp := h.procByPID[*gp.PPID]; pp != nil && pp.Comm != "" {
			_, bad := h.leftovers[pp.PID]
			if parent := h.gpByPID[pp.PID]; parent != nil && !bad && gp.State != "Z" && parent.memMiB() > 0 {
				// The parent is GPU work judged healthy: say so, lest its PID read as blame.
				line += " (" + pp.Comm + ", looks healthy)"
			} else {
				line += " (" + pp.Comm + ")"
			}
		}
		f.Evidence = append(f.Evidence, line)
	}
	f.Evidence = append(f.Evidence, h.ownerEvidence(gp)...)
	for _, g := range gp.memGPUs() {
		f.Evidence = append(f.Evidence, fmt.Sprintf("GPU %d: %s", g, fmtMiBGiB(gp.GPUMemoryMiB[g])))
	}
	if p != nil {
		for _, u := range deletedShm(p) {
			f.Files = append(f.Files, u.Path)
		}
		for _, m := range p.ModelPaths {
			if !m.Exists && gp.Container == "" {
				f.Files = append(f.Files, m.Path)
			}
		}
	}
	for _, r := range reasons {
		f.Evidence = append(f.Evidence, "reason: "+r)
	}
	f.Fix = append(h.stopCommands(gp), verifyGPU)
	return f
}

// ownerEvidence names the unit, container and job a process runs in.
func (h *host) ownerEvidence(gp *GPUProcess) []string {
	var ev []string
	if ref, ok := h.procUnit(gp); ok {
		line := "systemd unit: " + h.unitLabel(ref)
		if u := h.unitState(ref); u != nil {
			line += " (" + u.ActiveState
			if u.SubState != "" {
				line += "/" + u.SubState
			}
			if u.Result != "" && u.Result != "success" {
				line += ", result " + u.Result
			}
			line += ")"
		} else {
			line += " (state unknown: its manager's answer for it was not in the capture)"
		}
		ev = append(ev, line)
	}
	if gp.Container != "" {
		ev = append(ev, "container: "+gp.Container)
	}
	if gp.SlurmJob != "" {
		line := "Slurm job: " + gp.SlurmJob
		if p := h.procByPID[gp.PID]; p != nil && p.Cgroup.SlurmStep != "" {
			line += " step " + p.Cgroup.SlurmStep
		}
		ev = append(ev, line)
	}
	return ev
}

// shmDeletedFindings reports, per process, the deleted /dev/shm files it keeps alive.
func (h *host) shmDeletedFindings() []Finding {
	holders := map[string][]int{} // path -> PIDs that keep it
	perPID := map[int][]parse.ShmUse{}
	var pids []int
	for i := range h.s.Processes {
		p := &h.s.Processes[i]
		if p.Gone {
			continue
		}
		uses := deletedShm(p)
		if len(uses) == 0 {
			continue
		}
		perPID[p.PID] = uses
		pids = append(pids, p.PID)
		for _, u := range uses {
			holders[u.Path] = append(holders[u.Path], p.PID)
		}
	}
	slices.Sort(pids)
	var out []Finding
	var folded []int
	if len(pids) > maxDetailed {
		pids, folded = pids[:maxDetailed], pids[maxDetailed:]
	}
	for _, pid := range pids {
		out = append(out, h.shmDeletedFinding(pid, perPID[pid], holders))
	}
	if len(folded) > 0 {
		out = append(out, foldedFinding(CodeShmDeletedMapped, Warning, "keep deleted /dev/shm files in RAM", folded))
	}
	return out
}

// shmDeletedFinding is the finding for one process and the deleted /dev/shm files it keeps;
// holders maps each path to every PID that keeps it.
func (h *host) shmDeletedFinding(pid int, uses []parse.ShmUse, holders map[string][]int) Finding {
	var total int64
	unknown := 0
	f := Finding{Code: CodeShmDeletedMapped, Severity: Warning, PIDs: []int{pid}}
	for _, u := range uses {
		f.Files = append(f.Files, u.Path)
		size := "size unknown"
		if u.Bytes != nil {
			total += *u.Bytes
			size = fmtBytes(*u.Bytes)
		} else {
			unknown++
		}
		how := []string{}
		if u.Mapped {
			how = append(how, "mapped")
		}
		if u.Open {
			how = append(how, "open")
		}
		line := fmt.Sprintf("%s (deleted): %s", u.Path, size)
		if len(how) > 0 {
			line += ", " + strings.Join(how, " and ")
		}
		if others, more := someOthers(holders[u.Path], pid); len(others) > 0 {
			line += ", also kept by " + fmtPIDs(others)
			if more > 0 {
				line += fmt.Sprintf(" and %d more", more)
			}
		}
		f.Evidence = append(f.Evidence, line)
	}
	amount := fmtBytes(total)
	if unknown > 0 && total == 0 {
		amount = "an unknown amount"
	} else if unknown > 0 {
		amount = "at least " + amount
	}
	n := len(uses)
	f.Title = fmt.Sprintf("PID %d keeps %s of deleted /dev/shm %s in RAM", pid, amount, plural(n, "file", "files"))
	gp := h.gpByPID[pid]
	if gp == nil {
		// Not a GPU process: describe it from /proc alone.
		p := h.procByPID[pid]
		gp = &GPUProcess{PID: pid, Argv: p.Argv, Name: p.Comm, State: p.State, PPID: p.PPID, UID: p.UID, User: p.User,
			Container: containerName(p.Cgroup), SlurmJob: p.Cgroup.SlurmJob}
		if u, ok := unitOf(p.Cgroup); ok {
			gp.Unit, gp.UnitUserUID = u.Name, u.UserUID
		}
	}
	f.GPUs = slices.Clone(gp.GPUs)
	head := []string{"held by PID " + strconv.Itoa(pid) + ": " + h.cmdline(pid), "user: " + h.userName(gp.UID, gp.User)}
	head = append(head, h.ownerEvidence(gp)...)
	f.Evidence = append(head, append(f.Evidence, "total: "+amount)...)
	f.Explanation = fmt.Sprintf("%d %s under /dev/shm %s deleted (with rm, or by the program itself) while PID %d still maps or holds %s open. "+
		"/dev/shm is RAM: deleting a file there only removes its name, and the memory is freed when the last process using it exits. "+
		"Running rm again, or dropping caches, does not help; nor does it give back any GPU memory the process holds. "+
		"The RAM comes back only when PID %d (and any other process listed) exits.",
		n, plural(n, "file", "files"), plural(n, "was", "were"), pid, plural(n, "it", "them"), pid)
	f.Fix = append(h.stopCommands(gp), "df -h /dev/shm")
	if u, ok := h.servedUnit(gp); ok && h.leftovers[pid].strong == nil {
		// Its unit's manager vouches for it: the RAM is a fact worth knowing, the process
		// no problem to stop.
		f.Severity, f.Fix = Info, []string{"df -h /dev/shm"}
		f.Explanation += fmt.Sprintf(" PID %d is the live service of %s, which its manager reports running: it looks healthy, and nothing here stops it.",
			pid, h.unitLabel(u))
	}
	return f
}

// maxOthers bounds the other holders a line names: on a host where thousands of processes
// keep the same file, listing them all in each process's finding would be quadratic.
const maxOthers = 10

// someOthers is up to maxOthers of xs other than x, and how many more there are; x is in xs
// once (the holders of a file include the process whose finding this is).
func someOthers(xs []int, x int) (others []int, more int) {
	for _, y := range xs {
		if y == x {
			continue
		}
		if len(others) == maxOthers {
			return others, len(xs) - 1 - maxOthers
		}
		others = append(others, y)
	}
	return others, 0
}

// twoOldestJobs finds, once per host and per age class, the two oldest jobs that hold GPU
// memory (each aged by its oldest process), so muchOlder costs O(1) per process rather than a pass over all of
// them: a host with thousands of GPU processes stays linear.
func (h *host) twoOldestJobs() map[string][]jobAge {
	if h.oldestJobs != nil {
		return h.oldestJobs
	}
	byJob := map[string]map[string]time.Duration{} // class -> job -> its oldest process
	for i := range h.procs {
		o := &h.procs[i]
		if o.Elapsed == nil || o.memMiB() <= 0 {
			continue
		}
		c := h.ageClass(o)
		if byJob[c] == nil {
			byJob[c] = map[string]time.Duration{}
		}
		k := h.jobKey(o)
		if d, ok := byJob[c][k]; !ok || *o.Elapsed > d {
			byJob[c][k] = *o.Elapsed
		}
	}
	h.oldestJobs = map[string][]jobAge{}
	for c, jobs := range byJob {
		h.oldestJobs[c] = twoOldest(jobs)
	}
	return h.oldestJobs
}

// systemClass is the age class of work the system manager runs: its services and containers,
// which no unprivileged user can start.
const systemClass = "system"

func uidClass(uid int) string { return "uid " + strconv.Itoa(uid) }

// ageClass is whose work o is, for comparing ages: the system's (a system unit that is not a
// login unit, or a container) or its user's; "" when neither is known.
func (h *host) ageClass(o *GPUProcess) string {
	if u, ok := h.procUnit(o); (ok && u.UserUID == nil && !isLoginUnit(u)) || o.Container != "" {
		return systemClass
	}
	if o.UID != nil {
		return uidClass(*o.UID)
	}
	return ""
}

// twoOldest are the two oldest of jobs, oldest first.
func twoOldest(jobs map[string]time.Duration) []jobAge {
	var best []jobAge
	for k, d := range jobs {
		j := jobAge{k, d}
		switch {
		case len(best) < 2:
			best = append(best, j)
		case older(j, best[1]):
			best[1] = j
		}
		if len(best) == 2 && older(best[1], best[0]) {
			best[0], best[1] = best[1], best[0]
		}
	}
	return best
}

// older orders jobs by age, then key, so ties resolve the same way every run.
func older(a, b jobAge) bool {
	if a.elapsed != b.elapsed {
		return a.elapsed > b.elapsed
	}
	return a.key < b.key
}
