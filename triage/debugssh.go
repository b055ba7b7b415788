package triage

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/sshexec"
)

// debugStderrLines bounds how much of a host's stderr --debug-ssh prints.
const debugStderrLines = 20

// sshDebug writes --debug-ssh's lines on stderr: how each host is reached before the sweep,
// and how its connection ended as it ends. Every host string is sanitized. It is safe for
// concurrent use; a nil *sshDebug prints nothing.
type sshDebug struct {
	mu sync.Mutex
	w  io.Writer
}

func (d *sshDebug) printf(label, format string, args ...any) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.w, "gputriage: debug: %s: %s\n", report.Sanitize(label), fmt.Sprintf(format, args...))
}

// route says how t will be reached: address, user, jump hosts, keys, known_hosts, timeouts.
func (d *sshDebug) route(label string, t sshexec.Target, agent bool, o sshexec.Options) {
	if d == nil {
		return
	}
	if t.Via != nil {
		d.printf(label, "%s; timeout: whole host %s", report.Sanitize(fmt.Sprint(t.Via)), o.Timeout)
		return
	}
	var via []string
	for _, j := range t.Jump {
		via = append(via, fmt.Sprintf("%s (%s)", j.Name, endpoint(j)))
	}
	line := "connect " + endpoint(t)
	if len(via) > 0 {
		line += " via " + strings.Join(via, ", then ")
	}
	d.printf(label, "%s", line)
	d.printf(label, "keys: agent %s; identity files %s%s", yesNo(agent), listOrNone(t.IdentityFiles),
		map[bool]string{true: " (identities only)"}[t.IdentitiesOnly])
	kh := listOrNone(append(append([]string(nil), t.KnownHostsFiles...), t.GlobalKnownHostsFiles...))
	if t.HostKeyAlias != "" {
		kh += "; host key alias " + report.Sanitize(t.HostKeyAlias)
	}
	d.printf(label, "known_hosts: %s; unknown keys %s", kh,
		map[bool]string{true: "recorded (accept-new)", false: "refused"}[t.AcceptNew || o.AcceptNew])
	ct := t.ConnectTimeout
	if ct == 0 {
		ct = o.ConnectTimeout
	}
	d.printf(label, "timeouts: connect %s, whole host %s", ct, o.Timeout)
}

func endpoint(t sshexec.Target) string {
	port := t.Port
	if port == 0 {
		port = 22
	}
	return report.Sanitize(t.User) + "@" + report.Sanitize(t.HostName) + ":" + strconv.Itoa(port)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// result says how a host's connection ended, with its notes and the start of its stderr.
func (d *sshDebug) result(label string, r *sshexec.Result) {
	if d == nil {
		return
	}
	took := r.Duration.Round(time.Millisecond)
	if e := r.Err; e != nil {
		hop := ""
		if e.Hop != "" {
			hop = " at jump host " + report.Sanitize(e.Hop)
		}
		d.printf(label, "failed after %s in %s%s (%s): %s", took, e.Phase, hop, e.Kind, report.Sanitize(e.Message))
	} else {
		exit := "unknown"
		if r.ExitCode != nil {
			exit = strconv.Itoa(*r.ExitCode)
		}
		d.printf(label, "done in %s: exit status %s, %d bytes of output%s", took, exit, len(r.Stdout),
			map[bool]string{true: " (truncated)"}[r.Truncated])
	}
	for _, n := range r.Notes {
		d.printf(label, "note: %s", report.Sanitize(n))
	}
	lines := strings.Split(string(bytes.TrimRight(r.Stderr, "\n")), "\n")
	for i, l := range lines {
		if len(r.Stderr) == 0 {
			break
		}
		if i == debugStderrLines {
			d.printf(label, "stderr: ... %d more lines", len(lines)-i)
			break
		}
		d.printf(label, "stderr: %s", report.Sanitize(l))
	}
}
