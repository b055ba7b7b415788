//go:build linux

package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
)

func TestNodeCheckUsage(t *testing.T) {
	cases := []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"node-check", "gpu01"}, "no arguments"},
		{nil, []string{"node-check", "--timeout", "0s"}, "--timeout must be positive"},
		{nil, []string{"node-check", "--drain", "--node", "node1 state=resume"}, "is not a Slurm node name"},
		{map[string]string{"SLURMD_NODENAME": "-x"}, []string{"node-check", "--resume"}, "is not a Slurm node name"},
		{nil, []string{"node-check", "--format", "json"}, "--format: not a flag of gputriage node-check"},
	}
	for _, c := range cases {
		_, stderr, code := cli(t, c.env, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "gputriage node-check --help") {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, exitUsage, c.want)
		}
	}
}

// nodeLeftover starts a real leftover on this machine (an orphaned sglang.launch_server whose
// weights in model were deleted) and a fake nvidia-smi listing it with 55,286 MiB on GPU 0,
// first on PATH (with nothing else but /usr/bin and /bin); it returns the leftover and the fake
// nvidia-smi's directory.
func nodeLeftover(t *testing.T, model string) (*scenario.Proc, string) {
	t.Helper()
	testenv.SkipShort(t, "node-check leftover")
	p, err := scenario.Start(scenario.Server{Module: "sglang.launch_server", Args: []string{"--model-path", model, "--tp", "1"},
		ShmDir: model, ShmFiles: 1, ShmBytes: 1 << 20, Delete: true, Orphan: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	smiDir := t.TempDir()
	if err := scenario.WriteFakeSMI(smiDir, slurmSMI(p.PID)); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", smiDir+":/usr/bin:/bin")
	return p, smiDir
}

// TestNodeCheckJobGPUs runs node-check on this machine as Slurm's Epilog and Prolog would (no
// PATH but the fake nvidia-smi's, Slurm's variables set), with a real leftover holding GPU 0:
// the check of a job that had GPU 1 is clean, that of a job that had GPU 0 names the leftover
// and exits 1, and a job without GPUs is not probed at all.
func TestNodeCheckJobGPUs(t *testing.T) {
	p, smiDir := nodeLeftover(t, "/dev/shm/gputriage-nodecheck-model")
	epilog := func(gpus string) map[string]string {
		return map[string]string{"SLURM_SCRIPT_CONTEXT": "epilog_slurmd", "SLURM_JOB_ID": "42", "SLURMD_NODENAME": "node1", "SLURM_JOB_GPUS": gpus}
	}
	out, stderr, code := cli(t, epilog("1"), "node-check")
	if code != exitOK || out != "" {
		t.Errorf("epilog of GPU 1: exit %d, %q %q; want 0 and nothing", code, out, stderr)
	}
	out, stderr, code = cli(t, epilog("0"), "node-check")
	want := fmt.Sprintf("gputriage: leftover-process: PID %d looks abandoned: python3 -m sglang.launch_server holds 55,286 MiB on GPU 0\n", p.PID)
	if code != exitFindings || !strings.HasPrefix(out, want) {
		t.Errorf("epilog of GPU 0: exit %d, %q %q; want 1 and %q first", code, out, stderr, want)
	}
	prolog := map[string]string{"SLURM_SCRIPT_CONTEXT": "prolog_slurmd", "SLURM_JOB_ID": "43", "CUDA_VISIBLE_DEVICES": "0"}
	if out, _, code = cli(t, prolog, "node-check"); code != exitFindings || !strings.Contains(out, "leftover-process") {
		t.Errorf("prolog of GPU 0 (CUDA_VISIBLE_DEVICES): exit %d, %q; want 1 naming the leftover", code, out)
	}
	// A job without GPUs: nothing to check, and nothing run (a broken nvidia-smi would show).
	if err := scenario.WriteFakeSMI(smiDir, scenario.SMI{FailText: "NVIDIA-SMI has failed\n", FailRC: 9}); err != nil {
		t.Fatal(err)
	}
	if out, _, code = cli(t, map[string]string{"SLURM_SCRIPT_CONTEXT": "prolog_slurmd", "SLURM_JOB_ID": "44"}, "node-check"); code != exitOK || out != "" {
		t.Errorf("prolog of a job without GPUs: exit %d, %q; want 0 and nothing", code, out)
	}
	if out, _, code = cli(t, epilog("1"), "node-check"); code != exitFindings || !strings.HasPrefix(out, "gputriage: smi-failed: ") {
		t.Errorf("epilog with nvidia-smi failing: exit %d, %q; want 1 and smi-failed", code, out)
	}
}
