package explain

import (
	"fmt"
	"math"
	"strings"
)

// vLLM's startup check (vllm/v1/worker/gpu_worker.py, later vllm/v1/worker/utils.py): after
// creating the CUDA context and initializing NCCL, each worker takes a memory snapshot and
// fails when free < total × gpu_memory_utilization:
//
//	ValueError: Free memory on device (30.02/31.84 GiB) on startup is less than desired GPU
//	    memory utilization (0.95, 30.25 GiB). Decrease GPU memory utilization or reduce GPU
//	    memory used by other processes.
//	ValueError: Free memory on device cuda:0 (4.22/79.14 GiB) on startup is less than ...
//
// The INFO line "Free memory on device (X/Y GiB) on startup. Desired GPU memory utilization is
// (...)" is not an error and is not matched.
const (
	vllmAnchor = "Free memory on device"
	vllmFail   = "less than desired GPU memory utilization"
)

var vllmConts = []string{"GPU memory utilization", "is less than desired", "less than desired", "on startup", "utilization (", "Decrease GPU memory"}

type vllmHit struct {
	device                       string
	index                        *int
	free, total, util, requested float64
	rank                         *int
}

func parseVLLM(text, prefix string) (vllmHit, bool) {
	h := vllmHit{rank: rankIn(prefix)}
	rest := strings.TrimPrefix(text, vllmAnchor)
	open := strings.IndexByte(clip(rest, 96), '(')
	if open < 0 {
		return h, false
	}
	h.device = quote(rest[:open]) // remote text: valid UTF-8, no controls
	if k := strings.LastIndexByte(h.device, ':'); k >= 0 {
		if n, r, ok := leadingInt(h.device[k+1:]); ok && r == "" {
			h.index = &n
		}
	}
	var ok bool
	var r string
	if h.free, r, ok = leadingFloat(rest[open+1:]); !ok || !strings.HasPrefix(r, "/") {
		return h, false
	}
	if h.total, r, ok = leadingFloat(r[1:]); !ok || !strings.HasPrefix(strings.TrimLeft(r, " "), "GiB") {
		return h, false
	}
	k := strings.Index(r, vllmFail)
	if k < 0 {
		return h, false
	}
	r = strings.TrimLeft(r[k+len(vllmFail):], " ")
	if !strings.HasPrefix(r, "(") {
		return h, false
	}
	if h.util, r, ok = leadingFloat(r[1:]); !ok || !strings.HasPrefix(r, ",") {
		return h, false
	}
	if h.requested, r, ok = leadingFloat(r[1:]); !ok || !strings.HasPrefix(strings.TrimLeft(r, " "), "GiB") {
		return h, false
	}
	if h.total <= 0 || h.free < 0 || h.util <= 0 {
		return h, false
	}
	return h, true
}

func explainVLLM(d *doc) []found {
	var groups hitGroups[vllmHit]
	for i, l := range d.lines {
		j := strings.Index(l, vllmAnchor)
		if j < 0 {
			continue
		}
		text, used := d.window(i, j, vllmConts, vllmAnchor)
		if !strings.Contains(text, vllmFail) {
			continue
		}
		h, ok := parseVLLM(text, l[:j])
		if !ok {
			continue
		}
		key := fmt.Sprintf("%s|%g|%g|%g", h.device, h.free, h.total, h.util)
		groups.add(key, h, used)
	}
	return groups.found(d, vllmExplanation)
}

// vllmMargin is taken off the largest utilization that fits: vLLM compares exact bytes with
// ceil(total × utilization), the message rounds to 0.01 GiB, and what other processes hold
// changes between attempts.
const vllmMargin = 0.01

// vllmOwnContext is the most a vLLM worker's own CUDA context and NCCL buffers take before
// its startup snapshot; the rest of the memory in use belongs to other processes.
const vllmOwnContext = 1.5

func vllmExplanation(h vllmHit) Explanation {
	ex := Explanation{
		Family:  FamilyVLLMFreeMemory,
		Variant: "without-device",
		Title:   "vLLM refused to start: not enough free GPU memory for --gpu-memory-utilization",
		Device:  h.index,
	}
	where := "the GPU"
	if h.device != "" {
		ex.Variant = "with-device"
		where = h.device
	}
	inUse := max(h.total-h.free, 0)
	short := max(h.requested-h.free, 0)
	fit := math.Floor(h.free/h.total*100+1e-9) / 100
	suggest := round2(max(fit-vllmMargin, 0))

	var m strings.Builder
	fmt.Fprintf(&m, "At startup vLLM checks that %s has free the share it was told to take: "+
		"gpu_memory_utilization %g × %s total = %s. Only %s of %s was free, so %s (%s) was already in use, "+
		"and the check failed %s short. ",
		where, h.util, gib(h.total), gib(h.requested), gib(h.free), gib(h.total), gib(inUse), mib(inUse), gib(short))
	othersMin := max(inUse-vllmOwnContext, 0)
	fmt.Fprintf(&m, "vLLM measures after creating its own CUDA context and NCCL buffers (about 0.5–1.5 GiB), so other "+
		"processes hold about %s to %s of it.", gib(othersMin), gib(inUse))
	ex.Meaning = m.String()

	fitNote := fmt.Sprintf("The largest --gpu-memory-utilization that the free memory seen would allow is %.2f "+
		"(free ÷ total = %s ÷ %s, rounded down); use %.2f or lower, because vLLM compares exact bytes with "+
		"ceil(total × utilization), the message rounds to 0.01 GiB, and what other processes hold can change between attempts. "+
		"That only shrinks vLLM to fit around the other processes: it gets %.2f × %s = %s for weights, activations "+
		"and KV cache, and the memory stays held.",
		fit, gib(h.free), gib(h.total), suggest, suggest, gib(h.total), gib(suggest*h.total))
	if fit < h.util/2 {
		fitNote += " That is far below what was asked; free the memory instead."
	}
	ex.Notes = append(ex.Notes, fitNote)
	if h.index != nil {
		ex.Notes = append(ex.Notes, deviceNumbering(*h.index))
	}

	ex.Numbers = []Number{
		{Name: "free", Value: h.free, Unit: "GiB", Rank: h.rank},
		{Name: "total", Value: h.total, Unit: "GiB"},
		{Name: "gpu_memory_utilization", Value: h.util, Unit: "fraction"},
		{Name: "requested", Value: h.requested, Unit: "GiB"},
		{Name: "in_use", Value: round2(inUse), Unit: "GiB"},
		{Name: "shortfall", Value: round2(short), Unit: "GiB"},
		{Name: "held_by_others_min", Value: round2(othersMin), Unit: "GiB"},
		{Name: "held_by_others_max", Value: round2(inUse), Unit: "GiB"},
		{Name: "max_gpu_memory_utilization", Value: fit, Unit: "fraction"},
		{Name: "suggested_gpu_memory_utilization", Value: suggest, Unit: "fraction"},
	}
	ex.Next = []string{
		vllmTriage(h),
		"nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv   # on HOST: who holds the memory",
		"# stop the process gputriage names (often a vLLM server or EngineCore left from an earlier start), then start vLLM again",
	}
	if fit >= h.util/2 && suggest > 0 {
		ex.Next = append(ex.Next, fmt.Sprintf("# or, only if that memory must stay where it is: start vLLM with --gpu-memory-utilization %.2f", suggest))
	}
	return ex
}

// deviceNumbering explains whose numbering a GPU index in a message uses.
func deviceNumbering(index int) string {
	return fmt.Sprintf("GPU %d is numbered as the failing process saw it: after CUDA_VISIBLE_DEVICES, and in CUDA's "+
		"order, which matches nvidia-smi's only with CUDA_DEVICE_ORDER=PCI_BUS_ID. gputriage shows nvidia-smi's numbering.", index)
}

// vllmTriage is the gputriage command that asks which GPUs can take vLLM at the utilization
// the log asked for. --tp takes a number: the least the log shows, the reader sets their own.
func vllmTriage(h vllmHit) string {
	tp, why := 1, "one rank per GPU"
	if h.rank != nil && *h.rank >= 1 {
		tp, why = *h.rank+1, fmt.Sprintf("at least %d: the log shows rank %d", *h.rank+1, *h.rank)
	}
	return fmt.Sprintf("gputriage HOST --tp %d --engine vllm --gpu-memory-utilization %g   # %s; set --tp to your --tensor-parallel-size",
		tp, h.util, why)
}
