// Package sshexec runs one command, fed one script on stdin, on many hosts over SSH, and
// returns each host's output or the precise reason it has none.
//
// It owns the SSH side of a sweep: dialling (directly, through a ProxyJump chain, or over a
// ProxyCommand it runs and ends with the host), host key
// verification against known_hosts (strict by default, accept-new on request, a changed key
// always refused), public key authentication (one shared agent connection, identity files),
// per-host deadlines covering every phase, bounded output, and classified failures. It knows
// nothing about what the script does: it does not import parse, and its input is an already
// resolved Target (ssh_config is read elsewhere).
package sshexec

import (
	"context"
	"sync"
	"time"

	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/sync/errgroup"
)

// Defaults used when the corresponding Options field is zero.
const (
	DefaultFanout         = 64
	DefaultTimeout        = 2 * time.Minute
	DefaultConnectTimeout = 10 * time.Second
	// DefaultMaxOutput times Fanout bounds the output held at once only when Options.Done
	// drops each host's output; otherwise Run keeps every host's output until it returns.
	DefaultMaxOutput = 8 << 20
	DefaultMaxStderr = 64 << 10
)

// Target is one host, fully resolved (what ssh -G would say).
type Target struct {
	Name            string        // as the user typed it, for reports
	HostName        string        // address to dial
	Port            int           // 0 means 22
	User            string        // required
	IdentityFiles   []string      // tried in order after the agent's keys; missing files are skipped silently
	IdentitiesOnly  bool          // offer only agent keys that match an identity file
	Jump            []Target      // ProxyJump chain, outermost first; each hop fully resolved
	KnownHostsFiles []string      // the user's files (UserKnownHostsFile); AcceptNew records in the first
	HostKeyAlias    string        // name to look up in known_hosts instead of HostName[:Port]
	ConnectTimeout  time.Duration // TCP connect only; 0 = Options.ConnectTimeout
	// ProxyCommand, when set, carries the connection instead of TCP, as ssh's ProxyCommand:
	// the command (its %tokens expanded) runs as `Options.Shell -c "exec COMMAND"` in a
	// process group of its own, SSH is spoken over its stdin and stdout, and it is ended with
	// the host or at its deadline; its exit status and the end of its stderr explain a
	// failure. In a chain only the outermost hop may have one. "-" is refused.
	ProxyCommand string
	// ProxyUseFdpass: the ProxyCommand hands back a connected socket over its stdout instead
	// of speaking SSH there; as ssh does, Run waits for it to exit and uses that socket.
	ProxyUseFdpass bool
	// AcceptNew is StrictHostKeyChecking=accept-new for this host alone (Options.AcceptNew
	// applies it to all). It never overrides a changed key.
	AcceptNew bool

	// GlobalKnownHostsFiles are looked up after KnownHostsFiles and never written.
	GlobalKnownHostsFiles []string

	// Via, when set, reaches this target instead of SSH (see Via); the fields above are unused.
	Via Via
}

// Options configure a sweep.
type Options struct {
	Command        string        // remote command, built by the caller from constants only; never from host data
	Stdin          []byte        // the script
	MaxOutput      int           // bound on stdout bytes; 0 = DefaultMaxOutput
	MaxStderr      int           // bound on stderr bytes kept; 0 = DefaultMaxStderr
	Timeout        time.Duration // per host, every phase: dial, handshake, auth, run; 0 = DefaultTimeout
	ConnectTimeout time.Duration // TCP connect of each hop; 0 = DefaultConnectTimeout (capped by Timeout)
	Fanout         int           // hosts in flight at once; 0 = DefaultFanout
	Shell          string        // runs each ProxyCommand, as the user's $SHELL does for ssh; "" = /bin/sh

	// Agent is the one agent connection the whole sweep shares (see AgentFromEnv); nil for none.
	// It is only asked to list and to sign: agent forwarding is never requested.
	Agent agent.Agent
	// AcceptNew records unknown host keys in the first known_hosts file of the target (hashed if
	// that file already holds hashed entries) like StrictHostKeyChecking=accept-new. It is off
	// for the whole sweep when some known_hosts file could not be read fully.
	AcceptNew bool
	// Passphrase is asked, once per file and before any host is dialled, for an encrypted
	// identity file that the agent does not hold. nil: such files are skipped with a note.
	Passphrase func(file string) ([]byte, error)
	// Progress, when set, is called after every host starts or finishes, one call at a time.
	// It must return quickly.
	Progress func(Progress)

	// Head, when set, judges the beginning of each host's output while it arrives: it is
	// called with everything read so far, each time more arrives, until it accepts it. An
	// error stops reading at once: the session is closed and the host fails in PhaseProbe with
	// KindBadOutput and the error's text, keeping what was read. Output that ends before Head
	// accepted it is returned as it is. The caller knows what its command prints; Run does not.
	Head func(head []byte) (accepted bool, err error)
	// Done, when set, is called once for every target as soon as its Result is final, from the
	// host's own goroutine (so concurrently, up to Fanout at once). Run then stores the Result
	// as Done left it: a Done that consumes the output and sets Stdout and Stderr to nil keeps
	// a sweep's memory bounded by Fanout, not by the number of hosts.
	Done func(i int, r *Result)
}

// Progress is a snapshot of a sweep.
type Progress struct {
	Total, Succeeded, Failed, Running, Waiting int
	Slowest                                    string    // Name of the longest-running outstanding host; "" if none
	SlowestSince                               time.Time // when that host started
}

// Result is one host's outcome.
type Result struct {
	Target Target
	Stdout []byte // what was read, even when Err is set (a probe that timed out keeps its partial output)
	Stderr []byte // at most Options.MaxStderr bytes
	// ExitCode is nil when the command's exit status is unknown (it never ran, the connection
	// was lost, or reading stopped at MaxOutput).
	ExitCode *int
	// Truncated: stdout reached Options.MaxOutput; Stdout holds the first MaxOutput bytes, the
	// session was closed, and Err is nil unless something else failed. A note says so.
	Truncated bool
	Err       *Error   // nil on success; a non-zero exit is Phase "probe", Kind "exit"
	Notes     []string // things the user should know that did not stop the host
	Duration  time.Duration
}

// Run runs o.Command with o.Stdin on every target and returns one Result per target, in input
// order. A failed host always has a non-nil Err. Cancelling ctx (Ctrl-C) stops the sweep
// promptly: hosts in flight get Kind "interrupted" in the phase they were in, hosts not yet
// started get Phase "queued", Kind "interrupted"; what finished before is kept.
func Run(ctx context.Context, targets []Target, o Options) []Result {
	o = o.withDefaults()
	s := &sweep{
		o:        o,
		keys:     newHostKeys(targets),
		ids:      loadIdentities(o.Agent, o.Passphrase, targets),
		progress: newProgress(targets, o.Progress),
	}
	results := make([]Result, len(targets))
	done := func(i int, r Result) {
		if o.Done != nil {
			o.Done(i, &r)
		}
		results[i] = r
	}
	if o.Command == "" {
		for i, t := range targets {
			done(i, Result{Target: t, Err: &Error{Phase: PhaseSession, Kind: KindConfig, Message: "no command to run"}})
		}
		return results
	}
	var g errgroup.Group // not WithContext: one host's failure must not cancel the others
	g.SetLimit(o.Fanout)
	for i, t := range targets {
		if ctx.Err() != nil {
			done(i, queuedInterrupted(t))
			continue
		}
		g.Go(func() error {
			if ctx.Err() != nil {
				done(i, queuedInterrupted(t))
				return nil
			}
			s.progress.start(i)
			r := s.runHost(ctx, t)
			done(i, r)
			s.progress.finish(i, r.Err == nil)
			return nil
		})
	}
	_ = g.Wait() // goroutines return nil; failures are in results
	return results
}

func queuedInterrupted(t Target) Result {
	return Result{Target: t, Err: &Error{Phase: PhaseQueued, Kind: KindInterrupted,
		Message: "interrupted before this host was contacted"}}
}

func (o Options) withDefaults() Options {
	if o.Fanout <= 0 {
		o.Fanout = DefaultFanout
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	if o.MaxStderr <= 0 {
		o.MaxStderr = DefaultMaxStderr
	}
	return o
}

type sweep struct {
	o        Options
	keys     *hostKeys
	ids      *identities
	progress *progress
}

// progress tracks host states for Options.Progress.
type progress struct {
	mu      sync.Mutex
	fn      func(Progress)
	names   []string
	started []time.Time // zero while waiting or once finished
	p       Progress
}

func newProgress(targets []Target, fn func(Progress)) *progress {
	pr := &progress{fn: fn, names: make([]string, len(targets)), started: make([]time.Time, len(targets))}
	for i, t := range targets {
		pr.names[i] = t.Name
	}
	pr.p.Total, pr.p.Waiting = len(targets), len(targets)
	return pr
}

func (pr *progress) start(i int) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.started[i] = time.Now()
	pr.p.Waiting--
	pr.p.Running++
	pr.report()
}

func (pr *progress) finish(i int, ok bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.started[i] = time.Time{}
	pr.p.Running--
	if ok {
		pr.p.Succeeded++
	} else {
		pr.p.Failed++
	}
	pr.report()
}

func (pr *progress) report() {
	if pr.fn == nil {
		return
	}
	pr.p.Slowest, pr.p.SlowestSince = "", time.Time{}
	for i, st := range pr.started {
		if !st.IsZero() && (pr.p.SlowestSince.IsZero() || st.Before(pr.p.SlowestSince)) {
			pr.p.Slowest, pr.p.SlowestSince = pr.names[i], st
		}
	}
	pr.fn(pr.p)
}
