package diagnose

import (
	"fmt"
	"strings"

	"github.com/gputriage/gputriage/parse"
)

// Words of readiness: its one-sentence verdicts.

// smiUnreadyReason says that no GPU memory can be checked because nvidia-smi failed.
func smiUnreadyReason(f *parse.SMIFailure) string {
	reason := fmt.Sprintf("Not ready: nvidia-smi failed (%s), so no GPU memory can be checked (see smi-failed)", f.Kind)
	msg := strings.TrimSpace(strings.SplitN(f.Message, "\n", 2)[0])
	if msg == "" {
		return reason + "."
	}
	reason += ": \"" + msg + "\""
	if !strings.HasSuffix(msg, ".") {
		reason += "."
	}
	return reason
}

// readyReason says that the default GPUs pass.
func readyReason(out Readiness) string {
	return fmt.Sprintf("Ready: %s %s %s startup check%s for TP %d.", FormatGPUs(out.GPUs), plural(len(out.GPUs), "passes", "pass"),
		engineList(out.Verdicts), plural(len(out.Verdicts), "", "s"), out.Job.TP)
}

// notReadyReason says why the default GPUs fail, and what would pass instead; largest is the
// most GPUs of one size.
func notReadyReason(out Readiness, largest int) string {
	failed := failedOnly(out.Verdicts)
	fails := fmt.Sprintf("%s %s %s startup check%s", FormatGPUs(out.GPUs), plural(len(out.GPUs), "fails", "fail"), engineList(failed), plural(len(failed), "", "s"))
	fix := ""
	if out.AfterFix {
		fix = fmt.Sprintf("; stopping leftover %s (see leftover-process) would let %s pass", fmtPIDs(out.FixPIDs), FormatGPUs(out.GPUs))
	}
	tp := out.Job.TP
	switch {
	case out.Subset != nil:
		return fmt.Sprintf("Not ready on the default GPUs: %s, but %s %s: launch with %s%s.", fails, FormatGPUs(out.Subset),
			plural(len(out.Subset), "passes", "pass"), out.SubsetEnv, fix)
	case largest < tp:
		return fmt.Sprintf("Not ready: %s, and this host has no %d GPUs of one size that can hold ranks (at most %d)%s.", fails, tp, largest, fix)
	}
	return fmt.Sprintf("Not ready: %s, and no set of %d GPUs on this host can pass: %s%s.", fails, tp, blockerSentence(out.Blockers), fix)
}
