// Package snaptest builds parse.Snapshots by hand for the tests of diagnose, readiness and
// nodecheck, so that they do not depend on the parser and judge the same hosts: ct200's
// incident, an idle host, a healthy TP-8 server, a Slurm job's process.
package snaptest

import (
	"fmt"
	"time"

	"github.com/gputriage/gputriage/parse"
)

// RefTime is the time the snapshots were taken.
var RefTime = time.Date(2026, 5, 12, 3, 14, 0, 0, time.UTC)

func I64(n int64) *int64 { return &n }
func IP(n int) *int      { return &n }

func UUIDOf(i int) string { return fmt.Sprintf("GPU-00000000-0000-0000-0000-%012d", i) }

func GPU(i int, name string, total, used, free int64) parse.GPU {
	return parse.GPU{Index: i, UUID: UUIDOf(i), Name: name, MemoryTotalMiB: I64(total),
		MemoryUsedMiB: I64(used), MemoryFreeMiB: I64(free), DriverVersion: "580.95.05", MIGMode: "Disabled"}
}

func BaseHost(uid int) parse.HostFacts {
	t := RefTime
	user := "root"
	if uid != 0 {
		user = "alice"
	}
	return parse.HostFacts{ProbeVersion: "1", Hostname: "h", Time: &t, UID: IP(uid), User: user,
		ClockTicks: 100, NvidiaSMIPath: "/usr/bin/nvidia-smi", HasTimeout: true}
}

// IdleRTX is n idle RTX PRO 6000s as CT200 shows them.
func IdleRTX(n int) []parse.GPU {
	var gs []parse.GPU
	for i := range n {
		gs = append(gs, GPU(i, "NVIDIA RTX PRO 6000 Blackwell", 97887, 0, 97252))
	}
	return gs
}

func App(pid, gpu int, mem int64, name string) parse.ComputeApp {
	return parse.ComputeApp{PID: pid, GPUUUID: UUIDOf(gpu), UsedMiB: I64(mem), ProcessName: name}
}

func Holders(pid int, devs ...string) []parse.DeviceHolder {
	var hs []parse.DeviceHolder
	for i, d := range devs {
		hs = append(hs, parse.DeviceHolder{PID: pid, FD: 10 + i, Device: d})
	}
	return hs
}

func Proc(pid, ppid int, state string, uid int, user string, age time.Duration, argv ...string) parse.Process {
	start := RefTime.Add(-age)
	comm := "python3"
	if len(argv) > 0 {
		comm = argv[0]
		if len(comm) > 15 {
			comm = comm[:15]
		}
	}
	return parse.Process{PID: pid, PPID: IP(ppid), State: state, Comm: comm, UID: IP(uid), User: user,
		StartTime: &start, Argv: argv}
}

func SessionCgroup(n int) parse.Cgroup {
	return parse.Cgroup{Path: fmt.Sprintf("/user.slice/user-0.slice/session-%d.scope", n), Unit: fmt.Sprintf("session-%d.scope", n)}
}

func ServiceCgroup(unit string) parse.Cgroup {
	return parse.Cgroup{Path: "/system.slice/" + unit, Unit: unit}
}

func OKShm() parse.Shm {
	return parse.Shm{SizeBytes: I64(503 << 30), UsedBytes: I64(2 << 30), AvailBytes: I64(501 << 30), Listed: true}
}

// CT200 is the incident: a leftover SGLang server holds 55,286 MiB on GPU 0 of 8 and maps
// model weights someone deleted from /dev/shm.
func CT200() *parse.Snapshot {
	gs := IdleRTX(8)
	gs[0].UUID = "GPU-6793b112-91ac-b02e-b2b2-a7e4143a878b"
	gs[0].MemoryUsedMiB, gs[0].MemoryFreeMiB = I64(55295), I64(41958)
	p := Proc(20629, 1, "S", 0, "root", 7980*time.Second,
		"python3", "-m", "sglang.launch_server", "--model-path", "/dev/shm/Qwen3.6-27B", "--tp", "8",
		"--host", "0.0.0.0", "--port", "30000")
	p.Cgroup = SessionCgroup(4)
	p.Shm = []parse.ShmUse{
		{Path: "/dev/shm/Qwen3.6-27B/model-00001-of-00012.safetensors", Deleted: true, Mapped: true, Bytes: I64(4_563_402_752)},
		{Path: "/dev/shm/nccl-Zt3ehU", Deleted: true, Mapped: true, Bytes: I64(9_637_888)}, // NCCL unlinks its segments: normal
	}
	p.ModelPaths = []parse.PathCheck{{Path: "/dev/shm/Qwen3.6-27B", Exists: false}}
	h := BaseHost(0)
	h.Hostname = "ct200"
	return &parse.Snapshot{
		Host: h,
		GPUs: gs,
		Apps: []parse.ComputeApp{{PID: 20629, GPUUUID: "GPU-6793b112-91ac-b02e-b2b2-a7e4143a878b", UsedMiB: I64(55286), ProcessName: "python3"}},
		Holders: append(Holders(20629, "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia0"),
			Holders(1403, "/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia3",
				"/dev/nvidia4", "/dev/nvidia5", "/dev/nvidia6", "/dev/nvidia7")...),
		Processes: []parse.Process{
			{PID: 1403, PPID: IP(1), State: "S", Comm: "nvidia-persiste", UID: IP(0), User: "root",
				Argv: []string{"/usr/bin/nvidia-persistenced", "--user", "nvidia-persistenced"}, Cgroup: ServiceCgroup("nvidia-persistenced.service")},
			p,
		},
		Units: []parse.Unit{
			{Name: "nvidia-persistenced.service", LoadState: "loaded", ActiveState: "active", SubState: "running", Result: "success", MainPID: IP(1403)},
			{Name: "session-4.scope", LoadState: "loaded", ActiveState: "active", SubState: "abandoned", Result: "success"},
		},
		Shm: OKShm(),
	}
}

// Idle is a clean host: idle GPUs, persistenced, an empty /dev/shm.
func Idle() *parse.Snapshot {
	s := CT200()
	s.GPUs = IdleRTX(8)
	s.Apps = nil
	s.Holders = s.Holders[3:]
	s.Processes = s.Processes[:1]
	s.Units = s.Units[:1]
	return s
}

// BusyTP8 is one healthy SGLang TP-8 server in an active systemd unit: a launcher and one
// scheduler per GPU, ~70 GiB on every GPU, NCCL and PyTorch segments mapped and unlinked as
// they do by design.
func BusyTP8() *parse.Snapshot {
	s := Idle()
	unit := "sglang.service"
	launcher := Proc(3000, 1, "S", 998, "sglang", 26*time.Hour, "/opt/sglang/bin/python3", "-m", "sglang.launch_server",
		"--model-path", "/models/Qwen3-235B", "--tp", "8")
	launcher.Cgroup = ServiceCgroup(unit)
	launcher.ModelPaths = []parse.PathCheck{{Path: "/models/Qwen3-235B", Exists: true}}
	s.Processes = append(s.Processes, launcher)
	s.Holders = append(s.Holders, Holders(3000, "/dev/nvidiactl")...)
	for i := range 8 {
		pid := 3010 + i
		used := int64(71_800 + 37*i)
		s.GPUs[i].MemoryUsedMiB, s.GPUs[i].MemoryFreeMiB = I64(used+10), I64(97252-used-10)
		s.Apps = append(s.Apps, App(pid, i, used, "sglang::scheduler_TP"+fmt.Sprint(i)))
		s.Holders = append(s.Holders, Holders(pid, "/dev/nvidiactl", "/dev/nvidia-uvm", fmt.Sprintf("/dev/nvidia%d", i))...)
		p := Proc(pid, 3000, "S", 998, "sglang", 26*time.Hour-5*time.Second, "sglang::scheduler_TP"+fmt.Sprint(i))
		p.Cgroup = ServiceCgroup(unit)
		p.Shm = []parse.ShmUse{
			{Path: fmt.Sprintf("/dev/shm/nccl-shm-recv-%d", i), Deleted: true, Mapped: true, Bytes: I64(9_637_888)},
			{Path: fmt.Sprintf("/dev/shm/torch_%d_1", pid), Deleted: true, Mapped: true, Bytes: I64(1 << 20)},
		}
		s.Processes = append(s.Processes, p)
	}
	s.Units = append(s.Units, parse.Unit{Name: unit, LoadState: "loaded", ActiveState: "active", SubState: "running", Result: "success", MainPID: IP(3000)})
	return s
}

// WithLeftover adds one process holding mem MiB on GPU g to an idle host.
func WithLeftover(pid, g int, mem int64, p parse.Process, units ...parse.Unit) *parse.Snapshot {
	s := Idle()
	s.GPUs[g].MemoryUsedMiB, s.GPUs[g].MemoryFreeMiB = I64(mem+10), I64(97252-mem-10)
	s.Apps = append(s.Apps, App(pid, g, mem, "python3"))
	s.Holders = append(s.Holders, Holders(pid, "/dev/nvidiactl", fmt.Sprintf("/dev/nvidia%d", g))...)
	s.Processes = append(s.Processes, p)
	s.Units = append(s.Units, units...)
	return s
}

// SlurmHost is a host with four GPUs and one process of Slurm job 4242 (alice's) holding
// 55 GiB on gpu, in the v1 freezer cgroup of node2 of a host running several slurmd, and what
// Slurm said of the job.
func SlurmHost(gpu int, job parse.SlurmJob) *parse.Snapshot {
	s := &parse.Snapshot{Host: BaseHost(0), GPUs: IdleRTX(4), Shm: OKShm()}
	s.Apps = []parse.ComputeApp{App(20629, gpu, 56_320, "python")}
	s.Holders = Holders(20629, "/dev/nvidiactl", "/dev/nvidia"+string(rune('0'+gpu)))
	p := Proc(20629, 20600, "S", 1000, "alice", 3*time.Hour, "python", "train.py")
	p.Cgroup = parse.Cgroup{Path: "/slurm_node2/uid_1000/job_4242/step_0", SlurmJob: "4242", SlurmStep: "0", SlurmNode: "node2"}
	s.Processes = []parse.Process{p}
	job.ID, job.Asked = "4242", true
	if job.ExitCode == nil {
		job.ExitCode = IP(0)
	}
	s.SlurmJobs = []parse.SlurmJob{job}
	return WithGres(s, "gpu:4", "node2")
}

// WithGres is s with Slurm saying each of nodes has Gres gres ("gpu:4", "(null)"), GresTypes
// gpu and devices not constrained.
func WithGres(s *parse.Snapshot, gres string, nodes ...string) *parse.Snapshot {
	s.SlurmNodes = nil
	for _, n := range nodes {
		has := gres != "(null)"
		s.SlurmNodes = append(s.SlurmNodes, parse.SlurmNode{Name: n, Asked: true, ExitCode: IP(0), Gres: gres, GPUGres: &has})
	}
	no, yes := false, true
	s.SlurmGRES = parse.SlurmGRES{Types: []string{"gpu"}, TypesKnown: true, ConstrainDevices: &no, TaskCgroup: &yes}
	return s
}

func RunningJob(nodes string, gpus ...int) parse.SlurmJob {
	start := RefTime.Add(-3 * time.Hour)
	return parse.SlurmJob{Name: "train", State: "RUNNING", User: "alice", UID: IP(1000), StartTime: &start, NodeList: nodes,
		Alloc: []parse.SlurmAlloc{{Nodes: nodes, GPUs: gpus, GPUsKnown: true}}}
}
