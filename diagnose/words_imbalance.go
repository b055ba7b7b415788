package diagnose

import (
	"fmt"
	"slices"
	"strings"
)

// Words of memory-imbalance.

// imbalanceWords composes a memory-imbalance finding's words from its facts: the checks
// (f.Check), the judgement (f.Imbalance), the actions.
func imbalanceWords(f *Finding) {
	c := f.Check
	lo, hi := c.gpu(c.Lo), c.gpu(c.Hi)
	idx := c.indexes()
	f.Title = fmt.Sprintf("SGLang's TP check fails on %s: GPU %d has %s free vs %s on GPU %d",
		FormatGPUs(idx), lo.Index, fmtMiB(lo.FreeMiB), fmtMiB(hi.FreeMiB), hi.Index)
	f.Evidence = imbalanceCheckLines(c)
	f.Evidence = append(f.Evidence, imbalanceHolderLines(f)...)
	check := fmt.Sprintf("%s < 0.9 × %s = %s", thousands(lo.FreeMiB), thousands(hi.FreeMiB), fmtMiB(c.NeedMiB))
	f.Explanation = fmt.Sprintf("A tensor-parallel launch across %s fails SGLang's startup check (\"The memory capacity is unbalanced. Some GPUs may be occupied by other processes.\"): "+
		"each rank takes the smallest free memory across all ranks and refuses to start if it is below 90%% of its own free memory. "+
		"Here GPU %d has %s free and GPU %d has %s, and %s. "+
		"SGLang prints these numbers in GiB, measured after each rank has created its CUDA context, so its figures read a little lower. ",
		FormatGPUs(idx), lo.Index, fmtMiB(lo.FreeMiB), hi.Index, fmtMiB(hi.FreeMiB), check)
	if len(c.VLLMFail) > 0 {
		f.Explanation += fmt.Sprintf("vLLM checks each GPU on its own: with gpu_memory_utilization=0.9 it needs %s free on every GPU, which %s %s not have. ",
			fmtMiB(c.VLLMNeedMiB), FormatGPUs(c.VLLMFail), plural(len(c.VLLMFail), "does", "do"))
	}
	f.Explanation += imbalanceVerdict(f)
	f.Fix = fixWords(f.Actions, f.Omitted, f.Checks)
}

// indexes are the group's GPU indexes.
func (c *GroupCheck) indexes() []int {
	idx := make([]int, len(c.GPUs))
	for i, g := range c.GPUs {
		idx[i] = g.Index
	}
	return idx
}

// imbalanceCheckLines are the group, each GPU's memory (GPUs with identical numbers on one
// line), and the two checks with their numbers.
func imbalanceCheckLines(c *GroupCheck) []string {
	ev := []string{fmt.Sprintf("%s: %s, %s total each", FormatGPUs(c.indexes()), groupName(c.GPUs), totalRange(c.GPUs))}
	type row struct {
		used, free int64
		known      bool
	}
	var rows []row
	rowGPUs := map[row][]int{}
	for _, m := range c.GPUs {
		r := row{free: m.FreeMiB, known: m.UsedMiB != nil}
		if r.known {
			r.used = *m.UsedMiB
		}
		if _, ok := rowGPUs[r]; !ok {
			rows = append(rows, r)
		}
		rowGPUs[r] = append(rowGPUs[r], m.Index)
	}
	for _, r := range rows {
		used := "used unknown"
		if r.known {
			used = "used " + fmtMiB(r.used)
		}
		ev = append(ev, fmt.Sprintf("%s: %s, free %s", FormatGPUs(rowGPUs[r]), used, fmtMiBGiB(r.free)))
	}
	lo, hi := c.gpu(c.Lo), c.gpu(c.Hi)
	ev = append(ev, fmt.Sprintf("SGLang TP check: min free %s (GPU %d) < 0.9 × max free %s (GPU %d) = %s → fails",
		fmtMiB(lo.FreeMiB), lo.Index, fmtMiB(hi.FreeMiB), hi.Index, fmtMiB(c.NeedMiB)))
	cudaNote := ""
	if total := c.GPUs[0].TotalMiB; c.CUDAMiB != total {
		cudaNote = fmt.Sprintf(" (%s total − %s reserved, as CUDA counts it)", thousands(total), thousands(total-c.CUDAMiB))
	}
	vline := fmt.Sprintf("vLLM check (gpu_memory_utilization=0.9): needs 0.9 × %s%s = %s free per GPU → ",
		thousands(c.CUDAMiB), cudaNote, fmtMiB(c.VLLMNeedMiB))
	switch {
	case len(c.VLLMFail) == 0:
		vline += "passes on every GPU"
	case len(c.VLLMPass) == 0:
		vline += "fails on every GPU (lowest " + fmtMiB(lo.FreeMiB) + " free)"
	default:
		vline += fmt.Sprintf("fails on %s (lowest %s free); %s pass", FormatGPUs(c.VLLMFail), fmtMiB(lo.FreeMiB), FormatGPUs(c.VLLMPass))
	}
	return append(ev, vline)
}

// groupName is the group's GPU model for people.
func groupName(gpus []GroupGPU) string {
	name := gpus[0].Name
	for _, m := range gpus[1:] {
		if m.Name != name {
			return "mixed models"
		}
	}
	if name == "" {
		return "model unknown"
	}
	return name
}

// totalRange is the group's total memory: "81,559 MiB", or "80,000–81,559 MiB".
func totalRange(gpus []GroupGPU) string {
	lo, hi := gpus[0].TotalMiB, gpus[0].TotalMiB
	for _, m := range gpus {
		lo, hi = min(lo, m.TotalMiB), max(hi, m.TotalMiB)
	}
	if lo == hi {
		return fmtMiB(lo)
	}
	return thousands(lo) + "–" + fmtMiB(hi)
}

// imbalanceHolderLines are the evidence lines naming who holds each short GPU's memory,
// each holder marked as left over or healthy.
func imbalanceHolderLines(f *Finding) []string {
	var ev []string
	for _, sg := range f.Imbalance.Short {
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
			if k := f.named(s.PID).K8s; k != nil && !k.Gone {
				judged = " (Kubernetes pod " + podName(k) + ", looks healthy)"
			}
			if s.Leftover {
				judged = " (looks abandoned: see leftover-process)"
			}
			ev = append(ev, fmt.Sprintf("GPU %d: PID %d holds %s: %s%s", sg.Index, s.PID, fmtMiB(s.MiB), f.named(s.PID).Cmdline, judged))
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

// maxWho bounds the processes whoList names.
const maxWho = 10

// whoList names processes for a sentence: "PID 7 (python3 -m x, 5,000 MiB)", at most maxWho.
func whoList(f *Finding, pids []int) string {
	var who []string
	for i, pid := range pids {
		if i == maxWho {
			who = append(who, fmt.Sprintf("%d more", len(pids)-maxWho))
			break
		}
		p := f.named(pid)
		who = append(who, fmt.Sprintf("PID %d (%s, %s)", pid, p.Command, fmtMiB(p.memMiB())))
	}
	return strings.Join(who, ", ")
}

// imbalanceVerdict says who is to blame and what would restore balance, from the judgement.
func imbalanceVerdict(f *Finding) string {
	im := f.Imbalance
	short := FormatGPUs(im.shortIndexes())
	var b strings.Builder
	n := len(im.Leftover)
	switch {
	case n > 0 && im.BalancedAfter:
		fmt.Fprintf(&b, "Of the memory missing on %s, %s %s left over from an earlier run (see leftover-process): stopping %s brings the GPUs back into balance.",
			short, whoList(f, im.Leftover), plural(n, "looks", "look"), plural(n, "it", "them"))
	case n > 0:
		fmt.Fprintf(&b, "Of the memory missing on %s, %s %s left over from an earlier run (see leftover-process) and should be stopped, but that alone does not restore balance: ",
			short, whoList(f, im.Leftover), plural(n, "looks", "look"))
		stillShortWords(&b, f)
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
			short, whoList(f, im.Healthy))
		return b.String()
	}
	if healthy := healthyNotNamed(im); len(healthy) > 0 {
		fmt.Fprintf(&b, " %s %s healthy work, not left over.", whoList(f, healthy), plural(len(healthy), "is", "are"))
	}
	return b.String()
}

// healthyNotNamed is the healthy work the verdict names last: all of it, but what it named
// already as holding the GPUs still short after the leftovers.
func healthyNotNamed(im *Imbalance) []int {
	if len(im.Leftover) == 0 || im.BalancedAfter {
		return im.Healthy
	}
	named := setOf(im.healthyOn(im.StillShort))
	return slices.DeleteFunc(slices.Clone(im.Healthy), func(pid int) bool { return named[pid] })
}

// whoLists are the lists of processes the verdict may name (whoList), for the builder to
// describe their first maxWho.
func whoLists(im *Imbalance) [][]int {
	return [][]int{im.Leftover, im.Healthy, im.healthyOn(im.StillShort), healthyNotNamed(im)}
}

// stillShortWords says, with numbers, why stopping the leftovers is not enough and what is.
func stillShortWords(b *strings.Builder, f *Finding) {
	im := f.Imbalance
	var parts []string
	for _, g := range im.StillShort {
		parts = append(parts, fmt.Sprintf("GPU %d would have %s free", g, fmtMiB(im.FreeAfterMiB[g])))
	}
	fmt.Fprintf(b, "afterwards %s, below the %s (0.9 × the largest free) the check needs", strings.Join(parts, ", "), fmtMiB(im.NeedAfterMiB))
	var because []string
	if hs := im.healthyOn(im.StillShort); len(hs) > 0 {
		because = append(because, "healthy work holds it: "+whoList(f, hs))
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
			FormatGPUs(im.RoomAfter), visibleDevices(im.RoomAfter, f.Check.PCIOrder), FormatGPUs(im.StillShort), plural(len(im.StillShort), "is", "are"))
	} else {
		fmt.Fprintf(b, "Wait until %s %s free again.", FormatGPUs(im.StillShort), plural(len(im.StillShort), "is", "are"))
	}
}

// visibleDevices is the environment that makes CUDA use exactly these GPUs, numbered as
// nvidia-smi numbers them; pciOrder when the host's GPUs are not all one model.
func visibleDevices(gpus []int, pciOrder bool) string {
	env := "CUDA_VISIBLE_DEVICES=" + joinInts(gpus, ",")
	if pciOrder {
		return "CUDA_DEVICE_ORDER=PCI_BUS_ID " + env
	}
	return env
}
