package diagnose

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/parse"
)

// A CUDA process opens every /dev/nvidiaN it can see: a leftover nvidia-smi lists with memory
// on GPU 6 only, holding the device files of GPUs 0 to 7, is a leftover of GPU 6 alone.
func TestGPUsTiedByMemoryNotDeviceFiles(t *testing.T) {
	s := ct200()
	uuid := s.GPUs[0].UUID
	s.GPUs[0].UUID, s.GPUs[6].UUID = s.GPUs[6].UUID, uuid
	s.GPUs[6].MemoryUsedMiB, s.GPUs[0].MemoryUsedMiB = s.GPUs[0].MemoryUsedMiB, i64(0)
	s.Holders = append(holders(20629, "/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia3",
		"/dev/nvidia4", "/dev/nvidia5", "/dev/nvidia6", "/dev/nvidia7"), s.Holders[3:]...)
	r := Diagnose(s, refTime)
	var gp *GPUProcess
	for i := range r.Processes {
		if r.Processes[i].PID == 20629 {
			gp = &r.Processes[i]
		}
	}
	if gp == nil || !slices.Equal(gp.GPUs, []int{6}) || len(gp.DeviceGPUs) != 8 {
		t.Fatalf("process 20629: %+v, want GPUs [6] and eight device GPUs", gp)
	}
	f := findCode(r.Findings, CodeLeftoverProcess)
	if f == nil || !slices.Equal(f.GPUs, []int{6}) {
		t.Fatalf("leftover-process: %+v, want GPUs [6]\n%s", f, dump(r.Findings))
	}
	// An unlisted holder is still tied by its device files: nothing else ties it.
	s.Apps = nil
	s.GPUs[6].MemoryUsedMiB = i64(0)
	r = Diagnose(s, time.Time{})
	for _, p := range r.Processes {
		if p.PID == 20629 && len(p.GPUs) != 8 {
			t.Errorf("unlisted holder: GPUs %v, want its eight device GPUs", p.GPUs)
		}
	}
}

// workstation is one RTX 4080 with Xorg (root) and gnome-shell (alice's session) holding
// /dev/nvidia0 and 517 MiB of graphics memory; withPIDs says whether nvidia-smi's full
// listing (smi-pids) was read.
func workstation(withPIDs bool) *parse.Snapshot {
	s := idle()
	s.GPUs = []parse.GPU{gpu(0, "NVIDIA GeForce RTX 4080 SUPER", 16376, 522, 15854)}
	s.GPUs[0].BusID = "00000000:01:00.0"
	xorg := proc(1500, 1400, "S", 0, "root", 48*time.Hour, "/usr/lib/xorg/Xorg", "vt2", "-displayfd", "3")
	xorg.Comm = "Xorg"
	shell := proc(1600, 1550, "S", 1000, "alice", 48*time.Hour, "/usr/bin/gnome-shell")
	shell.Comm, shell.Cgroup = "gnome-shell", sessionCgroup(2)
	s.Processes = []parse.Process{xorg, shell}
	s.Holders = append(holders(1500, "/dev/nvidiactl", "/dev/nvidia0"), holders(1600, "/dev/nvidiactl", "/dev/nvidia0")...)
	s.Apps = nil
	s.Units = []parse.Unit{{Name: "session-2.scope", LoadState: "loaded", ActiveState: "active", SubState: "running", Result: "success"}}
	if withPIDs {
		s.SMIProcsKnown = true
		s.SMIProcs = []parse.SMIProcess{{PID: 1500, BusID: "00000000:01:00.0", Type: "G", UsedMiB: i64(300)},
			{PID: 1600, BusID: "0000:01:00.0", Type: "G", UsedMiB: i64(217)}}
	}
	return s
}

// No fix, in any finding, names the desktop: its PIDs, its session scope or a GPU reset.
func checkDesktopUnblamed(t *testing.T, fs []Finding) {
	t.Helper()
	for _, f := range fs {
		for _, l := range append(append([]string{}, f.Fix...), f.Title) {
			for _, bad := range []string{"1500", "1600", "session-2.scope", "gpu-reset"} {
				if strings.Contains(l, bad) {
					t.Errorf("%s names %s: %q", f.Code, bad, l)
				}
			}
		}
		if f.Severity >= Warning && f.Code != CodeGhostMemory {
			t.Errorf("unexpected %s %s", f.Severity, f.Code)
		}
	}
}

func TestWorkstationGraphics(t *testing.T) {
	r := Diagnose(workstation(true), refTime)
	if f := findCode(r.Findings, CodeGhostMemory); f != nil {
		t.Errorf("graphics memory read as ghost memory: %s", f.Title)
	}
	checkDesktopUnblamed(t, r.Findings)
	for _, p := range r.Processes {
		if !p.Graphics || !slices.Equal(p.GPUs, []int{0}) {
			t.Errorf("process %d: graphics %v GPUs %v", p.PID, p.Graphics, p.GPUs)
		}
	}
	// Without the full listing, the memory is unexplained, but the desktop is neither named
	// an owner nor reset.
	r = Diagnose(workstation(false), refTime)
	f := findCode(r.Findings, CodeGhostMemory)
	if f == nil || len(f.PIDs) != 0 {
		t.Fatalf("ghost-memory without the listing: %+v", f)
	}
	checkDesktopUnblamed(t, r.Findings)
	// A forged row (probe as root) for a process that holds no device of that GPU is not
	// believed.
	s := workstation(true)
	s.Holders = holders(1600, "/dev/nvidiactl", "/dev/nvidia0")
	r = Diagnose(s, refTime)
	if findCode(r.Findings, CodeGhostMemory) != nil {
		t.Errorf("gnome-shell's own row should still explain GPU 0")
	}
	for _, p := range r.Processes {
		if p.PID == 1500 && p.Graphics {
			t.Errorf("a row of a process holding no device of GPU 0 was believed")
		}
	}
}

// mps is an MPS server (root, orphaned for a week) serving one live client on GPU 0.
func mps(clientAlive bool) *parse.Snapshot {
	s := idle()
	srv := proc(700, 1, "S", 0, "root", 7*24*time.Hour, "nvidia-cuda-mps-server")
	srv.Comm = "nvidia-cuda-mps"
	client := proc(800, 1, "S", 1000, "alice", time.Hour, "python3", "infer.py")
	client.Cgroup = serviceCgroup("infer.service")
	s.Processes = append(s.Processes, srv, client)
	s.Holders = append(s.Holders, append(holders(700, "/dev/nvidiactl", "/dev/nvidia0"), holders(800, "/dev/nvidiactl", "/dev/nvidia0")...)...)
	s.Apps = []parse.ComputeApp{app(700, 0, 30, "nvidia-cuda-mps-server"), app(800, 0, 4000, "python3")}
	s.Units = append(s.Units, parse.Unit{Name: "infer.service", LoadState: "loaded", ActiveState: "inactive", SubState: "dead", Result: "success"})
	s.SMIProcsKnown = true
	s.GPUs[0].BusID = "00000000:18:00.0"
	s.SMIProcs = []parse.SMIProcess{{PID: 700, BusID: "00000000:18:00.0", Type: "C", UsedMiB: i64(30)},
		{PID: 800, BusID: "00000000:18:00.0", Type: "M+C", UsedMiB: i64(4000)}}
	if !clientAlive {
		s.Processes = s.Processes[:len(s.Processes)-1]
		s.Processes = append(s.Processes, parse.Process{PID: 800, Gone: true})
	}
	return s
}

// The MPS server is no culprit while a live client runs: the client (its unit stopped) is the
// leftover. With no live client, the server is judged as any process.
func TestMPSServerNotCulpritWithLiveClients(t *testing.T) {
	r := Diagnose(mps(true), refTime)
	for _, f := range r.Findings {
		if f.Severity >= Warning && slices.Contains(f.PIDs, 700) || slices.ContainsFunc(f.Fix, func(l string) bool { return strings.Contains(l, "700") }) {
			t.Errorf("%s names the serving MPS server: %s", f.Code, f.Title)
		}
	}
	if f := findCode(r.Findings, CodeLeftoverProcess); f == nil || !slices.Equal(f.PIDs, []int{800}) || !slices.Equal(f.GPUs, []int{0}) {
		t.Errorf("leftover client: %+v", f)
	}
	h := newHost(mps(false), refTime)
	if h.protected(h.gpByPID[700]) {
		t.Errorf("an MPS server with no live client is still protected")
	}
}

// dead-pid-memory: a trainer's forked workers (its process group) keep its device; a process
// of another group that holds the device is shown, not stopped. When every listed PID is
// gone, the probe ran in another PID namespace: no finding, and never "exited while the probe
// ran".
func TestDeadPIDMemory(t *testing.T) {
	s := idle()
	w1 := proc(5001, 1, "S", 1000, "alice", time.Hour, "python3", "train.py")
	w1.PGID, w1.SID = ip(5000), ip(4000)
	w2 := proc(5002, 1, "S", 1000, "alice", time.Hour, "python3", "train.py")
	w2.PGID, w2.SID = ip(5000), ip(4000)
	other := proc(6000, 5999, "S", 1001, "bob", time.Hour, "python3", "eval.py")
	other.PGID, other.SID = ip(5999), ip(5999)
	s.Processes = append(s.Processes, parse.Process{PID: 5000, Gone: true}, w1, w2, other)
	s.Holders = append(s.Holders, append(append(holders(5001, "/dev/nvidiactl", "/dev/nvidia1"), holders(5002, "/dev/nvidia1")...),
		holders(6000, "/dev/nvidia1")...)...)
	s.Apps = []parse.ComputeApp{app(5000, 1, 30000, "python3"), app(7000, 0, 100, "python3")}
	s.Processes = append(s.Processes, proc(7000, 1, "S", 1000, "alice", time.Hour, "python3", "x.py"))
	s.GPUs[1].MemoryUsedMiB = i64(30005)
	s.AppsChecked, s.AppsGone = true, []int{5000}
	r := Diagnose(s, refTime)
	f := findCode(r.Findings, CodeDeadPIDMemory)
	if f == nil || f.Severity != Error || !slices.Equal(f.PIDs, []int{5001, 5002}) || !slices.Equal(f.GPUs, []int{1}) {
		t.Fatalf("dead-pid-memory: %+v\n%s", f, dump(r.Findings))
	}
	if !slices.Contains(f.Fix, "kill 5001") || slices.ContainsFunc(f.Fix, func(l string) bool { return strings.Contains(l, "6000") }) {
		t.Errorf("fix: %q", f.Fix)
	}
	if !strings.Contains(strings.Join(f.Evidence, "\n"), "PID 6000") {
		t.Errorf("the untied holder is not shown: %q", f.Evidence)
	}
	for _, x := range r.Findings {
		if strings.Contains(dump([]Finding{x}), "exited while the probe ran") {
			t.Errorf("%s says the gone PID exited while the probe ran", x.Code)
		}
	}
	// Every listed PID gone: another PID namespace.
	s.AppsGone = []int{5000, 7000}
	r = Diagnose(s, refTime)
	if findCode(r.Findings, CodeDeadPIDMemory) != nil || strings.Contains(dump(r.Findings), "exited while the probe ran") {
		t.Errorf("every listed PID gone:\n%s", dump(r.Findings))
	}
}
