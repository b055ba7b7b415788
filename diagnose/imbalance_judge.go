package diagnose

import (
	"cmp"
	"slices"
)

// Imbalance is the judgement behind a memory-imbalance finding, as typed facts: who holds the
// memory the check misses, which of them are left over, and whether stopping those would be
// enough. The finding's words are composed from it in one place (words_imbalance.go), and
// its actions stop only the leftovers (imbalanceActions), so neither a sentence nor a command
// can call healthy work left over.
type Imbalance struct {
	// Short are the GPUs below SGLang's 0.9 × max free, with who holds their memory.
	Short []ShortGPU `json:"short"`
	// Leftover and Healthy are the PIDs holding memory on the short GPUs, sorted: those
	// judged leftover-process, and those that look like healthy work.
	Leftover []int `json:"leftover"`
	Healthy  []int `json:"healthy"`
	// FreeAfterMiB is each of the group's GPUs' free memory once every leftover has exited.
	FreeAfterMiB map[int]int64 `json:"free_after_mib"`
	// BalancedAfter is set when SGLang's check passes once the leftovers are stopped.
	// NeedAfterMiB is what each GPU then needs free (0.9 × the largest free), StillShort the
	// GPUs that would still fall below it, RoomAfter those that would not.
	BalancedAfter bool  `json:"balanced_after"`
	NeedAfterMiB  int64 `json:"need_after_mib"`
	StillShort    []int `json:"still_short"`
	RoomAfter     []int `json:"room_after"`
}

// ShortGPU is one GPU that fails the check and what holds its memory.
type ShortGPU struct {
	Index   int     `json:"index"`
	FreeMiB int64   `json:"free_mib"`
	Holders []Share `json:"holders"` // most memory first, then by PID
	// UnlistedMiB is memory used that no listed process accounts for, beyond the driver's
	// baseline (see ghost-memory); DeviceOpen are non-helper PIDs holding its device open
	// without memory listed.
	UnlistedMiB int64 `json:"unlisted_mib"`
	DeviceOpen  []int `json:"device_open"`
}

// Share is one process's memory on one GPU.
type Share struct {
	PID      int   `json:"pid"`
	MiB      int64 `json:"mib"`
	Leftover bool  `json:"leftover"`
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
				if !h.isDriverHelper(gp.PID) && !h.protected(gp) && !(gp.Listed && gp.memMiB() > 0) {
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
func (h *host) visibleDevices(gpus []int) string { return visibleDevices(gpus, h.mixedModels()) }

// mixedModels reports whether the host's GPUs are not all one model, so CUDA's default order
// (fastest first) may differ from nvidia-smi's (PCI bus).
func (h *host) mixedModels() bool {
	for _, g := range h.s.GPUs {
		if g.Name != h.s.GPUs[0].Name {
			return true
		}
	}
	return false
}
