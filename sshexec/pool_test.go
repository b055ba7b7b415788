package sshexec_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/sshtest"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/sshexec"
)

// TestPoolKeepsOneConnection: rounds over a kept connection cost one session each and one
// handshake in all, through a jump host too; a dropped connection is dialled again on the next
// round and says so; an unknown host key fails the round as Run fails the host.
func TestPoolKeepsOneConnection(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var reset atomic.Bool
	target := e.server(sshtest.Config{Exec: func(x *sshtest.Exec) int {
		if reset.Swap(false) {
			x.Reset()
			return 0
		}
		return echoExec(x)
	}})
	bastion := e.server(sshtest.Config{Forward: true})
	e.trust(target)
	e.trust(bastion)
	direct := e.target(target)
	jumped := e.target(target)
	jump := e.target(bastion)
	jump.Name = "bastion"
	jumped.Jump = []sshexec.Target{jump}
	unknown := e.target(target)
	unknown.KnownHostsFiles = nil

	p := sshexec.NewPool([]sshexec.Target{direct, jumped, unknown}, opts())
	defer p.Close()
	ctx := context.Background()
	for round := 0; round < 3; round++ {
		for i := 0; i < 2; i++ {
			r, dialed := p.Probe(ctx, i)
			wantOK(t, r)
			if !strings.HasSuffix(string(r.Stdout), "|echo hi\n") {
				t.Errorf("round %d host %d: stdout %q", round, i, r.Stdout)
			}
			if dialed != (round == 0) {
				t.Errorf("round %d host %d: dialed=%v", round, i, dialed)
			}
		}
	}
	if a, s := target.Accepted(), target.Sessions(); a != 2 || s != 6 {
		t.Errorf("target: %d connections and %d sessions for 3 rounds of 2 hosts; want 2 and 6", a, s)
	}
	if a, s := bastion.Accepted(), bastion.Sessions(); a != 1 || s != 0 {
		t.Errorf("bastion: %d connections, %d sessions; want 1 and 0", a, s)
	}

	// The host drops the connection mid-round: that round fails, the next one redials.
	reset.Store(true)
	r, _ := p.Probe(ctx, 0)
	if r.Err == nil {
		t.Fatalf("a reset connection gave no error: %q", r.Stdout)
	}
	r, dialed := p.Probe(ctx, 0)
	wantOK(t, r)
	if !dialed || target.Accepted() != 3 {
		t.Errorf("after the drop: dialed=%v, %d connections; want a new one (3)", dialed, target.Accepted())
	}

	r, _ = p.Probe(ctx, 2)
	wantErr(t, r, sshexec.PhaseHostKey, sshexec.KindUnknownHostKey)
}

// TestPoolRoundDeadline: a round that outlives Options.Timeout fails with a timeout and the
// connection is dropped, so the next round starts clean.
func TestPoolRoundDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var stall atomic.Bool
	stall.Store(true)
	s := e.server(sshtest.Config{Exec: func(x *sshtest.Exec) int {
		if stall.Swap(false) {
			<-x.Ctx.Done()
			return 0
		}
		return echoExec(x)
	}})
	e.trust(s)
	o := opts()
	o.Timeout = 500 * time.Millisecond
	p := sshexec.NewPool([]sshexec.Target{e.target(s)}, o)
	defer p.Close()
	begin := time.Now()
	r, _ := p.Probe(context.Background(), 0)
	wantErr(t, r, sshexec.PhaseProbe, sshexec.KindTimeout)
	if d := time.Since(begin); d > testenv.Scale(3*time.Second) {
		t.Errorf("round took %s with a 500ms deadline", d)
	}
	r, dialed := p.Probe(context.Background(), 0)
	wantOK(t, r)
	if !dialed {
		t.Errorf("the timed-out connection was reused")
	}
}
