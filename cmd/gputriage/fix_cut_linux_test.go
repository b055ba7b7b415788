//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/fix"
	"github.com/gputriage/gputriage/internal/testenv"
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

// A session that ends after the plan was sent and before the host said anything: the host may
// or may not have signalled the leftover, so fix says "outcome unknown" (never "not applied"),
// names the watch that tells what became of it, records the target as unconfirmed with detail
// no-answer, and exits 1. The cut is exact: the apply script's first command, id, is a stand-in
// on the lab login's PATH that, once armed, kills its own session's sshd and then answers.
func TestFixSessionCutBeforeAnswerIsUnknown(t *testing.T) {
	l := newFixLab(t)
	armed := l.cutAtID(t)
	out, errOut, code := l.fix(t, nil, "--yes", "gpu-fix")
	t.Logf("gputriage fix, cut before the host answered:\n%s", out)
	if _, err := os.Stat(armed); err == nil {
		t.Fatalf("the session was never cut: id did not run\n%s\n%s", out, errOut)
	}
	if code != exitFixIncomplete || strings.Contains(out, "not applied") ||
		!strings.Contains(out, "gpu-fix: outcome unknown: the session ended after the plan was sent") ||
		!strings.Contains(out, fmt.Sprintf("gpu-fix: PID %d sglang.launch_server: perhaps signalled; what became of it is not known: gputriage watch gpu-fix --until free", l.leftover.PID)) {
		t.Errorf("exit %d, want %d, and output saying the outcome is unknown\n%s\n%s", code, exitFixIncomplete, out, errOut)
	}
	recs := l.records(t)
	if len(recs) != 1 || recs[0].Result.Outcome != fix.Unconfirmed || recs[0].Result.Detail != "no-answer" || recs[0].Target.PID != l.leftover.PID {
		t.Errorf("audit records %+v, want one unconfirmed no-answer for PID %d", recs, l.leftover.PID)
	}
	// The script ran on without its session, all of it already in its input pipe: it did
	// signal the leftover, which "not applied" would have denied.
	for deadline := time.Now().Add(testenv.HangGuard); l.alive(t, l.leftover.PID) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	if l.alive(t, l.leftover.PID) || !l.alive(t, l.healthy.PID) {
		t.Errorf("leftover alive %v, healthy alive %v; want false, true", l.alive(t, l.leftover.PID), l.alive(t, l.healthy.PID))
	}
}

// cutAtID puts an id first on the lab login's PATH that, while the file it returns exists,
// removes it and kills the nearest sshd above itself (its session's), then runs the real id.
// The probe reads its user from /proc and /etc/passwd; the apply script runs id -un first.
func (l *fixLab) cutAtID(t *testing.T) string {
	t.Helper()
	real, err := exec.LookPath("id")
	if err != nil {
		t.Fatal(err)
	}
	bin := l.sshd.SMIDir()
	armed := filepath.Join(bin, "cut-armed")
	script := `#!/bin/sh
if rm "$CUT" 2>/dev/null; then
	p=$PPID
	while [ "$p" -gt 1 ]; do
		read -r c <"/proc/$p/comm"
		case $c in sshd*) kill -KILL "$p"; break ;; esac
		read -r l <"/proc/$p/stat"
		set -- ${l##*)}
		p=$2
	done
fi
exec "$REAL" "$@"
`
	script = strings.NewReplacer(`"$CUT"`, shellQuote(armed), `"$REAL"`, shellQuote(real)).Replace(script)
	if err := os.WriteFile(filepath.Join(bin, "id"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(armed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return armed
}
