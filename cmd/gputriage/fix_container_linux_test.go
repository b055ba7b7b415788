//go:build linux

package main

import (
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
	"github.com/gputriage/gputriage/internal/dockertest"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/sshdtest"
)

// ctrLab is a GPU host that runs its inference servers in Docker: a real dockerd (cgroupfs
// driver) runs sglang-old, the previous deployment, whose weights in its /dev/shm were
// deleted while it still maps them, on GPU 0; and sglang-new, healthy, on GPU 1. The lab
// sshd "gpu-ctr" runs in the test's own PID and mount namespaces, where the containers'
// processes are, and its sessions get DOCKER_HOST (through authorized_keys' environment=),
// so that the host's `docker stop` reaches that daemon. Its nvidia-smi lists both
// processes by the PIDs the machine sees and follows them.
type ctrLab struct {
	*fixLab
	d              *dockertest.Daemon
	oldID, newID   string
	oldPID, newPID int
}

// ctrOldShm is the old deployment's weights directory, inside its container.
const ctrOldShm = "/dev/shm/Qwen3.6-27B"

// ctrServer is the server's command line in the image, with its weights in dir.
func ctrServer(dir string, files, bytes int) []string {
	return []string{"python3", "-m", "sglang.launch_server", "--model-path", dir,
		"--files", strconv.Itoa(files), "--bytes", strconv.Itoa(bytes), "--tp", "1"}
}

func newCtrLab(t *testing.T) *ctrLab {
	l := newCtrEngine(t)
	l.oldID = l.d.Run(t, "sglang-old", "sglang:test", ctrServer(ctrOldShm, 4, 2<<20)...)
	l.newID = l.d.Run(t, "sglang-new", "sglang:test", ctrServer("/dev/shm/Llama-3-8B", 2, 1<<20)...)
	l.oldPID = l.d.WaitHolder(t, "sglang-old", ctrOldShm, 4, 30*time.Second)
	l.newPID = l.d.WaitHolder(t, "sglang-new", "/dev/shm/Llama-3-8B", 2, 30*time.Second)
	l.startHost(t)
	return l
}

// newCtrEngine starts the lab's dockerd with the server's image, sglang:test.
func newCtrEngine(t *testing.T) *ctrLab {
	sshdtest.SSHDPath(t)
	l := &ctrLab{fixLab: &fixLab{dir: t.TempDir()}, d: dockertest.Start(t)}
	l.state = filepath.Join(l.dir, "state")
	l.d.Holder(t, "sglang:test")
	return l
}

// startHost removes the old server's weights from its own directory (the new deployment's
// script did, as root: the old server still maps them) and starts the lab host, gpu-ctr. The
// directory stays: had it gone too, who could have emptied it would be unknown, and the
// deletion no evidence (docs/findings.md, "What counts as strong evidence").
func (l *ctrLab) startHost(t *testing.T) {
	deleteWeights(t, l.oldPID)
	key, pub := sshdtest.UserKey(t, l.dir, "ed25519")
	// sshd takes only its first SetEnv line, the harness's PATH: DOCKER_HOST comes with the key.
	l.sshd = sshdtest.Start(t, sshdtest.Config{Name: "gpu-ctr", Addr: "127.0.0.191", Port: 2391, JoinPID: os.Getpid(),
		AuthorizedKeys: []string{`environment="DOCKER_HOST=` + l.d.Host + `" ` + pub},
		Extra:          []string{"PermitUserEnvironment DOCKER_HOST"}, SMI: l.smi(l.oldPID)})
	fakeLogger(t, l.sshd)
	l.config = labClientConfig(t, l.dir, "gpu-ctr", l.sshd, key)
}

// deleteWeights deletes the files of ctrOldShm in the container of pid, as root, and leaves
// the directory.
func deleteWeights(t *testing.T, pid int) {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/root%s", pid, ctrOldShm)
	files, err := os.ReadDir(dir)
	if err != nil || len(files) == 0 {
		t.Fatalf("the old server's weights: %v %v", files, err)
	}
	for _, f := range files {
		if err := os.Remove(filepath.Join(dir, f.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// smi is the host's nvidia-smi with the old deployment's process oldPID on GPU 0.
func (l *ctrLab) smi(oldPID int) *scenario.SMI {
	smi := cleanSMI(2)
	smi.GPUs[0].UsedMiB, smi.GPUs[1].UsedMiB = 55295, 30009
	smi.Apps = []scenario.App{{PID: oldPID, GPUUUID: smi.GPUs[0].UUID, UsedMiB: 55286, Name: "python3"},
		{PID: l.newPID, GPUUUID: smi.GPUs[1].UUID, UsedMiB: 30000, Name: "python3"}}
	smi.Dynamic, smi.ReleaseDelay = true, time.Second
	return smi
}

// startTicks is field 22 of the process's stat, as the machine sees it ("" when gone).
func startTicks(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// The container case, end to end: fix plans `docker stop` of the leftover's container
// and nothing of the healthy one, the real engine stops it (its process ends on the SIGTERM
// docker sends), its memory is reported back per GPU, watch --until free holds, and the
// action is audited on both sides.
func TestFixStopsContainer(t *testing.T) {
	l := newCtrLab(t)
	_, newBefore := l.d.Inspect(t, "sglang-new")
	oldTicks, newTicks := startTicks(l.oldPID), startTicks(l.newPID)
	if _, _, code := l.gputriage(t, nil, "watch", "gpu-ctr", "--until", "free", "--timeout", "3s"); code == exitOK {
		t.Fatal("watch --until free held before the fix")
	}
	out, errOut, code := l.fix(t, nil, "--yes", "gpu-ctr")
	if code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	t.Logf("gputriage fix --yes gpu-ctr:\n%s", out)
	for _, want := range []string{
		fmt.Sprintf(`(?m)^  docker stop -- %s   \(holds PID %d\)$`, l.oldID, l.oldPID),
		fmt.Sprintf(`(?m)^gpu-ctr: PID %d sglang\.launch_server: stopped \S+ after the signal; nvidia-smi no longer lists it \(it held 55,286 MiB on GPU 0\)$`, l.oldPID),
		fmt.Sprintf(`(?m)^gpu-ctr: GPU 0: 55,286 MiB released \S+ s after PID %d was gone`, l.oldPID),
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("output lacks %s", want)
		}
	}
	healthy := regexp.MustCompile(fmt.Sprintf(`\b(%d|%s)|sglang-new|GPU 1`, l.newPID, l.newID[:12]))
	if m := healthy.FindString(out + errOut); m != "" {
		t.Errorf("the healthy container is named (%q):\n%s\n%s", m, out, errOut)
	}
	// The engine itself says the old container stopped, cleanly (exit 0: its process ended on
	// SIGTERM, not on docker's SIGKILL 10 s later); the new one runs on, the same process.
	if _, st := l.d.Inspect(t, "sglang-old"); st.Running || st.Status != "exited" || st.ExitCode != 0 {
		t.Errorf("sglang-old after fix: %+v, want exited 0", st)
	}
	if _, st := l.d.Inspect(t, "sglang-new"); !st.Running || st.Pid != l.newPID || !st.StartedAt.Equal(newBefore.StartedAt) || startTicks(l.newPID) != newTicks {
		t.Errorf("sglang-new after fix: %+v (ticks %s), want PID %d started at %v (ticks %s)", st, startTicks(l.newPID), l.newPID, newBefore.StartedAt, newTicks)
	}
	if l.alive(t, l.oldPID) || !l.alive(t, l.newPID) {
		t.Errorf("old alive %v, new alive %v", l.alive(t, l.oldPID), l.alive(t, l.newPID))
	}
	if wout, werr, code := l.gputriage(t, nil, "watch", "gpu-ctr", "--until", "free"); code != exitOK {
		t.Errorf("watch --until free after the fix: exit %d\n%s\n%s", code, wout, werr)
	}
	recs := l.records(t)
	if len(recs) != 1 {
		t.Fatalf("%d audit records, want 1: %+v", len(recs), recs)
	}
	r, tg := recs[0], recs[0].Target
	if r.Host != "gpu-ctr" || r.Login != "root" || r.Sudo || r.Signal != "SIGTERM" || len(r.PlanID) != 16 || len(r.BootID) != 32 {
		t.Errorf("audit record: %+v", r)
	}
	if tg.Kind != fix.KindStopContainer || tg.Name != l.oldID || tg.Runtime != "docker" || tg.PID != l.oldPID ||
		strconv.FormatInt(tg.StartTicks, 10) != oldTicks || tg.UID != 0 || tg.Finding != "leftover-process" ||
		!slices.Contains(tg.Reasons, "shm-deleted") || tg.FreesMiB[0] != 55286 || len(tg.FreesMiB) != 1 {
		t.Errorf("audit target: %+v", tg)
	}
	if res := r.Result; res.PID != l.oldPID || res.Outcome != fix.Stopped || res.Signal == nil || res.Exit == nil || res.Release == nil {
		t.Errorf("audit result: %+v", res)
	}
	wantLog := fmt.Sprintf("-t gputriage -- fix plan=%s pid=%d kind=3 name=%s outcome=stopped detail=- user=root sudo_user=-\n", r.PlanID, l.oldPID, l.oldID)
	if got := l.syslog(t); got != wantLog {
		t.Errorf("syslog %q, want %q", got, wantLog)
	}
}

// A reviewed plan names the container and the process it was judged on: once the container
// has restarted (docker restart: the same id, another process), --apply refuses it and the
// new incarnation runs on; a plan made again applies.
func TestFixRefusesRestartedContainer(t *testing.T) {
	l := newCtrLab(t)
	plan := filepath.Join(l.dir, "plan.json")
	if out, errOut, code := l.fix(t, nil, "--plan-out", plan, "gpu-ctr"); code != exitOK {
		t.Fatalf("--plan-out: exit %d\n%s\n%s", code, out, errOut)
	}
	raw, err := os.ReadFile(plan)
	if err != nil {
		t.Fatal(err)
	}
	p, err := fix.Read(strings.NewReader(string(raw)))
	if err != nil || len(p.Hosts) != 1 || len(p.Hosts[0].Targets) != 1 {
		t.Fatalf("plan %+v (%v)", p, err)
	}
	if tg := p.Hosts[0].Targets[0]; tg.Kind != fix.KindStopContainer || tg.Name != l.oldID || tg.Runtime != "docker" || tg.PID != l.oldPID {
		t.Errorf("plan target %+v, want docker stop of %s holding PID %d", tg, l.oldID, l.oldPID)
	}
	if m := regexp.MustCompile(fmt.Sprintf(`\b(%d|%s)`, l.newPID, l.newID[:12])).FindString(string(raw)); m != "" {
		t.Errorf("the healthy container is in the plan (%q):\n%s", m, raw)
	}
	l.d.Docker(t, "restart", "--", "sglang-old")
	again := l.d.WaitHolder(t, "sglang-old", ctrOldShm, 4, 30*time.Second)
	againTicks := startTicks(again)
	if err := scenario.WriteFakeSMI(l.sshd.SMIDir(), *l.smi(again)); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := l.fix(t, nil, "--yes", "--apply", plan)
	t.Logf("gputriage fix --yes --apply (sglang-old restarted, PID %d now %d):\n%s", l.oldPID, again, out)
	refused := regexp.MustCompile(fmt.Sprintf(`(?m)^gpu-ctr: PID %d sglang\.launch_server: refused: (PID reused or process restarted|the probe just before applying names no problem with it any more)`, l.oldPID))
	if code != exitFixIncomplete || !refused.MatchString(out) {
		t.Errorf("exit %d, want %d and the refusal\n%s\n%s", code, exitFixIncomplete, out, errOut)
	}
	if _, st := l.d.Inspect(t, "sglang-old"); !st.Running || st.Pid != again || startTicks(again) != againTicks {
		t.Errorf("sglang-old after the stale plan: %+v, want running as PID %d", st, again)
	}
	if _, st := l.d.Inspect(t, "sglang-new"); !st.Running || st.Pid != l.newPID {
		t.Errorf("sglang-new after the stale plan: %+v", st)
	}
	recs := l.records(t)
	if len(recs) != 1 {
		t.Fatalf("%d audit records, want 1: %+v", len(recs), recs)
	}
	r := recs[0]
	if r.Target.Kind != fix.KindStopContainer || r.Target.Name != l.oldID || r.Target.PID != l.oldPID || r.Result.Outcome != fix.Refused ||
		(r.Result.Detail != fix.DetailNotNamed && r.Result.Detail != "start-time-differs") || r.Result.Signal != nil {
		t.Errorf("audit record %+v", r)
	}
	// The probe fix takes just before applying saw the restart: nothing reached the host.
	if got := l.syslog(t); got != "" {
		t.Errorf("the stale plan reached the host: syslog %q", got)
	}
	// Its weights deleted again, a plan made now names the new process, and --apply stops
	// the container.
	deleteWeights(t, again)
	if out, errOut, code := l.fix(t, nil, "--plan-out", plan, "gpu-ctr"); code != exitOK {
		t.Fatalf("--plan-out: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = l.fix(t, nil, "--yes", "--apply", plan)
	if stopped := regexp.MustCompile(fmt.Sprintf(`(?m)^gpu-ctr: PID %d sglang\.launch_server: stopped `, again)); code != exitOK || !stopped.MatchString(out) {
		t.Errorf("--apply of a fresh plan: exit %d, want 0 and PID %d stopped\n%s\n%s", code, again, out, errOut)
	}
	if _, st := l.d.Inspect(t, "sglang-old"); st.Running || st.Status != "exited" {
		t.Errorf("sglang-old after the fresh plan: %+v", st)
	}
	if _, st := l.d.Inspect(t, "sglang-new"); !st.Running || st.Pid != l.newPID {
		t.Errorf("sglang-new after the fresh plan: %+v", st)
	}
	if recs := l.records(t); len(recs) != 2 || recs[1].Target.PID != again || recs[1].Target.Name != l.oldID || recs[1].Result.Outcome != fix.Stopped {
		t.Errorf("audit records %+v", recs)
	}
}

// A container that runs healthy GPU work besides the leftover is not stopped: that would end
// the healthy server too. Here a dev container serves from its main process while an older
// server, started in it with docker exec, outlived its weights; the leftover's PID is the
// handle, and the container runs on with its healthy server.
func TestFixSparesHealthyServerInSameContainer(t *testing.T) {
	l := newCtrEngine(t)
	l.newID = l.d.Run(t, "sglang-dev", "sglang:test", ctrServer("/dev/shm/Llama-3-8B", 2, 1<<20)...)
	l.newPID = l.d.WaitHolder(t, "sglang-dev", "/dev/shm/Llama-3-8B", 2, 30*time.Second)
	l.d.Docker(t, append([]string{"exec", "--detach", "sglang-dev"}, ctrServer(ctrOldShm, 4, 2<<20)...)...)
	l.oldID = l.newID
	l.oldPID = l.d.WaitHolder(t, "sglang-dev", ctrOldShm, 4, 30*time.Second)
	l.startHost(t)
	_, before := l.d.Inspect(t, "sglang-dev")
	newTicks := startTicks(l.newPID)
	out, errOut, code := l.fix(t, nil, "--yes", "gpu-ctr")
	t.Logf("gputriage fix --yes gpu-ctr:\n%s", out)
	stopped := regexp.MustCompile(fmt.Sprintf(`(?m)^gpu-ctr: PID %d sglang\.launch_server: stopped \S+ after the signal; nvidia-smi no longer lists it \(it held 55,286 MiB on GPU 0\)$`, l.oldPID))
	if code != exitOK || !strings.Contains(out, fmt.Sprintf("  kill -s TERM %d\n", l.oldPID)) || !stopped.MatchString(out) {
		t.Errorf("exit %d, want 0, the leftover's kill and its stop\n%s\n%s", code, out, errOut)
	}
	if m := regexp.MustCompile(fmt.Sprintf(`\b%d\b|docker stop|GPU 1`, l.newPID)).FindString(out + errOut); m != "" {
		t.Errorf("the healthy server is named or stopped (%q):\n%s\n%s", m, out, errOut)
	}
	if _, st := l.d.Inspect(t, "sglang-dev"); !st.Running || st.Pid != l.newPID || !st.StartedAt.Equal(before.StartedAt) || startTicks(l.newPID) != newTicks {
		t.Errorf("sglang-dev after fix: %+v, want running as PID %d since %v", st, l.newPID, before.StartedAt)
	}
	if l.alive(t, l.oldPID) {
		t.Error("the leftover runs on")
	}
	if recs := l.records(t); len(recs) != 1 || recs[0].Target.Kind != fix.KindKill || recs[0].Target.PID != l.oldPID || recs[0].Result.Outcome != fix.Stopped {
		t.Errorf("audit records %+v", recs)
	}
}
