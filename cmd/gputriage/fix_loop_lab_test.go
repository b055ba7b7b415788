//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/fix"
	"github.com/gputriage/gputriage/internal/testenv"
)

// The README's loop for the seed incident, its three commands exactly as the README shows
// them, on an 8-GPU host named gpu07: triage finds the leftover, fix stops it and only it,
// and watch exits 0 once its memory is back and a TP-8 job would start.
func TestFixReadmeLoop(t *testing.T) {
	l := newFixLabWith(t, fixLabConfig{host: "gpu07", gpus: 8})
	loop := readmeLoop(t)
	if len(loop) != 3 {
		t.Fatalf("README's loop: %q, want three commands", loop)
	}
	// 1. gputriage gpu07: the leftover, and the command that stops it.
	out, errOut, code := l.gputriage(t, nil, loop[0]...)
	if code != exitFindings || !strings.Contains(out, fmt.Sprintf("kill %d", l.leftover.PID)) && !strings.Contains(out, fmt.Sprintf("kill -TERM %d", l.leftover.PID)) {
		t.Fatalf("%q: exit %d, want %d and the leftover's kill\n%s\n%s", loop[0], code, exitFindings, out, errOut)
	}
	// Before the fix, a TP-8 job would not start: watch --until ready does not hold yet.
	if _, _, code := l.gputriage(t, nil, append(loop[2], "--timeout", "3s")...); code == exitOK {
		t.Fatalf("%q held before the fix", loop[2])
	}
	// 2. gputriage fix gpu07 --yes: stops the leftover, not the healthy server.
	out, errOut, code = l.gputriage(t, nil, loop[1]...)
	if code != exitOK || !regexp.MustCompile(fmt.Sprintf(`(?m)^gpu07: PID %d sglang\.launch_server: stopped `, l.leftover.PID)).MatchString(out) {
		t.Fatalf("%q: exit %d, want 0 and the leftover stopped\n%s\n%s", loop[1], code, out, errOut)
	}
	if l.alive(t, l.leftover.PID) || !l.alive(t, l.healthy.PID) {
		t.Fatalf("leftover alive %v, healthy alive %v", l.alive(t, l.leftover.PID), l.alive(t, l.healthy.PID))
	}
	if recs := l.records(t); len(recs) != 1 || recs[0].Target.PID != l.leftover.PID || recs[0].Result.Outcome != fix.Stopped {
		t.Errorf("audit records %+v", recs)
	}
	// 3. gputriage watch gpu07 --until ready --tp 8: holds, exit 0.
	start := time.Now()
	out, errOut, code = l.gputriage(t, nil, append(loop[2], "--timeout", "60s")...)
	if code != exitOK || !strings.Contains(out, "gpu07: holds") {
		t.Fatalf("%q: exit %d after %s, want 0 and holds\n%s\n%s", loop[2], code, time.Since(start), out, errOut)
	}
	t.Logf("%q held after %s:\n%s", loop[2], time.Since(start).Round(time.Millisecond), out)
}

// readmeLoop is the loop of README.md's "Fixing it: the loop", each command split into its
// arguments after "gputriage" (no quoting there: a single host).
func readmeLoop(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)### Fixing it: the loop\n\n```sh\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("README has no loop")
	}
	var loop [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(m[1])), "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		f := strings.Fields(cmd)
		if len(f) < 2 || f[0] != "gputriage" {
			t.Fatalf("README loop line %q", line)
		}
		loop = append(loop, f[1:])
	}
	return loop
}

// --kill-after D: a leftover that ignores SIGTERM is sent SIGKILL D after it and stops; the
// result says so, and the audit record shows that SIGKILL was sent.
func TestFixKillAfter(t *testing.T) {
	l := newFixLabWith(t, fixLabConfig{host: "gpu-fix", gpus: 2, ignoreTerm: true})
	start := time.Now()
	out, errOut, code := l.fix(t, nil, "gpu-fix", "--yes", "--kill-after", "2s")
	took := time.Since(start)
	stopped := regexp.MustCompile(fmt.Sprintf(`(?m)^gpu-fix: PID %d sglang\.launch_server: stopped \(after SIGKILL\) \S+ after the signal;`, l.leftover.PID))
	if code != exitOK || !stopped.MatchString(out) {
		t.Fatalf("exit %d, want 0 and stopped after SIGKILL\n%s\n%s", code, out, errOut)
	}
	if l.alive(t, l.leftover.PID) || !l.alive(t, l.healthy.PID) {
		t.Fatalf("leftover alive %v, healthy alive %v", l.alive(t, l.leftover.PID), l.alive(t, l.healthy.PID))
	}
	recs := l.records(t)
	if len(recs) != 1 {
		t.Fatalf("%d audit records, want 1: %+v", len(recs), recs)
	}
	r := recs[0]
	if r.Signal != "SIGTERM" || r.KillAfter != "2s" || r.Result.Outcome != fix.Stopped || r.Result.Detail != "sigkill" ||
		r.Result.Exit == nil || *r.Result.Exit < 2*time.Second {
		t.Errorf("audit record: %+v, result %+v", r, r.Result)
	}
	if !strings.Contains(l.syslog(t), "outcome=stopped detail=sigkill") {
		t.Errorf("syslog: %q", l.syslog(t))
	}
	t.Logf("fix --kill-after 2s took %s:\n%s", took.Round(time.Millisecond), out)
}

// The memory watch's --wait starts when the apply session ends, not before it: a SIGKILL sent
// late in the session (here 2.5 s into a 3 s --wait, with nvidia-smi releasing the memory 1 to
// 2 s after the exit) is still watched to its release. Counted from the session's start, only
// one round ran, at once after the exit, and fix reported the memory "still held". (Until the
// script took centiseconds, 2.5s also rounded up to the 3 s --wait, and no SIGKILL was sent.)
func TestFixWatchesAfterLateSIGKILL(t *testing.T) {
	l := newFixLabWith(t, fixLabConfig{host: "gpu-fix", gpus: 2, ignoreTerm: true, release: 2 * time.Second})
	out, errOut, code := l.fix(t, nil, "gpu-fix", "--yes", "--kill-after", "2.5s", "--wait", "3s")
	released := regexp.MustCompile(fmt.Sprintf(`(?m)^gpu-fix: GPU 0: 55,286 MiB released \S+ s after PID %d was gone`, l.leftover.PID))
	if code != exitOK || !released.MatchString(out) || strings.Contains(out, "still held") {
		t.Fatalf("exit %d, want 0 and the release reported\n%s\n%s", code, out, errOut)
	}
}

// --sudo: a login that is not root but may sudo (a sudoers of the lab host's own, bind-mounted
// in its mount namespace) stops root's leftover with --sudo, and only it.
func TestFixSudoNonRoot(t *testing.T) {
	testenv.Need(t, "sudo", "apt-get install sudo", "sudo")
	l := newFixLab(t)
	l.nobodyLogin(t)
	sudoers := filepath.Join(l.dir, "sudoers")
	conf := "Defaults env_reset\nDefaults secure_path=\"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\"\n" +
		"root ALL=(ALL:ALL) ALL\nnobody ALL=(ALL:ALL) NOPASSWD: ALL\n"
	if err := os.WriteFile(sudoers, []byte(conf), 0o440); err != nil {
		t.Fatal(err)
	}
	args := append(l.sshd.Enter(t), "mount", "--bind", sudoers, "/etc/sudoers")
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Skipf("cannot give nobody sudo in the lab: %v %s", err, out)
	}
	out, errOut, code := l.fix(t, nil, "--yes", "-l", "nobody", "--sudo", "gpu-fix")
	stopped := regexp.MustCompile(fmt.Sprintf(`(?m)^gpu-fix: PID %d sglang\.launch_server: stopped `, l.leftover.PID))
	if code != exitOK || !stopped.MatchString(out) {
		t.Fatalf("exit %d, want 0 and the leftover stopped\n%s\n%s", code, out, errOut)
	}
	if l.alive(t, l.leftover.PID) || !l.alive(t, l.healthy.PID) {
		t.Fatalf("leftover alive %v, healthy alive %v", l.alive(t, l.leftover.PID), l.alive(t, l.healthy.PID))
	}
	recs := l.records(t)
	if len(recs) != 1 || recs[0].Login != "nobody" || !recs[0].Sudo || recs[0].Target.UID != 0 || recs[0].Result.Outcome != fix.Stopped {
		t.Errorf("audit records %+v", recs)
	}
}

// A fleet is confirmed at a terminal by typing its number of hosts: a wrong count applies
// nothing, the right one stops the leftover on each host.
func TestFixFleetConfirmation(t *testing.T) {
	a := newFixLabWith(t, fixLabConfig{host: "gpu-a", gpus: 2})
	b := newFixLabWith(t, fixLabConfig{host: "gpu-b", gpus: 2, second: true})
	var conf []byte
	for _, l := range []*fixLab{a, b} {
		c, err := os.ReadFile(l.config)
		if err != nil {
			t.Fatal(err)
		}
		conf = append(conf, c...)
	}
	a.config = filepath.Join(a.dir, "fleet_config")
	if err := os.WriteFile(a.config, conf, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		answer string
		code   int
		alive  bool
	}{{"1", exitFixIncomplete, true}, {"gpu-a", exitFixIncomplete, true}, {"2", exitOK, false}} {
		t.Run(c.answer, func(t *testing.T) {
			code, out := a.confirmAtPTY(t, "type 2 (the number of hosts): ", c.answer, "fix", "-F", a.config, "gpu-a", "gpu-b")
			if code != c.code || a.alive(t, a.leftover.PID) != c.alive || b.alive(t, b.leftover.PID) != c.alive {
				t.Errorf("answer %q: exit %d, leftovers alive %v %v; want %d, %v\n%s", c.answer, code,
					a.alive(t, a.leftover.PID), b.alive(t, b.leftover.PID), c.code, c.alive, out)
			}
			if !a.alive(t, a.healthy.PID) || !b.alive(t, b.healthy.PID) {
				t.Error("a healthy server was stopped")
			}
		})
	}
	if recs := a.records(t); len(recs) != 2 || recs[0].Host == recs[1].Host {
		t.Errorf("audit records %+v", recs)
	}
}

// confirmAtPTY runs gputriage args with standard input a terminal, waits for prompt on
// standard error, checks nothing was signalled before it, types answer, and returns the exit
// status and standard output.
func (l *fixLab) confirmAtPTY(t *testing.T, prompt, answer string, args ...string) (int, string) {
	t.Helper()
	return l.atPTY(t, []exchange{{prompt, answer}}, args...)
}

// exchange is one prompt gputriage prints on standard error, and the answer typed to it.
type exchange struct{ prompt, answer string }

// atPTY runs gputriage args with standard input a terminal and, for each exchange in turn,
// waits for its prompt, checks the leftover is still there, and types its answer. It returns
// the exit status and standard output.
func (l *fixLab) atPTY(t *testing.T, talk []exchange, args ...string) (int, string) {
	t.Helper()
	ptm, pts := openPTY(t)
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer errR.Close()
	var out bytes.Buffer
	getenv := func(k string) string {
		if k == "XDG_STATE_HOME" {
			return l.state
		}
		return ""
	}
	done := make(chan int, 1)
	go func() {
		defer errW.Close()
		done <- run(context.Background(), args, pts, &out, errW, getenv, isTerminal)
	}()
	for _, x := range talk {
		readUntil(t, errR, x.prompt)
		if !l.alive(t, l.leftover.PID) {
			t.Fatalf("signalled before the answer to %q", x.prompt)
		}
		if _, err := ptm.Write([]byte(x.answer + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case code := <-done:
		return code, out.String()
	case <-time.After(60 * time.Second):
		t.Fatal("fix did not finish")
		return -1, ""
	}
}
