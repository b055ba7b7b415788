package diagnose

import (
	"slices"

	"github.com/gputriage/gputriage/parse"
)

// How a GPU's memory figures reconcile: the rule every report format follows.
//
// nvidia-smi gives four figures per GPU: memory.total, memory.used, memory.reserved (what the
// driver keeps for itself; drivers before R510 do not know it) and memory.free, and
// total = used + reserved + free. It rounds each figure to the MiB on its own, so the parts
// may come to a MiB or two more or less than the total (ct200: 55,295 + 635 + 41,958 =
// 97,888 against 97,887). Reports show the four figures as nvidia-smi gave them, never one
// derived by subtraction (a "free" of total − used would contradict nvidia-smi's free), and
// say, from Balance, when the parts do not come to the total. The memory nvidia-smi
// attributes to the processes it lists is set against used the same way: processes listed
// X MiB, not attributed to a listed process Y MiB (used − X).

// Balance is how a GPU's used + reserved + free compares with its total.
type Balance string

const (
	BalanceExact    Balance = "exact"    // the parts come to the total
	BalanceRounding Balance = "rounding" // within RoundingMiB of it: nvidia-smi's rounding
	BalanceMismatch Balance = "mismatch" // further off than rounding explains
	// BalanceReservedUnknown: total, used and free are known, reserved is not (an older
	// driver, or a listing without memory.reserved); nothing is derived in its place.
	BalanceReservedUnknown Balance = "reserved-unknown"
	BalanceUnknown         Balance = "unknown" // total, used or free unknown
)

// RoundingMiB is how far used + reserved + free may be from the total and still be
// nvidia-smi's rounding of each figure on its own.
const RoundingMiB = 2

// MemoryAccount is one GPU's memory as nvidia-smi gave it, and how its figures reconcile.
type MemoryAccount struct {
	GPU                                     int
	TotalMiB, UsedMiB, ReservedMiB, FreeMiB *int64 // as nvidia-smi gave them; nil when unknown
	Balance                                 Balance
	// OffByMiB is used + reserved + free − total, when all four are known.
	OffByMiB *int64
	// ListedMiB is the memory nvidia-smi gives for the processes it lists on this GPU, Listed
	// their number; ListedUnknown counts those listed here without a figure.
	ListedMiB             int64
	Listed, ListedUnknown int
	// UnattributedMiB is UsedMiB − ListedMiB: used memory no listed process accounts for
	// (the driver's own bookkeeping, processes the probe could not see). Nil when used or a listed process's
	// figure is unknown; negative when the listed figures exceed used.
	UnattributedMiB *int64
}

// AccountMemory is the memory of each GPU, reconciled, with what the processes nvidia-smi
// lists (a Result's Processes, before Retain folds them) hold on it.
//
// Reports read Result.Memory, or this of the Result's Processes where it is not set.
func AccountMemory(gpus []parse.GPU, procs []GPUProcess) []MemoryAccount {
	out := make([]MemoryAccount, 0, len(gpus))
	for _, g := range gpus {
		m := MemoryAccount{GPU: g.Index, TotalMiB: g.MemoryTotalMiB, UsedMiB: g.MemoryUsedMiB,
			ReservedMiB: g.MemoryReservedMiB, FreeMiB: g.MemoryFreeMiB}
		m.Balance, m.OffByMiB = balance(g)
		for _, p := range procs {
			if v, ok := p.GPUMemoryMiB[g.Index]; ok {
				m.ListedMiB += v
				m.Listed++
			} else if p.Listed && slices.Contains(p.GPUs, g.Index) {
				m.ListedUnknown++
			}
		}
		if m.UsedMiB != nil && m.ListedUnknown == 0 {
			m.UnattributedMiB = ptr(*m.UsedMiB - m.ListedMiB)
		}
		out = append(out, m)
	}
	return out
}

// balance applies the rule to one GPU's figures.
func balance(g parse.GPU) (Balance, *int64) {
	if g.MemoryTotalMiB == nil || g.MemoryUsedMiB == nil || g.MemoryFreeMiB == nil {
		return BalanceUnknown, nil
	}
	if g.MemoryReservedMiB == nil {
		return BalanceReservedUnknown, nil
	}
	off := *g.MemoryUsedMiB + *g.MemoryReservedMiB + *g.MemoryFreeMiB - *g.MemoryTotalMiB
	switch {
	case off == 0:
		return BalanceExact, &off
	case off >= -RoundingMiB && off <= RoundingMiB:
		return BalanceRounding, &off
	}
	return BalanceMismatch, &off
}

func ptr[T any](v T) *T { return &v }
