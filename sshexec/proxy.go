package sshexec

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxProxyStderr is how much of a ProxyCommand's stderr is kept: its end, where the reason it
// failed is.
const maxProxyStderr = 4 << 10

// proxyGrace is how long a ProxyCommand has to exit after its pipes are closed and it got
// SIGHUP (what ssh sends it), before its process group is killed.
const proxyGrace = time.Second

// proxyProc is a running ProxyCommand. It runs in its own process group, which stop ends,
// whatever the command started.
type proxyProc struct {
	cmd    *exec.Cmd
	stderr *tailBuffer
	done   chan struct{} // closed once the command has exited and its stderr is drained

	mu      sync.Mutex
	waitErr error // valid once done is closed
	stopped bool  // stop began: a signal after that is gputriage's doing
	once    sync.Once
}

// startProc runs command as ssh runs a ProxyCommand: `$SHELL -c "exec COMMAND"`, shell being
// the user's shell ("" means /bin/sh), with stdin and stdout as given. command has its
// %tokens expanded already.
func startProc(command, shell string, stdin, stdout *os.File) (*proxyProc, error) {
	if command == "-" {
		return nil, errors.New("ProxyCommand - (ssh's own standard input and output) cannot carry a sweep of many hosts")
	}
	if shell == "" {
		shell = "/bin/sh"
	}
	p := &proxyProc{stderr: &tailBuffer{max: maxProxyStderr}, done: make(chan struct{})}
	p.cmd = exec.Command(shell, "-c", "exec "+command)
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = stdin, stdout, p.stderr
	// A child the command leaves holding its stderr must not keep the host waiting.
	p.cmd.WaitDelay = proxyGrace
	setProcessGroup(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		err := p.cmd.Wait()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// stop ends the command with the host: its process group gets SIGHUP (what ssh sends its
// ProxyCommand), and whatever of it is left after proxyGrace is killed. It returns once the
// command is gone.
func (p *proxyProc) stop() {
	p.once.Do(func() {
		p.mu.Lock()
		p.stopped = true
		p.mu.Unlock()
		signalGroup(p.cmd.Process, false)
		select {
		case <-p.done:
		case <-time.After(proxyGrace):
		}
		// Also after the command exited: what it started in its group goes with it.
		signalGroup(p.cmd.Process, true)
		<-p.done
	})
}

// proxyConn is the connection to a host reached through a ProxyCommand: SSH is spoken over
// the command's standard input and output, as ssh does.
type proxyConn struct {
	*proxyProc
	r, w *os.File // the command's stdout (read here) and stdin (written here)
}

// startProxy starts command with SSH to be spoken over its stdin and stdout.
func startProxy(command, shell string) (*proxyConn, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	p, err := startProc(command, shell, inR, outW)
	inR.Close()
	outW.Close()
	if err != nil {
		outR.Close()
		inW.Close()
		return nil, err
	}
	return &proxyConn{proxyProc: p, r: outR, w: inW}, nil
}

func (p *proxyConn) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *proxyConn) Write(b []byte) (int, error) { return p.w.Write(b) }

// Close closes the pipes, then ends the command.
func (p *proxyConn) Close() error {
	_ = p.w.Close()
	_ = p.r.Close()
	p.stop()
	return nil
}

func (p *proxyConn) LocalAddr() net.Addr  { return proxyAddr{} }
func (p *proxyConn) RemoteAddr() net.Addr { return proxyAddr{} }

func (p *proxyConn) SetDeadline(t time.Time) error {
	return errors.Join(p.r.SetReadDeadline(t), p.w.SetWriteDeadline(t))
}
func (p *proxyConn) SetReadDeadline(t time.Time) error  { return p.r.SetReadDeadline(t) }
func (p *proxyConn) SetWriteDeadline(t time.Time) error { return p.w.SetWriteDeadline(t) }

type proxyAddr struct{}

func (proxyAddr) Network() string { return "proxy" }
func (proxyAddr) String() string  { return "ProxyCommand" }

// exited waits up to wait for the command to exit on its own, and says how it ended: "" while
// it runs or when gputriage stopped it.
func (p *proxyProc) exited(wait time.Duration) string {
	select {
	case <-p.done:
	case <-time.After(wait):
		return ""
	}
	p.mu.Lock()
	err, stopped := p.waitErr, p.stopped
	p.mu.Unlock()
	// An exit is the command's own, even after stop (x/crypto closes the connection when the
	// handshake fails); a signal after stop is gputriage's.
	var ee *exec.ExitError
	switch {
	case err == nil || errors.Is(err, exec.ErrWaitDelay):
		return "exited with status 0"
	case errors.As(err, &ee) && ee.Exited():
		return "exited with status " + strconv.Itoa(ee.ExitCode())
	case stopped:
		return ""
	case errors.As(err, &ee):
		return "was killed (" + ee.String() + ")"
	}
	return "failed: " + err.Error()
}

// stderrTail is the end of what the command wrote on stderr, quoted: it may be anything.
func (p *proxyProc) stderrTail() string {
	b, dropped := p.stderr.tail()
	s := strings.TrimSpace(string(b))
	if s == "" {
		return ""
	}
	q := strconv.Quote(s)
	if dropped > 0 {
		q = "..." + q
	}
	return q
}

// explain adds what the ProxyCommand says to a failure of the host it carries, the cause ssh
// would have shown on the terminal: its exit status and the end of its stderr. A command that
// exited before the SSH connection was up is the failure: phase connect, KindProxy. A closed
// connection is given a moment to show whether the command is exiting.
func (p *proxyProc) explain(e *Error) {
	wait := time.Duration(0)
	if e.Kind == KindClosed || e.Kind == KindReset || e.Kind == KindProtocol || e.Kind == KindProxy {
		wait = 500 * time.Millisecond
	}
	how := p.exited(wait)
	tail := p.stderrTail()
	switch {
	case how != "" && (e.Phase == PhaseConnect || e.Phase == PhaseHandshake):
		e.Phase, e.Kind = PhaseConnect, KindProxy
		e.Message = "the ProxyCommand " + how + " before the host answered"
		if tail != "" {
			e.Message += "; its stderr: " + tail
		} else {
			e.Message += "; it wrote nothing on stderr"
		}
	case how != "":
		e.Message += "; the ProxyCommand " + how
		if tail != "" {
			e.Message += "; its stderr: " + tail
		}
	case tail != "":
		e.Message += "; the ProxyCommand's stderr: " + tail
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu      sync.Mutex
	buf     []byte
	max     int
	dropped int64
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) > t.max {
		t.dropped += int64(len(p) - t.max)
		p = p[len(p)-t.max:]
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.dropped += int64(over)
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

func (t *tailBuffer) tail() ([]byte, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.buf...), t.dropped
}

// proxyWhat names the connection for messages.
func proxyWhat(addr string) string {
	return fmt.Sprintf("connect to %s through its ProxyCommand", addr)
}
