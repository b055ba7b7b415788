package explain

import (
	"fmt"
	"strconv"
	"strings"
)

// PyTorch's CUDA out-of-memory message (c10/cuda/CUDACachingAllocator.cpp). Current form:
//
//	CUDA out of memory. Tried to allocate 496.00 MiB. GPU 0 has a total capacity of 14.75 GiB of
//	which 235.06 MiB is free. Process 20398 has 14.52 GiB memory in use. Including non-PyTorch
//	memory, this process has 14.36 GiB memory in use. Of the allocated memory 14.06 GiB is
//	allocated by PyTorch, and 330.42 MiB is reserved by PyTorch but unallocated. ...
//
// ("total capacty" in PyTorch 2.1; "Process N has" lists the other processes on the GPU as NVML
// reports them, and the failing process itself when it cannot recognize its own PID, as in a
// container.) Legacy form:
//
//	CUDA out of memory. Tried to allocate 1024.00 KiB (GPU 0; 11.17 GiB total capacity; 10.90 GiB
//	already allocated; 576.00 KiB free; 30.96 MiB cached)
//
// with "X reserved in total by PyTorch" for "cached" in later 1.x versions, and "X allowed" when
// a per-process memory fraction is set.
const torchAnchor = "CUDA out of memory"

var torchConts = []string{"Tried to allocate", "GPU ", "(GPU ", "Process ", "Including non-PyTorch", "this process has",
	"Of the allocated", "If reserved", "See documentation", "is reserved by PyTorch", "is free", "of which"}

type torchOOM struct {
	variant     string
	requested   float64
	device      *int
	total, free float64
	haveTotal   bool
	pids        []PIDMemory
	self        *float64 // "this process has X memory in use"
	allocated   *float64 // by PyTorch
	unallocated *float64 // reserved by PyTorch but unallocated
	reserved    *float64 // legacy: reserved in total by PyTorch
	cached      *float64 // legacy (0.4–1.3): cached
	allowed     *float64 // legacy: per-process limit
	rank        *int
}

func parseTorchOOM(text, prefix string) (torchOOM, bool) {
	o := torchOOM{rank: rankIn(prefix)}
	k := strings.Index(text, "Tried to allocate ")
	if k < 0 {
		return o, false
	}
	req, rest, ok := leadingSize(text[k+len("Tried to allocate "):])
	if !ok {
		return o, false
	}
	o.requested = req
	rest = strings.TrimLeft(rest, " .")
	if strings.HasPrefix(rest, "(GPU ") {
		return o, parseTorchLegacy(&o, rest)
	}
	c := strings.Index(rest, " has a total capac")
	if c < 0 {
		return o, false
	}
	o.variant = "total-capacity"
	after := rest[c+len(" has a total capac"):]
	switch {
	case strings.HasPrefix(after, "ity of "):
		after = after[len("ity of "):]
	case strings.HasPrefix(after, "ty of "):
		o.variant = "total-capacty"
		after = after[len("ty of "):]
	default:
		return o, false
	}
	if g := strings.LastIndex(rest[:c], "GPU "); g >= 0 {
		if n, r, ok := leadingInt(rest[g+4 : c]); ok && r == "" {
			o.device = &n
		}
	}
	if o.total, after, ok = leadingSize(after); !ok {
		return o, false
	}
	if !strings.HasPrefix(after, " of which ") {
		return o, false
	}
	if o.free, after, ok = leadingSize(after[len(" of which "):]); !ok {
		return o, false
	}
	o.haveTotal = true
	o.pids = processesHolding(after, " memory in use")
	if v, ok := sizeAfter(after, "this process has "); ok {
		o.self = &v
	}
	if v, ok := sizeAfter(after, "Of the allocated memory "); ok {
		o.allocated = &v
		if u, ok := sizeAfter(after, "is allocated by PyTorch, and "); ok {
			o.unallocated = &u
		}
	}
	return o, true
}

func parseTorchLegacy(o *torchOOM, rest string) bool {
	o.variant = "legacy"
	rest = rest[len("(GPU "):]
	n, rest, ok := leadingInt(rest)
	if !ok || !strings.HasPrefix(rest, ";") {
		return false
	}
	o.device = &n
	if e := strings.IndexByte(rest, ')'); e >= 0 {
		rest = rest[:e]
	}
	for _, part := range strings.Split(rest[1:], ";") {
		v, label, ok := leadingSize(strings.TrimSpace(part))
		if !ok {
			continue
		}
		label = strings.TrimSpace(label)
		switch {
		case label == "total capacity":
			o.total, o.haveTotal = v, true
		case label == "already allocated":
			o.allocated = &v
		case label == "free":
			o.free = v
		case label == "allowed":
			o.allowed = &v
		case label == "cached":
			o.cached = &v
		case strings.HasPrefix(label, "reserved in total"):
			o.reserved = &v
		}
	}
	return o.haveTotal
}

// torchExceptions are the exception names PyTorch raises a CUDA out-of-memory error as; a
// paste can carry one without the message's own "CUDA out of memory" (an abridged line).
var torchExceptions = []string{"torch.OutOfMemoryError", "torch.cuda.OutOfMemoryError"}

// torchStart finds where a PyTorch out-of-memory message starts in l: at "CUDA out of
// memory", else at the exception's name; -1 if l has neither.
func torchStart(l string) int {
	if j := strings.Index(l, torchAnchor); j >= 0 {
		if k := torchExceptionAt(l[:j]); k >= 0 {
			return k
		}
		return j
	}
	return torchExceptionAt(l)
}

func torchExceptionAt(l string) int {
	for _, e := range torchExceptions {
		if j := strings.Index(l, e); j >= 0 {
			return j
		}
	}
	return -1
}

func explainTorchOOM(d *doc) []found {
	var groups hitGroups[torchOOM]
	for i, l := range d.lines {
		j := torchStart(l)
		if j < 0 {
			continue
		}
		text, used := d.window(i, j, torchConts, torchAnchor)
		o, ok := parseTorchOOM(text, l[:j])
		if !ok {
			if o, ok = parseTorchPartial(text, l[:j]); !ok {
				continue
			}
		}
		key := torchKey(o)
		groups.add(key, o, used)
	}
	return groups.found(d, torchExplanation)
}

// parseTorchPartial reads what an out-of-memory message cut short still says: a one-line
// "CUDA out of memory. Tried to allocate 2.00 GiB", or an abridged paste such as
// "torch.OutOfMemoryError: ... Process 20629 has 54.00 GiB ...".
// It needs a number to stand on: "CUDA out of memory" in prose is not an error message.
func parseTorchPartial(text, prefix string) (torchOOM, bool) {
	o := torchOOM{variant: "partial", rank: rankIn(prefix), requested: -1}
	if v, ok := sizeAfter(text, "Tried to allocate "); ok {
		o.requested = v
	}
	if g := strings.Index(text, "GPU "); g >= 0 {
		if n, r, ok := leadingInt(text[g+4:]); ok && (r == "" || !isLetter(r[0]) && r[0] != '.') {
			o.device = &n
		}
	}
	o.pids = processesHolding(text, "")
	if v, ok := sizeAfter(text, "this process has "); ok {
		o.self = &v
	}
	return o, o.requested >= 0 || len(o.pids) > 0
}

// torchPartialExplanation explains a message that lacks the GPU's total and free memory.
func torchPartialExplanation(o torchOOM) Explanation {
	ex := Explanation{Family: FamilyTorchOOM, Variant: o.variant, Title: "PyTorch ran out of GPU memory", Device: o.device, PIDs: o.pids}
	gpu := "the GPU"
	if o.device != nil {
		gpu = "GPU " + strconv.Itoa(*o.device)
	}
	var m strings.Builder
	if o.requested >= 0 {
		fmt.Fprintf(&m, "PyTorch asked the CUDA driver for %s more on %s and the GPU did not have it free. ", size(o.requested), gpu)
		ex.Numbers = append(ex.Numbers, Number{Name: "requested", Value: o.requested, Unit: "GiB", Rank: o.rank})
	} else {
		fmt.Fprintf(&m, "A PyTorch process could not get the GPU memory it asked for on %s. ", gpu)
	}
	others := 0.0
	var named []string
	for _, p := range o.pids {
		named = append(named, fmt.Sprintf("PID %d holds %s", p.PID, size(p.GiB)))
		others += p.GiB
	}
	if len(named) > 0 {
		m.WriteString("The message names the processes on " + gpu + ": " + strings.Join(named, "; ") + ". ")
		ex.Numbers = append(ex.Numbers, Number{Name: "other_processes", Value: others, Unit: "GiB"})
	}
	if o.self != nil {
		fmt.Fprintf(&m, "This process itself uses %s. ", gib(*o.self))
		ex.Numbers = append(ex.Numbers, Number{Name: "this_process", Value: *o.self, Unit: "GiB"})
	}
	m.WriteString("The text as pasted does not say how much memory the GPU has or how much was free; the full " +
		"message (from \"CUDA out of memory\" to \"See documentation\") does, and gputriage on the host shows who holds it now.")
	ex.Meaning = m.String()
	if o.device != nil {
		ex.Notes = append(ex.Notes, deviceNumbering(*o.device))
	}
	ex.Next = torchNext(o.pids)
	return ex
}

// torchNext is what to run after an out-of-memory error that names pids.
func torchNext(pids []PIDMemory) []string {
	next := []string{"gputriage HOST"}
	if len(pids) > 0 {
		var list []string
		for _, p := range pids {
			list = append(list, strconv.Itoa(p.PID))
		}
		next = append(next, "ps -o pid,user,etime,args -p "+strings.Join(list, ",")+
			"   # on HOST; from inside a container these are host PIDs")
	}
	return append(next, "nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv   # on HOST: who holds memory on which GPU")
}

func torchKey(o torchOOM) string {
	var b strings.Builder
	dev := -1
	if o.device != nil {
		dev = *o.device
	}
	fmt.Fprintf(&b, "%s|%d|%.4f|%.4f|%.4f", o.variant, dev, o.requested, o.total, o.free)
	for _, p := range o.pids {
		fmt.Fprintf(&b, "|%d:%.4f", p.PID, p.GiB)
	}
	return b.String()
}

func torchExplanation(o torchOOM) Explanation {
	if o.variant == "partial" {
		return torchPartialExplanation(o)
	}
	ex := Explanation{
		Family:  FamilyTorchOOM,
		Variant: o.variant,
		Title:   "PyTorch ran out of GPU memory",
		Device:  o.device,
	}
	gpu := "the GPU"
	if o.device != nil {
		gpu = "GPU " + strconv.Itoa(*o.device)
	}
	var m strings.Builder
	fmt.Fprintf(&m, "PyTorch asked the CUDA driver for %s more on %s (%s in all) and only %s was free. ",
		size(o.requested), gpu, gib(o.total), size(o.free))

	pytorch := torchHeld(&m, o)
	pids, others := torchOthers(&m, o, gpu, pytorch)
	ex.PIDs = pids

	torchCause(&m, o, len(pids) > 0, pytorch, others)
	ex.Meaning = strings.TrimSpace(m.String())

	if o.device != nil {
		ex.Notes = append(ex.Notes, deviceNumbering(*o.device))
	}
	if o.variant == "legacy" {
		ex.Notes = append(ex.Notes, "This is the message of an old PyTorch (1.x), which does not list the other processes on the GPU.")
	}

	ex.Numbers = torchNumbers(o, len(pids) > 0, others)
	ex.Next = torchNext(pids)
	return ex
}

// torchHeld says what PyTorch itself holds in this process, and returns it in GiB (-1 when
// the message does not say).
func torchHeld(m *strings.Builder, o torchOOM) float64 {
	pytorch := -1.0
	switch {
	case o.allocated != nil && o.unallocated != nil:
		pytorch = *o.allocated + *o.unallocated
		fmt.Fprintf(m, "PyTorch in this process holds %s: %s in tensors and %s cached but unused. ",
			gib(pytorch), gib(*o.allocated), size(*o.unallocated))
	case o.allocated != nil && o.reserved != nil:
		pytorch = *o.reserved
		fmt.Fprintf(m, "PyTorch in this process had %s in tensors and %s reserved in all. ", gib(*o.allocated), gib(*o.reserved))
	case o.allocated != nil && o.cached != nil:
		pytorch = *o.allocated
		fmt.Fprintf(m, "PyTorch in this process had %s already allocated, and %s cached. ", gib(*o.allocated), size(*o.cached))
	case o.allocated != nil:
		pytorch = *o.allocated
		fmt.Fprintf(m, "PyTorch in this process had %s in tensors. ", gib(*o.allocated))
	}
	if o.self != nil {
		fmt.Fprintf(m, "Counting its CUDA context and other non-PyTorch memory, this process uses %s. ", gib(*o.self))
	}
	return pytorch
}

// torchOthers says which processes the message names on gpu, marking the one that is most
// likely this process itself, and returns them with the GiB the others hold.
func torchOthers(m *strings.Builder, o torchOOM, gpu string, pytorch float64) ([]PIDMemory, float64) {
	others := 0.0
	pids := make([]PIDMemory, len(o.pids))
	copy(pids, o.pids)
	if o.self == nil && pytorch >= 0 {
		for k := range pids {
			if pids[k].GiB >= pytorch && pids[k].GiB <= pytorch+2 {
				pids[k].LikelySelf = true
				break
			}
		}
	}
	var named []string
	for _, p := range pids {
		s := fmt.Sprintf("PID %d holds %s", p.PID, size(p.GiB))
		if p.LikelySelf {
			s += " (most likely this process itself, seen under its host PID: its memory matches what PyTorch reserved)"
		} else {
			others += p.GiB
		}
		named = append(named, s)
	}
	if len(named) > 0 {
		m.WriteString("The message names the processes on " + gpu + ": " + strings.Join(named, "; ") + ". ")
	}
	return pids, others
}

// torchCause says the likely cause, from the numbers.
func torchCause(m *strings.Builder, o torchOOM, named bool, pytorch, others float64) {
	var unused float64
	if o.unallocated != nil {
		unused = *o.unallocated
	} else if o.reserved != nil && o.allocated != nil {
		unused = max(*o.reserved-*o.allocated, 0)
	}
	switch {
	case others >= max(o.requested, 0.1*o.total):
		fmt.Fprintf(m, "Other processes hold %s of this GPU: that memory is missing for this job. gputriage shows "+
			"what those PIDs are (command line, user, age, unit or container) and whether they are leftovers.", gib(others))
	case unused >= o.requested && unused >= 0.05*o.total:
		fmt.Fprintf(m, "PyTorch had %s cached but unused — more than it asked for — yet no free block was large "+
			"enough: the cache is fragmented. Setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (newer PyTorch) "+
			"or max_split_size_mb (older), as the message itself suggests, can help.", size(unused))
	case named || o.self != nil || pytorch >= 0:
		m.WriteString("This process itself uses nearly the whole GPU: the job needs more memory than the GPU has " +
			"(smaller batch or sequence length, lower precision, or more GPUs).")
	}
	if o.allowed != nil {
		fmt.Fprintf(m, " A per-process limit of %s was set (torch.cuda.set_per_process_memory_fraction).", gib(*o.allowed))
	}
}

// torchNumbers are the message's numbers, in GiB.
func torchNumbers(o torchOOM, named bool, others float64) []Number {
	var ns []Number
	ns = append(ns,
		Number{Name: "requested", Value: o.requested, Unit: "GiB", Rank: o.rank},
		Number{Name: "total", Value: o.total, Unit: "GiB"},
		Number{Name: "free", Value: o.free, Unit: "GiB"})
	for _, n := range []struct {
		name string
		v    *float64
	}{
		{"this_process", o.self},
		{"allocated", o.allocated},
		{"reserved_unallocated", o.unallocated},
		{"reserved", o.reserved},
		{"cached", o.cached},
		{"allowed", o.allowed},
	} {
		if n.v != nil {
			ns = append(ns, Number{Name: n.name, Value: *n.v, Unit: "GiB"})
		}
	}
	if named {
		ns = append(ns, Number{Name: "other_processes", Value: others, Unit: "GiB"})
	}

	return ns
}

// size formats a GiB value in the unit that reads best: "235.06 MiB", "14.52 GiB", "0 bytes".
func size(v float64) string {
	switch {
	case v == 0:
		return "0 bytes"
	case v < 1.0/1024/1024:
		return fmt.Sprintf("%.0f bytes", v*(1<<30))
	case v < 1.0/1024:
		return fmt.Sprintf("%.2f KiB", v*(1<<20))
	case v < 1:
		return fmt.Sprintf("%.2f MiB", v*(1<<10))
	}
	return gib(v)
}

// processesHolding reads torch's "Process PID has SIZE" mentions in text, at most 64, those
// followed by suffix (torch's full message says " memory in use"; an abridged one, pasted or
// cut, may say nothing after the size).
func processesHolding(text, suffix string) []PIDMemory {
	var out []PIDMemory
	for p := text; len(out) < 64; {
		j := strings.Index(p, "Process ")
		if j < 0 {
			break
		}
		p = p[j+len("Process "):]
		pid, r, ok := leadingInt(p)
		if !ok || !strings.HasPrefix(r, " has ") {
			continue
		}
		v, r, ok := leadingSize(r[len(" has "):])
		if !ok || !strings.HasPrefix(r, suffix) {
			continue
		}
		out = append(out, PIDMemory{PID: pid, GiB: v})
		p = r
	}
	return out
}
