//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/probe"
)

// A healthy server whose model lives where the probe's root may not look (NFS with
// root_squash: here a 0700 directory of uid 1000 and a probe without CAP_DAC_OVERRIDE and
// CAP_DAC_READ_SEARCH) is not judged a leftover for a "gone" model path: the path is gone
// only when stat says it does not exist. A path that truly does not exist still counts.
func TestModelPathUnreadableIsNotGone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: needs root (a second uid, dropped capabilities)")
	}
	home := filepath.Join(t.TempDir(), "alice")
	model := filepath.Join(home, "models", "llama")
	if err := os.MkdirAll(model, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(home), home, filepath.Dir(model), model} {
		if err := os.Chown(d, 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Dir(home), 0o755)
	for _, c := range []struct {
		path     string
		leftover bool
	}{{model, false}, {filepath.Join(home, "..", "gone", "llama"), true}} {
		p, err := scenario.Start(scenario.Server{Module: "sglang.launch_server", UID: 1000, Orphan: true, Python: "/usr/bin/python3",
			Args: []string{"--model-path", filepath.Clean(c.path), "--tp", "1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Stop()
		dir := t.TempDir()
		g := scenario.GPU{Index: 0, UUID: "GPU-0d0d0d0d-0000-0000-0000-000000000000", Name: "NVIDIA H100 80GB HBM3",
			BusID: "00000000:18:00.0", TotalMiB: 81559, UsedMiB: 40_005, Driver: "580.95.05"}
		if err := scenario.WriteFakeSMI(dir, scenario.SMI{GPUs: []scenario.GPU{g},
			Apps: []scenario.App{{PID: p.PID, GPUUUID: g.UUID, UsedMiB: 40_000, Name: "python3"}}}); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("setpriv", "--inh-caps=-dac_override,-dac_read_search",
			"--bounding-set=-dac_override,-dac_read_search", "sh", "-s")
		cmd.Stdin = strings.NewReader("set -- 0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d\n" + probe.Script)
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
		raw, err := cmd.Output()
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
		snap, _ := parse.Parse(raw)
		res := diagnose.Diagnose(snap, time.Now())
		var named []string
		for _, f := range res.Findings {
			for _, pid := range f.PIDs {
				if pid == p.PID && f.Code == diagnose.CodeLeftoverProcess {
					named = append(named, fmt.Sprintf("%s: %s", f.Code, f.Title))
				}
			}
		}
		if (len(named) > 0) != c.leftover {
			t.Errorf("model path %s: judged left over %v, want %v: %v", c.path, len(named) > 0, c.leftover, named)
		}
	}
}
