package nodecheck

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/probe"
	"github.com/gputriage/gputriage/triage"
)

// node-check's idle gate: before the probe, node-check asks nvidia-smi exactly what the
// probe asks it and looks at /proc and /dev/shm for the few things a warning could rest on
// (ReadIdleFacts); IdleGate decides whether any finding could fire. Only when it proves
// none can does node-check answer clean without the probe. The probe stays the one source
// of every capture: the gate makes none, and judges nothing it does not prove.

// The query arguments are the probe's own: the gate's answers must be the answers the probe
// would get.
var (
	smiGPUArgs      = probe.GPUQuery()
	smiGPUBasicArgs = probe.GPUBasicQuery()
	smiAppsArgs     = probe.AppsQuery()
)

// ReadIdleFacts reads on this node what IdleGate judges: nvidia-smi's answers to the probe's
// queries, each call bounded by bound, then /proc and /dev/shm (idleNodeFacts, Linux only)
// within bound too.
func ReadIdleFacts(ctx context.Context, bound time.Duration) IdleFacts {
	smi, unparsed := idleSMI(ctx, bound)
	f := nodeFactsWithin(ctx, bound)
	f.SMI, f.SMIUnparsed = smi, unparsed
	return f
}

// nodeFactsWithin runs idleNodeFacts for at most bound. A read of /proc can block for good
// (a process stuck in the driver holds its memory map's lock, and reading its maps or its
// command line waits for it), which no context interrupts: the read is left behind, and
// what it would have said is doubt.
func nodeFactsWithin(ctx context.Context, bound time.Duration) IdleFacts {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	done := make(chan IdleFacts, 1)
	go func() {
		var f IdleFacts
		idleNodeFacts(ctx, &f)
		done <- f
	}()
	select {
	case f := <-done:
		return f
	case <-ctx.Done():
		return IdleFacts{Unseen: []string{fmt.Sprintf("/proc and /dev/shm not read within %s", bound)}}
	}
}

// idleSMI runs the probe's nvidia-smi queries, with its fallback and its bounds, and parses
// the answers as the probe's sections: a capture holding only those, under a nonce of its
// own, goes through parse.Parse like any other.
func idleSMI(ctx context.Context, bound time.Duration) (*parse.Snapshot, bool) {
	nonce := triage.NewNonce()
	var b strings.Builder
	b.WriteString(parse.CaptureHeader(nonce))
	smi := probe.FindSMI()
	if smi == "" {
		// The probe's own words, so that parse classifies it the same way.
		fmt.Fprintf(&b, "@@gputriage %s begin smi-gpu limit=1048576\nnvidia-smi: not found on PATH or in %s\n@@gputriage %s rc=127\n@@gputriage %s end smi-gpu\n",
			nonce, strings.Join(probe.SMIDirs, ", "), nonce, nonce)
	} else {
		out, rc := runSMI(ctx, bound, smi, smiGPUArgs)
		smiSection(&b, nonce, "smi-gpu", out, rc)
		if strings.Contains(out, "not a valid field") {
			out, rc = runSMI(ctx, bound, smi, smiGPUBasicArgs)
			smiSection(&b, nonce, "smi-gpu-basic", out, rc)
		}
		if rc != 124 && rc != 137 {
			out, rc = runSMI(ctx, bound, smi, smiAppsArgs)
			smiSection(&b, nonce, "smi-apps", out, rc)
		}
	}
	fmt.Fprintf(&b, "@@gputriage %s done\n", nonce)
	s, err := parse.Parse([]byte(b.String()))
	return s, err != nil
}

// smiSectionLimit bounds each nvidia-smi answer as the probe's sections do.
const smiSectionLimit = 1 << 20

// runSMI runs one nvidia-smi query as the probe does (LC_ALL=C, stdout and stderr as one
// stream, at most the section's bound kept) for at most bound; rc is its exit status, 124
// when the bound stopped it (as timeout(1) says) and 127 when it could not start.
func runSMI(ctx context.Context, bound time.Duration, smi string, args []string) (string, int) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, smi, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out := &triage.CapWriter{Limit: smiSectionLimit + 64}
	cmd.Stdout, cmd.Stderr = out, out // one pipe for both, as 2>&1
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return out.Buf.String(), 124
	case errors.As(err, &exit):
		return out.Buf.String(), exit.ExitCode()
	case err != nil:
		return err.Error(), 127
	}
	return out.Buf.String(), 0
}

// smiSection writes one answer as the probe's capsec would: the output and its rc trailer
// cut together at the bound (a cut trailer is how a reader knows the section was cut), and
// the shell's $(...) dropping trailing newlines.
func smiSection(b *strings.Builder, nonce, name, out string, rc int) {
	stream := fmt.Sprintf("%s\n@@gputriage %s rc=%d\n", out, nonce, rc)
	if len(stream) > smiSectionLimit+64 {
		stream = stream[:smiSectionLimit+64]
	}
	fmt.Fprintf(b, "@@gputriage %s begin %s limit=%d\n%s\n@@gputriage %s end %s\n",
		nonce, name, smiSectionLimit, strings.TrimRight(stream, "\n"), nonce, name)
}
