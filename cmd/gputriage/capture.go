package main

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
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/report"
)

const (
	captureExt = ".capture"
	// maxCaptureBytes bounds one host's probe output. The probe bounds each section (at most
	// about 23 MiB in all); this catches a probe or host that does not.
	maxCaptureBytes = 32 << 20
)

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// newNonce returns the random marker nonce of one probe run.
func newNonce() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// smiSeconds bounds each nvidia-smi call of the probe to 40% of the host's deadline (at most
// 30 s, at least 1 s), so a wedged driver still leaves time to report the rest of the host.
func smiSeconds(timeout time.Duration) string {
	s := int(timeout.Seconds() * 0.4)
	return strconv.Itoa(min(max(s, 1), 30))
}

// readCapture reads a saved capture, bounded like a live one.
func readCapture(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxCaptureBytes+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxCaptureBytes {
		return nil, fmt.Errorf("%s: larger than %d MiB: not a capture", path, maxCaptureBytes>>20)
	}
	return raw, nil
}

func hostFromCaptureFile(path string) string {
	return strings.TrimSuffix(filepath.Base(path), captureExt)
}

// capWriter keeps at most limit bytes and remembers that more were offered.
type capWriter struct {
	buf      bytes.Buffer
	limit    int
	overflow bool
}

func (c *capWriter) Write(p []byte) (int, error) {
	if room := c.limit - c.buf.Len(); len(p) > room {
		c.overflow = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}

// localHost runs the probe on this machine through sh, without SSH. Everything after the
// byte stream is shared with replay and SSH.
func localHost(ctx context.Context, timeout time.Duration) report.Host {
	name, _ := os.Hostname()
	if name == "" {
		name = "localhost"
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-s", "--", newNonce(), smiSeconds(timeout))
	cmd.Stdin = strings.NewReader(parse.ProbeScript)
	out := &capWriter{limit: maxCaptureBytes}
	errOut := &capWriter{limit: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, errOut
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	h := diagnoseCapture(name, out.buf.Bytes())
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		h.Err = &report.HostError{Phase: "probe", Kind: "timeout",
			Message: fmt.Sprintf("the probe did not finish within %s", timeout)}
	case errors.Is(ctx.Err(), context.Canceled):
		h.Err = &report.HostError{Phase: "probe", Kind: "interrupted", Message: "interrupted"}
	case err != nil:
		msg := strings.TrimSpace(errOut.buf.String())
		if msg == "" {
			msg = err.Error()
		}
		h.Err = &report.HostError{Phase: "probe", Kind: "exit", Message: msg}
	}
	return h
}
