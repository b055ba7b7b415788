//go:build linux

package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/fix"
)

// A session cut while the host watches its targets: the host had already said it signalled
// the leftover, so fix says so (not "not applied"), tells how to see what became of it, and
// records it in the audit log as unconfirmed.
func TestFixSessionCutSaysWhatWasDone(t *testing.T) {
	l := newFixLabWith(t, fixLabConfig{host: "gpu-fix", gpus: 2, ignoreTerm: true})
	type ran struct {
		out  string
		code int
	}
	done := make(chan ran, 1)
	go func() {
		out, _, code := l.fix(t, nil, "--yes", "--wait", "30s", "gpu-fix")
		done <- ran{out, code}
	}()
	// The script's watch loop sleeps 0.2 s at a time once it has acted: cut the session then,
	// as a dropped link or a restarted sshd would.
	enter := l.sshd.Enter(t)
	cut := false
	for deadline := time.Now().Add(30 * time.Second); !cut && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		args := append(append([]string(nil), enter...), "pgrep", "-x", "-f", "sleep 0.2")
		if out, _ := exec.Command(args[0], args[1:]...).Output(); len(out) > 0 {
			kill := append(append([]string(nil), enter...), "pkill", "-KILL", "-f", "^sshd: root@")
			cut = exec.Command(kill[0], kill[1:]...).Run() == nil
		}
	}
	if !cut {
		t.Fatal("the apply script never reached its watch")
	}
	r := <-done
	t.Logf("gputriage fix, cut:\n%s", r.out)
	if r.code != exitFixIncomplete || strings.Contains(r.out, "not applied") ||
		!strings.Contains(r.out, "the session ended before the watch did") ||
		!strings.Contains(r.out, "signalled; what became of it is not known: gputriage watch gpu-fix --until free") {
		t.Errorf("exit %d, want %d, and output saying the leftover was signalled:\n%s", r.code, exitFixIncomplete, r.out)
	}
	recs := l.records(t)
	if len(recs) != 1 || recs[0].Result.Outcome != fix.Unconfirmed || recs[0].Target.PID != l.leftover.PID {
		t.Errorf("audit records %+v, want one unconfirmed for PID %d", recs, l.leftover.PID)
	}
	if !l.alive(t, l.healthy.PID) {
		t.Error("the healthy server is gone")
	}
}
