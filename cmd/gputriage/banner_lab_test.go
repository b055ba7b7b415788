//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBannerThroughEveryCommand: the fix lab's host, whose login shell prints a banner before
// every command it runs (a .bashrc that echoes, as many sites' profiles do), is triaged
// alike by every command that reaches it over SSH (sweep, collect and its replay, watch,
// explain --host, fix and its watch for released memory): the banner is dropped and named, never
// taken for the capture. The steps run in order on one host: fix stops the leftover, so the
// commands before it see it and the watch after it sees its memory come back. (node-check
// probes its own node without a login shell: no banner reaches it.)
func TestBannerThroughEveryCommand(t *testing.T) {
	l := newFixLab(t)
	const banner = "Welcome to gpu-fix: be nice"
	rc := filepath.Join(l.sshd.Dir, "home", ".bashrc")
	if err := os.WriteFile(rc, []byte("echo '"+banner+"'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	save := filepath.Join(l.dir, "saved")
	leftover := `"leftover-process"`
	steps := []struct {
		name     string
		args     []string
		code     int
		stdout   []string // each must be in stdout
		named    bool     // the banner is named on stderr
		roundsOK bool     // stdout is watch's JSON Lines: every round reached the host
	}{
		{name: "sweep", args: []string{"--format", "json", "gpu-fix"}, code: exitFindings,
			stdout: []string{`"ok": true`, leftover}, named: true},
		{name: "collect", args: []string{"collect", "--save", save, "gpu-fix"}, code: exitOK,
			stdout: []string{"gpu-fix: saved "}, named: true},
		{name: "replay", args: []string{"--replay", save, "--format", "json"}, code: exitFindings,
			stdout: []string{`"ok": true`, leftover}},
		{name: "watch", args: []string{"watch", "--format", "json", "--interval", "500ms", "--timeout", "3s", "gpu-fix"},
			code: exitOK, named: true, roundsOK: true},
		{name: "explain", args: []string{"explain", "--color", "never", "--host", "gpu-fix", fmt.Sprintf("torch.OutOfMemoryError: CUDA out of memory. "+
			"Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.50 GiB is free. Process %d has 54.00 GiB memory in use.", l.leftover.PID)},
			code: exitFindings, stdout: []string{fmt.Sprintf("PID %d (54.00 GiB in the log) on gpu-fix: ", l.leftover.PID)}, named: true},
		{name: "fix and its release watch", args: []string{"fix", "--yes", "--wait", "20s", "gpu-fix"}, code: exitOK,
			stdout: []string{"gpu-fix: GPU 0: 55,286 MiB released"}, named: true},
		{name: "watch until free", args: []string{"watch", "--until", "free", "--interval", "500ms", "--timeout", "30s", "gpu-fix"},
			code: exitOK, stdout: []string{"--until free holds on every host"}, named: true},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) {
			out, errOut, code := l.gputriage(t, nil, s.args...)
			if code != s.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, s.code, out, errOut)
			}
			for _, want := range s.stdout {
				if !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s\nstderr:\n%s", want, out, errOut)
				}
			}
			if s.named && !strings.Contains(errOut, "gpu-fix: the login shell printed") || !s.named && strings.Contains(errOut, "not a gputriage capture") {
				t.Errorf("stderr (the banner named: %v):\n%s", s.named, errOut)
			}
			if strings.Contains(out, banner) {
				t.Errorf("the banner is in the report:\n%s", out)
			}
			if s.roundsOK {
				checkRoundsReached(t, out)
			}
		}) {
			return // a later step needs this one's outcome
		}
	}
}

// checkRoundsReached fails unless watch's JSON Lines hold at least one round and every round
// reached its host.
func checkRoundsReached(t *testing.T, out string) {
	t.Helper()
	rounds := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			Round     *int    `json:"round"`
			Reachable bool    `json:"reachable"`
			Error     *string `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("watch line %q: %v", line, err)
		}
		if r.Round == nil {
			continue
		}
		rounds++
		if !r.Reachable || r.Error != nil {
			t.Errorf("a round did not reach the host: %s", line)
		}
	}
	if rounds == 0 {
		t.Errorf("no round:\n%s", out)
	}
}
