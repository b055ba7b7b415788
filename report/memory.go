package report

import (
	"strings"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
)

// memoryOf is the host's GPU memory reconciled: as diagnose judged it, of every process
// nvidia-smi listed (the process table may fold some), or else of the processes at hand.
func memoryOf(h Host) []diagnose.MemoryAccount {
	if h.Snapshot == nil {
		return nil
	}
	if m := h.Result.Memory; len(m) == len(h.Snapshot.GPUs) {
		return m
	}
	return diagnose.AccountMemory(h.Snapshot.GPUs, h.Result.Processes)
}

// memCells are a GPU's four memory figures, in diagnose.MemoryHeads's order, as nvidia-smi
// gave them: "?" for one it did not give, never one derived from the others.
func memCells(g parse.GPU) [4]string {
	return [4]string{opt(g.MemoryUsedMiB), opt(g.MemoryReservedMiB), opt(g.MemoryFreeMiB), opt(g.MemoryTotalMiB)}
}

// memColumns right-aligns cells in columns of widths w, two spaces apart.
func memColumns(cells [4]string, w [4]int) string {
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = fitRight(c, w[i])
	}
	return strings.Join(parts, "  ")
}
