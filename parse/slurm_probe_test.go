package parse

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stepdStandIn starts a process named slurmstepd (a copy of sh) whose command line reads
// "slurmstepd: [TAG]", as slurmstepd sets it, running one sleep child, as uid; it returns the
// stand-in's and the child's PIDs.
func stepdStandIn(t *testing.T, dir, tag string, uid uint32) (stepd, child int) {
	t.Helper()
	bin := filepath.Join(dir, "slurmstepd")
	if _, err := os.Stat(bin); err != nil {
		src, err := os.ReadFile("/bin/sh")
		if err != nil {
			t.Skip(err)
		}
		if err := os.WriteFile(bin, src, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := &exec.Cmd{Path: bin, Args: []string{"slurmstepd: [" + tag + "]", "-c", "sleep 120 & echo $!; wait"}}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return cmd.Process.Pid, pid
}

// A GPU process without a Slurm cgroup (proctrack/linuxproc or pgid) is tied to its job by
// its slurmstepd ancestor, which only root can make: a user's process named slurmstepd, with
// the same command line, ties nothing, and Slurm is not asked about the job it names.
func TestProbeSlurmstepdAncestor(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a process of another user")
	}
	rootDir := t.TempDir()
	// t.TempDir's parent is closed to other users.
	userDir, err := os.MkdirTemp("", "gt-stepd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(userDir) })
	if err := os.Chmod(userDir, 0o755); err != nil {
		t.Fatal(err)
	}
	stepd, job := stepdStandIn(t, rootDir, "4242.0", 0)
	forger, forged := stepdStandIn(t, userDir, "777.batch", 65534)
	smi := t.TempDir()
	script := fmt.Sprintf(`#!/bin/sh
case "$1" in
--query-gpu=*)
echo "index, uuid, name, pci.bus_id, memory.total [MiB], memory.used [MiB], memory.free [MiB], utilization.gpu [%%], compute_mode, driver_version, memory.reserved [MiB], mig.mode.current"
echo "0, GPU-fake, NVIDIA Fake 80GB, 00000000:01:00.0, 81559, 3000, 78080, 3, Default, 550.54.15, 479, Disabled" ;;
--query-compute-apps=*)
echo "pid, gpu_uuid, used_gpu_memory [MiB]"
echo "%d, GPU-fake, 1500"
echo "%d, GPU-fake, 1500" ;;
esac
`, job, forged)
	if err := os.WriteFile(filepath.Join(smi, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// Give sh time to exec: its command line must be the stand-in's by then.
	time.Sleep(100 * time.Millisecond)
	// No Slurm here: scontrol fails at once without a configuration (a SLURM_CONF naming an
	// absent file would make it retry for a minute).
	if v, ok := os.LookupEnv("SLURM_CONF"); ok {
		os.Unsetenv("SLURM_CONF")
		t.Cleanup(func() { os.Setenv("SLURM_CONF", v) })
	}
	snap, err := Parse(runProbe(t, smi))
	if err != nil {
		t.Logf("parse: %v", err)
	}
	anc := map[int]Ancestor{}
	for _, a := range snap.Ancestors {
		anc[a.PID] = a
	}
	if a, ok := anc[stepd]; !ok || a.UID != 0 || a.SlurmJob != "4242" || a.SlurmStep != "0" {
		t.Errorf("root's slurmstepd %d: %+v (listed %v)", stepd, a, ok)
	}
	if a, ok := anc[forger]; !ok || a.SlurmJob != "" || a.UID != 65534 {
		t.Errorf("a user's process named slurmstepd %d: %+v (listed %v)", forger, a, ok)
	}
	asked := map[string]bool{}
	for _, j := range snap.SlurmJobs {
		asked[j.ID] = true
	}
	if !asked["4242"] || asked["777"] {
		t.Errorf("Slurm asked about %v; want 4242 and not 777", asked)
	}
	for _, n := range snap.Notes {
		if strings.Contains(n.Message, "section ancestors") || strings.Contains(n.Message, "section slurm") {
			t.Errorf("note: %s", n.Message)
		}
	}
}
