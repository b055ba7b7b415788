package scenario_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/parse"
)

// The fake nvidia-smi answers -q -d PIDS with every process of its table, types and memory,
// and --query-compute-apps with those of a compute context only (no type G), as a driver does.
func TestFakeSMIProcessListing(t *testing.T) {
	dir := t.TempDir()
	gpus := []scenario.GPU{{Index: 0, UUID: "GPU-a", BusID: "00000000:18:00.0", TotalMiB: 16376, Driver: "595.71.05"},
		{Index: 1, UUID: "GPU-b", BusID: "00000000:19:00.0", TotalMiB: 16376, Driver: "595.71.05"}}
	apps := []scenario.App{{PID: 10, GPUUUID: "GPU-a", UsedMiB: 300, Name: "/usr/lib/xorg/Xorg", Type: "G"},
		{PID: 11, GPUUUID: "GPU-a", UsedMiB: 25, Name: "/usr/bin/kwin_wayland", Type: "C+G"},
		{PID: 12, GPUUUID: "GPU-a", UsedMiB: 4000, Name: "python3"}}
	if err := scenario.WriteFakeSMI(dir, scenario.SMI{GPUs: gpus, Apps: apps}); err != nil {
		t.Fatal(err)
	}
	smi := filepath.Join(dir, "nvidia-smi")
	q, err := exec.Command(smi, "-q", "-d", "PIDS").Output()
	if err != nil {
		t.Fatal(err)
	}
	got := parse.ParseSMIPIDs(strings.NewReader(string(q)))
	if len(got) != 3 || got[0].Type != "G" || got[1].Type != "C+G" || got[2].Type != "C" || *got[0].UsedMiB != 300 ||
		got[0].BusID != "00000000:18:00.0" {
		t.Errorf("-q -d PIDS: %+v\n%s", got, q)
	}
	ca, err := exec.Command(smi, "--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,nounits").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(ca), "\n10,") || !strings.Contains(string(ca), "\n11, GPU-a, 25") || !strings.Contains(string(ca), "\n12, GPU-a, 4000") {
		t.Errorf("--query-compute-apps:\n%s", ca)
	}
}
