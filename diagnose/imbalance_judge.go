package diagnose

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Imbalance is the judgement behind a memory-imbalance finding, as typed facts: who holds the
// memory the check misses, which of them are left over, and whether stopping those would be
// enough. The finding's words are composed from it in one place (imbalanceHolderLines,
// imbalanceVerdict, imbalanceActions), so a sentence cannot call healthy work left over.
type Imbalance struct {
	// Short are the GPUs below SGLang's 0.9 × max free, with who holds their memory.
	Short []ShortGPU
	// Leftover and Healthy are the PIDs holding memory on the short GPUs, sorted: those
	// judged leftover-process, and those that look like healthy work.
	Leftover, Healthy []int
	// FreeAfterMiB is each of the group's GPUs' free memory once every leftover has exited.
	FreeAfterMiB map[int]int64
	// BalancedAfter is set when SGLang's check passes once the leftovers are stopped.
	// NeedAfterMiB is what each GPU then needs free (0.9 × the largest free), StillShort the
	// GPUs that would still fall below it, RoomAfter those that would not.
	BalancedAfter         bool
	NeedAfterMiB          int64
	StillShort, RoomAfter []int
}

// ShortGPU is one GPU that fails the check and what holds its memory.
type ShortGPU struct {
	Index   int
	FreeMiB int64
	Holders []Share // most memory first, then by PID
	// UnlistedMiB is memory used that no listed process accounts for, beyond the driver's
	// baseline (see ghost-memory); DeviceOpen are non-helper PIDs holding its device open
	// without memory listed.
	UnlistedMiB int64
	DeviceOpen  []int
}

// Share is one process's memory on one GPU.
type Share struct {
	PID      int
	MiB      int64
	Leftover bool
}

func (im *Imbalance) unlisted() int64 {
	var n int64
	for _, s := range im.Short {
		n += s.UnlistedMiB
	}
	return n
}

// judgeImbalance finds who holds the memory on the short GPUs and what stopping the leftovers
// would give back. Its cost is linear in the processes on those GPUs.
func (h *host) judgeImbalance(grp []gpuMem, short []int) *Imbalance {
	im := &Imbalance{FreeAfterMiB: map[int]int64{}}
	inGroup := map[int]bool{}
	for _, m := range grp {
		inGroup[m.g.Index] = true
		im.FreeAfterMiB[m.g.Index] = m.free
	}
	seen := map[int]bool{}
	for _, gi := range short {
		sg := ShortGPU{Index: gi}
		if g := h.gpuByIndex[gi]; g != nil && g.MemoryFreeMiB != nil {
			sg.FreeMiB = *g.MemoryFreeMiB
		}
		var sum int64
		for _, gp := range h.onGPU[gi] {
			mem := gp.GPUMemoryMiB[gi]
			if mem <= 0 {
				// A process listed with memory on other GPUs opened this device the way CUDA
				// opens every one; only unlisted holders are candidates (see ghostFinding).
				if !h.isDriverHelper(gp.PID) && !(gp.Listed && gp.memMiB() > 0) {
					sg.DeviceOpen = append(sg.DeviceOpen, gp.PID)
				}
				continue
			}
			_, bad := h.leftovers[gp.PID]
			sg.Holders = append(sg.Holders, Share{PID: gp.PID, MiB: mem, Leftover: bad})
			sum += mem
			if seen[gp.PID] {
				continue
			}
			seen[gp.PID] = true
			if !bad {
				im.Healthy = append(im.Healthy, gp.PID)
				continue
			}
			im.Leftover = append(im.Leftover, gp.PID)
			for g, m := range gp.GPUMemoryMiB {
				if inGroup[g] {
					im.FreeAfterMiB[g] += m
				}
			}
		}
		slices.SortFunc(sg.Holders, func(a, b Share) int { return cmp.Or(cmp.Compare(b.MiB, a.MiB), cmp.Compare(a.PID, b.PID)) })
		if g := h.gpuByIndex[gi]; g != nil && g.MemoryUsedMiB != nil {
			if rest := *g.MemoryUsedMiB - sum; rest > h.ghostBaseline(g) {
				sg.UnlistedMiB = rest
			}
		}
		im.Short = append(im.Short, sg)
	}
	slices.Sort(im.Leftover)
	slices.Sort(im.Healthy)

	var maxAfter int64
	for _, f := range im.FreeAfterMiB {
		maxAfter = max(maxAfter, f)
	}
	im.NeedAfterMiB = sglangNeed(maxAfter)
	for _, m := range grp {
		if float64(im.FreeAfterMiB[m.g.Index]) < sglangRatio*float64(maxAfter) {
			im.StillShort = append(im.StillShort, m.g.Index)
		} else {
			im.RoomAfter = append(im.RoomAfter, m.g.Index)
		}
	}
	im.BalancedAfter = len(im.StillShort) == 0
	return im
}

// maxHolderLines bounds the holders listed per GPU, so that a host with thousands of
// processes on one GPU gives a readable finding of bounded size.
const maxHolderLines = 20

// imbalanceHolderLines are the evidence lines naming who holds each short GPU's memory,
// each holder marked as left over or healthy.
func (h *host) imbalanceHolderLines(im *Imbalance) []string {
	var ev []string
	for _, sg := range im.Short {
		for i, s := range sg.Holders {
			if i == maxHolderLines {
				var rest int64
				for _, t := range sg.Holders[i:] {
					rest += t.MiB
				}
				ev = append(ev, fmt.Sprintf("GPU %d: … and %d more processes holding %s", sg.Index, len(sg.Holders)-i, fmtMiB(rest)))
				break
			}
			judged := " (looks healthy)"
			if s.Leftover {
				judged = " (looks abandoned: see leftover-process)"
			}
			ev = append(ev, fmt.Sprintf("GPU %d: PID %d holds %s: %s%s", sg.Index, s.PID, fmtMiB(s.MiB), h.cmdline(s.PID), judged))
		}
		if sg.UnlistedMiB > 0 {
			line := fmt.Sprintf("GPU %d: %s used by no listed process (see ghost-memory)", sg.Index, fmtMiB(sg.UnlistedMiB))
			if len(sg.DeviceOpen) > 0 {
				line += fmt.Sprintf("; /dev/nvidia%d is open in %s", sg.Index, fmtPIDs(firstN(sg.DeviceOpen, maxHolderLines)))
				if len(sg.DeviceOpen) > maxHolderLines {
					line += fmt.Sprintf(" and %d more", len(sg.DeviceOpen)-maxHolderLines)
				}
			}
			ev = append(ev, line)
		}
	}
	return ev
}

func setOf(xs []int) map[int]bool {
	m := make(map[int]bool, len(xs))
	for _, x := range xs {
		m[x] = true
	}
	return m
}

func firstN(xs []int, n int) []int {
	if len(xs) > n {
		return xs[:n]
	}
	return xs
}

// whoList names processes for a sentence: "PID 7 (python3 -m x, 5,000 MiB)", at most ten.
func (h *host) whoList(pids []int) string {
	const most = 10
	var who []string
	for i, pid := range pids {
		if i == most {
			who = append(who, fmt.Sprintf("%d more", len(pids)-most))
			break
		}
		gp := h.gpByPID[pid]
		who = append(who, fmt.Sprintf("PID %d (%s, %s)", pid, shortCmd(gp), fmtMiB(gp.memMiB())))
	}
	return strings.Join(who, ", ")
}

// healthyOn are the healthy holders of the given GPUs, sorted.
func (im *Imbalance) healthyOn(gpus []int) []int {
	var out []int
	seen := map[int]bool{}
	want := setOf(gpus)
	for _, sg := range im.Short {
		if !want[sg.Index] {
			continue
		}
		for _, s := range sg.Holders {
			if !s.Leftover && !seen[s.PID] {
				seen[s.PID] = true
				out = append(out, s.PID)
			}
		}
	}
	slices.Sort(out)
	return out
}

func (im *Imbalance) shortIndexes() []int {
	var xs []int
	for _, sg := range im.Short {
		xs = append(xs, sg.Index)
	}
	return xs
}

// imbalanceVerdict says who is to blame and what would restore balance, from the judgement.
func (h *host) imbalanceVerdict(im *Imbalance) string {
	short := FormatGPUs(im.shortIndexes())
	var b strings.Builder
	n := len(im.Leftover)
	switch {
	case n > 0 && im.BalancedAfter:
		fmt.Fprintf(&b, "Of the memory missing on %s, %s %s left over from an earlier run (see leftover-process): stopping %s brings the GPUs back into balance.",
			short, h.whoList(im.Leftover), plural(n, "looks", "look"), plural(n, "it", "them"))
	case n > 0:
		fmt.Fprintf(&b, "Of the memory missing on %s, %s %s left over from an earlier run (see leftover-process) and should be stopped, but that alone does not restore balance: ",
			short, h.whoList(im.Leftover), plural(n, "looks", "look"))
		h.stillShortWords(&b, im)
	case im.unlisted() > 0 || len(im.Healthy) == 0:
		var on []int
		for _, sg := range im.Short {
			if sg.UnlistedMiB > 0 {
				on = append(on, sg.Index)
			}
		}
		if len(on) == 0 {
			on = im.shortIndexes()
		}
		fmt.Fprintf(&b, "nvidia-smi lists no process for %s of the memory used on %s (see ghost-memory), so nothing on this host is known to be using it.",
			fmtMiB(im.unlisted()), FormatGPUs(on))
	default:
		// Every byte is held by work that looks healthy: the host is shared between jobs,
		// which explains why a wide launch fails but is not a fault of the host.
		fmt.Fprintf(&b, "The memory on %s is held by running work that looks healthy: %s. Either wait for it to finish, or launch only on the GPUs that have room, with CUDA_VISIBLE_DEVICES set to them and a tensor-parallel size that fits.",
			short, h.whoList(im.Healthy))
		return b.String()
	}
	healthy := im.Healthy
	if n > 0 && !im.BalancedAfter {
		named := setOf(im.healthyOn(im.StillShort)) // already named as healthy above
		healthy = slices.DeleteFunc(slices.Clone(healthy), func(pid int) bool { return named[pid] })
	}
	if len(healthy) > 0 {
		fmt.Fprintf(&b, " %s %s healthy work, not left over.", h.whoList(healthy), plural(len(healthy), "is", "are"))
	}
	return b.String()
}

// stillShortWords says, with numbers, why stopping the leftovers is not enough and what is.
func (h *host) stillShortWords(b *strings.Builder, im *Imbalance) {
	var parts []string
	for _, g := range im.StillShort {
		parts = append(parts, fmt.Sprintf("GPU %d would have %s free", g, fmtMiB(im.FreeAfterMiB[g])))
	}
	fmt.Fprintf(b, "afterwards %s, below the %s (0.9 × the largest free) the check needs", strings.Join(parts, ", "), fmtMiB(im.NeedAfterMiB))
	var because []string
	if hs := im.healthyOn(im.StillShort); len(hs) > 0 {
		because = append(because, "healthy work holds it: "+h.whoList(hs))
	}
	var unlisted int64
	still := setOf(im.StillShort)
	for _, sg := range im.Short {
		if still[sg.Index] {
			unlisted += sg.UnlistedMiB
		}
	}
	if unlisted > 0 {
		because = append(because, fmtMiB(unlisted)+" is used by no listed process (see ghost-memory)")
	}
	if len(because) > 0 {
		b.WriteString(", because " + strings.Join(because, ", and "))
	}
	b.WriteString(". ")
	if len(im.RoomAfter) > 0 {
		fmt.Fprintf(b, "After stopping the leftovers, launch only on %s (%s) with a tensor-parallel size that fits, or wait until %s %s free again.",
			FormatGPUs(im.RoomAfter), h.visibleDevices(im.RoomAfter), FormatGPUs(im.StillShort), plural(len(im.StillShort), "is", "are"))
	} else {
		fmt.Fprintf(b, "Wait until %s %s free again.", FormatGPUs(im.StillShort), plural(len(im.StillShort), "is", "are"))
	}
}

// imbalanceActions stop only the leftovers (the first maxHolderLines of them; omitted counts
// the rest), then narrow a launch to the GPUs with room when that is what would work.
func (h *host) imbalanceActions(im *Imbalance, pass []int) (actions []Action, omitted int) {
	for i, pid := range im.Leftover {
		if i == maxHolderLines {
			omitted = len(im.Leftover) - i
			break
		}
		actions = addAction(actions, h.stopAction(h.gpByPID[pid]))
	}
	switch {
	case len(im.Leftover) == 0 && len(im.Healthy) > 0 && im.unlisted() == 0 && len(pass) > 0:
		actions = append(actions, h.narrowLaunch(pass, "only the GPUs with room"))
	case len(im.Leftover) > 0 && !im.BalancedAfter && len(im.RoomAfter) > 0:
		actions = append(actions, h.narrowLaunch(im.RoomAfter, "the GPUs with room once the leftovers are stopped"))
	}
	return actions, omitted
}

// verifyGPUFree shows each GPU's used and free memory.
var verifyGPUFree = Command{Line: "nvidia-smi --query-gpu=index,memory.used,memory.free --format=csv"}

// narrowLaunch is the action of launching only on gpus.
func (h *host) narrowLaunch(gpus []int, note string) Action {
	env := h.visibleDevices(gpus)
	return Action{Kind: ActionNarrowLaunch, Target: env, Steps: []Command{{Line: "export " + env, Note: note}}}
}

// visibleDevices is the environment that makes CUDA use exactly these GPUs, numbered as
// nvidia-smi numbers them: on a host with GPUs of different models CUDA numbers them fastest
// first unless CUDA_DEVICE_ORDER=PCI_BUS_ID is set, and the indexes would name other GPUs,
// maybe ones that healthy work uses.
func (h *host) visibleDevices(gpus []int) string {
	env := "CUDA_VISIBLE_DEVICES=" + joinInts(gpus, ",")
	for _, g := range h.s.GPUs {
		if g.Name != h.s.GPUs[0].Name {
			return "CUDA_DEVICE_ORDER=PCI_BUS_ID " + env
		}
	}
	return env
}
