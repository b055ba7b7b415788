//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
)

// TestNodeCheckNotBlindedByHugeArgv runs node-check on this machine as Slurm's health check
// (the whole node, --resume), with a real leftover holding 55 GB on GPU 0 and, before it in
// /proc's order, a tenant's GPU job whose command line is 256 MiB of one line. That once
// stalled the probe's process scan past its time limit before it reached the leftover, and
// node-check found the node clean (exit 0), resuming it when asked. It must name the leftover,
// exit 1 and resume nothing (no scontrol is on PATH: an attempt would fail the run).
func TestNodeCheckNotBlindedByHugeArgv(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: other users' processes")
	}
	for _, prog := range []string{"python3", "setpriv"} {
		if _, err := exec.LookPath(prog); err != nil {
			t.Skipf("%s not installed", prog)
		}
	}
	tenant := testenv.StartReady(t, exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
		"/usr/bin/python3", "-c", scenario.HugeArgv(256<<20)))
	p, smiDir := nodeLeftover(t, fmt.Sprintf("/dev/shm/gputriage-blind-%d-model", os.Getpid()))
	smi := slurmSMI(p.PID)
	smi.GPUs[1].UsedMiB += 1_000
	smi.Apps = append(smi.Apps, scenario.App{PID: tenant, GPUUUID: smi.GPUs[1].UUID, UsedMiB: 1_000, Name: "python3"})
	if err := scenario.WriteFakeSMI(smiDir, smi); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := cli(t, map[string]string{"SLURMD_NODENAME": "node1"}, "node-check", "--resume")
	want := fmt.Sprintf("gputriage: leftover-process: PID %d looks abandoned", p.PID)
	if code != exitFindings || !strings.HasPrefix(out, want) || strings.Contains(out, "resumed") || strings.Contains(out, fmt.Sprintf("PID %d ", tenant)) {
		t.Errorf("node-check --resume: exit %d, %q %q; want 1 naming the leftover (%q), not the tenant %d, and no resume", code, out, stderr, want, tenant)
	}
}
