package diagnose

import (
	"fmt"
	"time"

	"github.com/gputriage/gputriage/parse"
)

// Snapshots built by hand, so these tests do not depend on the parser.

var refTime = time.Date(2026, 5, 12, 3, 14, 0, 0, time.UTC)

func i64(n int64) *int64 { return &n }
func ip(n int) *int      { return &n }

func uuidOf(i int) string { return fmt.Sprintf("GPU-00000000-0000-0000-0000-%012d", i) }

func gpu(i int, name string, total, used, free int64) parse.GPU {
	return parse.GPU{Index: i, UUID: uuidOf(i), Name: name, MemoryTotalMiB: i64(total),
		MemoryUsedMiB: i64(used), MemoryFreeMiB: i64(free), DriverVersion: "580.95.05", MIGMode: "Disabled"}
}

func baseHost(uid int) parse.HostFacts {
	t := refTime
	user := "root"
	if uid != 0 {
		user = "alice"
	}
	return parse.HostFacts{ProbeVersion: "1", Hostname: "h", Time: &t, UID: ip(uid), User: user,
		ClockTicks: 100, NvidiaSMIPath: "/usr/bin/nvidia-smi", HasTimeout: true}
}

// idleRTX is n idle RTX PRO 6000s as ct200 shows them.
func idleRTX(n int) []parse.GPU {
	var gs []parse.GPU
	for i := range n {
		gs = append(gs, gpu(i, "NVIDIA RTX PRO 6000 Blackwell", 97887, 0, 97252))
	}
	return gs
}

func app(pid, gpu int, mem int64, name string) parse.ComputeApp {
	return parse.ComputeApp{PID: pid, GPUUUID: uuidOf(gpu), UsedMiB: i64(mem), ProcessName: name}
}

func holders(pid int, devs ...string) []parse.DeviceHolder {
	var hs []parse.DeviceHolder
	for i, d := range devs {
		hs = append(hs, parse.DeviceHolder{PID: pid, FD: 10 + i, Device: d})
	}
	return hs
}

func proc(pid, ppid int, state string, uid int, user string, age time.Duration, argv ...string) parse.Process {
	start := refTime.Add(-age)
	comm := "python3"
	if len(argv) > 0 {
		comm = argv[0]
		if len(comm) > 15 {
			comm = comm[:15]
		}
	}
	return parse.Process{PID: pid, PPID: ip(ppid), State: state, Comm: comm, UID: ip(uid), User: user,
		StartTime: &start, Argv: argv}
}

func sessionCgroup(n int) parse.Cgroup {
	return parse.Cgroup{Path: fmt.Sprintf("/user.slice/user-0.slice/session-%d.scope", n), Unit: fmt.Sprintf("session-%d.scope", n)}
}

func serviceCgroup(unit string) parse.Cgroup {
	return parse.Cgroup{Path: "/system.slice/" + unit, Unit: unit}
}

func okShm() parse.Shm {
	return parse.Shm{SizeBytes: i64(503 * gib), UsedBytes: i64(2 * gib), AvailBytes: i64(501 * gib), Listed: true}
}

// ct200 is the incident: a leftover SGLang server holds 55,286 MiB on GPU 0 of 8 and maps
// model weights someone deleted from /dev/shm.
func ct200() *parse.Snapshot {
	gs := idleRTX(8)
	gs[0].UUID = "GPU-6793b112-91ac-b02e-b2b2-a7e4143a878b"
	gs[0].MemoryUsedMiB, gs[0].MemoryFreeMiB = i64(55295), i64(41958)
	p := proc(20629, 1, "S", 0, "root", 7980*time.Second,
		"python3", "-m", "sglang.launch_server", "--model-path", "/dev/shm/Qwen3.6-27B", "--tp", "8",
		"--host", "0.0.0.0", "--port", "30000")
	p.Cgroup = sessionCgroup(4)
	p.Shm = []parse.ShmUse{
		{Path: "/dev/shm/Qwen3.6-27B/model-00001-of-00012.safetensors", Deleted: true, Mapped: true, Bytes: i64(4_563_402_752)},
		{Path: "/dev/shm/nccl-Zt3ehU", Deleted: true, Mapped: true, Bytes: i64(9_637_888)}, // NCCL unlinks its segments: normal
	}
	p.ModelPaths = []parse.PathCheck{{Path: "/dev/shm/Qwen3.6-27B", Exists: false}}
	h := baseHost(0)
	h.Hostname = "ct200"
	return &parse.Snapshot{
		Host: h,
		GPUs: gs,
		Apps: []parse.ComputeApp{{PID: 20629, GPUUUID: "GPU-6793b112-91ac-b02e-b2b2-a7e4143a878b", UsedMiB: i64(55286), ProcessName: "python3"}},
		Holders: append(holders(20629, "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia0"),
			holders(1403, "/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia3",
				"/dev/nvidia4", "/dev/nvidia5", "/dev/nvidia6", "/dev/nvidia7")...),
		Processes: []parse.Process{
			{PID: 1403, PPID: ip(1), State: "S", Comm: "nvidia-persiste", UID: ip(0), User: "root",
				Argv: []string{"/usr/bin/nvidia-persistenced", "--user", "nvidia-persistenced"}, Cgroup: serviceCgroup("nvidia-persistenced.service")},
			p,
		},
		Units: []parse.Unit{
			{Name: "nvidia-persistenced.service", LoadState: "loaded", ActiveState: "active", SubState: "running", Result: "success", MainPID: ip(1403)},
			{Name: "session-4.scope", LoadState: "loaded", ActiveState: "active", SubState: "abandoned", Result: "success"},
		},
		Shm: okShm(),
	}
}

// idle is a clean host: idle GPUs, persistenced, an empty /dev/shm.
func idle() *parse.Snapshot {
	s := ct200()
	s.GPUs = idleRTX(8)
	s.Apps = nil
	s.Holders = s.Holders[3:]
	s.Processes = s.Processes[:1]
	s.Units = s.Units[:1]
	return s
}

// busyTP8 is one healthy SGLang TP-8 server in an active systemd unit: a launcher and one
// scheduler per GPU, ~70 GiB on every GPU, NCCL and PyTorch segments mapped and unlinked as
// they do by design.
func busyTP8() *parse.Snapshot {
	s := idle()
	unit := "sglang.service"
	launcher := proc(3000, 1, "S", 998, "sglang", 26*time.Hour, "/opt/sglang/bin/python3", "-m", "sglang.launch_server",
		"--model-path", "/models/Qwen3-235B", "--tp", "8")
	launcher.Cgroup = serviceCgroup(unit)
	launcher.ModelPaths = []parse.PathCheck{{Path: "/models/Qwen3-235B", Exists: true}}
	s.Processes = append(s.Processes, launcher)
	s.Holders = append(s.Holders, holders(3000, "/dev/nvidiactl")...)
	for i := range 8 {
		pid := 3010 + i
		used := int64(71_800 + 37*i)
		s.GPUs[i].MemoryUsedMiB, s.GPUs[i].MemoryFreeMiB = i64(used+10), i64(97252-used-10)
		s.Apps = append(s.Apps, app(pid, i, used, "sglang::scheduler_TP"+fmt.Sprint(i)))
		s.Holders = append(s.Holders, holders(pid, "/dev/nvidiactl", "/dev/nvidia-uvm", fmt.Sprintf("/dev/nvidia%d", i))...)
		p := proc(pid, 3000, "S", 998, "sglang", 26*time.Hour-5*time.Second, "sglang::scheduler_TP"+fmt.Sprint(i))
		p.Cgroup = serviceCgroup(unit)
		p.Shm = []parse.ShmUse{
			{Path: fmt.Sprintf("/dev/shm/nccl-shm-recv-%d", i), Deleted: true, Mapped: true, Bytes: i64(9_637_888)},
			{Path: fmt.Sprintf("/dev/shm/torch_%d_1", pid), Deleted: true, Mapped: true, Bytes: i64(1 << 20)},
		}
		s.Processes = append(s.Processes, p)
	}
	s.Units = append(s.Units, parse.Unit{Name: unit, LoadState: "loaded", ActiveState: "active", SubState: "running", Result: "success", MainPID: ip(3000)})
	return s
}

// withLeftover adds one process holding mem MiB on GPU g to an idle host.
func withLeftover(pid, g int, mem int64, p parse.Process, units ...parse.Unit) *parse.Snapshot {
	s := idle()
	s.GPUs[g].MemoryUsedMiB, s.GPUs[g].MemoryFreeMiB = i64(mem+10), i64(97252-mem-10)
	s.Apps = append(s.Apps, app(pid, g, mem, "python3"))
	s.Holders = append(s.Holders, holders(pid, "/dev/nvidiactl", fmt.Sprintf("/dev/nvidia%d", g))...)
	s.Processes = append(s.Processes, p)
	s.Units = append(s.Units, units...)
	return s
}
