package triage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/gputriage/gputriage/kube"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/probe"
	"github.com/gputriage/gputriage/report"
)

const (
	captureExt = ".capture"
	// MaxCaptureBytes bounds one host's probe output. The probe bounds each section (at most
	// about 33 MiB in all, base64 included: TestCaptureBoundHoldsEverySection); this catches a
	// probe or host that does not.
	MaxCaptureBytes = 36 << 20
)

// NewNonce returns a random marker nonce: of one probe run, of one Slurm query.
func NewNonce() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// SMISeconds bounds each nvidia-smi call of the probe to 40% of the host's deadline (at most
// 30 s, at least 1 s), so a wedged driver still leaves time to report the rest of the host.
func SMISeconds(timeout time.Duration) int {
	return min(max(int(timeout.Seconds()*0.4), 1), 30)
}

// probeInput is the probe's stdin for one run: its nonce, nvidia-smi's bound, the script.
func probeInput(nonce string, timeout time.Duration) []byte {
	return probe.Input(nonce, SMISeconds(timeout))
}

// ProbeScript is the probe's input for a shell gputriage does not reach itself (kubectl
// debug's node pod): a new nonce, nvidia-smi's bound for timeout, the script, and a final
// line `exit 0` (as every Kubernetes exec gets: the shell ends without stdin's end).
func ProbeScript(timeout time.Duration) []byte {
	return kube.WithExit(probeInput(NewNonce(), timeout))
}

// readCapture reads a saved capture, bounded like a live one (a Kubernetes node's with the
// block the client appended).
func readCapture(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, MaxCaptureBytes+kube.BlockMax+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > MaxCaptureBytes+kube.BlockMax {
		return nil, fmt.Errorf("%s: larger than %d MiB: not a capture", path, MaxCaptureBytes>>20)
	}
	return raw, nil
}

func hostFromCaptureFile(path string) string {
	return strings.TrimSuffix(filepath.Base(path), captureExt)
}

// CapWriter keeps at most Limit bytes and remembers that more were offered (Overflow).
type CapWriter struct {
	Buf      bytes.Buffer
	Limit    int
	Overflow bool
}

func (c *CapWriter) Write(p []byte) (int, error) {
	if room := c.Limit - c.Buf.Len(); len(p) > room {
		c.Overflow = true
		if room > 0 {
			c.Buf.Write(p[:room])
		}
		return len(p), nil
	}
	return c.Buf.Write(p)
}

// NoGPUError is a machine with no NVIDIA GPU or driver to triage (probe.NoDriver says why).
type NoGPUError struct{ Why string }

func (e *NoGPUError) Error() string { return e.Why }

// Local runs the probe on this machine through sh, without SSH, within c.Timeout, and
// returns the host diagnosed, keeping what c keeps; with c.Save, its capture is kept there as
// Run keeps each host's (DIR/HOSTNAME.capture, for Replay). Everything after the byte stream
// is shared with Replay and Run. A machine with no NVIDIA GPU or driver is a *NoGPUError, at
// once: there is nothing to triage, and no probe runs.
func Local(ctx context.Context, c *Config) (report.Host, error) {
	if why := probe.NoDriver(); why != "" {
		return report.Host{}, &NoGPUError{Why: why}
	}
	sv, err := c.saver()
	if err != nil {
		return report.Host{}, err
	}
	h := ProbeLocal(ctx, c.Timeout)
	sv.host(h)
	if err := sv.finish([]report.Host{h}); err != nil {
		return report.Host{}, fmt.Errorf("--save: %w", err)
	}
	c.finish(&h)
	return h, nil
}

// ProbeLocal is Local's host whole, as diagnosed, for a judge of the whole snapshot
// (node-check).
func ProbeLocal(ctx context.Context, timeout time.Duration) report.Host {
	name, _ := os.Hostname()
	if name == "" {
		name = "localhost"
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nonce := NewNonce()
	cmd := exec.CommandContext(ctx, "sh", "-s")
	cmd.Stdin = bytes.NewReader(probeInput(nonce, timeout))
	out := &CapWriter{Limit: MaxCaptureBytes}
	errOut := &CapWriter{Limit: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, errOut
	cmd.WaitDelay = 2 * time.Second
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	raw, _, ferr := fromHeader(out.Buf.Bytes(), nonce)
	h := diagnoseCapture(name, raw)
	if ferr != nil {
		h = report.Host{Name: name, Capture: raw, Err: &report.HostError{Phase: "probe", Kind: "bad-output", Message: ferr.Error()}}
	}
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		h.Err = &report.HostError{Phase: "probe", Kind: "timeout",
			Message: fmt.Sprintf("the probe did not finish within %s", timeout)}
	case errors.Is(ctx.Err(), context.Canceled):
		h.Err = &report.HostError{Phase: "probe", Kind: "interrupted", Message: "interrupted"}
	case err != nil:
		msg := strings.TrimSpace(errOut.Buf.String())
		if msg == "" {
			msg = err.Error()
		}
		h.Err = &report.HostError{Phase: "probe", Kind: "exit", Message: msg}
	}
	h.ProbeDuration = took
	return h
}

// fromHeader returns the output from this run's capture header on, and what came before it:
// text a login shell's profile printed before the probe started. Output that is a capture of
// another run (another nonce: replayed or forged) is an error: nothing it says can be trusted.
// Output with no header at all is returned whole, to be reported as not a capture.
func fromHeader(out []byte, nonce string) (capture, dropped []byte, err error) {
	head := []byte(parse.CaptureHeader(nonce))
	i := bytes.Index(out, head)
	switch {
	case i == 0:
		return out, nil, nil
	case i > 0 && out[i-1] == '\n':
		return out[i:], out[:i], nil
	}
	if c, perr := parse.SplitCapture(out); perr == nil && c.Nonce != nonce {
		return out, nil, fmt.Errorf("the host answered with a capture of another run (nonce %.8s…, not this run's %.8s…): not trusted", c.Nonce, nonce)
	}
	return out, nil, nil
}

// preambleNote says what the login shell printed before the probe (it is dropped).
func preambleNote(b []byte) string {
	shown := b
	if len(shown) > 200 {
		shown = shown[:200]
	}
	return fmt.Sprintf("the login shell printed %d bytes before the probe started (dropped; check its profile): %s",
		len(b), report.Sanitize(report.MaskSecrets(strings.TrimSpace(string(shown)))))
}
