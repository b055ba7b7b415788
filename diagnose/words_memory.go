package diagnose

import (
	"fmt"
	"strings"
)

// Words of GPU memory: how a report's figures reconcile (memory.go).

// MemoryHeads name the columns of a GPU's four figures, in the order reports show them:
// the parts, then the total they come to.
var MemoryHeads = [4]string{"used", "reserved", "free", "total"}

// BalanceNotes are the footnotes a GPU table needs for its figures to reconcile, one per
// kind of gap, its GPUs folded: "GPU 0: used + reserved + free = total + 1 MiB (nvidia-smi
// rounds each figure)". None when the parts come to the total, or nothing is known to set
// against it.
func BalanceNotes(ms []MemoryAccount) []string {
	type key struct {
		b   Balance
		off int64
	}
	var order []key
	gpus := map[key][]int{}
	for _, m := range ms {
		k := key{b: m.Balance}
		if m.OffByMiB != nil {
			k.off = *m.OffByMiB
		}
		if k.b == BalanceExact || k.b == BalanceUnknown {
			continue
		}
		if gpus[k] == nil {
			order = append(order, k)
		}
		gpus[k] = append(gpus[k], m.GPU)
	}
	var out []string
	for _, k := range order {
		out = append(out, FormatGPUs(gpus[k])+": "+balanceWords(k.b, k.off))
	}
	return out
}

// balanceWords says why a GPU's parts do not come to its total, in a line of a terminal:
// "used + reserved + free = total + 1 MiB (nvidia-smi rounds each figure)".
func balanceWords(b Balance, off int64) string {
	if b == BalanceReservedUnknown {
		return "reserved unknown (nvidia-smi gave no memory.reserved, as older drivers do not), so used + free need not come to the total"
	}
	gap := "used + reserved + free = total + " + fmtMiB(off)
	if off < 0 {
		gap = "used + reserved + free = total − " + fmtMiB(-off)
	}
	if b == BalanceRounding {
		return gap + " (nvidia-smi rounds each figure)"
	}
	return gap + ", more than nvidia-smi's rounding of each figure explains: each is shown as it gave it"
}

// AttributionWords sets what nvidia-smi gives for the processes listed against the memory in
// use, over the GPUs where either is not zero: "GPU 0: 55,295 MiB used: processes listed
// 55,286 MiB; not attributed to a listed process 9 MiB" (over several GPUs, "used in all").
// "" when there is none.
func AttributionWords(ms []MemoryAccount) string {
	var gpus, unknown []int
	var used, listed int64
	for _, m := range ms {
		// A GPU whose used memory is unknown has nothing to set its processes against.
		switch {
		case m.ListedUnknown > 0:
			unknown = append(unknown, m.GPU)
		case m.UnattributedMiB != nil && (*m.UsedMiB != 0 || m.Listed > 0):
			gpus = append(gpus, m.GPU)
			used += *m.UsedMiB
			listed += m.ListedMiB
		}
	}
	var parts []string
	if len(gpus) > 0 {
		head := FormatGPUs(gpus) + ": " + fmtMiB(used) + " used"
		if len(gpus) > 1 {
			head += " in all"
		}
		s := fmt.Sprintf("%s: processes listed %s; not attributed to a listed process %s", head, fmtMiB(listed), fmtMiB(used-listed))
		if listed == 0 {
			s = head + ", none of it by a listed process"
		} else if listed > used {
			s = fmt.Sprintf("%s: processes listed %s, %s more (nvidia-smi reads the two at different moments)",
				head, fmtMiB(listed), fmtMiB(listed-used))
		}
		parts = append(parts, s)
	}
	if len(unknown) > 0 {
		parts = append(parts, FormatGPUs(unknown)+": nvidia-smi gives no memory figure for some processes listed, so what they hold is unknown")
	}
	return strings.Join(parts, "; ")
}
