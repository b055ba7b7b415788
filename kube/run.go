package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/sshexec"
)

// NodeVia is one node of the sweep, reached through its agent: an sshexec.Via.
type NodeVia struct {
	K       *Cluster
	Node    string
	Command string // runs instead of the sweep's command when set
	// Block: after a probe that answered, append the Kubernetes block (the node's pods from
	// the API, the kubelet's allocations from the agent) to its output. Off for anything that
	// is not the probe (fix's apply script).
	Block bool
}

// streamGrace is how long a stream that its context ended is waited for before it is left.
const streamGrace = 2 * time.Second

// RunTarget runs o.Command with o.Stdin in the agent container on the node, as sshexec runs
// it on an SSH host: within o.Timeout, agent lookup included; stdout bounded by o.MaxOutput
// and judged by o.Head while it arrives; stderr bounded by o.MaxStderr. The probe's output
// (Block) then gets the Kubernetes block, at most BlockMax more. The command runs as `sh -s` (or `sh -c COMMAND`), and stdin ends with a line
// `exit 0`, so that the shell ends without waiting for stdin's end, which not every exec path
// passes on. The exit status is kept but decides nothing while the command printed something,
// and a stream that ends in an error after a whole capture is only noted: the capture's own
// final marker says whether it is whole.
func (v NodeVia) RunTarget(ctx context.Context, t sshexec.Target, o sshexec.Options) sshexec.Result {
	o = o.WithDefaults()
	if v.Command != "" {
		o.Command = v.Command
	}
	start := time.Now()
	hctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	r := sshexec.Result{Target: t}
	pod, e := v.K.agentPod(hctx, ctx, v.Node, o.Timeout)
	var before *podListing
	if e == nil && v.Block {
		before = v.K.listBefore(hctx, v.Node, o.Timeout/4)
	}
	if e == nil {
		e = v.K.run(hctx, ctx, pod, o, o.MaxOutput, &r)
	}
	r.Err = e
	if e == nil && v.Block {
		var notes []string
		r.Stdout, notes = v.K.appendBlock(hctx, v.Node, pod, r.Stdout, before)
		r.Notes = append(r.Notes, notes...)
	}
	r.Duration = time.Since(start)
	return r
}

// listBefore lists node's pods before the probe, to tell a pod deleted while it ran, within
// limit: an API server slow to answer costs a note (appendBlock), never the node's probe.
func (k *Cluster) listBefore(hctx context.Context, node string, limit time.Duration) *podListing {
	lctx, cancel := context.WithTimeout(hctx, limit)
	defer cancel()
	l := k.listNodePods(lctx, node)
	if l.err != nil && lctx.Err() != nil && hctx.Err() == nil {
		l.err = fmt.Errorf("no answer within %v", limit)
	}
	return l
}

// argv is the command line a sweep's command runs as in the agent container: `sh -s` as is,
// anything else as sh -c, as sshd hands it to the login shell.
func argv(command string) []string {
	if command == "sh -s" {
		return []string{"sh", "-s"}
	}
	return []string{"sh", "-c", command}
}

// WithExit is stdin ending in a line `exit 0`.
func WithExit(stdin []byte) []byte {
	in := bytes.Clone(stdin)
	if len(in) > 0 && in[len(in)-1] != '\n' {
		in = append(in, '\n')
	}
	return append(in, "exit 0\n"...)
}

// run execs o.Command in pod and fills r: its output, bounded and judged, and how it ended.
func (k *Cluster) run(hctx, ctx context.Context, pod string, o sshexec.Options, limit int, r *sshexec.Result) *sshexec.Error {
	sctx, stop := context.WithCancel(hctx)
	defer stop()
	out := &capped{limit: limit, head: o.Head, stop: stop}
	errOut := &capped{limit: o.MaxStderr}
	code, err := k.streamBounded(sctx, pod, argv(o.Command), WithExit(o.Stdin), out, errOut)
	r.Stdout, r.Truncated = out.close()
	r.Stderr, _ = errOut.close()
	if errOut.dropped > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("stderr exceeded %d bytes: %d bytes discarded", o.MaxStderr, errOut.dropped))
	}
	if code >= 0 {
		r.ExitCode = &code
	}
	switch {
	case out.refused != nil:
		return &sshexec.Error{Phase: sshexec.PhaseProbe, Kind: sshexec.KindBadOutput, Err: out.refused,
			Message: fmt.Sprintf("%s (stopped reading after %d bytes)", sshexec.EscapeControl(out.refused.Error()), len(r.Stdout))}
	case r.Truncated:
		r.Notes = append(r.Notes, fmt.Sprintf("output exceeded %d bytes: kept the first %d, stopped reading and closed the exec stream", limit, limit))
		return nil
	case ctx.Err() != nil:
		return &sshexec.Error{Phase: sshexec.PhaseProbe, Kind: sshexec.KindInterrupted, Message: "interrupted during probe: run command"}
	case hctx.Err() != nil:
		return &sshexec.Error{Phase: sshexec.PhaseProbe, Kind: sshexec.KindTimeout, Err: hctx.Err(),
			Message: fmt.Sprintf("run command: the command did not finish within the %v host timeout", o.Timeout)}
	case err != nil && whole(r.Stdout):
		// The capture's own final marker says it is whole; the exec stream's end is not
		// trusted either way (kwok, for one, reports an exit status as a stream error).
		r.Notes = append(r.Notes, "the exec stream ended with an error after the probe's output was whole: "+errText(err))
	case err != nil && len(r.Stdout) > 0:
		return &sshexec.Error{Phase: sshexec.PhaseProbe, Kind: sshexec.KindClosed, Err: err,
			Message: fmt.Sprintf("the exec stream ended after %d bytes of output: %s", len(r.Stdout), errText(err))}
	case err != nil:
		return k.apiError(sshexec.PhaseSession, "exec in "+k.ns+"/"+pod, err)
	case code > 0 && len(r.Stdout) == 0:
		msg := fmt.Sprintf("the command exited with status %d", code)
		if head := sshexec.StderrHead(r.Stderr); head != "" {
			msg += "; stderr: " + head
		}
		return &sshexec.Error{Phase: sshexec.PhaseProbe, Kind: sshexec.KindExit, Message: msg}
	}
	return nil
}

// streamBounded is stream, left once its context has ended and streamGrace has passed: a
// stream that does not notice its context cannot hold the sweep past the host's deadline.
func (k *Cluster) streamBounded(ctx context.Context, pod string, argv []string, stdin []byte, out, errOut *capped) (int, error) {
	type res struct {
		code int
		err  error
	}
	done := make(chan res, 1)
	go func() {
		code, err := k.exec(ctx, pod, argv, stdin, out, errOut)
		done <- res{code, err}
	}()
	select {
	case r := <-done:
		return r.code, r.err
	case <-ctx.Done():
	}
	select {
	case r := <-done:
		return r.code, r.err
	case <-time.After(streamGrace):
		return -1, ctx.Err()
	}
}

// capped keeps at most limit bytes of a stream, shows its beginning to head until head
// accepts it, and stops the stream (stop) when head refuses it or it passes limit. Writes
// after close are dropped: a stream left behind cannot change what was returned.
type capped struct {
	mu        sync.Mutex
	buf       []byte
	limit     int
	head      func([]byte) (bool, error)
	stop      func()
	judged    bool
	refused   error
	truncated bool
	dropped   int
	closed    bool
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.refused != nil || c.truncated {
		c.dropped += len(p)
		return len(p), nil
	}
	if room := c.limit - len(c.buf); len(p) > room {
		c.buf = append(c.buf, p[:room]...)
		c.dropped += len(p) - room
		if c.stop != nil {
			c.truncated = true
			c.stop()
		}
		return len(p), nil
	}
	c.buf = append(c.buf, p...)
	if c.head != nil && !c.judged {
		if c.judged, c.refused = c.head(c.buf); c.refused != nil {
			c.stop()
		}
	}
	return len(p), nil
}

// close returns what was kept and whether the stream was cut at the limit.
func (c *capped) close() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return c.buf, c.truncated
}

// apiError classifies a failure of a request to the API server as sshexec classifies one on
// the way to an SSH host: the credentials refused or not allowed (auth), the server not
// reached (resolve, connect), or anything else in the phase given.
func (k *Cluster) apiError(phase, what string, err error) *sshexec.Error {
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		err = ue.Err // the request's URL says nothing the message does not
	}
	msg := sshexec.EscapeControl(err.Error())
	switch kind := sshexec.Classify(err); {
	case isAuth(err):
		return &sshexec.Error{Phase: sshexec.PhaseAuth, Kind: sshexec.KindAuthFailed, Err: err,
			Message: fmt.Sprintf("%s: the API server refused it (context %s): %s", what, k.context, msg)}
	case kind == sshexec.KindNameLookup:
		return &sshexec.Error{Phase: sshexec.PhaseResolve, Kind: kind, Err: err, Message: fmt.Sprintf("%s: API server %s: %s", what, k.Host(), msg)}
	case kind == sshexec.KindRefused || kind == sshexec.KindUnreachable || kind == sshexec.KindReset:
		return &sshexec.Error{Phase: sshexec.PhaseConnect, Kind: kind, Err: err, Message: fmt.Sprintf("%s: API server %s: %s", what, k.Host(), msg)}
	case kind != "":
		return &sshexec.Error{Phase: phase, Kind: kind, Err: err, Message: what + ": " + msg}
	}
	return &sshexec.Error{Phase: phase, Kind: sshexec.KindOther, Err: err, Message: what + ": " + msg}
}

// whole reports whether out is a capture that reached its final marker.
func whole(out []byte) bool {
	c, err := parse.SplitCapture(out)
	return err == nil && c.Done
}

// errText is an error's message for a note: remote text, made printable.
func errText(err error) string {
	return sshexec.EscapeControl(strings.TrimSpace(err.Error()))
}

var errNoAgent = errors.New("no agent")

// String says how the node is reached, for --debug-ssh and --dry-run.
func (v NodeVia) String() string {
	return fmt.Sprintf("pods/exec into the gputriage agent pod on node %s (namespace %s, label %s) through the API server %s (context %s)",
		v.Node, v.K.ns, AgentLabel, v.K.Host(), v.K.context)
}
