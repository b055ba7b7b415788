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

// isTransientShm reports whether a /dev/shm file is a runtime's unlinked-by-design segment,
// at any depth (PyTorch's torch_PID in a directory of the job's is as normal as at the top):
// its name starts like one and does not end like model weights.
func isTransientShm(p string) bool {
	if top, _ := shmTop(p); top == "" {
		return false
	}
	name := path.Base(p)
	if isWeights(name) {
		return false
	}
	for _, pre := range transientShmPrefixes {
		if strings.HasPrefix(name, pre) {
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
	return isWeights(p)
}

// isWeights reports whether a file's name ends like model weights or a checkpoint.
func isWeights(p string) bool {
	return slices.Contains(weightsExt, strings.ToLower(path.Ext(p)))
}

// shmFileKey names a /dev/shm file a process keeps, for telling who else keeps it: its path
// and, when the probe read it, its device and inode. A deleted file's name is free for anyone
// to use again: a file made under it later, by anyone, is another file.
func shmFileKey(u parse.ShmUse) string {
	if u.File == "" {
		return u.Path
	}
	return u.Path + "\x00" + u.File
}

// deletedShm are the process's deleted /dev/shm files worth a word, one per path (the
// largest size seen wins), sorted by path: not a runtime's segments (isTransientShm), and
// none of zero bytes, which keeps no RAM and frees nothing when its holder ends.
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
		if u.Bytes == nil || *u.Bytes > 0 {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b parse.ShmUse) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// leftoverVerdict is why a process looks abandoned. It is a leftover only with at least one
// strong reason; weak ones are shown alongside.
type leftoverVerdict struct {
	strong, weak []Reason
}

// reasons are the verdict's reasons, strong first.
func (v leftoverVerdict) reasons() []Reason { return append(slices.Clone(v.strong), v.weak...) }

func (v *leftoverVerdict) add(r Reason) {
	if r.Strong {
		v.strong = append(v.strong, r)
	} else {
		v.weak = append(v.weak, r)
	}
}

// managed reports whether something other than a login shell owns the process: a service, a
// container, a pod or a Slurm job. Orphaned processes there are normal (daemons re-parent).
func managed(gp *GPUProcess) bool {
	return gp.Container != "" || gp.SlurmJob != "" || (gp.Unit != "" && !isLoginUnit(unitRef{gp.Unit, gp.UnitUserUID}))
}

// judgeLeftovers fills h.leftovers for every GPU process that looks abandoned.
func (h *host) judgeLeftovers() {
	for i := range h.procs {
		gp := &h.procs[i]
		if len(gp.GPUs) == 0 || h.isDriverHelper(gp.PID) || h.protected(gp) {
			continue // graphics work, a desktop and a serving MPS daemon are never culprits
		}
		p := h.procByPID[gp.PID]
		if p == nil || p.Gone {
			continue
		}
		v := h.leftoverReasons(gp, p)
		switch {
		case len(v.strong) > 0:
			h.leftovers[gp.PID] = v
		case slices.ContainsFunc(v.weak, func(r Reason) bool { return r.OthersMay != nil && r.ServedBy == "" }):
			// It would look abandoned, but on evidence another user could have made.
			h.unconfirmed[gp.PID] = v
		}
	}
}

// leftoverReasons judges gp: every reason it looks abandoned, as typed facts.
func (h *host) leftoverReasons(gp *GPUProcess, p *parse.Process) leftoverVerdict {
	var v leftoverVerdict
	pid := gp.PID
	ref, inUnit := h.procUnit(gp)
	if u := h.unitState(ref); inUnit && u != nil {
		switch u.ActiveState {
		case "inactive", "failed", "deactivating":
			r := Reason{Code: ReasonUnitStopped, Strong: true, PID: pid, Unit: h.unitLabel(ref), State: u.ActiveState}
			if u.Result != "success" {
				r.Result = u.Result
			}
			v.add(r)
		}
		if isSessionScope(u.Name) && u.SubState == "abandoned" {
			v.add(Reason{Code: ReasonSessionEnded, PID: pid, Unit: h.unitLabel(ref)})
		}
	}
	if ref, older, ok := h.strayInUnit(gp); ok {
		v.add(Reason{Code: ReasonStrayInUnit, Strong: older, Older: older, PID: pid, Unit: h.unitLabel(ref)})
	}
	switch {
	case zombieLeader(p):
		v.add(Reason{Code: ReasonZombieLeader, Strong: true, PID: pid, State: p.State, Detail: strconv.Itoa(*p.Threads - 1)})
	case p.State == "Z":
		r := Reason{Code: ReasonZombie, Strong: true, PID: pid, State: p.State}
		h.zombieParent(gp, &r)
		v.add(r)
	}
	switch p.State {
	case "T":
		v.add(Reason{Code: ReasonStopped, Strong: true, PID: pid, State: p.State})
	case "t":
		v.add(Reason{Code: ReasonTraced, PID: pid, State: p.State})
	}
	h.cleanedUpReasons(&v, gp, p)
	for _, r := range append(h.slurmReasons(gp), h.podReasons(gp)...) {
		v.add(r)
	}
	tree := false
	for _, judge := range []func(*GPUProcess) (Reason, bool){h.orphanedWorker, h.olderGeneration, h.olderAttempt} {
		if r, ok := judge(gp); ok {
			v.add(r)
			tree = true
		}
	}
	orphan := gp.PPID != nil && *gp.PPID == 1 && !managed(gp)
	age, than, older := h.muchOlder(gp)
	switch {
	case older:
		v.add(Reason{Code: ReasonMuchOlder, Orphaned: orphan, PID: pid, Age: age, Than: than})
	case orphan && !tree: // the tree's reasons say it, and more
		v.add(Reason{Code: ReasonOrphaned, PID: pid})
	}
	return v
}

// cleanedUpReasons adds what says someone cleaned up after gp as if it were gone: deleted
// /dev/shm files it maps, a model path on its command line that no longer exists. Anyone who
// may write the directory can delete those, so they do not make abandoned the live service of
// a unit its own manager reports running (servedUnit): there they are weak reasons only. Nor
// do they anywhere when a user other than gp's owner and root could have deleted or renamed
// them (OthersMay: evidence.go).
func (h *host) cleanedUpReasons(v *leftoverVerdict, gp *GPUProcess, p *parse.Process) {
	var cleaned []Reason
	var deliberate, other []string
	for _, u := range deletedShm(p) {
		if isDeliberatelyDeleted(u.Path) {
			deliberate = append(deliberate, u.Path)
		} else {
			other = append(other, u.Path)
		}
	}
	if len(deliberate) > 0 {
		cleaned = append(cleaned, Reason{Code: ReasonShmDeleted, PID: gp.PID, Paths: deliberate, OthersMay: h.shmPathsOthersMay(p, deliberate)})
	}
	if len(other) > 0 {
		v.add(Reason{Code: ReasonScratchDeleted, PID: gp.PID, Paths: other})
	}
	// Inside a container the path is resolved in the container's mount namespace, which the
	// probe did not look into: a missing path proves nothing there.
	if gp.Container == "" {
		for _, m := range p.ModelPaths {
			if !m.Exists {
				cleaned = append(cleaned, Reason{Code: ReasonModelPathGone, PID: gp.PID, Paths: []string{m.Path}, OthersMay: h.modelOthersMay(p, m)})
			}
		}
	}
	u, served := h.servedUnit(gp)
	for _, r := range cleaned {
		if served {
			r.ServedBy = h.unitLabel(u)
		}
		r.Strong = !served && r.OthersMay == nil
		v.add(r)
	}
}

// muchOlder reports whether gp has run much longer than every GPU process of the other
// jobs it is compared with: its own user's, and for a process of a system user (root's
// server, the ct200 leftover) the system's services' too (see ageClass). Another user's work
// is no yardstick: anyone can start a GPU process at any time, and that must not make a
// healthy long-running server look abandoned. Nor is a system service for a person's own
// server: any user of a service's API may crash it, systemd restarts it, and its new age says
// nothing of the other server. Nor is graphics work or a serving MPS daemon (protected): a
// desktop's Xorg, run as its user, starts anew at each login.
func (h *host) muchOlder(gp *GPUProcess) (age, than time.Duration, ok bool) {
	if gp.Elapsed == nil {
		return 0, 0, false
	}
	key := h.jobKey(gp)
	var classes []string
	if gp.UID == nil || *gp.UID <= maxSystemUID {
		classes = append(classes, systemClass)
	}
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
	if !found || *gp.Elapsed < olderFactor*oldest || *gp.Elapsed-oldest < olderMargin {
		return 0, 0, false
	}
	return *gp.Elapsed, oldest, true
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

// stateNames are the /proc/PID/stat states, for people.
var stateNames = map[string]string{
	"R": "running", "S": "sleeping", "D": "uninterruptible wait, usually in the kernel or a driver",
	"Z": "zombie", "T": "stopped", "t": "stopped by a debugger", "I": "idle kernel thread", "X": "dead",
}

// leftoverFindings reports each process judgeLeftovers flagged.
func (h *host) leftoverFindings() []Finding {
	return h.verdictFindings(h.leftovers, h.leftoverFinding, CodeLeftoverProcess, Error, "look abandoned")
}

// verdictFindings reports each GPU process with a verdict in verdicts, by one, in PID order:
// maxDetailed of them, the rest folded into one finding of code and sev saying what they do.
func (h *host) verdictFindings(verdicts map[int]leftoverVerdict, one func(*GPUProcess, leftoverVerdict) Finding,
	code string, sev Severity, what string) []Finding {
	var out []Finding
	var folded []int
	for i := range h.procs {
		gp := &h.procs[i]
		v, ok := verdicts[gp.PID]
		switch {
		case !ok:
		case len(out) == maxDetailed:
			folded = append(folded, gp.PID)
		default:
			out = append(out, one(gp, v))
		}
	}
	if len(folded) > 0 {
		out = append(out, foldedFinding(code, sev, what, folded))
	}
	return out
}

// leftoverFinding is the finding for one process judged left over.
func (h *host) leftoverFinding(gp *GPUProcess, v leftoverVerdict) Finding {
	f := Finding{
		Code:     CodeLeftoverProcess,
		Severity: Error,
		GPUs:     slices.Clone(gp.GPUs),
		PIDs:     []int{gp.PID},
		Reasons:  v.reasons(),
		Actions:  []Action{h.stopAction(gp)},
		Checks:   []Command{verifyGPU},
	}
	f.Files = h.cleanedFiles(gp)
	h.name(&f, gp.PID)
	leftoverWords(&f)
	return f
}

// cleanedFiles are the files whose loss cleanedUpReasons weighs: the deleted /dev/shm files gp
// maps, the missing model paths on its command line.
func (h *host) cleanedFiles(gp *GPUProcess) []string {
	var files []string
	if p := h.procByPID[gp.PID]; p != nil {
		for _, u := range deletedShm(p) {
			files = append(files, u.Path)
		}
		for _, m := range p.ModelPaths {
			if !m.Exists && gp.Container == "" {
				files = append(files, m.Path)
			}
		}
	}
	return files
}

// shmDeletedFindings reports, per process, the deleted /dev/shm files it keeps alive.
func (h *host) shmDeletedFindings() []Finding {
	holders := map[string][]int{} // shmFileKey -> PIDs that keep it
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
			k := shmFileKey(u)
			holders[k] = append(holders[k], p.PID)
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
	f := Finding{Code: CodeShmDeletedMapped, Severity: Warning, PIDs: []int{pid}, Checks: []Command{verifyShm}}
	for _, u := range uses {
		f.Files = append(f.Files, u.Path)
		others, more := someOthers(holders[shmFileKey(u)], pid)
		f.Shm = append(f.Shm, ShmFile{Path: u.Path, Bytes: u.Bytes, Deleted: true, Mapped: u.Mapped, Open: u.Open,
			PIDs: append([]int{pid}, others...), MorePIDs: more, ByName: u.File == "" && len(others) > 0})
	}
	gp := h.gpByPID[pid]
	if gp == nil {
		gp = h.plainProcess(pid)
	}
	f.GPUs = slices.Clone(gp.GPUs)
	served := ""
	var others *OthersMay
	if p := h.procByPID[pid]; p != nil && h.leftovers[pid].strong == nil {
		others = h.shmPathsOthersMay(p, f.Files)
	}
	if u, ok := h.servedUnit(gp); ok && h.leftovers[pid].strong == nil {
		// Its unit's manager vouches for it: the RAM is a fact worth knowing, the process
		// no problem to stop.
		f.Severity, served = Info, h.unitLabel(u)
	} else if others != nil {
		// Another user could have deleted its files: that is no fault of the process.
		f.Severity = Info
	} else if h.protected(gp) {
		f.Severity = Info // a desktop or a serving MPS daemon: a fact, never a fix
	} else {
		f.Actions = []Action{h.stopAction(gp)}
	}
	f.ServedBy, f.OthersMay = served, others
	h.name(&f, pid)
	for _, sf := range f.Shm {
		h.name(&f, sf.PIDs...)
	}
	shmDeletedWords(&f)
	return f
}

// plainProcess describes a process that holds no GPU from /proc alone, as a GPUProcess.
func (h *host) plainProcess(pid int) *GPUProcess {
	p := h.procByPID[pid]
	gp := &GPUProcess{PID: pid, Argv: p.Argv, Name: p.Comm, State: p.State, PPID: p.PPID, UID: p.UID, User: p.User,
		Container: containerName(p.Cgroup), SlurmJob: p.Cgroup.SlurmJob}
	if u, ok := unitOf(p.Cgroup); ok {
		gp.Unit, gp.UnitUserUID = u.Name, u.UserUID
	}
	return gp
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
		if o.Elapsed == nil || o.memMiB() <= 0 || h.protected(o) {
			continue // a display restarts at each login, an MPS server with its clients: no yardstick
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

// systemClass is the age class of work the system manager runs as system users: its services
// and containers, which no unprivileged user can start.
const systemClass = "system"

// maxSystemUID is the highest uid of a system user (systemd's SYSTEM_UID_MAX, login.defs'
// SYS_UID_MAX): the users services run as, never a person's.
const maxSystemUID = 999

func uidClass(uid int) string { return "uid " + strconv.Itoa(uid) }

// ageClass is whose work o is, for comparing ages: the system's (a system unit that is not a
// login unit, or a container, run as a system user) or its user's; "" when neither is known.
func (h *host) ageClass(o *GPUProcess) string {
	// A system unit or container may run a user's own work too, started when that user chose:
	// a Slurm job under cgroup/v2 (slurmstepd.scope), a notebook hub's spawner, a batch
	// starter. Only what runs there as a system user (a uid below 1000, as systemd counts
	// them) is the host's.
	sys := o.UID == nil || *o.UID <= maxSystemUID
	if u, ok := h.procUnit(o); sys && ((ok && u.UserUID == nil && !isLoginUnit(u)) || o.Container != "") {
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
