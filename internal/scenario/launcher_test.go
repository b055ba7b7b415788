package scenario_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
)

// TestStagedLauncherNamesWorkers starts "vllm serve MODEL" (a console script, as pip installs
// it) with spawned workers holding the GPUs, as a healthy tensor-parallel job runs, and checks
// that each worker is named after its launcher's engine and model with its place among the
// launcher's GPU processes: "vllm serve MODEL (PID N), worker i of 2", in the report and in
// the typed facts. A hostile model argument (escapes, a newline, a forged "(PID 1), worker"
// and 4 KiB) is not taken for a model: the worker is "vllm serve (PID N), worker i of 2".
func TestStagedLauncherNamesWorkers(t *testing.T) {
	testenv.SkipShort(t, "starts processes")
	hostile := "evil\x1b[31m\n(PID 1), worker 7 of 9 " + strings.Repeat("A", 4096)
	for _, tc := range []struct{ name, model, want string }{
		{"model", "meta-llama/Llama-3.1-8B-Instruct", "vllm serve meta-llama/Llama-3.1-8B-Instruct (PID %d), worker %d of 2"},
		{"hostile model", hostile, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStage(t)
			s.gpuSet([]int64{81559, 81559})
			m := s.server(scenario.Server{Module: "vllm.entrypoints.cli.main", Script: "vllm", Python: "/usr/bin/python3",
				Args: []string{"serve", tc.model, "--tensor-parallel-size", "2"}, Children: 2}, false)
			ws := scenario.WaitWorkers(m.PID, 2)
			if len(ws) != 2 {
				t.Fatalf("workers of %d: %v", m.PID, ws)
			}
			for i, w := range ws {
				s.hold(w, i, 70_000)
			}
			r := s.run()
			for i, w := range ws {
				gp := findGPUProcess(r.res, w)
				if gp == nil {
					t.Fatalf("worker %d not among the GPU processes:\n%s", w, r.text)
				}
				if gp.LauncherPID != m.PID || gp.WorkerIndex != i || gp.Workers != 2 || gp.Engine != "vLLM" {
					t.Errorf("worker %d: launcher %q PID %d, worker %d of %d, engine %q; want PID %d, worker %d of 2, vLLM",
						w, gp.Launcher, gp.LauncherPID, gp.WorkerIndex, gp.Workers, gp.Engine, m.PID, i)
				}
				if want := fmt.Sprintf(tc.want, m.PID, i); tc.want != "" && !strings.Contains(r.json, `"name": "vllm serve meta-llama/Llama-3.1-8B-Instruct"`) {
					t.Errorf("the JSON report does not name worker %d %q:\n%s", w, want, r.json)
				}
				if tc.want != "" && !strings.Contains(r.md, fmt.Sprintf(tc.want, m.PID, i)) {
					t.Errorf("the report does not name worker %d %q:\n%s", w, fmt.Sprintf(tc.want, m.PID, i), r.md)
				}
				if len(gp.Launcher) > 80 || tc.want == "" && gp.Launcher != "vllm serve" {
					t.Errorf("launcher %q: want it bounded, and without a model that is not a model name", gp.Launcher)
				}
			}
			busy := fmt.Sprintf("in use by the workers of vllm serve meta-llama/Llama-3.1-8B-Instruct (PID %d)", m.PID)
			if tc.want == "" {
				busy = fmt.Sprintf("in use by the workers of vllm serve (PID %d)", m.PID)
			}
			if !slices.ContainsFunc(r.jsonFindings, func(f jsonFinding) bool { return f.Code == diagnose.CodeGPUBusy && strings.Contains(f.Title, busy) }) {
				t.Errorf("no gpu-busy titled %q: %+v", busy, r.jsonFindings)
			}
			if tc.want == "" {
				for _, out := range []string{r.text, r.md} {
					// The argument shows, quoted, in the command line only; never in the name.
					if strings.Contains(out, "\x1b") || strings.Contains(out, "…"+fmt.Sprintf(" (PID %d), worker", m.PID)) ||
						out == r.md && !strings.Contains(out, fmt.Sprintf("vllm serve (PID %d), worker 0 of 2", m.PID)) {
						t.Errorf("the hostile model argument came through unsanitized or unbounded:\n%s", out)
					}
				}
			}
		})
	}
}

func findGPUProcess(res diagnose.Result, pid int) *diagnose.GPUProcess {
	for i := range res.Processes {
		if res.Processes[i].PID == pid {
			return &res.Processes[i]
		}
	}
	return nil
}
