package probe_test

import (
	"fmt"
	"github.com/gputriage/gputriage/internal/testenv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gputriage/gputriage/parse"
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
	testenv.SkipShort(t, "probe on this host")
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
	// Each stand-in's child is a fork of it (named slurmstepd, of the stand-in's user) until it
	// has exec'd sleep: wait for that, not for a time that a loaded machine may not keep.
	for _, pid := range []int{job, forged} {
		testenv.WaitFor(t, fmt.Sprintf("PID %d to run sleep", pid), func() bool {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			return err == nil && string(b) == "sleep\n"
		})
	}
	// No Slurm here: scontrol fails at once without a configuration (a SLURM_CONF naming an
	// absent file would make it retry for a minute).
	if v, ok := os.LookupEnv("SLURM_CONF"); ok {
		os.Unsetenv("SLURM_CONF")
		t.Cleanup(func() { os.Setenv("SLURM_CONF", v) })
	}
	snap, err := parse.Parse(runProbe(t, smi))
	if err != nil {
		t.Logf("parse: %v", err)
	}
	anc := map[int]parse.Ancestor{}
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

// The probe reads Slurm's KillWait and UnkillableStepTimeout from scontrol show config (a
// real Slurm 22.05's output, recorded from the test harness's cluster: KillWait = 7 sec,
// UnkillableStepTimeout = 75 sec) and sends them only as digits: a value that is not one
// (an odd unit, a huge number) is sent as unknown.
func TestProbeSlurmTimeouts(t *testing.T) {
	testenv.SkipShort(t, "probe on this host")
	if os.Geteuid() != 0 {
		t.Skip("needs root: a root-owned slurmstepd stand-in")
	}
	_, job := stepdStandIn(t, t.TempDir(), "4242.0", 0)
	real := slurmRecording(t, "config.txt")
	for _, tt := range []struct {
		name, config string
		kw, us       *time.Duration
	}{
		{"recorded", real, dur(7 * time.Second), dur(75 * time.Second)},
		{"not digits", strings.Replace(strings.Replace(real, "= 7 sec", "= 7x sec", 1), "= 75 sec", "= 1234567890 sec", 1), nil, nil},
		{"no such lines", "Configuration data as of 2026-12-01T02:36:40\n", nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			smi := t.TempDir()
			writeFakeSMIOne(t, smi, job)
			if err := os.WriteFile(filepath.Join(smi, "config.txt"), []byte(tt.config), 0o644); err != nil {
				t.Fatal(err)
			}
			scontrol := fmt.Sprintf("#!/bin/sh\ncase \"$1 $2\" in\n\"show config\") cat %q ;;\n*) cat %q; exit 1 ;;\nesac\n",
				filepath.Join(smi, "config.txt"), abs(t, slurmTestdata("purged.txt")))
			if err := os.WriteFile(filepath.Join(smi, "scontrol"), []byte(scontrol), 0o755); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			snap, err := parse.Parse(runProbe(t, smi))
			if err != nil {
				t.Logf("parse: %v", err)
			}
			to := snap.SlurmTimeouts
			if !reflect.DeepEqual(to.KillWait, tt.kw) || !reflect.DeepEqual(to.UnkillableStep, tt.us) {
				t.Errorf("KillWait %v, UnkillableStepTimeout %v; want %v, %v", to.KillWait, to.UnkillableStep, tt.kw, tt.us)
			}
			for _, n := range snap.Notes {
				if strings.Contains(n.Message, "section slurm") {
					t.Errorf("note: %s", n.Message)
				}
			}
		})
	}
}

// writeFakeSMIOne writes an nvidia-smi into dir that shows one GPU and pid holding memory on it.
func writeFakeSMIOne(t *testing.T, dir string, pid int) {
	t.Helper()
	script := fmt.Sprintf(`#!/bin/sh
case "$1" in
--query-gpu=*)
echo "index, uuid, name, pci.bus_id, memory.total [MiB], memory.used [MiB], memory.free [MiB], utilization.gpu [%%], compute_mode, driver_version, memory.reserved [MiB], mig.mode.current"
echo "0, GPU-fake, NVIDIA Fake 80GB, 00000000:01:00.0, 81559, 3000, 78080, 3, Default, 550.54.15, 479, Disabled" ;;
--query-compute-apps=*)
echo "pid, gpu_uuid, used_gpu_memory [MiB]"
echo "%d, GPU-fake, 1500" ;;
esac
`, pid)
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

func abs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
