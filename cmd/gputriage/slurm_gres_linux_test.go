//go:build linux

package main

import (
	"bytes"
	"errors"
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
)

// TestNodeCheckSlurmGRES runs node-check --drain on node2 of two real clusters, where a running
// batch job's process (in the job's cgroup, and in the node's box: nsenter from the job's
// script) holds GPU memory that nvidia-smi lists:
//   - a cluster that does not manage GPUs as GRES (no GresTypes, no Gres: Slurm allocates no
//     GPUs, and the job's record says "GRES="): the job's GPU use is normal, node-check
//     passes and node2 is not drained;
//   - a cluster with GPU GRES where the job, given GPU 0, holds memory on GPU 1: node-check
//     names the job's work outside its allocation as a note and does not drain node2; with
//     --drain-unconstrained it is a problem, and node2 is drained for it.
func TestNodeCheckSlurmGRES(t *testing.T) {
	bin := buildGputriage(t)
	t.Run("no GRES", func(t *testing.T) {
		g := newGresNode(t, bin, slurmtest.Config{}, 0, 1)
		out, code := g.check(t, "--drain")
		if code != exitOK || strings.TrimSpace(out) != "" {
			t.Errorf("node-check --drain on a cluster without GRES: exit %d, want 0 and nothing printed:\n%s", code, out)
		}
		g.wantUp(t)
	})
	t.Run("GRES, outside the allocation", func(t *testing.T) {
		g := newGresNode(t, bin, slurmtest.Config{GPUs: 2}, 1)
		out, code := g.check(t, "--drain")
		want := fmt.Sprintf("gputriage: note: gpu-outside-allocation: Slurm job %s of root uses GPU 1, which it was not allocated on node node2: PID %d", g.job, g.pid)
		if code != exitOK || !strings.Contains(out, want) || strings.Contains(out, "leftover") || strings.Contains(out, "drained") {
			t.Errorf("node-check --drain: exit %d, want 0 and a note %q:\n%s", code, want, out)
		}
		g.wantUp(t)
		out, code = g.check(t, "--drain", "--drain-unconstrained")
		reason := fmt.Sprintf("gputriage: gpu-outside-allocation (sleep) PID %d 30000 MiB GPU 1 job %s", g.pid, g.job)
		if code != exitFindings || !strings.Contains(out, "gputriage: gpu-outside-allocation: Slurm job "+g.job) || !strings.Contains(out, "drained node2: "+reason) {
			t.Errorf("node-check --drain --drain-unconstrained: exit %d, want 1, the problem and a drain for %q:\n%s", code, reason, out)
		}
		st, r, err := g.c.NodeState("node2")
		if err != nil || !strings.HasPrefix(st, "drain") || r != reason {
			t.Errorf("node2 is %s (%s), %v; want drained for %q", st, r, err, reason)
		}
	})
}

// gresNode is node2 of a real cluster, a box of its own (newNodeBox), and a batch job on
// node2 (given one GPU where the cluster has GRES) whose process, in the box, nvidia-smi
// lists with 30,000 MiB on each of some GPUs.
type gresNode struct {
	c      *slurmtest.Cluster
	box    *nodeBox
	bin    string
	smiDir string
	job    string
	pid    int // as the box sees it
}

func newGresNode(t *testing.T, bin string, cfg slurmtest.Config, gpus ...int) *gresNode {
	t.Helper()
	g := &gresNode{box: newNodeBox(t), bin: bin, smiDir: t.TempDir()}
	g.c = slurmtest.Start(t, cfg)
	pidFile := filepath.Join(t.TempDir(), "pid")
	args := []string{"-w", "node2", "-o", "/dev/null", "-J", "train"}
	if cfg.GPUs > 0 {
		args = append(args, "--gres=gpu:1")
	}
	body := fmt.Sprintf("exec %s sh -c 'echo $$ > %s; exec sleep 300'", strings.Join(g.box.enter(), " "), pidFile)
	g.job = g.c.Sbatch(t, append(args, "--wrap", body)...)
	g.c.WaitFor(t, "job "+g.job+"'s process in the box", 30*time.Second, func() bool {
		b, _ := os.ReadFile(pidFile)
		g.pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return g.pid > 0
	})
	if cfg.GPUs > 0 {
		if out := g.c.Scontrol(t, "-d", "show", "job", g.job); !strings.Contains(out, "GRES=gpu:1(IDX:0)") {
			t.Fatalf("job %s was not given GPU 0:\n%s", g.job, out)
		}
	}
	smi := cleanSMI(2)
	for _, i := range gpus {
		smi.GPUs[i].UsedMiB = 30_009
		smi.Apps = append(smi.Apps, scenario.App{PID: g.pid, GPUUUID: smi.GPUs[i].UUID, UsedMiB: 30_000, Name: "sleep"})
	}
	if err := scenario.WriteFakeSMI(g.smiDir, *smi); err != nil {
		t.Fatal(err)
	}
	return g
}

// check runs node-check ARGS in the box as node2's health check would: SLURMD_NODENAME set,
// the fake nvidia-smi first on PATH.
func (g *gresNode) check(t *testing.T, args ...string) (string, int) {
	t.Helper()
	argv := append(append(g.box.enter(), g.bin, "node-check"), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + g.smiDir + ":/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_CONF=" + g.c.Conf, "SLURMD_NODENAME=node2"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// wantUp fails the test when node2 is drained.
func (g *gresNode) wantUp(t *testing.T) {
	t.Helper()
	if st, reason, err := g.c.NodeState("node2"); err != nil || strings.HasPrefix(st, "drain") {
		t.Errorf("node2 is %s (%s), %v; a running job's GPU use must not drain it", st, reason, err)
	}
}
