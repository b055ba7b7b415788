package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/gputriage/gputriage/hostlist"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/probe"
	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/sshconf"
	"github.com/gputriage/gputriage/sshexec"
)

// resolved is one host as the user named it and as ssh_config resolves it.
type resolved struct {
	label string // as typed: the report's host name and the capture's file name
	conf  sshconf.Host
}

func (o *reachFlags) resolve(ts []hostlist.Target, e *env) ([]resolved, error) {
	home, _ := os.UserHomeDir()
	local := e.getenv("USER")
	if u, err := user.Current(); err == nil {
		local = u.Username
	}
	lhost, _ := os.Hostname()
	conf := sshconf.NewConfig() // every host resolved against one reading of the files
	out := make([]resolved, 0, len(ts))
	for _, t := range ts {
		so := sshconf.Options{ConfigFile: o.configFile, Home: home, LocalUser: local, LocalHost: lhost,
			User: o.user, Port: o.port, Identity: o.identity, Jump: o.jump, Opts: o.opts, Getenv: e.getenv}
		if t.User != "" {
			so.User = t.User
		}
		if t.Port != 0 {
			so.Port = t.Port
		}
		h, err := conf.Resolve(t.Host, so)
		if err != nil {
			return nil, usagef("%s: %v", t, err)
		}
		out = append(out, resolved{label: t.String(), conf: h})
	}
	return out, nil
}

func (o *reachFlags) target(r resolved) sshexec.Target {
	var conv func(h sshconf.Host, name string) sshexec.Target
	conv = func(h sshconf.Host, name string) sshexec.Target {
		t := sshexec.Target{Name: name, HostName: h.HostName, Port: h.Port, User: h.User,
			IdentityFiles: h.IdentityFiles, IdentitiesOnly: h.IdentitiesOnly,
			KnownHostsFiles: h.UserKnownHostsFiles, GlobalKnownHostsFiles: h.GlobalKnownHostsFiles, HostKeyAlias: h.HostKeyAlias,
			ConnectTimeout: h.ConnectTimeout, ProxyCommand: h.ProxyCommandLine, ProxyUseFdpass: h.ProxyUseFdpass,
			// "no" and "ask" are not honored: a sweep never skips the check and never prompts.
			AcceptNew: o.acceptNew || h.StrictHostKeyChecking == "accept-new"}
		for _, hop := range h.ProxyJump {
			t.Jump = append(t.Jump, conv(hop, hop.Alias))
		}
		return t
	}
	return conv(r.conf, r.label)
}

// sweep probes every host over SSH and diagnoses each one as soon as its output is in, so
// that it holds the raw output of at most --fanout hosts at once: a host's output is written
// to --save at once and dropped once diagnosed, but for what tr keeps for the report.
func (o *sshOptions) sweep(ctx context.Context, hosts []resolved, timeout time.Duration, tr triager, sv *saver, e *env) ([]report.Host, error) {
	if o.fanout < 1 {
		return nil, usagef("--fanout must be at least 1, got %d", o.fanout)
	}
	sopt, nonce, closeAgent, err := o.options(timeout, e)
	if err != nil {
		return nil, err
	}
	defer closeAgent()
	sopt.Fanout = fanoutWithin(o.fanout, len(hosts), e)
	defer limitMemory(sopt.Fanout, len(hosts))()
	var debug *sshDebug
	if o.debug {
		debug = &sshDebug{w: e.stderr}
	}
	targets := make([]sshexec.Target, len(hosts))
	for i, h := range hosts {
		targets[i] = o.target(h)
		debug.route(h.label, targets[i], sopt.Agent != nil, sopt)
	}
	printConfigNotes(e.stderr, hosts)
	out := make([]report.Host, len(hosts))
	notes := make([][]string, len(hosts)) // printed in host order once the sweep is over
	sopt.Done = func(i int, r *sshexec.Result) {
		debug.result(hosts[i].label, r)
		withDiagnoseSlot(func() {
			out[i], notes[i] = o.finishHost(hosts[i].label, r, nonce)
			blameConfig(out[i].Err, hosts[i].conf)
			sv.host(out[i])
			tr.finish(&out[i])
			r.Stdout, r.Stderr = nil, nil
		})
	}
	if tty, _ := e.isTerminal(e.stderr); tty {
		p := newProgressLine(e.stderr)
		sopt.Progress = p.update
		defer p.done()
	}
	sshexec.Run(ctx, targets, sopt)
	for i, ns := range notes {
		for _, n := range ns {
			fmt.Fprintf(e.stderr, "gputriage: %s: %s\n", report.Sanitize(hosts[i].label), n)
		}
	}
	return out, nil
}

// sessions are the options every SSH session of a run shares, whatever it runs: deadlines,
// host key policy, the user's shell for ProxyCommand, the agent and the passphrase prompt.
// The caller closes the agent connection (closer, when not nil) once its sessions are done.
func (o *reachFlags) sessions(timeout time.Duration, e *env) (sshexec.Options, io.Closer, error) {
	sopt := sshexec.Options{
		Timeout:        timeout,
		ConnectTimeout: o.connectTimeout,
		AcceptNew:      o.acceptNew,
		Shell:          e.getenv("SHELL"), // a ProxyCommand runs in the user's shell, as ssh runs it
	}
	if o.askPassphrase {
		in, ok := e.stdin.(*os.File)
		if !ok || !term.IsTerminal(int(in.Fd())) {
			return sshexec.Options{}, nil, usagef("--ask-passphrase needs a terminal on standard input")
		}
		var mu sync.Mutex
		sopt.Passphrase = func(file string) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(e.stderr, "Enter passphrase for key '%s': ", file)
			b, err := term.ReadPassword(int(in.Fd()))
			fmt.Fprintln(e.stderr)
			return b, err
		}
	}
	ag, closer, err := sshexec.AgentFromEnv(e.getenv)
	if err != nil {
		fmt.Fprintf(e.stderr, "gputriage: ssh-agent: %v (continuing with identity files)\n", err)
	}
	if ag != nil {
		sopt.Agent = ag
	}
	return sopt, closer, nil
}

// options are the sshexec options a sweep and a watch share: sessions' with the probe and its
// bounds, under this run's nonce. closeAgent ends the agent connection.
func (o *reachFlags) options(timeout time.Duration, e *env) (sopt sshexec.Options, nonce string, closeAgent func(), err error) {
	sopt, closer, err := o.sessions(timeout, e)
	if err != nil {
		return sopt, "", func() {}, err
	}
	closeAgent = func() {}
	if closer != nil {
		closeAgent = func() { closer.Close() }
	}
	nonce = newNonce()
	sopt.Command = probeCommand(o.sudo)
	sopt.Stdin = probe.Input(nonce, smiSeconds(timeout))
	sopt.MaxOutput = maxCaptureBytes
	sopt.Head = headCheck(nonce)
	return sopt, nonce, closeAgent, nil
}

// strictNoNote is said of the hosts whose config turns host key checking off.
const strictNoNote = "StrictHostKeyChecking no: not honored: host keys are always checked (use --accept-new to record unknown ones)"

// printConfigNotes names, once for the sweep, each config line gputriage does not act on that
// changes how a host is reached, folding the hosts it applies to:
// "ProxyUseFdpass (~/.ssh/config:12): ...; used by gpu[01-16]".
func printConfigNotes(w io.Writer, hosts []resolved) {
	var order []string
	used := map[string][]string{}
	add := func(msg, label string) {
		if _, ok := used[msg]; !ok {
			order = append(order, msg)
		}
		used[msg] = append(used[msg], label)
	}
	for _, h := range hosts {
		for _, n := range configNotes(h.conf) {
			add(n.String(), h.label)
		}
		if h.conf.StrictHostKeyChecking == "no" {
			add(strictNoNote, h.label)
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
func (o *reachFlags) finishHost(label string, r *sshexec.Result, nonce string) (report.Host, []string) {
	var notes []string
	for _, n := range r.Notes {
		notes = append(notes, report.Sanitize(n))
	}
	if o.sudo && bytes.Contains(r.Stderr, []byte(sudoFallbackMsg)) {
		notes = append(notes, sudoFallbackMsg)
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

const sudoFallbackMsg = "sudo -n is missing or wants a password here: probed without root"

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
		`echo "gputriage: ` + sudoFallbackMsg + `" >&2; exec sh -s'`
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

// saver writes what --save keeps as each host finishes: DIR/HOST.capture for a probed host,
// DIR/HOST.error for a failed one, and at the end DIR/hosts with the host order, so --replay
// DIR reproduces the sweep exactly. A nil saver saves nothing.
type saver struct {
	dir string
	mu  sync.Mutex
	err error // the first write that failed
}

func newSaver(dir string) (*saver, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &saver{dir: dir}, nil
}

// host writes one host's file; it is safe for concurrent use.
func (sv *saver) host(h report.Host) {
	if sv == nil {
		return
	}
	base := filepath.Join(sv.dir, fileSafe(h.Name))
	var err error
	if h.Err != nil {
		var b []byte
		b, err = json.Marshal(h.Err)
		if err == nil {
			err = os.WriteFile(base+errorExt, append(b, '\n'), 0o600)
		}
	} else {
		err = os.WriteFile(base+captureExt, h.Capture, 0o600)
	}
	if err != nil {
		sv.mu.Lock()
		sv.err = cmp.Or(sv.err, err)
		sv.mu.Unlock()
	}
}

// finish writes the host order and returns the first error of the sweep's writes.
func (sv *saver) finish(hosts []report.Host) error {
	if sv == nil {
		return nil
	}
	if sv.err != nil {
		return sv.err
	}
	var index strings.Builder
	for _, h := range hosts {
		index.WriteString(h.Name + "\n")
	}
	return os.WriteFile(filepath.Join(sv.dir, indexFile), []byte(index.String()), 0o600)
}

const (
	errorExt  = ".error"
	indexFile = "hosts"
)

// fileSafe maps a host label to a file name: labels never hold '/', but may start with '.'.
func fileSafe(label string) string {
	label = strings.NewReplacer("/", "_", "\\", "_", "\x00", "_").Replace(label)
	if strings.HasPrefix(label, ".") {
		label = "_" + label
	}
	return label
}

// replayDir reads a saved sweep: the hosts in DIR/hosts order when present (others after, by
// name), each from HOST.capture or HOST.error, keeping of each what tr keeps.
func replayDir(dir string, tr triager) ([]report.Host, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	kind := map[string]string{}
	var names []string
	for _, de := range entries {
		n := de.Name()
		for _, ext := range []string{captureExt, errorExt} {
			if !de.IsDir() && strings.HasSuffix(n, ext) {
				label := strings.TrimSuffix(n, ext)
				if _, dup := kind[label]; !dup {
					names = append(names, label)
				}
				kind[label] = ext
			}
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no *%s files in %s", captureExt, dir)
	}
	sort.Strings(names)
	order := names
	if b, err := os.ReadFile(filepath.Join(dir, indexFile)); err == nil {
		seen := map[string]bool{}
		order = nil
		for _, l := range strings.Split(string(b), "\n") {
			if _, ok := kind[fileSafe(l)]; ok && l != "" && !seen[fileSafe(l)] {
				seen[fileSafe(l)] = true
				order = append(order, l)
			}
		}
		for _, n := range names {
			if !seen[n] {
				order = append(order, n)
			}
		}
	}
	defer limitMemory(1, len(order))() // one host at a time
	hosts := make([]report.Host, 0, len(order))
	for _, label := range order {
		path := filepath.Join(dir, fileSafe(label))
		if kind[fileSafe(label)] == errorExt {
			b, err := os.ReadFile(path + errorExt)
			if err != nil {
				return nil, err
			}
			var he report.HostError
			if err := json.Unmarshal(b, &he); err != nil {
				return nil, fmt.Errorf("%s%s: %v", path, errorExt, err)
			}
			hosts = append(hosts, report.Host{Name: label, Err: &he})
			continue
		}
		raw, err := readCapture(path + captureExt)
		if err != nil {
			return nil, err
		}
		h := diagnoseCapture(label, raw)
		tr.finish(&h)
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// dryRunHost is one host of --dry-run's JSON.
type dryRunHost struct {
	Host            string   `json:"host"`
	HostName        string   `json:"hostname"`
	Port            int      `json:"port"`
	User            string   `json:"user"`
	IdentityFiles   []string `json:"identity_files"`
	IdentitiesOnly  bool     `json:"identities_only"`
	ProxyJump       []string `json:"proxy_jump"`       // each hop as user@hostname:port
	ProxyJumpHosts  []string `json:"proxy_jump_hosts"` // each hop as named
	ProxyCommand    *string  `json:"proxy_command"`
	KnownHostsFiles []string `json:"known_hosts_files"`
	HostKeyAlias    *string  `json:"host_key_alias"`
	StrictHostKey   string   `json:"strict_host_key_checking"`
	ConnectTimeout  *float64 `json:"connect_timeout_seconds"`
	Ignored         []string `json:"ignored"`
}

// dryRun prints how each host would be reached, like ssh -G, without connecting.
func dryRun(w io.Writer, hosts []resolved, format string) error {
	doc := struct {
		Hosts []dryRunHost `json:"hosts"`
	}{Hosts: []dryRunHost{}}
	for _, r := range hosts {
		h := r.conf
		j := dryRunHost{Host: r.label, HostName: h.HostName, Port: h.Port, User: h.User,
			IdentityFiles: nonNil(h.IdentityFiles), IdentitiesOnly: h.IdentitiesOnly, ProxyJump: []string{}, ProxyJumpHosts: []string{},
			KnownHostsFiles: nonNil(h.KnownHostsFiles()), StrictHostKey: h.StrictHostKeyChecking, Ignored: []string{}}
		for _, n := range h.Notes {
			j.Ignored = append(j.Ignored, n.String())
		}
		for _, hop := range h.ProxyJump {
			j.ProxyJump = append(j.ProxyJump, hopSpec(hop))
			j.ProxyJumpHosts = append(j.ProxyJumpHosts, hop.Alias)
		}
		if h.ProxyCommand != "" {
			j.ProxyCommand = &h.ProxyCommand
		}
		if h.HostKeyAlias != "" {
			j.HostKeyAlias = &h.HostKeyAlias
		}
		if h.ConnectTimeout > 0 {
			s := h.ConnectTimeout.Seconds()
			j.ConnectTimeout = &s
		}
		doc.Hosts = append(doc.Hosts, j)
	}
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	_, err := io.WriteString(w, dryRunText(doc.Hosts))
	return err
}

// dryRunText is --dry-run's text: each host and how it would be reached, sanitized.
func dryRunText(hosts []dryRunHost) string {
	var b strings.Builder
	for _, j := range hosts {
		fmt.Fprintf(&b, "%s\n", report.Sanitize(j.Host))
		fmt.Fprintf(&b, "  hostname %s, port %d, user %s\n", report.Sanitize(j.HostName), j.Port, report.Sanitize(j.User))
		fmt.Fprintf(&b, "  identity files: %s\n", listOrNone(j.IdentityFiles))
		if j.IdentitiesOnly {
			b.WriteString("  identities only: yes\n")
		}
		hops := make([]string, len(j.ProxyJump))
		for i, spec := range j.ProxyJump {
			hops[i] = spec + " (" + j.ProxyJumpHosts[i] + ")"
		}
		fmt.Fprintf(&b, "  proxy jump: %s\n", listOrNone(hops))
		if j.ProxyCommand != nil {
			fmt.Fprintf(&b, "  proxy command: %s\n", report.Sanitize(*j.ProxyCommand))
		}
		fmt.Fprintf(&b, "  known_hosts: %s\n", listOrNone(j.KnownHostsFiles))
		if j.HostKeyAlias != nil {
			fmt.Fprintf(&b, "  host key alias: %s\n", report.Sanitize(*j.HostKeyAlias))
		}
		for _, ig := range j.Ignored {
			fmt.Fprintf(&b, "  ignored: %s\n", report.Sanitize(ig))
		}
	}
	return b.String()
}

// hopSpec writes a jump hop as ssh -G writes a ProxyJump: user@host:port, an IPv6 address in
// brackets.
func hopSpec(h sshconf.Host) string {
	return h.User + "@" + net.JoinHostPort(h.HostName, strconv.Itoa(h.Port))
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = report.Sanitize(x)
	}
	return strings.Join(out, ", ")
}

// progressLine redraws one status line on a terminal's stderr while hosts are outstanding.
type progressLine struct {
	w    io.Writer
	mu   sync.Mutex
	last sshexec.Progress
	stop chan struct{}
	wg   sync.WaitGroup
}

func newProgressLine(w io.Writer) *progressLine {
	p := &progressLine{w: w, stop: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
	return p
}

func (p *progressLine) update(pr sshexec.Progress) {
	p.mu.Lock()
	p.last = pr
	p.mu.Unlock()
}

func (p *progressLine) draw() {
	p.mu.Lock()
	pr := p.last
	p.mu.Unlock()
	if pr.Total == 0 {
		return
	}
	line := fmt.Sprintf("%d/%d done, %d failed, %d running, %d waiting", pr.Succeeded+pr.Failed, pr.Total, pr.Failed, pr.Running, pr.Waiting)
	if pr.Slowest != "" && !pr.SlowestSince.IsZero() {
		line += fmt.Sprintf("; slowest %s (%s)", report.Sanitize(pr.Slowest), time.Since(pr.SlowestSince).Truncate(time.Second))
	}
	fmt.Fprintf(p.w, "\r\x1b[K%s", line)
}

func (p *progressLine) done() {
	close(p.stop)
	p.wg.Wait()
	fmt.Fprint(p.w, "\r\x1b[K")
}
