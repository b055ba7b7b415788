package sshexec

import (
	"context"
	"time"

	"golang.org/x/crypto/ssh"
)

// Pool keeps one SSH connection per target open across rounds, for watching hosts: each Probe
// runs Options.Command on a new session of the host's connection, so a round costs the host
// one session, not a handshake. A connection that drops (or a round that fails) is closed and
// dialled again on the host's next Probe, through the same path as Run: ProxyJump chains,
// ProxyCommand, host key checks and keys are Run's.
type Pool struct {
	s     *sweep
	hosts []*keptHost
}

// keptHost is one target's connection between rounds.
type keptHost struct {
	t      Target
	h      *hostRun    // the connection's; nil before the first dial and after a drop
	client *ssh.Client // the target's SSH client on h
	base   int         // h.closers[:base] are the connection's; later ones are a round's
}

// NewPool prepares a pool for targets. Options.Fanout, Progress and Done are not used: the
// caller decides when each host is probed. Options.Timeout bounds each Probe, dialling
// included.
func NewPool(targets []Target, o Options) *Pool {
	o = o.withDefaults()
	p := &Pool{s: &sweep{
		o:        o,
		keys:     newHostKeys(targets),
		ids:      loadIdentities(o.Agent, o.Passphrase, targets),
		progress: newProgress(nil, nil),
	}}
	for _, t := range targets {
		p.hosts = append(p.hosts, &keptHost{t: t})
	}
	return p
}

// Probe runs the command once on target i, over its kept connection, dialling first when it
// has none; dialed says it did. Probes of different targets may run at once; Probes of one
// target must not. Cancelling ctx ends the round as Run's Ctrl-C does and drops the connection.
func (p *Pool) Probe(ctx context.Context, i int) (r Result, dialed bool) {
	k := p.hosts[i]
	if k.t.Via != nil {
		return k.t.Via.RunTarget(ctx, k.t, p.s.o), false // no connection is kept: nothing is dialed
	}
	start := time.Now()
	hctx, cancel := context.WithTimeout(ctx, p.s.o.Timeout)
	defer cancel()
	if k.h != nil && k.h.cw != nil && k.h.cw.ended() {
		k.h.closeAll() // dropped since the last round: dial again now rather than fail a round
		k.h, k.client = nil, nil
	}
	if k.h == nil {
		k.h, dialed = &hostRun{s: p.s, phase: PhaseConnect}, true
	}
	h := k.h
	h.mu.Lock()
	h.ctx, h.hctx, h.notes, h.phase, h.hop = ctx, hctx, nil, PhaseConnect, ""
	h.mu.Unlock()
	stop := context.AfterFunc(hctx, h.closeAll)
	r = Result{Target: k.t}
	if p.s.o.Command == "" {
		r.Err = &Error{Phase: PhaseSession, Kind: KindConfig, Message: "no command to run"}
	} else if dialed {
		client, err := h.connect(k.t)
		r.Err = err
		h.mu.Lock()
		k.client, k.base = client, len(h.closers)
		h.mu.Unlock()
	}
	if r.Err == nil {
		h.probe(k.client, &r)
	}
	stop()
	p.endRound(k, &r)
	r.Duration = time.Since(start)
	return r, dialed
}

// endRound keeps the connection after a good round, closing what the round opened, and drops
// it after a failed one (or when the deadline closed it meanwhile).
func (p *Pool) endRound(k *keptHost, r *Result) {
	h := k.h
	if r.Err != nil && h.proxy != nil && r.Err.Kind != KindConfig {
		h.proxy.explain(r.Err)
	}
	h.mu.Lock()
	r.Notes = h.notes
	closed := h.closed
	var round []interface{ Close() error }
	if !closed && r.Err == nil && !r.Truncated {
		for _, c := range h.closers[k.base:] {
			round = append(round, c)
		}
		h.closers = h.closers[:k.base]
	}
	h.mu.Unlock()
	for _, c := range round {
		_ = c.Close()
	}
	if closed || r.Err != nil || r.Truncated {
		h.closeAll()
		k.h, k.client = nil, nil
	}
}

// Close closes every kept connection. The pool must not be probed afterwards.
func (p *Pool) Close() {
	for _, k := range p.hosts {
		if k.h != nil {
			k.h.closeAll()
			k.h, k.client = nil, nil
		}
	}
}

// ended reports whether the connection has ended.
func (w *connWatch) ended() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}
