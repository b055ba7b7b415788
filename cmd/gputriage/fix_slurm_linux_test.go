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
	"syscall"
	"testing"
	"time"

	"github.com/gputriage/gputriage/fix"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/slurmtest"
	"github.com/gputriage/gputriage/internal/sshdtest"
)

// slurmFixLab is a real Slurm cluster on this machine (node1..node4, two GPUs each, job ids
// from 73001 so that a job id is a word no other number in a report is) and a real OpenSSH
// host "node1" whose sessions run in this test's own PID and mount namespaces, where slurmd
// runs its job steps: the probe sees them, and scancel there is the cluster's own. On node1
// two batch jobs hold one GPU each: "previous", the previous deployment, whose server (a job
// step) still maps its model in /dev/shm after someone rm -rf'd it; and "current", a healthy
// server on the other GPU. The fake nvidia-smi lists both servers by their PIDs and follows
// them: a holder that exits leaves the list, its memory comes back a second later.
type slurmFixLab struct {
	*fixLab
	c                             *slurmtest.Cluster
	leftoverJob, healthyJob       string
	leftoverGPU, healthyGPU       int
	leftoverShm, healthyShm       string
	leftoverTicks                 int64 // the leftover server's start time, while it runs
	smi                           scenario.SMI
	leftoverMiB, healthyMiB       int64
	leftoverServer, healthyServer scenario.Server
}

func newSlurmFixLab(t *testing.T, proctrack string) *slurmFixLab {
	sshdtest.SSHDPath(t)
	c := slurmtest.Start(t, slurmtest.Config{GPUs: 2, Conf: []string{"FirstJobId=73001", "ProctrackType=" + proctrack}})
	t.Setenv("SLURM_CONF", c.Conf) // srun, scontrol and squeue of this test
	l := &slurmFixLab{fixLab: &fixLab{dir: t.TempDir()}, c: c, leftoverMiB: 55286, healthyMiB: 30000}
	l.state = filepath.Join(l.dir, "state")
	// The machine's /dev/shm, which other tests may use: names of this process only.
	l.leftoverShm = fmt.Sprintf("/dev/shm/Qwen3.6-27B-%d", os.Getpid())
	l.healthyShm = fmt.Sprintf("/dev/shm/Llama-3-8B-%d", os.Getpid())
	t.Cleanup(func() { os.RemoveAll(l.leftoverShm); os.RemoveAll(l.healthyShm) })

	l.leftoverJob, l.leftoverGPU = l.allocation(t, "previous")
	l.healthyJob, l.healthyGPU = l.allocation(t, "current")
	l.leftoverServer = scenario.Server{Module: "sglang.launch_server", Args: []string{"--model-path", l.leftoverShm, "--tp", "1"},
		ShmDir: l.leftoverShm, ShmFiles: 4, ShmBytes: 2 << 20, Delete: true}
	l.healthyServer = scenario.Server{Module: "sglang.launch_server", Args: []string{"--model-path", l.healthyShm, "--tp", "1"},
		ShmDir: l.healthyShm, ShmFiles: 2, ShmBytes: 1 << 20}
	l.leftover = l.step(t, l.leftoverJob, l.leftoverServer, 0)
	l.leftoverTicks = startTicksNum(l.leftover.PID)
	l.healthy = l.step(t, l.healthyJob, l.healthyServer, 0)

	key, pub := sshdtest.UserKey(t, l.dir, "ed25519")
	smi := cleanSMI(2)
	l.sshd = sshdtest.Start(t, sshdtest.Config{Name: "node1", Addr: "127.0.0.191", Port: 2391, JoinPID: os.Getpid(),
		AuthorizedKeys: []string{pub}, SMI: smi,
		// The harness's SetEnv sets PATH, and sshd takes the first SetEnv only: SLURM_CONF,
		// which the probe's scontrol and apply's scancel need, comes from ~/.ssh/environment.
		Extra: []string{"PermitUserEnvironment SLURM_CONF"}})
	ssh := filepath.Join(l.sshd.Dir, "home", ".ssh")
	if err := os.MkdirAll(ssh, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ssh, "environment"), []byte("SLURM_CONF="+c.Conf+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.smi = *smi
	l.writeSMI(t)
	fakeLogger(t, l.sshd)
	l.config = labClientConfig(t, l.dir, "node1", l.sshd, key)
	return l
}

// allocation submits a batch job named name on node1 with one GPU, which only holds the
// allocation (its servers are steps started into it), and returns its id and the GPU Slurm
// gave it (the IDX of scontrol -d show job).
func (l *slurmFixLab) allocation(t *testing.T, name string) (string, int) {
	t.Helper()
	id := l.c.Sbatch(t, "-w", "node1", "--gres=gpu:1", "-J", name, "-o", "/dev/null", "--wrap", "exec sleep 600")
	l.c.WaitFor(t, "job "+id+" running", 30*time.Second, func() bool {
		st, err := l.c.JobState(id)
		return err == nil && st == "RUNNING"
	})
	out := l.c.Scontrol(t, "-d", "show", "job", id)
	m := regexp.MustCompile(`GRES=gpu:1\(IDX:(\d)\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("job %s: no GPU index in:\n%s", id, out)
	}
	gpu, _ := strconv.Atoi(m[1])
	return id, gpu
}

// step starts s as a step of job (srun --jobid), its command line the real one; with
// wantPID, the step's shell asks the kernel for that PID for the server it forks (best
// effort: the next PID the machine hands out).
func (l *slurmFixLab) step(t *testing.T, job string, s scenario.Server, wantPID int) *scenario.Proc {
	t.Helper()
	s.Enter = []string{"srun", "--jobid", job, "--overlap", "-o", "/dev/null", "-e", "/dev/null"}
	if wantPID > 0 {
		s.Enter = append(s.Enter, "sh", "-c", `echo "$0" >/proc/sys/kernel/ns_last_pid || exit; "$@" & wait`, strconv.Itoa(wantPID-1))
	}
	p, err := scenario.Start(s)
	if err != nil {
		t.Fatalf("job %s: %v\n%s", job, err, l.c.Logs())
	}
	t.Cleanup(p.Stop) // its files; the job's end ends it
	return p
}

// writeSMI makes nvidia-smi list the leftover's and the healthy server's PIDs on their jobs'
// GPUs, following them.
func (l *slurmFixLab) writeSMI(t *testing.T) {
	t.Helper()
	smi := l.smi
	smi.GPUs = slices.Clone(l.smi.GPUs)
	smi.GPUs[l.leftoverGPU].UsedMiB, smi.GPUs[l.healthyGPU].UsedMiB = l.leftoverMiB+9, l.healthyMiB+9
	smi.Apps = []scenario.App{{PID: l.leftover.PID, GPUUUID: smi.GPUs[l.leftoverGPU].UUID, UsedMiB: l.leftoverMiB, Name: "python3"},
		{PID: l.healthy.PID, GPUUUID: smi.GPUs[l.healthyGPU].UUID, UsedMiB: l.healthyMiB, Name: "python3"}}
	smi.Dynamic, smi.ReleaseDelay = true, time.Second
	// A PID the fake saw gone stays gone for it: a PID reused by a restart must not be.
	os.Remove(filepath.Join(l.sshd.SMIDir(), "gone.tsv"))
	if err := scenario.WriteFakeSMI(l.sshd.SMIDir(), smi); err != nil {
		t.Fatal(err)
	}
}

// startTicksNum is startTicks (fix_container_linux_test.go) as a number, 0 when unknown.
func startTicksNum(pid int) int64 {
	n, _ := strconv.ParseInt(startTicks(pid), 10, 64)
	return n
}

// waitJobState waits until Slurm says job is in state, failing the test after within.
func (l *slurmFixLab) waitJobState(t *testing.T, job string, within time.Duration, state string) {
	t.Helper()
	l.c.WaitFor(t, "job "+job+" "+state, within, func() bool {
		st, _ := l.c.JobState(job)
		return st == state
	})
}

// namesHealthy says where out names the healthy server's PID or its job.
func (l *slurmFixLab) namesHealthy(out string) []string {
	return regexp.MustCompile(fmt.Sprintf(`.*\b(%d|%s)\b.*`, l.healthy.PID, l.healthyJob)).FindAllString(out, -1)
}

// TestFixCancelsSlurmJob: the previous deployment's server, a step of a Slurm job that still
// runs, maps its deleted model: fix plans `scancel -- JOB` for it (the job owns it: killing the
// PID would leave the job to start it again), and never names the healthy job next to it. A
// plan written before the server restarted under the same job is refused and the new server
// keeps running. Then `fix node1 --yes` runs the host's real scancel: Slurm says the job was
// cancelled, its server is gone and its memory back, the healthy job's server runs on with the
// same PID and start time, the audit log and the host's syslog record it, and `watch --until
// free` holds.
//
// The same under either process tracking: proctrack/cgroup, where the process's cgroup names
// its job, and proctrack/linuxproc, where only its slurmstepd ancestor does.
func TestFixCancelsSlurmJob(t *testing.T) {
	for _, pt := range []string{"proctrack/cgroup", "proctrack/linuxproc"} {
		t.Run(pt, func(t *testing.T) { testFixCancelsSlurmJob(t, newSlurmFixLab(t, pt)) })
	}
}

func testFixCancelsSlurmJob(t *testing.T, l *slurmFixLab) {
	healthyTicks := startTicksNum(l.healthy.PID)

	// 1. The plan: cancel the leftover's job, nothing of the healthy one.
	plan, out, errOut, raw, p := l.planOut(t, "node1", 1)
	tg := p.Hosts[0].Targets[0]
	if tg.Kind != fix.KindCancelJob || tg.Name != l.leftoverJob || tg.PID != l.leftover.PID || tg.Finding != "leftover-process" ||
		!slices.Contains(tg.Reasons, "shm-deleted") || tg.FreesMiB[l.leftoverGPU] != l.leftoverMiB || len(tg.FreesMiB) != 1 {
		t.Fatalf("target %+v, want cancel-job %s for PID %d freeing %d MiB on GPU %d\n%s", tg, l.leftoverJob, l.leftover.PID, l.leftoverMiB, l.leftoverGPU, out)
	}
	want := fmt.Sprintf("scancel -- %s   (holds PID %d)", l.leftoverJob, l.leftover.PID)
	if !strings.Contains(out, want) {
		t.Errorf("the plan lacks %q:\n%s", want, out)
	}
	if named := l.namesHealthy(out + errOut + string(raw)); len(named) > 0 {
		t.Errorf("the healthy server %d or its job %s is named:\n%s", l.healthy.PID, l.healthyJob, strings.Join(named, "\n"))
	}

	// 2. A plan naming a job the process is not in (here: the healthy one) is refused on the
	// host before any scancel runs.
	l.testOtherJobRefused(t, raw)

	// 3. The server crashes and its job starts it again (same job, same command line; the same
	// PID if the kernel hands it out again): the plan no longer applies.
	l.testStalePlan(t, plan)

	// 4. fix --yes: the real scancel.
	start := time.Now()
	out, errOut, code := l.fix(t, nil, "--yes", "node1")
	took := time.Since(start)
	t.Logf("gputriage fix --yes node1 (%s):\n%s", took.Round(time.Millisecond), out)
	if code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s\n%s", code, out, errOut, l.c.Logs())
	}
	for _, re := range []string{
		fmt.Sprintf(`(?m)^  scancel -- %s   \(holds PID %d\)$`, l.leftoverJob, l.leftover.PID),
		fmt.Sprintf(`(?m)^node1: PID %d sglang\.launch_server: stopped \S+ after the signal; nvidia-smi no longer lists it \(it held 55,286 MiB on GPU %d\)$`, l.leftover.PID, l.leftoverGPU),
		fmt.Sprintf(`(?m)^node1: GPU %d: 55,286 MiB released \S+ s after PID %d was gone`, l.leftoverGPU, l.leftover.PID),
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("the output lacks %s:\n%s", re, out)
		}
	}
	if named := l.namesHealthy(out + errOut); len(named) > 0 {
		t.Errorf("the healthy server %d or its job %s is named:\n%s", l.healthy.PID, l.healthyJob, strings.Join(named, "\n"))
	}
	// Slurm itself: the job was cancelled, the healthy one runs on, its server untouched.
	l.waitJobState(t, l.leftoverJob, 30*time.Second, "CANCELLED")
	if q := l.c.Run(t, "squeue", "-h", "-w", "node1", "-o", "%i %T"); strings.TrimSpace(q) != l.healthyJob+" RUNNING" {
		t.Errorf("squeue on node1: %q, want only %s RUNNING", q, l.healthyJob)
	}
	if l.alive(t, l.leftover.PID) {
		t.Errorf("the leftover %d still runs", l.leftover.PID)
	}
	if got := startTicksNum(l.healthy.PID); got != healthyTicks {
		t.Errorf("the healthy server %d: start time %d, want %d (still the same process)", l.healthy.PID, got, healthyTicks)
	}
	l.checkRecord(t)

	out, errOut, code = l.gputriage(t, nil, "watch", "node1", "--until", "free", "--timeout", "30s")
	if code != exitOK {
		t.Errorf("watch --until free: exit %d, want 0\n%s\n%s", code, out, errOut)
	}
}

// testOtherJobRefused applies plan (raw) with its target's job changed to the healthy job,
// which the leftover is not in: refused as not-in-job, both jobs and servers run on.
func (l *slurmFixLab) testOtherJobRefused(t *testing.T, raw []byte) {
	t.Helper()
	q, err := fix.Read(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	q.Hosts[0].Targets[0].Name = l.healthyJob
	var b bytes.Buffer
	if err := fix.Write(&b, q); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(l.dir, "other-job.json")
	if err := os.WriteFile(other, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	healthyTicks := startTicksNum(l.healthy.PID)
	out, errOut, code := l.fix(t, nil, "--yes", "--apply", other)
	// The probe fix takes just before applying names the leftover for its own job: refused
	// here, nothing sent (the host's own job check is fix/apply_linux_test.go's).
	want := fmt.Sprintf("node1: PID %d sglang.launch_server: refused: the probe just before applying names it for another action than the plan's; nothing was sent", l.leftover.PID)
	if code != exitFixIncomplete || !strings.Contains(out, want) {
		t.Errorf("--apply naming another job: exit %d, want %d and %q\n%s\n%s", code, exitFixIncomplete, want, out, errOut)
	}
	for _, job := range []string{l.leftoverJob, l.healthyJob} {
		if st, err := l.c.JobState(job); err != nil || st != "RUNNING" {
			t.Errorf("after a refused plan, job %s is %q (%v), want RUNNING", job, st, err)
		}
	}
	if !l.alive(t, l.leftover.PID) || startTicksNum(l.healthy.PID) != healthyTicks {
		t.Errorf("after a refused plan: leftover alive %v, healthy start time %d, want %d", l.alive(t, l.leftover.PID), startTicksNum(l.healthy.PID), healthyTicks)
	}
	recs := l.records(t)
	if len(recs) != 1 || recs[0].Target.Name != l.healthyJob || recs[0].Result.Outcome != fix.Refused || recs[0].Result.Detail != fix.DetailActionDiffers {
		t.Errorf("audit records %+v", recs)
	}
}

// testStalePlan restarts the leftover's server under the same job and applies plan, written
// for the server before: refused, and the new server and its job run on.
func (l *slurmFixLab) testStalePlan(t *testing.T, plan string) {
	t.Helper()
	old := l.leftover.PID
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	l.c.WaitFor(t, "the crashed server reaped", 10*time.Second, func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/%d", old))
		return err != nil
	})
	l.leftover = l.step(t, l.leftoverJob, l.leftoverServer, old)
	l.leftoverTicks = startTicksNum(l.leftover.PID)
	l.writeSMI(t)
	detail := fix.DetailNotNamed // the old PID: no process the probe describes
	if l.leftover.PID == old {
		detail = "start-time-differs"
	}
	t.Logf("the restarted server has PID %d (was %d): the plan is refused as %s", l.leftover.PID, old, detail)
	out, errOut, code := l.fix(t, nil, "--yes", "--apply", plan)
	if code != exitFixIncomplete || !strings.Contains(out, fmt.Sprintf("node1: PID %d sglang.launch_server: refused: %s", old, refusals(detail))) {
		t.Errorf("--apply of a stale plan: exit %d, want %d and refused (%s)\n%s\n%s", code, exitFixIncomplete, detail, out, errOut)
	}
	if st, err := l.c.JobState(l.leftoverJob); err != nil || st != "RUNNING" {
		t.Errorf("after a refused plan, job %s is %q (%v), want RUNNING", l.leftoverJob, st, err)
	}
	if !l.alive(t, l.leftover.PID) {
		t.Errorf("after a refused plan, the restarted server %d is gone", l.leftover.PID)
	}
	recs := l.records(t)
	if len(recs) != 2 || recs[1].Target.Kind != fix.KindCancelJob || recs[1].Result.Outcome != fix.Refused ||
		recs[1].Result.Detail != detail || recs[1].Result.Signal != nil {
		t.Errorf("audit records %+v", recs)
	}
	// The probe fix takes just before applying saw the restart: nothing reached the host.
	if got := l.syslog(t); strings.Contains(got, "outcome=refused") {
		t.Errorf("a refused plan reached the host: syslog %q", got)
	}
}

func refusals(detail string) string {
	if detail == fix.DetailNotNamed {
		return "the probe just before applying names no problem with it any more"
	}
	return refusalWords(detail)
}

// checkRecord checks the audit record of the applied scancel, the third after the
// two refusals, and the host's syslog line.
func (l *slurmFixLab) checkRecord(t *testing.T) {
	t.Helper()
	recs := l.records(t)
	if len(recs) != 3 {
		t.Fatalf("%d audit records, want 3 (two refusals, the cancel): %+v", len(recs), recs)
	}
	r := recs[2]
	tg := r.Target
	if r.Host != "node1" || r.Login != "root" || r.Sudo || r.Signal != "SIGTERM" || len(r.PlanID) != 16 || len(r.BootID) != 32 ||
		r.Who == "" || time.Since(r.Time) > time.Minute || r.Time.Location() != time.UTC {
		t.Errorf("audit record: %+v", r)
	}
	if tg.Kind != fix.KindCancelJob || tg.Name != l.leftoverJob || tg.PID != l.leftover.PID || tg.StartTicks != l.leftoverTicks ||
		len(tg.ArgvSHA256) != 64 || tg.UID != 0 || tg.Finding != "leftover-process" || tg.FreesMiB[l.leftoverGPU] != l.leftoverMiB {
		t.Errorf("audit target: %+v", tg)
	}
	if r.Result.PID != l.leftover.PID || r.Result.Outcome != fix.Stopped || r.Result.Signal == nil || r.Result.Exit == nil || r.Result.Release == nil {
		t.Errorf("audit result: %+v", r.Result)
	}
	want := fmt.Sprintf("-t gputriage -- fix plan=%s pid=%d kind=6 name=%s outcome=stopped detail=- user=root sudo_user=-\n", r.PlanID, tg.PID, l.leftoverJob)
	if got := l.syslog(t); !strings.HasSuffix(got, want) {
		t.Errorf("syslog %q, want it to end in %q", got, want)
	}
}
