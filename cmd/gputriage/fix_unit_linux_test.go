//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/fix"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/sshdtest"
	"github.com/gputriage/gputriage/internal/systemdtest"
	"github.com/gputriage/gputriage/internal/testenv"
)

// unitLab is the seed incident under a real systemd: host "gpu-unit", whose sshd runs in the
// namespaces of a systemd that is PID 1 there. sglang-old.service, the previous deployment,
// holds GPU 0: its weights were rm -rf'd while mapped, and it was paused (SIGSTOP), which is
// what makes the live main process of a running unit a leftover (deleted files alone do not:
// anyone who may write the directory can delete them). sglang-new.service, healthy, holds
// GPU 1 under the same manager. nvidia-smi follows the processes (PIDs as the namespace sees
// them); logger and journalctl are the real ones, with systemd-journald.
type unitLab struct {
	*fixLab
	sd       *systemdtest.Systemd
	old, new systemdtest.Server
}

const (
	unitOld = "sglang-old.service"
	unitNew = "sglang-new.service"
)

func newUnitLab(t *testing.T) *unitLab { return newUnitLabWith(t, false) }

// newUnitLabWith varies the lab: with ignoreTerm, sglang-old's server ignores SIGTERM, as a
// server stuck in its shutdown does (systemd would wait TimeoutStopSec, 90 s, before SIGKILL).
func newUnitLabWith(t *testing.T, ignoreTerm bool) *unitLab {
	sshdtest.SSHDPath(t)
	dir := t.TempDir()
	l := &unitLab{fixLab: &fixLab{dir: dir, state: filepath.Join(dir, "state")}}
	var err error
	l.old, err = systemdtest.NewServer(filepath.Join(dir, "old"), scenario.Server{Module: "sglang.launch_server",
		Args: []string{"--model-path", "/dev/shm/Qwen3.6-27B", "--tp", "1"}, ShmDir: "/dev/shm/Qwen3.6-27B", ShmFiles: 4, ShmBytes: 2 << 20, Delete: true, IgnoreTerm: ignoreTerm})
	if err != nil {
		t.Fatal(err)
	}
	l.new, err = systemdtest.NewServer(filepath.Join(dir, "new"), scenario.Server{Module: "sglang.launch_server",
		Args: []string{"--model-path", "/dev/shm/Llama-3-8B", "--tp", "1"}, ShmDir: "/dev/shm/Llama-3-8B", ShmFiles: 2, ShmBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	l.sd = systemdtest.Start(t, systemdtest.Config{Name: "gpu-unit", Journal: true,
		Units: map[string]string{unitOld: l.old.Unit, unitNew: l.new.Unit}})
	oldPID, newPID := l.ready(t, unitOld, l.old), l.ready(t, unitNew, l.new)
	l.pause(t, oldPID)
	smi := cleanSMI(2)
	smi.GPUs[0].UsedMiB, smi.GPUs[1].UsedMiB = 55295, 30009
	smi.Apps = []scenario.App{{PID: oldPID, GPUUUID: smi.GPUs[0].UUID, UsedMiB: 55286, Name: "python3"},
		{PID: newPID, GPUUUID: smi.GPUs[1].UUID, UsedMiB: 30000, Name: "python3"}}
	l.connect(t, smi)
	return l
}

// connect starts the lab's sshd in the namespaces of its systemd, with an nvidia-smi that
// serves smi and follows the processes, and writes the client's ssh_config for gpu-unit.
func (l *unitLab) connect(t *testing.T, smi *scenario.SMI) {
	t.Helper()
	dir := l.dir
	key, pub := sshdtest.UserKey(t, dir, "ed25519")
	l.sshd = sshdtest.Start(t, sshdtest.Config{Name: "gpu-unit", Addr: "127.0.0.211", Port: 2411,
		AuthorizedKeys: []string{pub}, SMI: cleanSMI(2), JoinPID: l.sd.PID})
	smi.Dynamic, smi.ReleaseDelay = true, time.Second
	if err := scenario.WriteFakeSMI(l.sshd.SMIDir(), *smi); err != nil {
		t.Fatal(err)
	}
	l.config = labClientConfig(t, dir, "gpu-unit", l.sshd, key)
}

// ready waits until the unit's server has its files in place and returns its PID, which the
// unit's manager reports as its main process.
func (l *unitLab) ready(t *testing.T, unit string, s systemdtest.Server) int {
	t.Helper()
	var pid int
	l.sd.WaitFor(t, unit+" ready", 20*time.Second, func() bool {
		b, err := os.ReadFile(s.Ready)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	if main := l.sd.MainPID(t, unit); main != pid || l.sd.Property(t, unit, "ActiveState") != "active" {
		t.Fatalf("%s: main PID %d, server %d, state %s", unit, main, pid, l.sd.Property(t, unit, "ActiveState"))
	}
	return pid
}

// pause stops pid with SIGSTOP and waits until it shows state T.
func (l *unitLab) pause(t *testing.T, pid int) {
	t.Helper()
	if out, err := l.sd.Run("kill", "-STOP", strconv.Itoa(pid)); err != nil {
		t.Fatalf("kill -STOP %d: %v: %s", pid, err, out)
	}
	l.sd.WaitFor(t, "state T", 5*time.Second, func() bool { st, _ := l.stat(t, pid); return st == "T" })
}

// stat is pid's state and start time in ticks, read in the namespace ("" when it is gone).
func (l *unitLab) stat(t *testing.T, pid int) (state string, ticks int64) {
	t.Helper()
	out, err := l.sd.Run("cat", fmt.Sprintf("/proc/%d/stat", pid))
	i := strings.LastIndexByte(out, ')')
	if err != nil || i < 0 {
		return "", 0
	}
	f := strings.Fields(out[i+1:])
	if len(f) < 20 {
		t.Fatalf("stat of %d: %q", pid, out)
	}
	ticks, _ = strconv.ParseInt(f[19], 10, 64)
	return f[0], ticks
}

// journal is what the namespace's journal holds under the tag gputriage.
func (l *unitLab) journal(t *testing.T) string {
	t.Helper()
	out, err := l.sd.Run("journalctl", "-q", "--no-pager", "-o", "cat", "-t", "gputriage")
	if err != nil {
		t.Fatalf("journalctl: %v: %s", err, out)
	}
	return out
}

// waitJournal waits until the journal holds line (journald may take a moment to write it).
func (l *unitLab) waitJournal(t *testing.T, line string) {
	t.Helper()
	deadline := time.Now().Add(testenv.HangGuard)
	for !slices.Contains(strings.Split(l.journal(t), "\n"), line) {
		if time.Now().After(deadline) {
			t.Fatalf("the journal lacks %q:\n%s", line, l.journal(t))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// healthyNamed are the lines of out that name the healthy unit, its model or its PID.
func healthyNamed(out string, newPID int) []string {
	return regexp.MustCompile(fmt.Sprintf(`.*(sglang-new|Llama-3-8B|(PID|pid[= ]|"pid": |kill( -[A-Z]+)?) %d\b).*`, newPID)).FindAllString(out, -1)
}

// The seed incident under a real systemd: fix plans systemctl stop of the leftover's unit and
// nothing of the healthy unit beside it, systemd stops it, the memory comes back, and the
// action is recorded on both sides: the audit log here, the host's own journal there.
func TestFixStopsSystemdUnit(t *testing.T) {
	l := newUnitLab(t)
	oldPID, newPID := l.sd.MainPID(t, unitOld), l.sd.MainPID(t, unitNew)
	_, newTicks := l.stat(t, newPID)
	out, errOut, code := l.fix(t, nil, "--yes", "gpu-unit")
	t.Logf("gputriage fix --yes gpu-unit:\n%s", out)
	if code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s\nsystemd:\n%s", code, out, errOut, l.sd.Log())
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(fmt.Sprintf(`(?m)^  systemctl stop --no-block -- sglang-old\.service   \(holds PID %d\)$`, oldPID)),
		regexp.MustCompile(fmt.Sprintf(`(?m)^gpu-unit: PID %d sglang\.launch_server: stopped \S+ after the signal; nvidia-smi no longer lists it \(it held 55,286 MiB on GPU 0\)$`, oldPID)),
		regexp.MustCompile(fmt.Sprintf(`(?m)^gpu-unit: GPU 0: 55,286 MiB released \S+ s after PID %d was gone`, oldPID)),
	} {
		if !want.MatchString(out) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	if named := healthyNamed(out+errOut, newPID); len(named) > 0 {
		t.Errorf("the healthy unit is named: %q", named)
	}
	// The manager itself says the unit is stopped; the leftover is gone, the healthy server
	// runs on as the same process.
	if st, res := l.sd.Property(t, unitOld, "ActiveState"), l.sd.Property(t, unitOld, "Result"); st != "inactive" || res != "success" {
		t.Errorf("%s: %s (result %s), want inactive (success)", unitOld, st, res)
	}
	if st, _ := l.stat(t, oldPID); st != "" {
		t.Errorf("the leftover %d is still there (state %s)", oldPID, st)
	}
	if st, ticks := l.stat(t, newPID); st == "" || ticks != newTicks || l.sd.MainPID(t, unitNew) != newPID || l.sd.Property(t, unitNew, "ActiveState") != "active" {
		t.Errorf("the healthy unit changed: PID %d state %q ticks %d (was %d), main PID %d", newPID, st, ticks, newTicks, l.sd.MainPID(t, unitNew))
	}
	recs := l.records(t)
	if len(recs) != 1 {
		t.Fatalf("%d audit records, want 1: %+v", len(recs), recs)
	}
	r, tg := recs[0], recs[0].Target
	if r.Host != "gpu-unit" || r.Login != "root" || r.Sudo || r.Signal != "SIGTERM" || len(r.PlanID) != 16 || len(r.BootID) != 32 {
		t.Errorf("audit record: %+v", r)
	}
	if tg.Kind != fix.KindStopUnit || tg.Name != unitOld || tg.PID != oldPID || !tg.Stopped || tg.UID != 0 || tg.Finding != "leftover-process" ||
		!slices.Contains(tg.Reasons, "stopped") || !slices.Contains(tg.Reasons, "shm-deleted") || tg.FreesMiB[0] != 55286 || len(tg.FreesMiB) != 1 {
		t.Errorf("audit target: %+v", tg)
	}
	if res := r.Result; res.PID != oldPID || res.Outcome != fix.Stopped || res.Signal == nil || res.Exit == nil || res.Release == nil {
		t.Errorf("audit result: %+v", res)
	}
	l.waitJournal(t, fmt.Sprintf("fix plan=%s pid=%d kind=2 name=%s outcome=stopped detail=- user=root sudo_user=-", r.PlanID, oldPID, unitOld))
	if named := healthyNamed(l.journal(t), newPID); len(named) > 0 {
		t.Errorf("the host's journal names the healthy unit: %q", named)
	}
	wout, werr, wcode := l.gputriage(t, nil, "watch", "--until", "free", "--interval", "500ms", "gpu-unit")
	if wcode != exitOK {
		t.Errorf("watch --until free: exit %d, want 0\n%s\n%s", wcode, wout, werr)
	}
}

// A plan made before the unit restarted does not stop its new incarnation: the PID (when the
// kernel hands the same one out again, the start time) differs, fix --apply refuses before it
// sends anything, and the unit runs on.
func TestFixUnitStalePlanRefused(t *testing.T) {
	l := newUnitLab(t)
	oldPID := l.sd.MainPID(t, unitOld)
	plan := filepath.Join(l.dir, "plan.json")
	if out, errOut, code := l.fix(t, nil, "--plan-out", plan, "gpu-unit"); code != exitOK {
		t.Fatalf("--plan-out: exit %d\n%s\n%s", code, out, errOut)
	}
	raw, err := os.ReadFile(plan)
	if err != nil {
		t.Fatal(err)
	}
	p, err := fix.Read(bytes.NewReader(raw))
	if err != nil || len(p.Hosts) != 1 || len(p.Hosts[0].Targets) != 1 {
		t.Fatalf("plan %+v (%v)", p, err)
	}
	if tg := p.Hosts[0].Targets[0]; tg.Kind != fix.KindStopUnit || tg.Name != unitOld || tg.PID != oldPID {
		t.Fatalf("plan target %+v", tg)
	}
	if named := healthyNamed(string(raw), l.sd.MainPID(t, unitNew)); len(named) > 0 {
		t.Errorf("the healthy unit is in the plan: %q", named)
	}
	newPID := l.restart(t, oldPID)
	_, newTicks := l.stat(t, newPID)
	detail := fix.DetailNotNamed // the old PID: no process the probe describes
	if newPID == oldPID {
		detail = "start-time-differs"
	}
	t.Logf("%s restarted: PID %d, was %d: want refusal %s", unitOld, newPID, oldPID, detail)
	out, errOut, code := l.fix(t, nil, "--yes", "--apply", plan)
	if code != exitFixIncomplete || !strings.Contains(out, fmt.Sprintf("gpu-unit: PID %d sglang.launch_server: refused: ", oldPID)) {
		t.Errorf("exit %d, want %d and the refusal\n%s\n%s", code, exitFixIncomplete, out, errOut)
	}
	if st, ticks := l.stat(t, newPID); st == "" || ticks != newTicks || l.sd.MainPID(t, unitOld) != newPID || l.sd.Property(t, unitOld, "ActiveState") != "active" {
		t.Errorf("the new incarnation was stopped: PID %d state %q ticks %d (was %d), unit %s", newPID, st, ticks, newTicks, l.sd.Property(t, unitOld, "ActiveState"))
	}
	recs := l.records(t)
	if len(recs) != 1 || recs[0].Target.Kind != fix.KindStopUnit || recs[0].Result.Outcome != fix.Refused || recs[0].Result.Detail != detail || recs[0].Result.Signal != nil {
		t.Errorf("audit records %+v", recs)
	}
	// The probe fix takes just before applying saw the restart: nothing reached the host.
	if j := l.journal(t); strings.Contains(j, "plan="+p.ID) {
		t.Errorf("the stale plan reached the host: journal %q", j)
	}
}

// restart restarts sglang-old.service through systemd, asking the kernel to hand the new
// main process the old one's PID (ns_last_pid, best effort: systemd forks it right after the
// shell that sets it becomes systemctl), and returns the new main PID once it is ready.
func (l *unitLab) restart(t *testing.T, pid int) int {
	t.Helper()
	if err := os.Remove(l.old.Ready); err != nil {
		t.Fatal(err)
	}
	if out, err := l.sd.Run("systemctl", "stop", "--", unitOld); err != nil {
		t.Fatalf("systemctl stop: %v: %s", err, out)
	}
	if out, err := l.sd.Run("sh", "-c", `echo "$1" >/proc/sys/kernel/ns_last_pid && exec systemctl start -- "$2"`, "sh",
		strconv.Itoa(pid-1), unitOld); err != nil {
		t.Fatalf("systemctl start: %v: %s", err, out)
	}
	return l.ready(t, unitOld, l.old)
}

// A unit whose server ignores SIGTERM: fix does not wait on systemd's own stop timeout (90 s,
// longer than --wait and the session's timeout); it watches the exit itself, and --kill-after
// sends SIGKILL to the process the plan names, after which systemd reports the unit stopped.
func TestFixUnitKillAfter(t *testing.T) {
	l := newUnitLabWith(t, true)
	oldPID := l.sd.MainPID(t, unitOld)
	start := time.Now()
	out, errOut, code := l.fix(t, nil, "--yes", "--wait", "10s", "--kill-after", "1s", "gpu-unit")
	t.Logf("gputriage fix --yes --wait 10s --kill-after 1s gpu-unit (%s):\n%s", time.Since(start).Round(time.Millisecond), out)
	if code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	stopped := regexp.MustCompile(fmt.Sprintf(`(?m)^gpu-unit: PID %d sglang\.launch_server: stopped \(after SIGKILL\) \S+ after the signal;`, oldPID))
	if !stopped.MatchString(out) {
		t.Errorf("output lacks the stop after SIGKILL:\n%s", out)
	}
	// Killed by a signal systemd did not send, the unit ends failed (result signal): stopped,
	// and marked for whoever looks at it next.
	l.sd.WaitFor(t, unitOld+" failed", 5*time.Second, func() bool {
		return l.sd.Property(t, unitOld, "ActiveState") == "failed" && l.sd.Property(t, unitOld, "Result") == "signal"
	})
	if st, _ := l.stat(t, oldPID); st != "" {
		t.Errorf("the leftover %d is still there (state %s)", oldPID, st)
	}
	if recs := l.records(t); len(recs) != 1 || recs[0].Result.Outcome != fix.Stopped || recs[0].Result.Detail != "sigkill" || recs[0].KillAfter != "1s" {
		t.Errorf("audit records %+v", recs)
	}
}
