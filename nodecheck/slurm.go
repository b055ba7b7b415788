package nodecheck

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/triage"
)

// What node-check does to the node in Slurm, through scontrol: drain it with a reason, and
// resume it when gputriage drained it.

// scontrol runs scontrol with args (an argv, never a shell line), bounded in time and output.
func scontrol(ctx context.Context, args ...string) (string, error) {
	bin, err := exec.LookPath("scontrol")
	if err != nil {
		return "", fmt.Errorf("scontrol: not found on PATH (%s)", os.Getenv("PATH"))
	}
	return runBounded(ctx, bin, args...)
}

// runBounded runs a Slurm client for at most 15 s and keeps at most 64 KiB of its output.
func runBounded(ctx context.Context, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	out := &triage.CapWriter{Limit: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), strings.Join(args, " "), err,
			report.Sanitize(strings.TrimSpace(out.Buf.String())))
	}
	return out.Buf.String(), nil
}

// Drain drains node with reason, which DrainReason made printable and short, and says so on w.
func Drain(ctx context.Context, node, reason string, w io.Writer) error {
	if _, err := scontrol(ctx, "update", "nodename="+node, "state=drain", "reason="+reason); err != nil {
		return fmt.Errorf("node-check: draining %s: %w", node, err)
	}
	fmt.Fprintf(w, "gputriage: drained %s: %s\n", node, reason)
	return nil
}

// Resume resumes node when it is drained and its reason starts with "gputriage:". A node
// that is not drained is left as it is, silently; one drained for another reason too, saying so.
func Resume(ctx context.Context, node string, w io.Writer) error {
	bin, err := exec.LookPath("sinfo")
	if err != nil {
		return fmt.Errorf("node-check: sinfo: not found on PATH (%s)", os.Getenv("PATH"))
	}
	out, err := runBounded(ctx, bin, "-h", "-N", "-n", node, "-o", "%T|%E")
	if err != nil {
		return fmt.Errorf("node-check: reading the state of %s: %w", node, err)
	}
	state, reason, ok := strings.Cut(strings.SplitN(out, "\n", 2)[0], "|")
	if !ok {
		return fmt.Errorf("node-check: reading the state of %s: sinfo printed %q", node, report.Sanitize(out))
	}
	if !strings.HasPrefix(state, "drain") {
		return nil
	}
	if !strings.HasPrefix(reason, "gputriage:") {
		fmt.Fprintf(w, "gputriage: %s is clean but stays drained: not drained by gputriage (reason %q)\n", node, report.Sanitize(reason))
		return nil
	}
	if _, err := scontrol(ctx, "update", "nodename="+node, "state=resume"); err != nil {
		return fmt.Errorf("node-check: resuming %s: %w", node, err)
	}
	fmt.Fprintf(w, "gputriage: resumed %s (it was drained for: %s)\n", node, report.Sanitize(reason))
	return nil
}
