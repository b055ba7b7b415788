// Package explain reads error messages that users paste (one line or a whole log) and says
// what each recognized one means: its numbers decoded, in plain words, with what to run next.
// It owns the knowledge of those message formats and of nothing else: it is pure (no I/O, no
// clock), uses the standard library only, and never guesses — text it does not recognize gives
// no explanation at all.
//
// Matching is by fixed phrases (strings.Index), then a small hand-written parser per format,
// so the work is linear in the input; only the first MaxInputBytes of a paste are read.
package explain

import (
	"cmp"
	"slices"
)

// MaxInputBytes is how much of a paste Explain reads; the rest is ignored. A caller that
// passes more should say so (see Truncated).
const MaxInputBytes = 16 << 20

// Family identifiers. They are stable: users grep for them and paste them into tickets. Each
// is documented in docs/explain.md.
const (
	FamilySGLangUnbalanced   = "sglang-unbalanced"
	FamilyVLLMFreeMemory     = "vllm-free-memory"
	FamilyTorchOOM           = "torch-oom"
	FamilyNCCLShm            = "nccl-shm"
	FamilyDataLoaderBusError = "dataloader-bus-error"
	FamilySMIFailed          = "smi-failed"
	FamilyNVRMProbe          = "nvrm-probe"
	FamilyXid                = "xid"
	FamilyFDsUnreadable      = "fds-unreadable"
)

// Explanation is what one recognized error means. Every string is plain text, ready to print;
// quoted log lines have had terminal escape sequences and other control characters removed.
type Explanation struct {
	Family  string // one of the Family constants
	Variant string // which form of the message, e.g. "pre_model_load_memory", "legacy"; "" if the family has one
	Title   string
	// Lines are the log lines the explanation rests on, as found (without ANSI colors or
	// control characters, and cut at 2,000 bytes). MoreLines counts further matching lines
	// that were not kept.
	Lines     []string
	MoreLines int
	Meaning   string   // what happened, in plain words with the numbers decoded
	Notes     []string // further points worth knowing: caveats, switches and why not to use them
	Numbers   []Number // the decoded values
	Next      []string // commands or steps to run next; HOST stands for the host that failed
	// PIDs are the processes the message names with their GPU memory (PyTorch's "Process N
	// has X memory in use").
	PIDs []PIDMemory
	// Device is the GPU index the message names ("GPU 0", "cuda:0"), as the failing process
	// numbered it (after CUDA_VISIBLE_DEVICES); nil when the message names none.
	Device *int
	// BusID is the PCI bus id the message names ("0000:02:00.0"), or "".
	BusID string
}

// Number is one decoded value. Name is a stable snake_case key.
type Number struct {
	Name  string
	Value float64
	Unit  string // "GiB", "MiB", "bytes", "fraction", "count", "pid"
	Rank  *int   // the tensor-parallel or distributed rank it belongs to, when the log says
}

// PIDMemory is one process and the GPU memory a message says it holds.
type PIDMemory struct {
	PID int
	GiB float64
	// LikelySelf is set when the message has no "this process has" line and this PID's
	// memory matches what PyTorch itself reserved: the PID is then most likely the failing
	// process, seen under its host PID from inside a container.
	LikelySelf bool
}

// Truncated reports whether Explain would read only part of text.
func Truncated(text string) bool { return len(text) > MaxInputBytes }

// Explain finds every recognized error in text and explains it, in the order the errors
// first appear. An empty result means nothing was recognized.
func Explain(text string) []Explanation {
	d := newDoc(text)
	var all []found
	for _, f := range []func(*doc) []found{
		explainSGLang,
		explainVLLM,
		explainTorchOOM,
		explainNCCLShm,
		explainDataLoader,
		explainSMI,
		explainNVRMProbe,
		explainXid,
		explainFDsUnreadable,
	} {
		all = append(all, f(d)...)
	}
	slices.SortStableFunc(all, func(a, b found) int { return cmp.Compare(a.first, b.first) })
	out := make([]Explanation, 0, len(all))
	for _, f := range all {
		out = append(out, f.ex)
	}
	return out
}

// found is an explanation with the index of the first line it rests on, for ordering.
type found struct {
	first int
	ex    Explanation
}

// maxPerFamily bounds how many separate explanations one family gives for one paste: a log
// of a thousand ranks failing alike needs a handful, not a thousand.
const maxPerFamily = 8

// maxLines bounds the lines quoted by one explanation.
const maxLines = 12
