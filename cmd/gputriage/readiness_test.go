package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// --tp answers "will my deployment start?" on the incident host: not with TP 8 (GPU 0 is held
// by the leftover; it would after stopping it), and with TP 7 on GPUs 1-7.
func TestReadinessCLI(t *testing.T) {
	fx := filepath.Join(repoRoot(t), "fixtures", "ct200.capture")
	out, _, code := cli(t, map[string]string{"COLUMNS": "100"}, "--replay", fx, "--tp", "8", "--color", "never")
	if code != exitFindings {
		t.Errorf("exit %d", code)
	}
	for _, want := range []string{"readiness  Not ready", "PID 20629", "after stopping leftover PID 20629", "GPUs 0-7 would pass",
		"min free 40,678 MiB (GPU 0) < 0.9 × max free 95,972 MiB (GPU 1) = 86,375 MiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("--tp 8 report lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = cli(t, nil, "--replay", fx, "--tp", "7", "--engine", "sglang", "--format", "json")
	var doc struct {
		Hosts []struct {
			Readiness struct {
				Ready   bool   `json:"ready"`
				Env     string `json:"env"`
				Engines []string
			} `json:"readiness"`
		} `json:"hosts"`
		Summary struct {
			WithSubset []string `json:"ready_with_subset"`
		} `json:"readiness_summary"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if r := doc.Hosts[0].Readiness; r.Ready || r.Env != "CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7" {
		t.Errorf("--tp 7: %+v", r)
	}
	if len(doc.Summary.WithSubset) != 1 || doc.Summary.WithSubset[0] != "ct200" {
		t.Errorf("readiness_summary: %+v", doc.Summary)
	}
	for _, args := range [][]string{{"--tp", "0", "--engine", "vllm"}, {"--tp", "8", "--engine", "trt"},
		{"--tp", "8", "--need", "lots"}, {"--tp", "8", "--gpu-memory-utilization", "1.5"}, {"--tp", "-1"}} {
		if _, errOut, code := cli(t, nil, append([]string{"--replay", fx}, args...)...); code != exitUsage {
			t.Errorf("%v: exit %d (%s)", args, code, errOut)
		}
	}
}

func TestParseMiB(t *testing.T) {
	for in, want := range map[string]int64{"80GiB": 81920, "80G": 81920, "70000MiB": 70000, "70000": 70000, "0.5TiB": 524288, "1.5 GiB": 1536, "80GB": 76294} {
		if got, err := parseMiB(in); err != nil || got != want {
			t.Errorf("parseMiB(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-1G", "lots", "1e30G"} {
		if _, err := parseMiB(in); err == nil {
			t.Errorf("parseMiB(%q) accepted", in)
		}
	}
}
