package diagnose

// BlamedGPUs maps each GPU that a warning or worse finding blames to the worst severity among
// those findings: the GPU a leftover holds, the one with ghost memory. A memory-imbalance
// finding blames its short GPUs, not every GPU of the group it compares. Info findings (healthy
// work) blame nothing, so a full GPU that is merely busy is not in the map.
func (r Result) BlamedGPUs() map[int]Severity {
	blamed := map[int]Severity{}
	mark := func(gpu int, s Severity) {
		if cur, ok := blamed[gpu]; !ok || s > cur {
			blamed[gpu] = s
		}
	}
	for _, f := range r.Findings {
		if f.Severity < Warning {
			continue
		}
		if f.Imbalance != nil {
			for _, sg := range f.Imbalance.Short {
				mark(sg.Index, f.Severity)
			}
			continue
		}
		for _, g := range f.GPUs {
			mark(g, f.Severity)
		}
	}
	return blamed
}

// BlamedPIDs maps each process that a warning or worse finding blames to the worst severity
// among those findings: a leftover, the holder of deleted /dev/shm files. A memory-imbalance
// finding blames its leftovers only: the healthy work on a short GPU is named, not blamed.
func (r Result) BlamedPIDs() map[int]Severity {
	blamed := map[int]Severity{}
	for _, f := range r.Findings {
		if f.Severity < Warning {
			continue
		}
		pids := f.PIDs
		if f.Imbalance != nil {
			pids = f.Imbalance.Leftover
		}
		for _, p := range pids {
			if cur, ok := blamed[p]; !ok || f.Severity > cur {
				blamed[p] = f.Severity
			}
		}
	}
	return blamed
}
