package triage

import (
	"context"

	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/sshexec"
)

// Pool probes its hosts again and again, each over one kept SSH connection (watch, fix's
// watch for released memory), each round checked and diagnosed exactly as Run's: a login
// banner is dropped and named, another run's capture refused.
type Pool struct {
	c          *Config
	hosts      []Host
	nonce      string
	pool       *sshexec.Pool
	closeAgent func()
}

// Round is one host's round: the host diagnosed, whole (no Retain, no reportView; no raw
// capture), whether its connection was dialed for it, and the notes to print about it.
type Round struct {
	Host   report.Host
	Dialed bool
	Notes  []string
}

// NewPool opens no connection yet: each host is dialed at its first Probe. Each round gets
// c.Timeout, connecting included.
func NewPool(c *Config, hosts []Host) (*Pool, error) {
	sopt, nonce, closeAgent, err := c.probeOptions(c.Timeout)
	if err != nil {
		return nil, err
	}
	targets := make([]sshexec.Target, len(hosts))
	for i, h := range hosts {
		targets[i] = c.target(h)
	}
	return &Pool{c: c, hosts: hosts, nonce: nonce, pool: sshexec.NewPool(targets, sopt), closeAgent: closeAgent}, nil
}

// Probe runs one round on host i and gives it to use, holding one of the sweep's diagnose
// slots until use returns: a round's snapshot is whole, so at most that many are in flight,
// whatever the number of hosts. It reports false, without calling use, when ctx ended first.
// Probe may be called for different hosts at once; Close waits for none.
func (p *Pool) Probe(ctx context.Context, i int, use func(Round)) bool {
	r, dialed := p.pool.Probe(ctx, i)
	if ctx.Err() != nil {
		return false
	}
	p.round(i, &r, dialed, use)
	return true
}

// round diagnoses r, host i's output, without its raw capture, and gives it to use, holding a
// diagnose slot.
func (p *Pool) round(i int, r *sshexec.Result, dialed bool, use func(Round)) {
	withDiagnoseSlot(func() {
		h, notes := p.c.finishHost(p.hosts[i].Label, r, p.nonce)
		blameConfig(h.Err, p.hosts[i].Conf)
		h.Capture, r.Stdout, r.Stderr = nil, nil, nil
		use(Round{Host: h, Dialed: dialed, Notes: notes})
	})
}

// Close closes every connection; no Probe may be in flight.
func (p *Pool) Close() {
	p.pool.Close()
	p.closeAgent()
}
