//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/gputriage/gputriage/fix"
	"github.com/gputriage/gputriage/internal/testenv"
)

// A target whose command line takes hours to read (its owner pointed its argv at a terabyte of
// untouched memory after the plan was written) does not stall the apply: fix refuses it and
// still stops the leftover after it in the same plan, well within --timeout. The probe just
// before applying sees its command line changed and refuses it before anything is sent
// (argv-differs or not-named); were it sent, the host's script refuses it within its 2 s bound
// on that read (argv-read-timeout, which TestApplyBoundsArgvRead shows on the script itself).
// Before either, the apply ran into the session's timeout, and the leftover was neither
// stopped nor reported.
func TestFixSlowArgvDoesNotStallApply(t *testing.T) {
	l := newFixLab(t)
	plan, _, _, _, p := l.planOut(t, "gpu-fix", 1)
	slow := l.slowArgv(t)
	// The slow one first: what follows it on the host must still be acted on.
	p.Hosts[0].Targets = append([]fix.Target{slow}, p.Hosts[0].Targets...)
	var b bytes.Buffer
	if err := fix.Write(&b, p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plan, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, errOut, code := l.fix(t, nil, "--yes", "--wait", "10s", "--apply", plan)
	took := time.Since(start)
	t.Logf("gputriage fix --apply took %s:\n%s", took.Round(time.Millisecond), out)
	refused := regexp.MustCompile(fmt.Sprintf(`(?m)^gpu-fix: PID %d slowargv: refused: `, slow.PID))
	stopped := regexp.MustCompile(fmt.Sprintf(`(?m)^gpu-fix: PID %d sglang\.launch_server: stopped `, l.leftover.PID))
	if code != exitFixIncomplete || !refused.MatchString(out) || !stopped.MatchString(out) {
		t.Errorf("exit %d, want %d, the slow one refused and the leftover stopped\n%s\n%s", code, exitFixIncomplete, out, errOut)
	}
	if took > min(testenv.Scale(15*time.Second), 30*time.Second) { // --timeout is 30 s, the session's limit 40 s
		t.Errorf("fix --apply took %s", took)
	}
	if regexp.MustCompile(fmt.Sprintf(`(PID|kill -s TERM) %d\b`, l.healthy.PID)).MatchString(out) {
		t.Errorf("the healthy server %d is named:\n%s", l.healthy.PID, out)
	}
	if l.alive(t, l.leftover.PID) || !l.alive(t, l.healthy.PID) || !l.alive(t, slow.PID) {
		t.Errorf("leftover alive %v, healthy alive %v, slow one alive %v; want false, true, true",
			l.alive(t, l.leftover.PID), l.alive(t, l.healthy.PID), l.alive(t, slow.PID))
	}
	recs := l.records(t)
	slowRefusals := map[string]bool{"argv-read-timeout": true, "argv-differs": true, fix.DetailNotNamed: true}
	if len(recs) != 2 || recs[0].Result.Outcome != fix.Refused || !slowRefusals[recs[0].Result.Detail] ||
		recs[1].Result.Outcome != fix.Stopped {
		t.Errorf("audit records %+v", recs)
	}
}

// slowArgv starts fix/testdata/slowargv.py on the lab host, in a session of its own, and
// returns it as a kill target once its command line has become slow to read: a process of
// root's, with the identity it had when its command line was its own.
func (l *fixLab) slowArgv(t *testing.T) fix.Target {
	t.Helper()
	script, err := filepath.Abs("../../fix/testdata/slowargv.py")
	if err != nil {
		t.Fatal(err)
	}
	args := append(l.sshd.Enter(t), "python3", script)
	c := exec.Command(args[0], args[1:]...)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); c.Wait() }) // it ends at the end of its input
	r := bufio.NewReader(outPipe)
	line, err := r.ReadString('\n')
	tg := fix.Target{Kind: fix.KindKill, Program: "slowargv", Finding: "leftover-process", Reasons: []string{"orphaned"}}
	if _, err2 := fmt.Sscan(line, &tg.PID, &tg.StartTicks, &tg.UID, &tg.ArgvSHA256); err != nil || err2 != nil {
		t.Fatalf("slowargv.py said %q (%v %v)", line, err, err2)
	}
	if _, err := in.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); line != "slow\n" {
		t.Fatalf("slowargv.py did not make its command line slow: %q %v", line, err)
	}
	return tg
}
