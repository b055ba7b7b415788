//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	if code != exitFindings || !strings.Contains(out, want) || strings.Contains(out, "resumed") || strings.Contains(out, fmt.Sprintf("PID %d ", tenant)) {
		t.Errorf("node-check --resume: exit %d, %q %q; want 1 naming the leftover (%q), not the tenant %d, and no resume", code, out, stderr, want, tenant)
	}
}

// TestNodeCheckStalledHolderIsNotClean: a GPU holder whose description stalls (here its cwd's
// readlink never returns: a stand-in on PATH for a read blocked on a hung mount or a tenant's
// page-fault handler) costs only its own 5 s; left undescribed, it makes the node not clean.
// Before, the stall ran the whole procs scan into its time limit, the holder read as merely
// unreadable, node-check exited 0 and went on to resume the node.
func TestNodeCheckStalledHolderIsNotClean(t *testing.T) {
	testenv.SkipShort(t, "node-check stalled holder")
	if os.Geteuid() != 0 {
		t.Skip("needs root: other users' processes")
	}
	holder := testenv.StartReady(t, exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
		"/usr/bin/python3", "-c", `import os, time
print("ready", os.getpid(), flush=True)
time.sleep(100000)`))
	smiDir := t.TempDir()
	smi := slurmSMI(holder)
	if err := scenario.WriteFakeSMI(smiDir, smi); err != nil {
		t.Fatal(err)
	}
	stall := fmt.Sprintf("#!/bin/sh\ncase $1 in /proc/%d/cwd) exec sleep 1000 ;; esac\nexec /usr/bin/readlink \"$@\"\n", holder)
	if err := os.WriteFile(filepath.Join(smiDir, "readlink"), []byte(stall), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", smiDir+":/usr/bin:/bin")
	out, stderr, code := cli(t, map[string]string{"SLURMD_NODENAME": "node1"}, "node-check", "--resume")
	t.Logf("node-check: %s", out)
	if code != exitFindings || !strings.Contains(out, "gputriage: probe-limited: ") || strings.Contains(out, "resumed") {
		t.Errorf("node-check --resume: exit %d, %q %q; want 1 with probe-limited and no resume", code, out, stderr)
	}
}
