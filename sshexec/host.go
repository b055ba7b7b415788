package sshexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/ssh"
)

// hostRun is one host's trip through the phases. Everything it opens is tracked so that the
// host's deadline (or Ctrl-C) can close it from context.AfterFunc: x/crypto/ssh has no context
// support past the dial, and a peer that stops talking would otherwise block a read forever.
type hostRun struct {
	s    *sweep
	ctx  context.Context // the sweep's: cancelled on Ctrl-C
	hctx context.Context // this host's: ctx plus the host deadline

	mu      sync.Mutex
	phase   string
	hop     string // Name of the jump host being worked on; "" for the target
	closers []io.Closer
	closed  bool
	notes   []string
	proxy   *proxyProc // the first hop's ProxyCommand, if it has one
	// overProxy: the handshake under way is the one over the ProxyCommand. Only the host's
	// own goroutine uses it.
	overProxy bool
	// cw learns why the target's connection ended; one per connection, so that a kept
	// connection (Pool) probed every round starts one watcher, not one per round.
	cw *connWatch
}

func (s *sweep) runHost(ctx context.Context, t Target) Result {
	if t.Via != nil {
		return t.Via.RunTarget(ctx, t, s.o)
	}
	start := time.Now()
	hctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	h := &hostRun{s: s, ctx: ctx, hctx: hctx, phase: PhaseConnect}
	stop := context.AfterFunc(hctx, h.closeAll)
	defer stop()

	res := Result{Target: t}
	client, err := h.connect(t)
	if err != nil {
		res.Err = err
	} else {
		h.probe(client, &res)
	}
	if res.Err != nil && h.proxy != nil && res.Err.Kind != KindConfig {
		h.proxy.explain(res.Err)
	}
	h.closeAll()
	h.mu.Lock()
	res.Notes = h.notes
	h.mu.Unlock()
	res.Duration = time.Since(start)
	return res
}

func (h *hostRun) setPhase(p string) {
	h.mu.Lock()
	h.phase = p
	h.mu.Unlock()
}

func (h *hostRun) state() (phase, hop string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.phase, h.hop
}

func (h *hostRun) note(n ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range n {
		if !slices.Contains(h.notes, s) {
			h.notes = append(h.notes, s)
		}
	}
}

// track registers c to be closed when the host is done or its deadline passes; if that already
// happened, c is closed at once.
func (h *hostRun) track(c io.Closer) {
	h.mu.Lock()
	closed := h.closed
	if !closed {
		h.closers = append(h.closers, c)
	}
	h.mu.Unlock()
	if closed {
		_ = c.Close()
	}
}

func (h *hostRun) closeAll() {
	h.mu.Lock()
	cs := h.closers
	h.closers, h.closed = nil, true
	h.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- { // innermost first: target client, then the hops
		_ = cs[i].Close()
	}
}

// fail builds the Error for err in phase. A passed deadline or a cancelled sweep explains any
// error that follows it (typically "use of closed network connection" from closeAll), so those
// come first.
func (h *hostRun) fail(phase string, err error, fallback, what string) *Error {
	_, hop := h.state()
	e := &Error{Phase: phase, Hop: hop, Err: err}
	switch {
	case h.ctx.Err() != nil:
		e.Kind, e.Message = KindInterrupted, fmt.Sprintf("interrupted during %s: %s", phase, what)
	case h.expired():
		hint := timeoutHint(phase)
		if h.overProxy && phase == PhaseHandshake {
			hint = "no SSH handshake through the ProxyCommand"
		}
		e.Kind, e.Message = KindTimeout, fmt.Sprintf("%s: %s within the %v host timeout", what, hint, h.s.o.Timeout)
	default:
		e.Kind = classify(err)
		if e.Kind == "" {
			e.Kind = fallback
		}
		e.Message = fmt.Sprintf("%s: %s", what, escapeControl(err.Error()))
		if e.Kind == KindNameLookup {
			e.Phase = PhaseResolve
		}
	}
	return e
}

// expired reports whether the host's deadline has passed. The conn's own deadline (the same
// instant) can fire before the context notices, so the clock is checked too.
func (h *hostRun) expired() bool {
	if h.hctx.Err() != nil {
		return true
	}
	dl, ok := h.hctx.Deadline()
	return ok && !time.Now().Before(dl)
}

func timeoutHint(phase string) string {
	switch phase {
	case PhaseConnect, PhaseResolve:
		return "no TCP connection"
	case PhaseHandshake:
		return "the host accepted TCP but did not complete the SSH handshake"
	case PhaseHostKey:
		return "host key check did not complete"
	case PhaseAuth:
		return "authentication did not complete"
	case PhaseSession:
		return "no session could be opened"
	default:
		return "the command did not finish"
	}
}

func portOf(t Target) int {
	if t.Port == 0 {
		return 22
	}
	return t.Port
}

// hops is the ProxyJump chain of t, outermost first, ending with t. A hop's own Jump, if the
// resolver left one, goes before it.
func hops(t Target) []Target {
	var out []Target
	for _, j := range t.Jump {
		out = append(out, hops(j)...)
	}
	t.Jump = nil
	return append(out, t)
}

// connect opens the one TCP connection of this host (to the first hop) and the SSH connections
// through the chain, verifying each hop's key under its own name.
func (h *hostRun) connect(t Target) (*ssh.Client, *Error) {
	chain := hops(t)
	if len(chain) > 10 {
		return nil, &Error{Phase: PhaseConnect, Kind: KindConfig, Message: fmt.Sprintf("jump chain of %d hops is too long (a loop?)", len(chain)-1)}
	}
	var prev *ssh.Client
	for i, hop := range chain {
		name := ""
		if i < len(chain)-1 {
			name = hop.Name
		}
		h.mu.Lock()
		h.hop, h.phase = name, PhaseConnect
		h.mu.Unlock()
		if hop.HostName == "" || hop.User == "" {
			return nil, &Error{Phase: PhaseConnect, Kind: KindConfig, Hop: name,
				Message: fmt.Sprintf("target %q has no host name or no user", hop.Name)}
		}
		addr := net.JoinHostPort(hop.HostName, strconv.Itoa(portOf(hop)))
		ct := hop.ConnectTimeout
		if ct <= 0 {
			ct = h.s.o.ConnectTimeout
		}
		var conn net.Conn
		var err error
		what := "connect to " + addr
		switch {
		case prev == nil && hop.ProxyCommand != "":
			var e *Error
			if conn, e = h.startProxy(hop, addr); e != nil {
				return nil, e
			}
		case prev == nil:
			d := net.Dialer{Timeout: ct}
			conn, err = d.DialContext(h.hctx, "tcp", addr)
		default:
			what += " through jump host " + chain[i-1].Name
			dctx, cancel := context.WithTimeout(h.hctx, ct)
			conn, err = prev.DialContext(dctx, "tcp", addr)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) && h.hctx.Err() == nil {
				err = fmt.Errorf("no connection within the %v connect timeout: %w", ct, err)
			}
		}
		if err != nil {
			return nil, h.fail(PhaseConnect, err, KindUnreachable, what)
		}
		h.track(conn)
		h.overProxy = prev == nil && h.proxy != nil
		client, e := h.handshake(conn, hop, addr, prev == nil && h.proxy == nil)
		h.overProxy = false
		if e != nil {
			return nil, e
		}
		h.track(client)
		prev = client
	}
	return prev, nil
}

// startProxy starts the ProxyCommand that carries the connection to the first hop: SSH over
// its stdin and stdout, or, with ProxyUseFdpass, over the socket it hands back.
func (h *hostRun) startProxy(hop Target, addr string) (net.Conn, *Error) {
	if hop.ProxyUseFdpass {
		conn, p, err := startFdpass(h.hctx, hop.ProxyCommand, h.s.o.Shell)
		if p != nil {
			h.proxy = p
			h.track(procStopper{p})
		}
		if err != nil {
			return nil, h.fail(PhaseConnect, err, KindProxy, proxyWhat(addr))
		}
		return conn, nil
	}
	p, err := startProxy(hop.ProxyCommand, h.s.o.Shell)
	if err != nil {
		_, name := h.state()
		kind := KindProxy
		if hop.ProxyCommand == "-" {
			kind = KindConfig
		}
		return nil, &Error{Phase: PhaseConnect, Kind: kind, Hop: name, Err: err,
			Message: fmt.Sprintf("%s: %s", proxyWhat(addr), escapeControl(err.Error()))}
	}
	h.proxy = p.proxyProc
	return p, nil
}

// procStopper ends a ProxyCommand with the host.
type procStopper struct{ p *proxyProc }

func (s procStopper) Close() error { s.p.stop(); return nil }

func (h *hostRun) handshake(conn net.Conn, hop Target, addr string, direct bool) (*ssh.Client, *Error) {
	// The deadline covers the handshake of a direct connection; a forwarded one (a channel of
	// the previous hop) has no deadlines, and closeAll covers it.
	if dl, ok := h.hctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	check := h.s.keys.newCheck(hop, h.s.o.AcceptNew || hop.AcceptNew, direct)
	offer := h.s.ids.offer(hop)
	var allowed []string
	offered := false
	cfg := &ssh.ClientConfig{
		User: hop.User,
		// One publickey method carrying every key: x/crypto tries each method name only once,
		// so a second publickey AuthMethod would never be used.
		Auth: []ssh.AuthMethod{ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
			offered = true
			return offer.signers, nil
		})},
		AuthCallback: func(ac *ssh.ClientAuthContext) (ssh.AuthMethod, error) {
			allowed = ac.AllowedMethods
			return nil, nil // fall back to Auth
		},
		HostKeyCallback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.phase = PhaseHostKey
			if err := check.callback(hostname, remote, key); err != nil {
				return err
			}
			h.phase = PhaseAuth
			return nil
		},
		HostKeyAlgorithms: check.algorithms(),
	}
	h.setPhase(PhaseHandshake)
	ec := &firstErrConn{Conn: conn}
	c, chans, reqs, err := ssh.NewClientConn(ec, lookupAddr(hop), cfg)
	_ = conn.SetDeadline(time.Time{})
	if first := ec.firstErr(); err != nil && errors.Is(err, net.ErrClosed) && first != nil && !errors.Is(first, net.ErrClosed) {
		err = fmt.Errorf("ssh: handshake failed: %w", first)
	}
	h.mu.Lock()
	hkErr, hkNotes, phase, hopName := check.err, check.notes, h.phase, h.hop
	h.mu.Unlock()
	h.note(hkNotes...)
	if offered {
		h.note(offer.notes...)
	}
	if err == nil {
		return ssh.NewClient(c, chans, reqs), nil
	}
	if hkErr != nil {
		hkErr.Hop = hopName
		return nil, hkErr
	}
	if phase == PhaseHandshake && len(cfg.HostKeyAlgorithms) > 0 && h.hctx.Err() == nil &&
		strings.Contains(err.Error(), "no common algorithm for host key") {
		return nil, h.noCommonHostKey(check, err)
	}
	e := h.fail(phase, err, KindProtocol, "ssh handshake with "+addr)
	if phase == PhaseAuth && (e.Kind == KindProtocol) {
		e.Kind = KindAuthFailed
		server := "unknown"
		if len(allowed) > 0 {
			server = strings.Join(allowed, ",")
		}
		e.Message = fmt.Sprintf("%s@%s: no key was accepted; tried %s; the server allows %s",
			hop.User, addr, offer.tried, server)
		if offered && len(offer.notes) > 0 {
			e.Message += "; note: " + strings.Join(offer.notes, "; ")
		}
	}
	return nil, e
}

// noCommonHostKey: known_hosts has keys for this host, but the server offers none of their
// types. OpenSSH refuses this too (a key of another type is known); it is reported as a changed
// key, naming the entries, because that is what the user has to resolve.
func (h *hostRun) noCommonHostKey(check *hostKeyCheck, err error) *Error {
	_, hop := h.state()
	var b strings.Builder
	fmt.Fprintf(&b, "HOST KEY CHANGED for %s (known_hosts name %s): the server offers none of the key types recorded for it (",
		check.target.Name, check.name)
	for i, k := range check.knownKeys() {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s:%d has %s %s", k.Filename, k.Line, k.Key.Type(), Fingerprint(k.Key))
	}
	fmt.Fprintf(&b, "). Verify the host out of band before changing known_hosts. No option overrides this check (%v)", err)
	return &Error{Phase: PhaseHostKey, Kind: KindHostKeyChanged, Hop: hop, Err: err, Message: b.String()}
}

// probe runs the command on one session and reads its output within the bounds.
func (h *hostRun) probe(client *ssh.Client, res *Result) {
	o := h.s.o
	h.mu.Lock()
	h.hop, h.phase = "", PhaseSession
	h.mu.Unlock()
	if h.cw == nil {
		h.cw = watchConn(client)
	}
	conn := h.cw
	sess, stdin, stdout, stderr, e := h.startCommand(client)
	if e != nil {
		res.Err = e
		return
	}
	h.setPhase(PhaseProbe)
	go func() {
		// Errors here mean the command stopped reading or the connection died; Wait and the
		// output tell which.
		_, _ = stdin.Write(o.Stdin)
		_ = stdin.Close()
	}()

	errBuf := &boundedBuffer{max: o.MaxStderr}
	stderrDone := make(chan struct{})
	go func() {
		// Keep draining: an unread stderr would stall the channel window. A small buffer:
		// io.Copy's own is 32 KiB, allocated for every host, for a stream mostly empty.
		_, _ = io.CopyBuffer(errBuf, stderr, make([]byte, stderrChunk))
		close(stderrDone)
	}()
	out, readErr, refused := h.readOutput(stdout)
	if refused != nil {
		h.closeAll()
		<-stderrDone
		res.Stdout, res.Stderr = out, errBuf.Bytes()
		res.Err = &Error{Phase: PhaseProbe, Kind: KindBadOutput, Err: refused,
			Message: fmt.Sprintf("%s (stopped reading after %d bytes)", escapeControl(refused.Error()), len(out))}
		return
	}
	if len(out) > o.MaxOutput {
		// Over the bound: stop reading and hang up; what was read is kept.
		h.closeAll()
		<-stderrDone
		res.Stdout, res.Stderr, res.Truncated = out[:o.MaxOutput], errBuf.Bytes(), true
		h.note(fmt.Sprintf("output exceeded %d bytes: kept the first %d, stopped reading and closed the session", o.MaxOutput, o.MaxOutput))
		h.stderrNote(errBuf)
		return
	}
	waitErr := sess.Wait()
	<-stderrDone
	res.Stdout, res.Stderr = out, errBuf.Bytes()
	h.stderrNote(errBuf)
	h.exitResult(res, waitErr, readErr, conn)
}

// startCommand opens a session and starts the command with its three streams piped.
func (h *hostRun) startCommand(client *ssh.Client) (*ssh.Session, io.WriteCloser, io.Reader, io.Reader, *Error) {
	sess, err := client.NewSession()
	if err != nil {
		return nil, nil, nil, nil, h.fail(PhaseSession, err, KindOther, "open session")
	}
	h.track(sess)
	// Stdin through a pipe written here, not Session.Stdin: with the latter, Wait reports a
	// command that exits without reading all of its input as a failed copy (EOF) even when its
	// exit status is 0.
	stdin, err := sess.StdinPipe()
	var stdout, stderr io.Reader
	if err == nil {
		stdout, err = sess.StdoutPipe()
	}
	if err == nil {
		stderr, err = sess.StderrPipe()
	}
	if err != nil {
		return nil, nil, nil, nil, h.fail(PhaseSession, err, KindOther, "open session")
	}
	if err := sess.Start(h.s.o.Command); err != nil {
		return nil, nil, nil, nil, h.fail(PhaseSession, err, KindOther, "start command")
	}
	return sess, stdin, stdout, stderr, nil
}

// exitResult records how the command ended: its exit status, or why there is none.
func (h *hostRun) exitResult(res *Result, waitErr, readErr error, conn *connWatch) {
	var exitErr *ssh.ExitError
	var missing *ssh.ExitMissingError
	switch {
	case waitErr == nil && readErr == nil:
		code := 0
		res.ExitCode = &code
	case errors.As(waitErr, &exitErr):
		code := exitErr.ExitStatus()
		res.ExitCode = &code
		msg := fmt.Sprintf("the command exited with status %d", code)
		if sig := exitErr.Signal(); sig != "" {
			msg = "the command was killed by signal " + sig
		}
		if head := stderrHead(res.Stderr); head != "" {
			msg += "; stderr: " + head
		}
		res.Err = &Error{Phase: PhaseProbe, Kind: KindExit, Message: msg, Err: waitErr}
	case h.expired():
		res.Err = h.fail(PhaseProbe, waitErr, KindOther, fmt.Sprintf("run command (%d bytes of output read)", len(res.Stdout)))
	case readErr != nil:
		res.Err = h.fail(PhaseProbe, readErr, KindClosed, "read output")
	case errors.As(waitErr, &missing):
		res.Err = h.fail(PhaseProbe, conn.cause(h.hctx, waitErr), KindClosed,
			fmt.Sprintf("the session ended without an exit status after %d bytes of output", len(res.Stdout)))
	default:
		res.Err = h.fail(PhaseProbe, waitErr, KindOther, "run command")
	}
}

// connWatch learns why the SSH connection ended, once it has.
type connWatch struct {
	done chan struct{}
	err  error // set before done is closed
}

func watchConn(c *ssh.Client) *connWatch {
	w := &connWatch{done: make(chan struct{})}
	go func() {
		w.err = c.Wait()
		close(w.done)
	}()
	return w
}

// cause is why a session that closed without an exit status ended. Either the server ended
// the session, or the connection died; the mux closes channels before recording why, so the
// connection gets a moment to report, and its error (other than a plain close) wins over
// fallback.
func (w *connWatch) cause(ctx context.Context, fallback error) error {
	select {
	case <-w.done:
	case <-time.After(250 * time.Millisecond):
	case <-ctx.Done():
	}
	select {
	case <-w.done:
		if w.err != nil && classify(w.err) != KindClosed {
			return w.err
		}
	default:
	}
	return fallback
}

// readOutput reads stdout until it ends or passes Options.MaxOutput (then it holds one byte
// more), showing its beginning to Options.Head until Head accepts it; refused is Head's error.
func (h *hostRun) readOutput(r io.Reader) (out []byte, err, refused error) {
	o := h.s.o
	out = make([]byte, 0, min(32<<10, o.MaxOutput+1))
	judged := o.Head == nil
	for {
		if len(out) == cap(out) {
			out = slices.Grow(out, min(cap(out), o.MaxOutput+1-len(out)))
		}
		n, rerr := r.Read(out[len(out):min(cap(out), o.MaxOutput+1)])
		out = out[:len(out)+n]
		if !judged && n > 0 {
			judged, refused = o.Head(out)
			if refused != nil {
				return out, nil, refused
			}
		}
		switch {
		case len(out) > o.MaxOutput:
			return out, nil, nil
		case rerr == io.EOF:
			return out, nil, nil
		case rerr != nil:
			return out, rerr, nil
		}
	}
}

func (h *hostRun) stderrNote(b *boundedBuffer) {
	if b.dropped > 0 {
		h.note(fmt.Sprintf("stderr exceeded %d bytes: %d bytes discarded", b.max, b.dropped))
	}
}

// stderrHead is the start of stderr, quoted: it is remote text and may hold escape sequences.
func stderrHead(b []byte) string {
	b = bytes.TrimSpace(b)
	const limit = 512
	if len(b) == 0 {
		return ""
	}
	if len(b) > limit {
		return strconv.Quote(string(b[:limit])) + "..."
	}
	return strconv.Quote(string(b))
}

// escapeControl makes text printable on a terminal: errors can carry remote text (a disconnect
// reason, a jump host's refusal), which must not smuggle escape sequences into a report.
func escapeControl(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError {
			fmt.Fprintf(&b, "\\x%02x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// stderrChunk is how much of a host's stderr is read at once.
const stderrChunk = 2 << 10

// boundedBuffer keeps the first max bytes written and counts the rest.
type boundedBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	max     int
	dropped int64
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if room := b.max - b.buf.Len(); room < len(p) {
		b.dropped += int64(len(p) - max(room, 0))
		p = p[:max(room, 0)]
	}
	b.buf.Write(p)
	return n, nil
}

func (b *boundedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// firstErrConn remembers the first read or write error on a connection. When the peer resets
// the connection while x/crypto/ssh is writing its key exchange, the writer closes the
// connection and the handshake reports the read that this close interrupted ("use of closed
// network connection"), which hides the cause; the first error is the one to classify.
type firstErrConn struct {
	net.Conn
	mu    sync.Mutex
	first error
}

func (c *firstErrConn) record(err error) {
	if err == nil {
		return
	}
	c.mu.Lock()
	if c.first == nil {
		c.first = err
	}
	c.mu.Unlock()
}

func (c *firstErrConn) firstErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first
}

func (c *firstErrConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.record(err)
	return n, err
}

func (c *firstErrConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.record(err)
	return n, err
}
