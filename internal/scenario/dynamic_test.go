package scenario

import (
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/testenv"
)

// TestFakeSMIDynamic: with Dynamic, a holder that exits leaves the compute-apps list at once
// and its memory leaves the GPU's used memory ReleaseDelay later; a live holder stays listed.
func TestFakeSMIDynamic(t *testing.T) {
	gone := exec.Command("sleep", "600")
	live := exec.Command("sleep", "600")
	for _, c := range []*exec.Cmd{gone, live} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _, _ = c.Process.Wait() })
	}
	dir := t.TempDir()
	smi := SMI{GPUs: []GPU{{Index: 0, UUID: "GPU-0", TotalMiB: 81559, UsedMiB: 55295}, {Index: 1, UUID: "GPU-1", TotalMiB: 81559, UsedMiB: 30009}},
		Apps: []App{{PID: gone.Process.Pid, GPUUUID: "GPU-0", UsedMiB: 55286, Name: "python3"},
			{PID: live.Process.Pid, GPUUUID: "GPU-1", UsedMiB: 30000, Name: "python3"}},
		Dynamic: true, ReleaseDelay: 2 * time.Second}
	if err := WriteFakeSMI(dir, smi); err != nil {
		t.Fatal(err)
	}
	query := func(what string) string {
		t.Helper()
		out, err := exec.Command(dir+"/nvidia-smi", what, "--format=csv,noheader,nounits").CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", what, err, out)
		}
		return string(out)
	}
	const gpus, apps = "--query-gpu=index,memory.used,memory.free", "--query-compute-apps=pid,used_memory"
	livePID := strconv.Itoa(live.Process.Pid)
	both := strconv.Itoa(gone.Process.Pid) + ", 55286\n" + livePID + ", 30000\n"
	if a, g := query(apps), query(gpus); a != both || g != "0, 55295, 26264\n1, 30009, 51550\n" {
		t.Fatalf("before: apps %q gpus %q", a, g)
	}
	_ = gone.Process.Kill()
	_, _ = gone.Process.Wait()
	noticed := time.Now()
	if a, g := query(apps), query(gpus); a != livePID+", 30000\n" || g != "0, 55295, 26264\n1, 30009, 51550\n" {
		t.Fatalf("at exit: apps %q gpus %q (the row goes at once, the memory later)", a, g)
	}
	for query(gpus) != "0, 9, 81550\n1, 30009, 51550\n" {
		if time.Since(noticed) > testenv.Scale(5*time.Second) {
			t.Fatalf("memory not released 5 s after exit: %q", query(gpus))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if d := time.Since(noticed); d < time.Second {
		t.Errorf("memory released %s after exit, before the 2 s delay", d)
	}
}
