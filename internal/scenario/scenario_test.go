package scenario

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestLeftoverIsReal checks the scenario is what it claims: a process with the given command
// line that maps a /dev/shm file which no longer exists, and a fake nvidia-smi naming it.
func TestLeftoverIsReal(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	p, err := Start(Server{
		Module: "sglang.launch_server",
		Args:   []string{"--model-path", "/dev/shm/gt-test-model", "--tp", "8"},
		ShmDir: "/dev/shm/gt-test-model", ShmFiles: 2, ShmBytes: 1 << 20, Delete: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if len(argv) < 4 || argv[1] != "-m" || argv[2] != "sglang.launch_server" || argv[3] != "--model-path" {
		t.Fatalf("argv = %q", argv)
	}
	maps, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(maps), "/dev/shm/gt-test-model/model-00001-of-00002.safetensors (deleted)") {
		t.Fatalf("no deleted shm mapping in maps:\n%s", maps)
	}
	if left, err := os.ReadDir("/dev/shm/gt-test-model"); err != nil || len(left) != 0 {
		t.Fatalf("the server's own shm dir should stay, emptied: %v %v", left, err)
	}

	dir := t.TempDir()
	if err := WriteFakeSMI(dir, SMI{
		GPUs: []GPU{{Index: 0, UUID: "GPU-1", Name: "NVIDIA H100 80GB HBM3", BusID: "00000000:18:00.0", TotalMiB: 81559, UsedMiB: 1000, ReservedMiB: 500, Driver: "590.48.01"}},
		Apps: []App{{PID: p.PID, GPUUUID: "GPU-1", UsedMiB: 990, Name: "python3"}},
	}); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(dir+"/nvidia-smi", "--query-compute-apps=pid,gpu_uuid,used_memory,process_name", "--format=csv,nounits").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := "pid, gpu_uuid, used_memory [MiB], process_name\n" + strconv.Itoa(p.PID) + ", GPU-1, 990, python3\n"
	if string(out) != want {
		t.Fatalf("apps = %q, want %q", out, want)
	}
	out, err = exec.Command(dir+"/nvidia-smi", "--query-gpu=index,memory.free,memory.reserved", "--format=csv,nounits").CombinedOutput()
	if err != nil || string(out) != "index, memory.free [MiB], memory.reserved [MiB]\n0, 80059, 500\n" {
		t.Fatalf("gpu = %q, %v", out, err)
	}
}

func TestFakeSMIOldDriverAndFailure(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFakeSMI(dir, SMI{GPUs: []GPU{{UUID: "GPU-1", TotalMiB: 100}}, OldDriver: true}); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(dir+"/nvidia-smi", "--query-gpu=index,memory.reserved", "--format=csv").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `Field "memory.reserved" is not a valid field to query.`) {
		t.Fatalf("old driver: %q, %v", out, err)
	}
	dir = t.TempDir()
	if err := WriteFakeSMI(dir, SMI{FailText: "Failed to initialize NVML: Driver/library version mismatch\n", FailRC: 18}); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(dir+"/nvidia-smi", "--query-gpu=index", "--format=csv").CombinedOutput()
	var ee *exec.ExitError
	if !strings.Contains(string(out), "version mismatch") || !asExit(err, &ee) || ee.ExitCode() != 18 {
		t.Fatalf("failure: %q, %v", out, err)
	}
}

func asExit(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*target = e
	return ok
}
