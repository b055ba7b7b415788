package scenario_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/slurmtest"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/probe"
	"github.com/gputriage/gputriage/report"
)

// slurmHolder submits a batch job on node with gpus GRES whose script (sh) runs body, which
// writes the PID that stands for the GPU holder to a file; it returns the job id and that PID.
func slurmHolder(t *testing.T, c *slurmtest.Cluster, node string, gpus int, body string, args ...string) (string, int) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "pid")
	args = append([]string{"-w", node, fmt.Sprintf("--gres=gpu:%d", gpus), "-o", "/dev/null", "-J", "holder"}, args...)
	id := c.Sbatch(t, append(args, "--wrap", strings.ReplaceAll(body, "PIDFILE", file))...)
	var pid int
	c.WaitFor(t, "job "+id+"'s GPU holder", 30*time.Second, func() bool {
		b, _ := os.ReadFile(file)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	})
	return id, pid
}

// TestSlurmJobsNameTheirHolders runs real Slurm jobs on node2 and node3 of a real cluster on
// this machine (processes in freezer:/slurm_NODE/uid_0/job_N/step_batch, as on a cgroup v1
// node) and asks Slurm about them as the probe does: a job's GPU holder on the GPUs it was
// allocated is attributed to the job and healthy; the process a cancelled job left behind (it
// moved itself out of its step's cgroup, so Slurm's proctrack did not kill it) is a leftover
// whose words name the job, and whose fix is its PID; a process on a GPU its job was not
// allocated (this cluster has GPU GRES) is gpu-outside-allocation, a finding about that
// running job, never a leftover, and nothing of it is killed or cancelled.
func TestSlurmJobsNameTheirHolders(t *testing.T) {
	s := newStage(t)
	c := slurmtest.Start(t, slurmtest.Config{GPUs: 2})
	t.Setenv("SLURM_CONF", c.Conf) // the probe's scontrol asks this cluster
	s.gpuSet([]int64{81559, 81559, 81559, 81559})

	healthyJob, healthy := slurmHolder(t, c, "node2", 2, "echo $$ > PIDFILE; exec sleep 300")
	strayJob, stray := slurmHolder(t, c, "node1", 1, `sh -c 'cg=$(sed -n "s/^[0-9]*:freezer://p" /proc/self/cgroup)
echo $$ > "/sys/fs/cgroup/freezer${cg%/*}/tasks" && echo $$ > PIDFILE && exec sleep 300' &
exec sleep 300`)
	t.Cleanup(func() { _ = killPID(stray) })
	wrongJob, wrong := slurmHolder(t, c, "node3", 1, "echo $$ > PIDFILE; exec sleep 300")
	// On two nodes, only the cgroup (slurm_node3) says which node's GPUs apply: node3's GPU 1
	// (GPU 0 is the job above's), node4's GPU 0.
	wideJob, wide := slurmHolder(t, c, "node[3-4]", 1, "echo $$ > PIDFILE; exec sleep 300")
	// A job's name and comment are its user's text: keys forged there make a running job
	// look ended to a reader that trusts the first copy.
	forgedJob, forged := slurmHolder(t, c, "node4", 1, "echo $$ > PIDFILE; exec sleep 300",
		"-J", "x JobState=CANCELLED EndTime=2020-01-01T00:00:00 NodeList=node9", "--comment", "c\nNodes=node4 CPU_IDs=0 Mem=0 GRES=gpu:4(IDX:0-3)")
	c.Run(t, "scancel", strayJob)
	c.WaitFor(t, "job "+strayJob+" to end", 30*time.Second, func() bool {
		st, _ := c.JobState(strayJob)
		return st == "CANCELLED"
	})
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", stray)); err != nil || !strings.Contains(string(b), ":freezer:/slurm_node1/uid_0/job_"+strayJob+"\n") {
		t.Fatalf("the stray %d of job %s is not left in the job's cgroup: %v\n%s", stray, strayJob, err, b)
	}

	s.hold(healthy, 0, 30_000) // node2's job has GPUs 0 and 1
	s.hold(stray, 1, 50_000)
	s.hold(wrong, 3, 20_000) // node3's job has GPU 0 only
	s.hold(wide, 0, 10_000)
	s.hold(forged, 0, 5_000) // node4's job has GPU 0
	r := s.run()

	for _, gp := range r.res.Processes {
		if want := map[int]string{healthy: healthyJob, stray: strayJob, wrong: wrongJob, wide: wideJob}[gp.PID]; want != "" && gp.SlurmJob != want {
			t.Errorf("PID %d is attributed to Slurm job %q, want %q", gp.PID, gp.SlurmJob, want)
		}
	}
	innocent := scenario.Innocents{PIDs: []int{healthy, forged},
		Commands: []*regexp.Regexp{regexp.MustCompile(`scancel`), regexp.MustCompile(fmt.Sprintf(`kill .*\b(%d|%d|%d|%d)\b`, healthy, forged, wrong, wide))}}
	if blamed := innocent.Blamed(r.blamingUnits...); len(blamed) > 0 {
		t.Errorf("a running job's process on its own GPUs is blamed:\n%s\n%s", strings.Join(blamed, "\n"), r.findingsForDebug)
	}
	if !strings.Contains(r.text, "job "+forgedJob+": a key its record is read by came twice") {
		t.Errorf("the forged record of job %s is not noted:\n%s", forgedJob, r.text)
	}
	for _, want := range []struct {
		pid  int
		code string
		text string
	}{
		{stray, diagnose.CodeLeftoverProcess, fmt.Sprintf("Slurm job %s of root ended ", strayJob)},
		{stray, diagnose.CodeLeftoverProcess, fmt.Sprintf("s ago (CANCELLED); its PID %d still holds 50,000 MiB on GPU 1", stray)},
		{wrong, diagnose.CodeGPUOutsideAllocation, fmt.Sprintf("Slurm job %s of root (RUNNING) was not allocated GPU 3 on node node3, yet its PID %d holds memory there", wrongJob, wrong)},
		{wide, diagnose.CodeGPUOutsideAllocation, fmt.Sprintf("Slurm job %s of root (RUNNING) was not allocated GPU 0 on node node3, yet its PID %d holds memory there", wideJob, wide)},
	} {
		i := slices.IndexFunc(r.jsonFindings, func(f jsonFinding) bool { return f.Code == want.code && slices.Contains(f.PIDs, want.pid) })
		if i < 0 {
			t.Errorf("no %s finding for PID %d:\n%s", want.code, want.pid, r.findingsForDebug)
			continue
		}
		f := r.jsonFindings[i]
		if !strings.Contains(f.Explanation, want.text) {
			t.Errorf("PID %d: the explanation lacks %q:\n%s", want.pid, want.text, f.Explanation)
		}
		switch {
		case want.code == diagnose.CodeLeftoverProcess && (len(f.Fix) == 0 || f.Fix[0] != fmt.Sprint("kill ", want.pid)):
			t.Errorf("PID %d: fix %q, want kill %d first", want.pid, f.Fix, want.pid)
		case want.code == diagnose.CodeGPUOutsideAllocation && (f.Severity != "warning" || !strings.Contains(f.Explanation, "ConstrainDevices=no")):
			t.Errorf("PID %d: want a warning saying devices are not constrained (ConstrainDevices=no): %s: %s", want.pid, f.Severity, f.Explanation)
		}
	}
	for _, pid := range []int{wrong, wide} {
		if slices.ContainsFunc(r.jsonFindings, func(f jsonFinding) bool {
			return f.Code == diagnose.CodeLeftoverProcess && slices.Contains(f.PIDs, pid)
		}) {
			t.Errorf("PID %d of a running job on a GPU it was not allocated is called a leftover:\n%s", pid, r.findingsForDebug)
		}
	}
}

// TestSlurmWithoutGRES: on a real cluster that does not manage GPUs as GRES (no GresTypes, no
// Gres on the nodes: common on small clusters), Slurm allocates no GPUs, every job's record
// says "GRES=" and any job may use any GPU. Running jobs' processes on GPUs are healthy work:
// no leftover, no gpu-outside-allocation, no word of allocation in any report or metric,
// and the busy finding says GPUs are not GRES here.
func TestSlurmWithoutGRES(t *testing.T) {
	s := newStage(t)
	c := slurmtest.Start(t, slurmtest.Config{})
	t.Setenv("SLURM_CONF", c.Conf)
	s.gpuSet([]int64{81559, 81559, 81559, 81559})
	// slurmHolder asks for --gres=gpu:N; a cluster without GRES refuses that: plain sbatch.
	holder := func(node string) (string, int) {
		file := filepath.Join(t.TempDir(), "pid")
		id := c.Sbatch(t, "-w", node, "-o", "/dev/null", "-J", "train", "--wrap", "echo $$ > "+file+"; exec sleep 300")
		var pid int
		c.WaitFor(t, "job "+id+"'s GPU holder", 30*time.Second, func() bool {
			b, _ := os.ReadFile(file)
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			return pid > 0
		})
		return id, pid
	}
	job2, on2 := holder("node2")
	job3, on3 := holder("node3")
	s.hold(on2, 0, 30_000)
	s.hold(on2, 1, 30_000)
	s.hold(on3, 3, 20_000)
	r := s.run()

	for _, gp := range r.res.Processes {
		if want := map[int]string{on2: job2, on3: job3}[gp.PID]; want != "" && gp.SlurmJob != want {
			t.Errorf("PID %d is attributed to Slurm job %q, want %q", gp.PID, gp.SlurmJob, want)
		}
	}
	for _, n := range r.snap.SlurmNodes {
		if n.GPUGres == nil || *n.GPUGres {
			t.Errorf("node %s: GPU GRES %v, want false (Gres %q)", n.Name, n.GPUGres, n.Gres)
		}
	}
	// No scancel of the jobs, no kill of their processes. The probe sees this whole machine,
	// and another test's leftover may rightly get a kill line of its own.
	innocent := scenario.Innocents{PIDs: []int{on2, on3}, Commands: []*regexp.Regexp{
		regexp.MustCompile(fmt.Sprintf(`scancel.*\b(%s|%s)\b|kill .*\b(%d|%d)\b`, job2, job3, on2, on3))}}
	if blamed := innocent.Blamed(r.blamingUnits...); len(blamed) > 0 {
		t.Errorf("a running job's process on a cluster without GPU GRES is blamed:\n%s\n%s", strings.Join(blamed, "\n"), r.findingsForDebug)
	}
	for _, f := range r.jsonFindings {
		if f.Code == diagnose.CodeLeftoverProcess || f.Code == diagnose.CodeGPUOutsideAllocation {
			t.Errorf("%s on a cluster without GPU GRES:\n%s", f.Code, r.findingsForDebug)
		}
	}
	var prom strings.Builder
	if err := report.Prometheus(&prom, []report.Host{{Name: "staged", Snapshot: r.snap, Result: r.res}}, report.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{r.text, r.verbose, r.md, r.json} {
		if strings.Contains(out, "not allocated") || strings.Contains(out, "gpu-outside-allocation") || strings.Contains(out, "leftover-process") {
			t.Errorf("a report speaks of allocation or leftovers:\n%s", out)
		}
	}
	for _, l := range strings.Split(prom.String(), "\n") {
		if strings.HasPrefix(l, "gputriage_gpu_memory_leftover_bytes{") && !strings.HasSuffix(l, " 0") ||
			strings.HasPrefix(l, "gputriage_finding{") && (strings.Contains(l, `code="leftover-process"`) || strings.Contains(l, `code="gpu-outside-allocation"`)) {
			t.Errorf("a leftover or work outside its allocation exported: %s", l)
		}
	}
	if !strings.Contains(r.verbose, "Slurm: GPUs are not configured as GRES on node node2") {
		t.Errorf("the busy job's evidence does not say GPUs are not GRES here:\n%s", r.verbose)
	}
}

func killPID(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// TestSlurmStepdAncestorNamesTheJob: where process tracking leaves no cgroup trace
// (proctrack/linuxproc), a job's GPU holder is tied to its job by its real slurmstepd
// ancestor: attributed and healthy on its own GPU, named on one its job was not allocated
// (gpu-outside-allocation: the probe learns the node's GRES from the -N of this machine's
// slurmd, the cgroups naming no node).
func TestSlurmStepdAncestorNamesTheJob(t *testing.T) {
	s := newStage(t)
	c := slurmtest.Start(t, slurmtest.Config{GPUs: 2, Conf: []string{"ProctrackType=proctrack/linuxproc"}})
	t.Setenv("SLURM_CONF", c.Conf)
	s.gpuSet([]int64{81559, 81559})

	// The holders are grandchildren of slurmstepd: the batch shell waits for them.
	const body = "sh -c 'echo $$ > PIDFILE; exec sleep 300' & wait"
	okJob, ok := slurmHolder(t, c, "node2", 1, body)
	wrongJob, wrong := slurmHolder(t, c, "node3", 1, body)
	for _, pid := range []int{ok, wrong} {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err != nil || strings.Contains(string(b), "slurm") {
			t.Fatalf("PID %d: want a process with no Slurm cgroup: %v\n%s", pid, err, b)
		}
	}
	s.hold(ok, 0, 30_000)    // node2's job has GPU 0
	s.hold(wrong, 1, 20_000) // node3's job has GPU 0, not 1
	r := s.run()

	for _, gp := range r.res.Processes {
		if want := map[int]string{ok: okJob, wrong: wrongJob}[gp.PID]; want != "" && gp.SlurmJob != want {
			t.Errorf("PID %d is attributed to Slurm job %q, want %q", gp.PID, gp.SlurmJob, want)
		}
	}
	innocent := scenario.Innocents{PIDs: []int{ok}, Commands: []*regexp.Regexp{regexp.MustCompile(`scancel`)}}
	if blamed := innocent.Blamed(r.blamingUnits...); len(blamed) > 0 {
		t.Errorf("a running job's process on its own GPU is blamed:\n%s\n%s", strings.Join(blamed, "\n"), r.findingsForDebug)
	}
	want := fmt.Sprintf("Slurm job %s of root (RUNNING) was not allocated GPU 1 on node node3, yet its PID %d holds memory there", wrongJob, wrong)
	i := slices.IndexFunc(r.jsonFindings, func(f jsonFinding) bool {
		return f.Code == diagnose.CodeGPUOutsideAllocation && slices.Contains(f.PIDs, wrong) && strings.Contains(f.Explanation, want)
	})
	if i < 0 {
		t.Errorf("no gpu-outside-allocation finding saying %q:\n%s", want, r.findingsForDebug)
	}
}

// Below a user's manager the user names the cgroups: sixteen GPU holders there in cgroups named
// like Slurm jobs must not crowd the real job out of the probe's sixteen questions to Slurm
// (nor be asked about at all).
func TestSlurmUserCgroupsAskNothing(t *testing.T) {
	s := newStage(t)
	c := slurmtest.Start(t, slurmtest.Config{GPUs: 1})
	t.Setenv("SLURM_CONF", c.Conf)
	s.gpuSet([]int64{81559})
	var users []*exec.Cmd
	for i := range 16 {
		cg := s.userCgroup(fmt.Sprintf("app.slice/slurmstepd.scope/job_%d/step_0", 4200+i))
		p := exec.Command("sh", "-c", `echo $$ >"$0/cgroup.procs" && exec sleep 300`, cg)
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		users = append(users, p)
		s.hold(p.Process.Pid, 0, 100)
	}
	// Before any of their cgroups is removed (user slices are shared between stages' calls).
	t.Cleanup(func() {
		for _, p := range users {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	})
	// The real job's holder, started last, comes after the users' in the probe's PID order.
	realJob, real := slurmHolder(t, c, "node1", 1, "echo $$ > PIDFILE; exec sleep 300")
	s.hold(real, 0, 30_000)
	dir := t.TempDir()
	if err := scenario.WriteFakeSMI(dir, scenario.SMI{GPUs: s.gpus, Apps: s.apps}); err != nil {
		t.Fatal(err)
	}
	raw, err := scenario.RunProbe(probe.Script, dir, "", "5ca9ed5ca9ed5ca9ed5ca9ed5ca9ed00")
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := parse.Parse(raw)
	var asked []string
	for _, j := range snap.SlurmJobs {
		asked = append(asked, j.ID)
	}
	if !slices.Equal(asked, []string{realJob}) {
		t.Errorf("the probe asked Slurm about jobs %v, want only %s", asked, realJob)
	}
}

// The probe carries the host's real KillWait and UnkillableStepTimeout (both set away from
// Slurm's defaults, 30 s and 60 s, in this cluster's slurm.conf) with the jobs it asks about:
// diagnose judges a COMPLETING job's processes by them.
func TestSlurmProbeCarriesTimeouts(t *testing.T) {
	s := newStage(t)
	c := slurmtest.Start(t, slurmtest.Config{GPUs: 1, Conf: []string{"KillWait=7", "UnkillableStepTimeout=75"}})
	t.Setenv("SLURM_CONF", c.Conf)
	s.gpuSet([]int64{81559})
	_, pid := slurmHolder(t, c, "node1", 1, "echo $$ > PIDFILE; exec sleep 300")
	s.hold(pid, 0, 30_000)
	// GPUTRIAGE_RECORD_SLURM_CONFIG=FILE records scontrol show config (parse/testdata/slurm/config.txt).
	if os.Getenv("GPUTRIAGE_RECORD_SLURM_CONFIG") != "" {
		out, _ := c.Output("scontrol", "show", "config")
		_ = os.WriteFile(os.Getenv("GPUTRIAGE_RECORD_SLURM_CONFIG"), []byte(out), 0o644)
	}
	dir := t.TempDir()
	if err := scenario.WriteFakeSMI(dir, scenario.SMI{GPUs: s.gpus, Apps: s.apps}); err != nil {
		t.Fatal(err)
	}
	raw, err := scenario.RunProbe(probe.Script, dir, "", "5ca9ed5ca9ed5ca9ed5ca9ed5ca9ed01")
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := parse.Parse(raw)
	to := snap.SlurmTimeouts
	if to.KillWait == nil || *to.KillWait != 7*time.Second || to.UnkillableStep == nil || *to.UnkillableStep != 75*time.Second {
		t.Errorf("the probe carried KillWait %v, UnkillableStepTimeout %v; want 7s and 1m15s", to.KillWait, to.UnkillableStep)
	}
}
