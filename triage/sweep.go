package triage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gputriage/gputriage/hostlist"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/sshconf"
	"github.com/gputriage/gputriage/sshexec"
)

// Run probes every host over SSH and diagnoses each one as soon as its output is in, so that
// it holds the raw output of at most Fanout hosts at once: a host's output is written to
// Save at once, given to Each, and dropped once diagnosed, but for what the report reads. It
// returns the hosts in order, each with what Slurm says of it.
func Run(ctx context.Context, c *Config, hosts []Host) ([]report.Host, error) {
	sv, err := c.saver()
	if err != nil {
		return nil, err
	}
	out, err := c.sweep(ctx, hosts, sv)
	if err != nil {
		return nil, err
	}
	if err := sv.finish(out); err != nil {
		return nil, fmt.Errorf("--save: %w", err)
	}
	for i := range out {
		out[i].Scheduler = c.Scheduler[out[i].Name]
	}
	return out, nil
}

func (c *Config) sweep(ctx context.Context, hosts []Host, sv *saver) ([]report.Host, error) {
	if c.Fanout < 1 {
		return nil, usagef("--fanout must be at least 1, got %d", c.Fanout)
	}
	sopt, nonce, closeAgent, err := c.probeOptions(c.Timeout)
	if err != nil {
		return nil, err
	}
	defer closeAgent()
	sopt.Fanout = fanoutWithin(c.Fanout, len(hosts), c.Stderr)
	defer limitMemory(sopt.Fanout, len(hosts))()
	debug := c.debug()
	targets := make([]sshexec.Target, len(hosts))
	for i, h := range hosts {
		targets[i] = c.target(h)
		debug.route(h.Label, targets[i], sopt.Agent != nil, sopt)
	}
	PrintConfigNotes(c.Stderr, hosts)
	out := make([]report.Host, len(hosts))
	notes := make([][]string, len(hosts)) // printed in host order once the sweep is over
	sopt.Done = func(i int, r *sshexec.Result) {
		debug.result(hosts[i].Label, r)
		withDiagnoseSlot(func() {
			out[i], notes[i] = c.finishHost(hosts[i].Label, r, nonce)
			blameConfig(out[i].Err, hosts[i].Conf)
			sv.host(out[i])
			c.finish(&out[i])
			r.Stdout, r.Stderr = nil, nil
		})
	}
	sopt.Progress = c.Progress
	sshexec.Run(ctx, targets, sopt)
	for i, ns := range notes {
		for _, n := range ns {
			fmt.Fprintf(c.Stderr, "gputriage: %s: %s\n", report.Sanitize(hosts[i].Label), n)
		}
	}
	return out, nil
}

// StrictNoNote is said of the hosts whose config turns host key checking off.
const StrictNoNote = "StrictHostKeyChecking no: not honored: host keys are always checked (use --accept-new to record unknown ones)"

// PrintConfigNotes names, once for the sweep, each config line gputriage does not act on that
// changes how a host is reached, folding the hosts it applies to:
// "ProxyUseFdpass (~/.ssh/config:12): ...; used by gpu[01-16]".
func PrintConfigNotes(w io.Writer, hosts []Host) {
	var order []string
	used := map[string][]string{}
	add := func(msg, label string) {
		if _, ok := used[msg]; !ok {
			order = append(order, msg)
		}
		used[msg] = append(used[msg], label)
	}
	for _, h := range hosts {
		for _, n := range configNotes(h.Conf) {
			add(n.String(), h.Label)
		}
		if h.Conf.StrictHostKeyChecking == "no" {
			add(StrictNoNote, h.Label)
		}
	}
	for _, msg := range order {
		fmt.Fprintf(w, "gputriage: %s; used by %s\n", report.Sanitize(msg), report.Sanitize(hostlist.Fold(used[msg])))
	}
}

// configNotes are the notes of a host and of the jump hosts on its way, each once.
func configNotes(h sshconf.Host) []sshconf.Note {
	out := slices.Clone(h.Notes)
	for _, hop := range h.ProxyJump {
		for _, n := range configNotes(hop) {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// blameConfig adds to a failure on the way to a host the config lines gputriage did not honor
// for it: one of them may be why ssh reaches the host and gputriage does not.
func blameConfig(he *report.HostError, h sshconf.Host) {
	if he == nil {
		return
	}
	switch he.Phase {
	case sshexec.PhaseResolve, sshexec.PhaseConnect, sshexec.PhaseHandshake, sshexec.PhaseHostKey, sshexec.PhaseAuth:
	default:
		return
	}
	var lines []string
	for _, n := range configNotes(h) {
		lines = append(lines, n.Keyword+" ("+n.Where+")")
	}
	if len(lines) > 0 {
		he.Message += "; gputriage did not honor this host's " + strings.Join(lines, ", ") + ", which may be why"
	}
}

// finishHost turns one host's SSH result into its report host, whole (the raw capture with
// it), and the notes to print about it, sanitized.
func (c *Config) finishHost(label string, r *sshexec.Result, nonce string) (report.Host, []string) {
	var notes []string
	for _, n := range r.Notes {
		notes = append(notes, report.Sanitize(n))
	}
	if c.Sudo && bytes.Contains(r.Stderr, []byte(SudoFallbackMsg)) {
		notes = append(notes, SudoFallbackMsg)
	}
	var dropped []byte
	var ferr error
	r.Stdout, dropped, ferr = fromHeader(r.Stdout, nonce)
	if len(dropped) > 0 {
		notes = append(notes, preambleNote(dropped))
	}
	h := hostFromResult(label, *r)
	if ferr != nil && r.Err == nil {
		h = report.Host{Name: label, Capture: r.Stdout,
			Err: &report.HostError{Phase: "probe", Kind: "bad-output", Message: ferr.Error()}}
	}
	h.ProbeDuration = r.Duration
	return h, notes
}

// preambleMax is how much a login shell may print before the probe's output starts (a banner,
// a message of the day). Output without this run's capture header that far in is not a
// capture, and the sweep stops reading it.
const preambleMax = 64 << 10

// headCheck accepts output that starts with this run's capture header, after at most
// preambleMax bytes of preamble, and refuses anything else as soon as that is certain: another
// run's capture at once, output with no header once preambleMax bytes and a header line's
// length are in.
func headCheck(nonce string) func(head []byte) (bool, error) {
	return func(head []byte) (bool, error) {
		c, dropped, err := fromHeader(head, nonce)
		if err != nil {
			return false, err
		}
		switch {
		case len(dropped) > preambleMax, len(dropped) == 0 && !isHeaderOf(c, nonce) && len(head) > preambleMax+maxHeaderLine:
			return false, fmt.Errorf("the host's output is not a gputriage capture: no capture header of this run in its first %d bytes", preambleMax)
		case len(dropped) > 0 || isHeaderOf(c, nonce):
			return true, nil
		}
		return false, nil
	}
}

// maxHeaderLine bounds a capture's first line, so that no check copies more of an output
// whose first line never ends.
const maxHeaderLine = 1 << 10

// firstLine is raw up to and including its first newline, or its first maxHeaderLine bytes.
func firstLine(raw []byte) []byte {
	head := raw[:min(len(raw), maxHeaderLine)]
	if i := bytes.IndexByte(head, '\n'); i >= 0 {
		return head[:i+1]
	}
	return head
}

// isHeaderOf reports whether raw starts with a whole capture header line of this run.
func isHeaderOf(raw []byte, nonce string) bool {
	line := firstLine(raw)
	if !bytes.HasSuffix(line, []byte("\n")) {
		return false
	}
	c, err := parse.SplitCapture(line)
	return err == nil && c.Nonce == nonce
}

// SudoFallbackMsg is said of a host where --sudo probed without root.
const SudoFallbackMsg = "sudo -n is missing or wants a password here: probed without root"

// probeCommand is the remote command line: constants only. Nothing the user typed is ever
// part of shell text, and the nonce travels on stdin (probe.Input). With sudo, a sudo
// that would prompt fails at once (-n) before reading the script, which then goes to the plain
// sh. Root's probe gets sudoPath, not the login user's PATH (whose first directories may hold
// an sh, timeout or awk of anyone's choosing), plus, last, the directory of the nvidia-smi the
// login PATH finds, so root runs the same nvidia-smi where secure_path lacks it. That
// directory reaches root's sh as an argument ($1), never as shell text; one that is relative
// or holds a ':' (it would split PATH) is left out.
func probeCommand(sudo bool) string {
	if !sudo {
		return "sh -s"
	}
	// Root's script, in double quotes inside the outer single-quoted one: \$ keeps the outer
	// sh from expanding it.
	root := `PATH=` + sudoPath + `\${1:+:\$1}; export PATH; exec /bin/sh -s`
	return `sh -c 'if command -v sudo >/dev/null 2>&1 && sudo -n /bin/sh -c : 2>/dev/null; then ` +
		`d=$(command -v nvidia-smi 2>/dev/null); case $d in /*/nvidia-smi) d=${d%/nvidia-smi} ;; *) d= ;; esac; ` +
		`case $d in *:*) d= ;; esac; exec sudo -n /bin/sh -c "` + root + `" sh "$d"; fi; ` +
		`echo "gputriage: ` + SudoFallbackMsg + `" >&2; exec sh -s'`
}

// sudoPath is sudo's secure_path as Debian, Ubuntu, RHEL and SUSE ship it: the PATH of the
// root probe, whatever sudoers says (a sudo without secure_path would keep the user's PATH).
const sudoPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// hostFromResult turns one host's SSH result into a report host. A host whose probe ran is
// diagnosed from its capture exactly as --replay would; one that failed carries the cause.
func hostFromResult(label string, r sshexec.Result) report.Host {
	if r.Err == nil {
		return diagnoseCapture(label, r.Stdout)
	}
	if r.Err.Kind == sshexec.KindBadOutput {
		return report.Host{Name: label, Capture: r.Stdout,
			Err: &report.HostError{Phase: r.Err.Phase, Kind: r.Err.Kind, Message: r.Err.Message}}
	}
	msg := r.Err.Message
	if r.Err.Phase == sshexec.PhaseProbe && r.Err.Kind == sshexec.KindTimeout && len(r.Stdout) > 0 {
		if c, err := parse.SplitCapture(r.Stdout); err == nil && len(c.Sections) > 0 {
			if last := c.Sections[len(c.Sections)-1]; last.Truncated {
				msg += fmt.Sprintf(" (the probe was still in its %q step)", last.Name)
			}
		}
	}
	if r.Err.Hop != "" && !strings.Contains(msg, r.Err.Hop) {
		msg = "via jump host " + r.Err.Hop + ": " + msg
	}
	return report.Host{Name: label, Err: &report.HostError{Phase: r.Err.Phase, Kind: r.Err.Kind, Message: msg}}
}
