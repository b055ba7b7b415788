package slurmtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestJobProcessesLandInTheirCgroups checks what the Slurm tests rely on: jobs run on the node
// they ask for, a batch script's and a step's processes show freezer:/slurm_NODE/uid_U/job_N/
// step_S in /proc/PID/cgroup, GPUs given as GRES reach the job, and Stop leaves nothing behind:
// no job process, no daemon, no job cgroup.
func TestJobProcessesLandInTheirCgroups(t *testing.T) {
	c := Start(t, Config{GPUs: 2})
	if got := c.NodeNames(); strings.Join(got, ",") != "node1,node2,node3,node4" {
		t.Fatalf("NodeNames = %v", got)
	}
	out := c.Srun(t, "-w", "node2", "--gres=gpu:1", "sh", "-c", `echo "$SLURMD_NODENAME gpus=$SLURM_STEP_GPUS cuda=$CUDA_VISIBLE_DEVICES"`)
	if strings.TrimSpace(out) != "node2 gpus=0 cuda=0" {
		t.Errorf("srun on node2 with one GPU printed %q, want %q", out, "node2 gpus=0 cuda=0")
	}

	pidFile := filepath.Join(t.TempDir(), "pids")
	script := fmt.Sprintf("#!/bin/sh\necho gpus $SLURM_JOB_GPUS >> %[1]s\necho batch $$ >> %[1]s\nsrun sh -c 'echo step $$ >> %[1]s; exec sleep 300'\n", pidFile)
	id := c.Sbatch(t, "-w", "node3", "--gres=gpu:2", "-o", "/dev/null", "--wrap", script)
	pids, gpus := map[string]int{}, ""
	c.WaitFor(t, "the job's processes", 30*time.Second, func() bool {
		data, _ := os.ReadFile(pidFile)
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			kind, v, _ := strings.Cut(line, " ")
			if kind == "gpus" {
				gpus = v
			} else {
				pids[kind], _ = strconv.Atoi(v)
			}
		}
		return pids["batch"] > 0 && pids["step"] > 0
	})
	if gpus != "0,1" {
		t.Errorf("a batch job given two GPUs has SLURM_JOB_GPUS=%q, want 0,1", gpus)
	}
	for kind, step := range map[string]string{"batch": "step_batch", "step": "step_0"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pids[kind]))
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(":freezer:/slurm_node3/uid_0/job_%s/%s\n", id, step)
		if !strings.Contains(string(data), want) {
			t.Errorf("the %s process %d is not in %q:\n%s", kind, pids[kind], want, data)
		}
	}
	if st, err := c.JobState(id); err != nil || st != "RUNNING" {
		t.Errorf("JobState(%s) = %q, %v; want RUNNING", id, st, err)
	}
	if st, _, err := c.NodeState("node3"); err != nil || st != "mixed" && st != "allocated" {
		t.Errorf("NodeState(node3) = %q, %v; want mixed or allocated", st, err)
	}

	daemons := c.daemons
	c.Stop()
	for kind, pid := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/cgroup", pid)); err == nil {
			t.Errorf("after Stop, the job's %s process %d is still there", kind, pid)
		}
	}
	for _, d := range daemons {
		select {
		case <-d.done:
		default:
			t.Errorf("after Stop, %s still runs", d.name)
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup/freezer/slurm_node3/uid_0/job_" + id); err == nil {
		t.Errorf("after Stop, the job's cgroup is still there")
	}
	if _, err := os.Stat(c.Dir); err == nil {
		t.Errorf("after Stop, %s is still there", c.Dir)
	}
}

func TestMergeConf(t *testing.T) {
	got := mergeConf([]string{"KillWait=2", "ReturnToService=2"}, []string{"killwait=1", "HealthCheckInterval=5"})
	want := "killwait=1 ReturnToService=2 HealthCheckInterval=5"
	if strings.Join(got, " ") != want {
		t.Errorf("mergeConf = %q, want %q", got, want)
	}
}
