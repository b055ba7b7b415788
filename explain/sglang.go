package explain

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// SGLang's tensor-parallel startup check (python/sglang/srt/model_executor/model_runner.py):
// every rank measures its GPU's free memory in GiB (torch.cuda.mem_get_info / 2^30, after the
// rank created its CUDA context), the group all-reduces the minimum, and a rank fails when
// min < 0.9 × its own. The message has taken these forms:
//
//	ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes.
//	ValueError: ... min_per_gpu_memory=X, local_gpu_memory=Y, local_gpu_memory * 0.9=Z
//	    (SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK=true turns it into a warning)
//	RuntimeError: ... min_per_gpu_memory=X, local_gpu_memory=Y, local_gpu_memory * 0.9=Z
//	RuntimeError: ... pre_model_load_memory=X, local_gpu_memory=Y, local_gpu_memory * 0.9=Z
//	    (SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK, default true; false turns it into a warning)
//	ValueError: The memory capacity is unbalanced. min_available_device_memory=X,
//	    local_device_memory=Y, local_device_memory*0.9=Z          (sgl-jax; SGL_DISABLE_...)
const (
	sglangAnchor = "The memory capacity is unbalanced"
	sglangRatio  = 0.9
)

var sglangConts = []string{"Some GPUs", "min_per_gpu_memory", "pre_model_load_memory", "local_gpu_memory",
	"min_available_device_memory", "local_device_memory"}

type sglangHit struct {
	variant    string
	exc        string // "RuntimeError", "ValueError" or "" when the paste does not show it
	min, local float64
	hasNumbers bool
	rank       *int
}

type sglangGroup struct {
	variant  string
	exc      string
	min      float64
	locals   map[string]sglangLocal // by rank ("" when the log names none)
	order    []string
	lines    lineSet
	hasNums  bool
	messages int
}

type sglangLocal struct {
	rank  *int
	local float64
}

func parseSGLang(text, prefix string) sglangHit {
	h := sglangHit{variant: "no-numbers", rank: rankIn(prefix)}
	switch {
	case strings.Contains(prefix, "RuntimeError"):
		h.exc = "RuntimeError"
	case strings.Contains(prefix, "ValueError"):
		h.exc = "ValueError"
	}
	for _, k := range []struct{ min, local, variant string }{
		{"pre_model_load_memory=", "local_gpu_memory=", "pre_model_load_memory"},
		{"min_per_gpu_memory=", "local_gpu_memory=", "min_per_gpu_memory"},
		{"min_available_device_memory=", "local_device_memory=", "sgl-jax"},
	} {
		mn, ok1 := valueAfter(text, k.min)
		lc, ok2 := valueAfter(text, k.local)
		if ok1 && ok2 && mn >= 0 && lc >= 0 {
			h.variant, h.min, h.local, h.hasNumbers = k.variant, mn, lc, true
			break
		}
	}
	return h
}

func explainSGLang(d *doc) []found {
	var groups []*sglangGroup
	byKey := map[string]*sglangGroup{}
	overflow := 0
	for i, l := range d.lines {
		j := strings.Index(l, sglangAnchor)
		if j < 0 {
			continue
		}
		text, used := d.window(i, j, sglangConts, sglangAnchor)
		h := parseSGLang(text, l[:j])
		key := h.variant + "|" + h.exc
		if h.hasNumbers {
			key += "|" + strconv.FormatFloat(round2(h.min), 'f', 2, 64)
		}
		g := byKey[key]
		if g == nil {
			if len(groups) >= maxPerFamily {
				overflow++
				continue
			}
			g = &sglangGroup{variant: h.variant, exc: h.exc, min: h.min, hasNums: h.hasNumbers, locals: map[string]sglangLocal{}}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.messages++
		for _, u := range used {
			g.lines.add(u)
		}
		if h.hasNumbers {
			rk := ""
			if h.rank != nil {
				rk = strconv.Itoa(*h.rank)
			}
			if _, ok := g.locals[rk]; !ok && len(g.order) < 1024 {
				g.order = append(g.order, rk)
			}
			if old, ok := g.locals[rk]; !ok || h.local > old.local {
				g.locals[rk] = sglangLocal{rank: h.rank, local: h.local}
			}
		}
	}
	out := make([]found, 0, len(groups))
	for k, g := range groups {
		ex := g.explanation(d)
		if k == len(groups)-1 {
			ex.MoreLines += overflow
		}
		out = append(out, found{first: g.lines.first(), ex: ex})
	}
	return out
}

func (g *sglangGroup) explanation(d *doc) Explanation {
	ex := Explanation{
		Family:    FamilySGLangUnbalanced,
		Variant:   g.variant,
		Title:     "SGLang refused to start: free GPU memory is unbalanced across the tensor-parallel group",
		Lines:     g.lines.quoted(d),
		MoreLines: g.lines.more,
	}
	locals, maxRank := g.sortedLocals()
	device := "GPU"
	if g.variant == "sgl-jax" {
		device = "device"
	}
	if !g.hasNums {
		ex.Meaning = "At startup every SGLang rank measures the free memory of its own GPU, and the group " +
			"compares the smallest of them with 90% of each rank's own. Here some GPU of the group had less " +
			"than 90% of the free memory of another — most often because a process (a previous server that did " +
			"not exit, another user's job) still holds memory on it. This older form of the message prints no " +
			"numbers; gputriage measures the same thing on the host and names the process."
	} else {
		g.explainNumbers(&ex, locals, device)
	}
	ex.Notes = append(ex.Notes, "GPUs of different sizes in one tensor-parallel group fail this check even when nothing else runs on them.")
	ex.Notes = append(ex.Notes, sglangSwitch(g.variant, g.exc))
	if g.exc == "" && g.hasNums {
		ex.Notes = append(ex.Notes, "The paste does not show whether this was raised (RuntimeError/ValueError) or only "+
			"logged as a warning because the check was turned off; without a traceback after it, startup went on.")
	}
	ex.Next = sglangNext(maxRank)
	return ex
}

// sortedLocals are the ranks' own measurements, ranks in order and a message without a rank
// after them, and the highest rank seen (-1: none).
func (g *sglangGroup) sortedLocals() (locals []sglangLocal, maxRank int) {
	for _, rk := range g.order {
		if l, ok := g.locals[rk]; ok {
			locals = append(locals, l)
		}
	}
	rankOf := func(l sglangLocal) int {
		if l.rank != nil {
			return *l.rank
		}
		return math.MaxInt
	}
	slices.SortStableFunc(locals, func(a, b sglangLocal) int { return cmp.Compare(rankOf(a), rankOf(b)) })
	maxRank = -1
	for _, l := range locals {
		if l.rank != nil {
			maxRank = max(maxRank, *l.rank)
		}
	}
	return locals, maxRank
}

// explainNumbers writes the meaning and numbers of a message that printed its measurements.
func (g *sglangGroup) explainNumbers(ex *Explanation, locals []sglangLocal, device string) {
	var m strings.Builder
	hi := locals[0].local
	for _, l := range locals {
		hi = max(hi, l.local)
	}
	held := hi - g.min
	short := sglangRatio*hi - g.min
	fmt.Fprintf(&m, "Before loading the model every SGLang rank measured the free memory of its own %s, and the "+
		"group took the smallest: %s (%s). ", device, gib(g.min), minName(g.variant))
	m.WriteString(rankSaw(locals, device))
	fmt.Fprintf(&m, " SGLang requires the smallest to be at least 90%% of each rank's own (0.9 × %s = %s), so it "+
		"is short by %s. ", gib(hi), gib(sglangRatio*hi), gib(max(short, 0)))
	fmt.Fprintf(&m, "On %ss of the same size this means other processes hold at least %s (%s) on the %s with "+
		"the least free memory, the one with %s free: that much more is in use there than on the %s with the most. ",
		device, gib(held), mib(held), device, gib(g.min), device)
	m.WriteString("The rank that reported the error is not the one at fault: its " + device + " is the free one; " +
		"the rank on the occupied " + device + " passes the check and does not report it.")
	ex.Meaning = m.String()

	ex.Numbers = append(ex.Numbers, Number{Name: "min_free", Value: g.min, Unit: "GiB"})
	for _, l := range locals {
		ex.Numbers = append(ex.Numbers, Number{Name: "local_free", Value: l.local, Unit: "GiB", Rank: l.rank})
	}
	ex.Numbers = append(ex.Numbers,
		Number{Name: "threshold", Value: sglangRatio * hi, Unit: "GiB"},
		Number{Name: "shortfall", Value: max(short, 0), Unit: "GiB"},
		Number{Name: "held_elsewhere_min", Value: held, Unit: "GiB"},
		Number{Name: "held_elsewhere_min_mib", Value: math.Round(held * 1024), Unit: "MiB"},
	)
	if g.variant != "sgl-jax" {
		ex.Notes = append(ex.Notes, "These numbers read lower than nvidia-smi's free memory before the start: "+
			"each rank measures after creating its CUDA context (and NCCL state), which takes about 0.5–1.5 GiB "+
			"per GPU. SGLang prints them in GiB (2^30 bytes).")
	}
}

// sglangNext are the next steps. --tp takes a number, and the paste rarely shows the group's
// size: name the least it can be, or leave --tp to the reader in a comment, so the line runs
// as printed.
func sglangNext(maxRank int) []string {
	tp := "gputriage HOST   # and with --tp N --engine sglang, N = your --tp-size: which GPUs can take the job"
	if maxRank >= 1 {
		tp = fmt.Sprintf("gputriage HOST --tp %d --engine sglang   # at least %d: the log shows TP%d; set --tp to your --tp-size",
			maxRank+1, maxRank+1, maxRank)
	}
	return []string{
		tp,
		"nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv   # on HOST: who holds memory on which GPU",
		"# stop the process gputriage names (a previous server that did not exit, another job), then start SGLang again",
	}
}

func minName(variant string) string {
	switch variant {
	case "pre_model_load_memory":
		return "pre_model_load_memory"
	case "sgl-jax":
		return "min_available_device_memory"
	}
	return "min_per_gpu_memory"
}

// rankSaw says which rank saw how much free memory.
func rankSaw(locals []sglangLocal, device string) string {
	if len(locals) == 1 && locals[0].rank == nil {
		return fmt.Sprintf("The rank that reported this saw %s free on its own %s.", gib(locals[0].local), device)
	}
	var parts []string
	for k, l := range locals {
		if k == 6 && len(locals) > 7 {
			parts = append(parts, fmt.Sprintf("and %d more ranks", len(locals)-k))
			break
		}
		who := "a rank"
		if l.rank != nil {
			who = "TP" + strconv.Itoa(*l.rank)
		}
		parts = append(parts, fmt.Sprintf("%s saw %s free", who, gib(l.local)))
	}
	return "On its own " + device + ", " + strings.Join(parts, ", ") + "."
}

// sglangSwitch names the switch that turns the check into a warning in the version that printed
// this form, and why not to use it. Verified against SGLang's source history; where the form
// does not tell the version apart, both are named.
func sglangSwitch(variant, exc string) string {
	why := " Turning the check off does not free anything: the other process keeps its memory, SGLang " +
		"plans its memory from the smallest free amount of all ranks, so every rank gets less KV cache, and if " +
		"that process grows, a rank runs out of memory while serving. Free the memory instead."
	switch {
	case variant == "no-numbers":
		return "In the SGLang versions that print this message without numbers the check raises unconditionally " +
			"(no switch in the source we checked); check your version's source " +
			"(python/sglang/srt/model_executor/model_runner.py)." + why
	case variant == "sgl-jax":
		return "In sgl-jax, SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK=true (sic, INBALANCE) turns the error into a warning." + why
	case variant == "pre_model_load_memory", exc == "RuntimeError":
		return "In this SGLang version SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=false (sic, INBALANCE; default true) " +
			"turns the error into a warning." + why
	case exc == "ValueError":
		return "In this SGLang version SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK=true (sic, INBALANCE) turns the error " +
			"into a warning." + why
	}
	return "SGLang versions that raise RuntimeError read SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=false (sic, " +
		"INBALANCE); older ones that raise ValueError read SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK=true; both turn " +
		"the error into a warning." + why
}
