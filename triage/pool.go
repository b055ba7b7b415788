package triage

import (
	"context"
	"sync"
	"time"

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
// capture), whether its connection was dialed for it, when it was in, and the notes to print
// about it.
type Round struct {
	Host   report.Host
	Dialed bool
	At     time.Time
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
		use(Round{Host: h, Dialed: dialed, At: time.Now(), Notes: notes})
	})
}

// Close closes every connection; no Probe may be in flight.
func (p *Pool) Close() {
	p.pool.Close()
	p.closeAgent()
}

// Watch probes each host of p every interval until ctx ends or see returns false, and gives
// see each round, one at a time, as it comes (see(i, r): host i's round). Rounds are not
// lock-stepped across hosts: a slow host delays only its own next round. A round holds its
// diagnose slot until see has it, so at most that many diagnosed rounds are in flight,
// whatever the number of hosts. When Watch returns, no Probe is in flight.
func (p *Pool) Watch(ctx context.Context, interval time.Duration, see func(i int, r Round) bool) {
	type hostRound struct {
		i int
		r Round
	}
	rounds := make(chan hostRound)
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for i := range p.hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				start := time.Now()
				handed := p.Probe(pctx, i, func(r Round) {
					select {
					case rounds <- hostRound{i, r}:
					case <-pctx.Done():
					}
				})
				if !handed || pctx.Err() != nil {
					return
				}
				select {
				case <-time.After(interval - time.Since(start)):
				case <-pctx.Done():
					return
				}
			}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-rounds:
			if !see(r.i, r.r) {
				return
			}
		}
	}
}
