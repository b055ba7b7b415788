//go:build linux

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/slurmtest"
	"github.com/gputriage/gputriage/internal/testenv"
)

// nodeBox is "the node" a node check judges: a PID and mount namespace of its own, with its
// own /proc and /dev/shm, so that the check sees the processes a test puts there and none of
// the test machine's others. Slurm, scontrol and the network are the machine's.
type nodeBox struct {
	cmd  *exec.Cmd
	init int // the namespace's PID 1, as this machine sees it
}

func newNodeBox(t *testing.T) *nodeBox {
	t.Helper()
	return startBox(t, "mount -t tmpfs -o size=8g,mode=1777 tmpfs /dev/shm")
}

// startBox runs setup, a shell command that mounts what the box needs, as PID 1 of a PID and
// mount namespace of its own, and returns once it is done and PID 1 is a sleep: setup's shell
// says so on its stdout, unshare's one child, and then becomes the sleep.
func startBox(t *testing.T, setup string) *nodeBox {
	t.Helper()
	testenv.SkipShort(t, "node box")
	cmd := exec.Command("unshare", "-p", "-m", "-f", "--kill-child", "--mount-proc", "sh", "-c",
		setup+" && echo ready && exec sleep 100000")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	// A test binary killed (go test's -timeout) takes the box with it: unshare --kill-child
	// then ends the namespace.
	cmd.SysProcAttr = testenv.DieWithTest(false)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b := &nodeBox{cmd: cmd}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("the node box did not start: %q", line)
	}
	if b.init = testenv.ChildOf(cmd.Process.Pid); b.init == 0 {
		t.Fatal("no namespace init under unshare")
	}
	testenv.WaitFor(t, "the node box's sleep", func() bool {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", b.init))
		return strings.TrimSpace(string(comm)) == "sleep"
	})
	return b
}

// enter is the command prefix that runs a command in the box.
func (b *nodeBox) enter() []string {
	return []string{"nsenter", "-t", strconv.Itoa(b.init), "-p", "-m", "--"}
}

// kill kills a process of the box by its PID there.
func (b *nodeBox) kill(t *testing.T, pid int) {
	t.Helper()
	argv := append(b.enter(), "kill", "-9", strconv.Itoa(pid))
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("kill %d in the box: %v: %s", pid, err, out)
	}
}

// slurmSMI is two clean H100s whose minor numbers are their indexes, as Slurm's gres.conf
// (File=/dev/nvidia[0-1]) names them; with holder, that PID holds 55,286 MiB on GPU 0.
func slurmSMI(holder int) scenario.SMI {
	smi := *cleanSMI(2)
	if holder > 0 {
		smi.GPUs[0].UsedMiB = 55295
		smi.Apps = []scenario.App{{PID: holder, GPUUUID: smi.GPUs[0].UUID, UsedMiB: 55286, Name: "python3"}}
	}
	return smi
}

// checkScript is a program Slurm runs (it passes no arguments and no PATH) that runs
// `gputriage node-check ARGS` in the box on one node only, with the fake nvidia-smi first on
// PATH, and logs "rc=N" after each run.
func checkScript(t *testing.T, dir, name, node string, box *nodeBox, bin, smiDir string, args ...string) (script, log string) {
	t.Helper()
	script, log = filepath.Join(dir, name+".sh"), filepath.Join(dir, name+".log")
	body := fmt.Sprintf(`#!/bin/sh
[ "$SLURMD_NODENAME" = %s ] || exit 0
export PATH=%s:/usr/sbin:/usr/bin:/sbin:/bin
export SLURM_CONF=%s
{ echo "== job=${SLURM_JOB_ID:-} gpus=${SLURM_JOB_GPUS:-} context=${SLURM_SCRIPT_CONTEXT:-}"; %s %s node-check %s; rc=$?; echo "rc=$rc"; } >>%s 2>&1
exit $rc
`, node, smiDir, "SLURMCONF", strings.Join(box.enter(), " "), bin, strings.Join(args, " "), log)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, log
}

// runsIn counts the finished runs a checkScript logged.
func runsIn(log string) int {
	data, _ := os.ReadFile(log)
	return strings.Count("\n"+string(data), "\nrc=")
}

// TestNodeCheckInSlurm runs node-check as a real Slurm's HealthCheckProgram (node2, with
// --drain --resume), Epilog (node3, --drain) and Prolog (node4, --drain), on a node whose
// GPU 0 a leftover holds: the health check drains node2 with a gputriage reason naming the
// leftover and resumes it once the leftover is gone, and never resumes a node an admin
// drained; the Epilog of a job that had GPU 1 passes and that of a job that had GPU 0
// drains; the Prolog refuses GPU 0 and the job does not run.
func TestNodeCheckInSlurm(t *testing.T) {
	box := newNodeBox(t)
	bin := buildGputriage(t)
	dir := t.TempDir()
	smiDir := filepath.Join(dir, "smi")
	if err := os.Mkdir(smiDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := scenario.WriteFakeSMI(smiDir, slurmSMI(0)); err != nil {
		t.Fatal(err)
	}
	hc, hcLog := checkScript(t, dir, "healthcheck", "node2", box, bin, smiDir, "--drain", "--resume")
	epilog, epLog := checkScript(t, dir, "epilog", "node3", box, bin, smiDir, "--drain")
	prolog, prLog := checkScript(t, dir, "prolog", "node4", box, bin, smiDir, "--drain")
	c := slurmtest.Start(t, slurmtest.Config{GPUs: 2, Conf: []string{
		"HealthCheckProgram=" + hc, "HealthCheckInterval=2", "Epilog=" + epilog, "Prolog=" + prolog}})
	// The scripts learn where slurm.conf is now (Slurm gives a health check no SLURM_CONF);
	// until then their scontrol fails, and a failing health check changes nothing.
	for _, s := range []string{hc, epilog, prolog} {
		data, _ := os.ReadFile(s)
		if err := os.WriteFile(s+".new", []byte(strings.ReplaceAll(string(data), "SLURMCONF", c.Conf)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(s+".new", s); err != nil {
			t.Fatal(err)
		}
	}
	logs := func() string {
		var b strings.Builder
		for _, l := range []string{hcLog, epLog, prLog} {
			data, _ := os.ReadFile(l)
			fmt.Fprintf(&b, "== %s\n%s", filepath.Base(l), data)
		}
		return b.String()
	}
	state := func(node string) (string, string) {
		st, reason, err := c.NodeState(node)
		if err != nil {
			t.Fatal(err)
		}
		return st, reason
	}
	waitState := func(node, what string, within time.Duration, ok func(st, reason string) bool) {
		t.Helper()
		deadline := time.Now().Add(testenv.Scale(within))
		for {
			st, reason := state(node)
			if ok(st, reason) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is %s (%s), not %s after %v\n%s", node, st, reason, what, within, logs())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// A clean node: the Epilog of a job on node3 passes, node3 stays up.
	c.Srun(t, "-w", "node3", "--gres=gpu:1", "true")
	waitState("node3", "idle after a clean epilog", 20*time.Second, func(st, _ string) bool { return st == "idle" && runsIn(epLog) == 1 })

	// A job holds GPU 0 of node3; then a leftover appears on GPU 0.
	sleeper := c.Sbatch(t, "-w", "node3", "--gres=gpu:1", "-o", "/dev/null", "--wrap", "sleep 300")
	c.WaitFor(t, "the sleeper job running", 20*time.Second, func() bool { st, _ := c.JobState(sleeper); return st == "RUNNING" })
	leftover, err := scenario.Start(scenario.Server{Module: "sglang.launch_server",
		Args:   []string{"--model-path", "/dev/shm/Qwen3.6-27B", "--tp", "1"},
		ShmDir: "/dev/shm/Qwen3.6-27B", ShmFiles: 2, ShmBytes: 1 << 20, Delete: true, Orphan: true, Enter: box.enter()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(leftover.Stop)
	if err := scenario.WriteFakeSMI(smiDir, slurmSMI(leftover.PID)); err != nil {
		t.Fatal(err)
	}

	t.Run("health check drains", func(t *testing.T) {
		waitState("node2", "drained by gputriage", 30*time.Second, func(st, r string) bool { return strings.HasPrefix(st, "drain") })
		_, reason := state("node2")
		want := fmt.Sprintf("gputriage: leftover-process (sglang.launch_server) PID %d 55286 MiB GPU 0", leftover.PID)
		if !strings.HasPrefix(reason, want) || len(reason) > 80 {
			t.Errorf("node2's drain reason is %q, want %q (at most 80 bytes)", reason, want)
		}
		if r := c.Sinfo(t, "-R", "-h", "-o", "%N|%E"); !strings.Contains(r, "node2|"+reason) {
			t.Errorf("sinfo -R does not show node2's reason:\n%s", r)
		}
	})

	t.Run("epilog scoped to the job's GPUs", func(t *testing.T) {
		// A job on GPU 1 ends: GPU 0's leftover is not its business.
		before := runsIn(epLog)
		c.Srun(t, "-w", "node3", "--gres=gpu:1", "true")
		waitState("node3", "up after the GPU 1 job's epilog", 20*time.Second, func(st, _ string) bool { return runsIn(epLog) > before && !strings.HasPrefix(st, "drain") })
		// The GPU 0 job ends, the leftover still on GPU 0: the epilog drains node3.
		c.Run(t, "scancel", sleeper)
		waitState("node3", "drained by its epilog", 30*time.Second, func(st, _ string) bool { return strings.HasPrefix(st, "drain") })
		if _, reason := state("node3"); !strings.HasPrefix(reason, "gputriage: ") {
			t.Errorf("node3's drain reason is %q, want gputriage's", reason)
		}
	})

	t.Run("prolog refuses a GPU that is not free", func(t *testing.T) {
		marker := filepath.Join(dir, "ran")
		job := c.Sbatch(t, "-w", "node4", "--gres=gpu:1", "-o", "/dev/null", "--wrap", "touch "+marker)
		waitState("node4", "drained by its prolog", 30*time.Second, func(st, _ string) bool { return strings.HasPrefix(st, "drain") })
		if _, reason := state("node4"); !strings.HasPrefix(reason, "gputriage: ") {
			t.Errorf("node4's drain reason is %q, want gputriage's", reason)
		}
		c.WaitFor(t, "the refused job requeued", 20*time.Second, func() bool {
			out, _ := c.Output("squeue", "-h", "-j", job, "-o", "%T %r")
			return strings.Contains(out, "PENDING") && strings.Contains(out, "held")
		})
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("the job ran on GPU 0 although its prolog refused it")
		}
	})

	// The leftover goes: the health check resumes node2.
	box.kill(t, leftover.PID)
	if err := scenario.WriteFakeSMI(smiDir, slurmSMI(0)); err != nil {
		t.Fatal(err)
	}
	t.Run("health check resumes", func(t *testing.T) {
		waitState("node2", "resumed", 30*time.Second, func(st, _ string) bool { return st == "idle" })
	})

	t.Run("an admin's drain is never resumed", func(t *testing.T) {
		c.Scontrol(t, "update", "nodename=node2", "state=drain", "reason=admin: DIMM B2 replacement")
		runs := runsIn(hcLog)
		c.WaitFor(t, "two more health checks", 30*time.Second, func() bool { return runsIn(hcLog) >= runs+2 })
		if st, reason := state("node2"); !strings.HasPrefix(st, "drain") || reason != "admin: DIMM B2 replacement" {
			t.Errorf("node2 is %s (%s) after clean health checks; an admin's drain must stay", st, reason)
		}
		if data, _ := os.ReadFile(hcLog); !strings.Contains(string(data), "stays drained") {
			t.Errorf("the health check did not say why it left node2 drained:\n%s", data)
		}
	})
	// Slurm drains a node whose Epilog or Prolog fails ("Epilog error"): the reason
	// gputriage gave first is the one that stays.
	for _, node := range []string{"node3", "node4"} {
		if st, reason := state(node); !strings.HasPrefix(st, "drain") || !strings.HasPrefix(reason, "gputriage: leftover-process") {
			t.Errorf("%s is %s (%s) at the end; want drained with gputriage's reason", node, st, reason)
		}
	}
	if t.Failed() {
		t.Log(logs())
	}
}
