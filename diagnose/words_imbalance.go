package diagnose

import (
	"fmt"
	"slices"
	"strings"
)

// Words of memory-imbalance.

// imbalanceWords composes a memory-imbalance finding's words from its facts: the checks (c),
// the judgement (f.Imbalance), the actions.
func (h *host) imbalanceWords(f *Finding, c groupCheck, omitted int) {
	im := f.Imbalance
	lo, hi := c.lo, c.hi
	f.Title = fmt.Sprintf("SGLang's TP check fails on %s: GPU %d has %s free vs %s on GPU %d",
		FormatGPUs(c.idx), lo.g.Index, fmtMiB(lo.free), fmtMiB(hi.free), hi.g.Index)
	f.Evidence = imbalanceCheckLines(c)
	f.Evidence = append(f.Evidence, h.imbalanceHolderLines(im)...)
	check := fmt.Sprintf("%s < 0.9 × %s = %s", thousands(lo.free), thousands(hi.free), fmtMiB(c.needMiB))
	f.Explanation = fmt.Sprintf("A tensor-parallel launch across %s fails SGLang's startup check (\"The memory capacity is unbalanced. Some GPUs may be occupied by other processes.\"): "+
		"each rank takes the smallest free memory across all ranks and refuses to start if it is below 90%% of its own free memory. "+
		"Here GPU %d has %s free and GPU %d has %s, and %s. "+
		"SGLang prints these numbers in GiB, measured after each rank has created its CUDA context, so its figures read a little lower. ",
		FormatGPUs(c.idx), lo.g.Index, fmtMiB(lo.free), hi.g.Index, fmtMiB(hi.free), check)
	if len(c.vfail) > 0 {
		f.Explanation += fmt.Sprintf("vLLM checks each GPU on its own: with gpu_memory_utilization=0.9 it needs %s free on every GPU, which %s %s not have. ",
			fmtMiB(c.vneedMiB), FormatGPUs(c.vfail), plural(len(c.vfail), "does", "do"))
	}
	f.Explanation += h.imbalanceVerdict(im)
	f.Fix = fixWords(f.Actions, omitted, f.Checks)
}

// imbalanceCheckLines are the group, each GPU's memory (GPUs with identical numbers on one
// line), and the two checks with their numbers.
func imbalanceCheckLines(c groupCheck) []string {
	ev := []string{fmt.Sprintf("%s: %s, %s total each", FormatGPUs(c.idx), groupName(c.grp), totalRange(c.grp))}
	type row struct {
		used, free int64
		known      bool
	}
	var rows []row
	rowGPUs := map[row][]int{}
	for _, m := range c.grp {
		r := row{m.used, m.free, m.usedKnown}
		if _, ok := rowGPUs[r]; !ok {
			rows = append(rows, r)
		}
		rowGPUs[r] = append(rowGPUs[r], m.g.Index)
	}
	for _, r := range rows {
		used := "used unknown"
		if r.known {
			used = "used " + fmtMiB(r.used)
		}
		ev = append(ev, fmt.Sprintf("%s: %s, free %s", FormatGPUs(rowGPUs[r]), used, fmtMiBGiB(r.free)))
	}
	lo, hi := c.lo, c.hi
	ev = append(ev, fmt.Sprintf("SGLang TP check: min free %s (GPU %d) < 0.9 × max free %s (GPU %d) = %s → fails",
		fmtMiB(lo.free), lo.g.Index, fmtMiB(hi.free), hi.g.Index, fmtMiB(c.needMiB)))
	cudaNote := ""
	if total := c.grp[0].total; c.cudaMiB != total {
		cudaNote = fmt.Sprintf(" (%s total − %s reserved, as CUDA counts it)", thousands(total), thousands(total-c.cudaMiB))
	}
	vline := fmt.Sprintf("vLLM check (gpu_memory_utilization=0.9): needs 0.9 × %s%s = %s free per GPU → ",
		thousands(c.cudaMiB), cudaNote, fmtMiB(c.vneedMiB))
	switch {
	case len(c.vfail) == 0:
		vline += "passes on every GPU"
	case len(c.pass) == 0:
		vline += "fails on every GPU (lowest " + fmtMiB(lo.free) + " free)"
	default:
		vline += fmt.Sprintf("fails on %s (lowest %s free); %s pass", FormatGPUs(c.vfail), fmtMiB(lo.free), FormatGPUs(c.pass))
	}
	return append(ev, vline)
}

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
