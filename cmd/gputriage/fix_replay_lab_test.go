//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// On a real host, fix --replay of a capture saved from it prints the plan fix --plan-out
// prints for it live, line for line (the seed incident's leftover, by its identity; the
// healthy server nowhere), and leaves everything as it was: the leftover runs, nothing reached
// the host's syslog, no audit record.
func TestFixReplayIsTheLivePlan(t *testing.T) {
	l := newFixLab(t)
	saved := filepath.Join(l.dir, "saved")
	if out, errOut, code := l.gputriage(t, nil, "collect", "--save", saved, "gpu-fix"); code != exitOK {
		t.Fatalf("collect: exit %d\n%s%s", code, out, errOut)
	}
	_, live, _, _, _ := l.planOut(t, "gpu-fix", 1)
	live, _, _ = strings.Cut(live, "plan ")
	for _, path := range []string{saved, filepath.Join(saved, "gpu-fix.capture")} {
		out, errOut, code := l.fix(t, nil, "--replay", path)
		replay, _, _ := strings.Cut(out, "nothing applied (--replay)")
		if code != exitOK || replay != live {
			t.Errorf("fix --replay %s: exit %d, plan\n%s\nwant the live plan\n%s%s", path, code, replay, live, errOut)
		}
		if !strings.Contains(replay, fmt.Sprintf("  kill -s TERM %d\n", l.leftover.PID)) ||
			regexp.MustCompile(fmt.Sprintf(`\b%d\b`, l.healthy.PID)).MatchString(out) {
			t.Errorf("fix --replay %s: the plan does not stop the leftover %d alone:\n%s", path, l.leftover.PID, out)
		}
	}
	if !l.alive(t, l.leftover.PID) || !l.alive(t, l.healthy.PID) {
		t.Error("a process was signalled")
	}
	if got := l.syslog(t); got != "" {
		t.Errorf("the host's syslog: %q", got)
	}
	if _, err := os.Stat(filepath.Join(l.state, "gputriage", "fix.log")); !os.IsNotExist(err) {
		t.Errorf("an audit log was written (%v)", err)
	}
}
