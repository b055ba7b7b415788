//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// signal sends sig (STOP, CONT) to pid on the lab host, as the process's owner would. The
// nsenter that started it, outside the host's namespace, stops itself when its child stops
// (util-linux passes job control on) and is not resumed by the child's SIGCONT: it gets the
// same signal, or a stopped nsenter would outlive the test, holding the tests' lock.
func (l *fixLab) signal(t *testing.T, sig string, pid int) {
	t.Helper()
	args := append(l.sshd.Enter(t), "kill", "-"+sig, fmt.Sprint(pid))
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("kill -%s %d: %v %s", sig, pid, err, out)
	}
	starter := l.starter(t, pid)
	if starter == 0 {
		return
	}
	if sig == "STOP" {
		t.Cleanup(func() { syscall.Kill(starter, syscall.SIGCONT) })
		return
	}
	syscall.Kill(starter, syscall.SIGCONT)
}

// starter is the parent, outside the lab host's namespace, of the host's process pid (the
// nsenter that started it); 0 when there is none.
func (l *fixLab) starter(t *testing.T, pid int) int {
	t.Helper()
	ns, err := os.Readlink("/proc/" + l.sshd.Enter(t)[2] + "/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if n, _ := os.Readlink(d + "/ns/pid"); n != ns {
			continue
		}
		b, _ := os.ReadFile(d + "/status")
		var nspid []string
		ppid := 0
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
				nspid = strings.Fields(v)
			} else if v, ok := strings.CutPrefix(line, "PPid:"); ok {
				ppid, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		if len(nspid) > 1 && nspid[len(nspid)-1] == strconv.Itoa(pid) {
			return ppid
		}
	}
	return 0
}

// A plan is a snapshot of what was a problem when it was written. A server its owner had paused
// (state T) is a leftover then; resumed, it serves again with the same PID, start time, uid
// and command line, so the host's identity checks alone would let --apply stop it. fix
// probes the host again right before it acts and applies only what that probe's findings
// still name: the resumed server is refused, recorded as such, and runs on.
func TestFixApplyRefusesTargetNoLongerNamed(t *testing.T) {
	l := newFixLab(t)
	l.signal(t, "STOP", l.healthy.PID)
	plan, _, _, _, _ := l.planOut(t, "gpu-fix", 2) // the paused server and the leftover
	l.signal(t, "CONT", l.healthy.PID)             // its owner resumes it: healthy again

	out, errOut, code := l.fix(t, nil, "--yes", "--apply", plan)
	t.Logf("gputriage fix --yes --apply:\n%s\n%s", out, errOut)
	if !l.alive(t, l.healthy.PID) {
		t.Fatalf("the resumed server %d was stopped by a plan written while it was paused", l.healthy.PID)
	}
	if l.alive(t, l.leftover.PID) {
		t.Errorf("the leftover, still named, was not stopped")
	}
	want := fmt.Sprintf("gpu-fix: PID %d sglang.launch_server: refused: the probe just before applying names no problem with it any more", l.healthy.PID)
	if code != exitFixIncomplete || !strings.Contains(out, want) {
		t.Errorf("exit %d, want %d and %q", code, exitFixIncomplete, want)
	}
	var got []string
	for _, r := range l.records(t) {
		got = append(got, fmt.Sprintf("%d %s %s %v", r.Target.PID, r.Result.Outcome, r.Result.Detail, r.Result.Signal != nil))
	}
	wantRecs := []string{fmt.Sprintf("%d refused not-named false", l.healthy.PID), fmt.Sprintf("%d stopped  true", l.leftover.PID)}
	if strings.Join(got, "\n") != strings.Join(wantRecs, "\n") {
		t.Errorf("audit records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantRecs, "\n"))
	}
	if strings.Contains(l.syslog(t), fmt.Sprintf("pid=%d ", l.healthy.PID)) {
		t.Errorf("the host was sent the refused target: %q", l.syslog(t))
	}
}
