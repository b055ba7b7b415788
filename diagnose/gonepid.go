package diagnose

import (
	"slices"
	"strconv"

	"github.com/gputriage/gputriage/parse"
)

// CodeDeadPIDMemory: nvidia-smi charges GPU memory to a PID that no longer exists. When a
// trainer is OOM-killed, its DataLoader workers and other children it forked keep its
// /dev/nvidiaN open, and with it the memory of its context; nvidia-smi goes on listing the
// dead PID. What to stop is whoever still holds the device.
const CodeDeadPIDMemory = "dead-pid-memory"

// Reason codes of dead-pid-memory.
const (
	// ReasonListedPIDGone: nvidia-smi lists PID with MiB on the GPUs in Held, and /proc/PID
	// did not exist right after the listing (section apps-alive): it was gone before the
	// probe read /proc, not exiting while it ran.
	ReasonListedPIDGone ReasonCode = "listed-pid-gone"
	// ReasonHoldsDevice: PID holds the device files of the GPUs in GPUs open. Detail says what
	// ties it to the gone PID: "process-group" (its process group is the gone PID's, as a
	// forked child's stays), "session" (its session is the gone PID's), or "" (nothing: it
	// merely holds the device). Strong when tied.
	ReasonHoldsDevice ReasonCode = "holds-device"
)

// deadTies are the values of a holds-device reason's Detail.
const (
	tieGroup   = "process-group"
	tieSession = "session"
)

// deadPIDFindings reports each listed PID that was gone right after the listing. Not when
// every listed PID was gone: then the probe most likely ran in another PID namespace than
// nvidia-smi's (probe-limited says so), not beside a host full of dead processes.
func (h *host) deadPIDFindings() []Finding {
	gone := h.goneApps()
	if len(gone) == 0 {
		return nil
	}
	var out []Finding
	for _, pid := range gone {
		if gp := h.gpByPID[pid]; gp != nil {
			out = append(out, h.deadPIDFinding(gp))
		}
	}
	return out
}

// goneApps are the listed PIDs the probe found gone right after the listing, unless every
// listed PID was (another PID namespace): sorted.
func (h *host) goneApps() []int {
	if !h.s.AppsChecked || len(h.s.AppsGone) == 0 {
		return nil
	}
	listed := map[int]bool{}
	for _, a := range h.s.Apps {
		listed[a.PID] = true
	}
	if len(listed) > 1 && len(h.s.AppsGone) >= len(listed) {
		return nil
	}
	return h.s.AppsGone
}

// deadPIDFinding is the finding for one gone listed PID: who still holds its GPUs' devices.
func (h *host) deadPIDFinding(dead *GPUProcess) Finding {
	gpus := dead.memGPUs()
	if len(gpus) == 0 {
		gpus = dead.GPUs
	}
	f := Finding{Code: CodeDeadPIDMemory, Severity: Warning, GPUs: slices.Clone(gpus)}
	f.Reasons = append(f.Reasons, Reason{Code: ReasonListedPIDGone, PID: dead.PID, MiB: dead.memMiB(), Held: slices.Clone(gpus), GPUs: slices.Clone(gpus)})
	tied, others := h.deviceKeepers(dead.PID, gpus)
	for _, k := range tied {
		f.Reasons = append(f.Reasons, k)
		f.PIDs = append(f.PIDs, k.PID)
		f.Actions = addAction(f.Actions, h.stopAction(h.gpByPID[k.PID]))
	}
	if len(tied) > 0 {
		f.Severity = Error
		f.Checks = []Command{verifyGPU}
	}
	f.Reasons = append(f.Reasons, others...)
	if len(tied) == 0 {
		f.Actions = h.deadInspect(dead.PID, gpus, others)
	}
	for _, r := range f.Reasons[1:] {
		h.name(&f, r.PID)
	}
	deadPIDWords(&f)
	return f
}

// deviceKeepers are the live processes holding a device of gpus open that nvidia-smi does not
// list with memory of their own (those it lists are accounted for), and that are never
// culprits otherwise (driver helpers and GPU monitors, a desktop, a serving MPS daemon): tied
// are those whose process group or session is the dead PID's, others the rest but the work
// of a live listed process (workOfLiveHolder).
func (h *host) deviceKeepers(dead int, gpus []int) (tied, others []Reason) {
	ix := h.keeperIndex()
	seen := map[int]bool{}
	add := func(gp *GPUProcess, tie string) {
		if seen[gp.PID] || gp.PID == dead {
			return
		}
		var on []int
		for _, g := range gp.DeviceGPUs {
			if slices.Contains(gpus, g) {
				on = append(on, g)
			}
		}
		if len(on) == 0 {
			return
		}
		seen[gp.PID] = true
		r := Reason{Code: ReasonHoldsDevice, PID: gp.PID, GPUs: on, Detail: tie, Strong: tie != ""}
		if r.Strong {
			tied = append(tied, r)
		} else {
			others = append(others, r)
		}
	}
	for _, gp := range ix.byGroup[dead] {
		add(gp, tieGroup)
	}
	for _, gp := range ix.bySession[dead] {
		add(gp, tieSession)
	}
	// The untied holders are shown, not stopped: the first few of them are enough to look at
	// (fuser, in the fix, lists them all), and naming every one for every gone PID would cost
	// their product.
	for _, g := range gpus {
		for _, gp := range ix.byGPU[g] {
			if len(others) == maxUntiedKeepers {
				break
			}
			add(gp, "")
		}
	}
	slices.SortFunc(tied, func(a, b Reason) int { return a.PID - b.PID })
	slices.SortFunc(others, func(a, b Reason) int { return a.PID - b.PID })
	return tied, others
}

// maxUntiedKeepers bounds the untied device holders a dead-pid-memory finding names.
const maxUntiedKeepers = 5

// keepers indexes, once per host, the live processes that hold a GPU's device open without
// memory nvidia-smi lists for them (and are neither driver helpers nor protected): by process
// group, by session and by GPU, each in PID order.
type keepers struct {
	byGroup, bySession, byGPU map[int][]*GPUProcess
}

func (h *host) keeperIndex() *keepers {
	if h.keepers != nil {
		return h.keepers
	}
	ix := &keepers{byGroup: map[int][]*GPUProcess{}, bySession: map[int][]*GPUProcess{}, byGPU: map[int][]*GPUProcess{}}
	for i := range h.procs {
		gp := &h.procs[i]
		p := h.procByPID[gp.PID]
		if p == nil || p.Gone || p.ParentOnly || len(gp.DeviceGPUs) == 0 || gp.memMiB() > 0 || h.isDriverHelper(gp.PID) || h.protected(gp) {
			continue
		}
		if p.PGID != nil {
			ix.byGroup[*p.PGID] = append(ix.byGroup[*p.PGID], gp)
		}
		if p.SID != nil && (p.PGID == nil || *p.SID != *p.PGID) {
			ix.bySession[*p.SID] = append(ix.bySession[*p.SID], gp)
		}
		if h.workOfLiveHolder(p) {
			continue // no suspect: tied, it is still named above
		}
		for _, g := range gp.DeviceGPUs {
			ix.byGPU[g] = append(ix.byGPU[g], gp)
		}
	}
	h.keepers = ix
	return ix
}

// workOfLiveHolder reports whether p runs below a live process nvidia-smi lists with memory
// of its own (a DataLoader worker of another user's live trainer): the device it holds is
// that job's, and it is no suspect for a gone PID's memory.
func (h *host) workOfLiveHolder(p *parse.Process) bool {
	for cur, steps := h.parentOf(p), 0; cur != nil && steps < maxAncestry; cur, steps = h.parentOf(cur), steps+1 {
		if gp := h.gpByPID[cur.PID]; gp != nil && !cur.Gone && gp.memMiB() > 0 {
			return true
		}
	}
	return false
}

// deadInspect are the actions when nothing tied to the dead PID holds its GPUs: look at who
// holds the devices, and at the process group's survivors.
func (h *host) deadInspect(dead int, gpus []int, others []Reason) []Action {
	sudo := h.sudo(nil)
	var devs string
	for i, g := range gpus {
		if i > 0 {
			devs += " "
		}
		devs += "/dev/nvidia" + strconv.Itoa(h.gpuMinor(g))
	}
	steps := []Command{
		{Line: sudo + "fuser -v " + devs},
		{Line: "ps -eo pid,pgid,sid,ppid,user,lstart,cmd | awk -v p=" + strconv.Itoa(dead) + " 'NR == 1 || $2 == p || $3 == p'", Note: "what is left of its process group and session"},
	}
	if len(others) == 0 {
		steps = append(steps, Command{Line: verifyGPU.Line, Note: "the driver may still be releasing the memory: if PID " + strconv.Itoa(dead) + " is still listed a minute later, something the probe could not see keeps it"})
	}
	return []Action{{Kind: ActionInspect, Target: "/dev/nvidia* of PID " + strconv.Itoa(dead), Steps: steps}}
}

// gpuMinor is N of GPU index g's /dev/nvidiaN.
func (h *host) gpuMinor(g int) int {
	if gpu := h.gpuByIndex[g]; gpu != nil && gpu.MinorNumber != nil {
		return *gpu.MinorNumber
	}
	return g
}
