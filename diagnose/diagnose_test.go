package diagnose

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/parse"
)

// want describes one finding a scenario must produce.
type want struct {
	code     string
	severity Severity
	kind     string
	gpus     []int // exact, when set
	pids     []int // exact, when set
	title    []string
	evidence []string // each must appear in some evidence line
	text     []string // each must appear in the explanation
	fix      []string // each must be one of the fix commands, exactly
	fixHas   []string // each must appear within some fix command
	files    []string // each must be one of Files
}

func TestDiagnoseScenarios(t *testing.T) {
	zombie := func() *parse.Snapshot {
		parent := proc(2999, 1, "S", 1000, "bob", 5*time.Hour, "bash", "train.sh")
		parent.Cgroup = sessionCgroup(9)
		z := proc(3001, 2999, "Z", 1000, "bob", 4*time.Hour, "python3", "train.py")
		z.Cgroup = sessionCgroup(9)
		s := withLeftover(3001, 1, 2_000, z)
		s.Processes = append(s.Processes, parent)
		return s
	}
	unitFailed := func() *parse.Snapshot {
		p := proc(4000, 1, "S", 998, "vllm", 3*time.Hour, "/opt/vllm/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/llama")
		p.Cgroup = serviceCgroup("vllm.service")
		return withLeftover(4000, 2, 60_000, p,
			parse.Unit{Name: "vllm.service", LoadState: "loaded", ActiveState: "failed", SubState: "failed", Result: "exit-code"})
	}
	docker := func() *parse.Snapshot {
		p := proc(5000, 4990, "S", 0, "root", 30*time.Hour, "python3", "serve.py")
		p.Cgroup = parse.Cgroup{Path: "/system.slice/docker-b708f3d89365aa11223344556677889900aabbccddeeff0011223344556677.scope",
			Unit:        "docker-b708f3d89365aa11223344556677889900aabbccddeeff0011223344556677.scope",
			ContainerID: "b708f3d89365aa11223344556677889900aabbccddeeff0011223344556677", Runtime: "docker"}
		p.Shm = []parse.ShmUse{{Path: "/dev/shm/weights/model.safetensors", Deleted: true, Mapped: true, Bytes: i64(3 * gib)}}
		// Inside a container the model path is in another mount namespace: not evidence.
		p.ModelPaths = []parse.PathCheck{{Path: "/models/x", Exists: false}}
		return withLeftover(5000, 3, 20_000, p)
	}
	slurm := func() *parse.Snapshot {
		p := proc(6000, 5990, "T", 1001, "carol", 2*time.Hour, "python", "pretrain.py")
		p.Cgroup = parse.Cgroup{Path: "/system.slice/slurmstepd.scope/job_12345/step_0/user/task_0", Unit: "slurmstepd.scope", SlurmJob: "12345", SlurmStep: "0"}
		return withLeftover(6000, 4, 30_000, p)
	}
	orphanOnly := func() *parse.Snapshot {
		// Started by hand with nohup, still in use: orphaned but nothing else is wrong.
		p := proc(7000, 1, "S", 1000, "bob", 2*time.Hour, "python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/data/m")
		p.Cgroup = sessionCgroup(3)
		p.ModelPaths = []parse.PathCheck{{Path: "/data/m", Exists: true}}
		return withLeftover(7000, 0, 40_000, p)
	}
	orphanOld := func() *parse.Snapshot {
		s := orphanOnly()
		s.Processes[len(s.Processes)-1].StartTime = ptrTime(refTime.Add(-50 * time.Hour))
		// Other GPU work on the host, started an hour ago in a service.
		w := proc(7100, 1, "S", 998, "svc", time.Hour, "python3", "worker.py")
		w.Cgroup = serviceCgroup("worker.service")
		s.Processes = append(s.Processes, w)
		s.Apps = append(s.Apps, app(7100, 5, 10_000, "python3"))
		s.Holders = append(s.Holders, holders(7100, "/dev/nvidia5")...)
		s.GPUs[5].MemoryUsedMiB, s.GPUs[5].MemoryFreeMiB = i64(10_010), i64(87_242)
		s.Units = append(s.Units, parse.Unit{Name: "worker.service", ActiveState: "active", SubState: "running"})
		return s
	}
	// orphanOldOthers is orphanOld with the other work started by hand: by another user, or
	// by the orphan's own user.
	orphanOldOthers := func(uid int, user string) func() *parse.Snapshot {
		return func() *parse.Snapshot {
			s := orphanOld()
			w := &s.Processes[len(s.Processes)-1]
			w.UID, w.User, w.Cgroup = ip(uid), user, sessionCgroup(9)
			s.Units = s.Units[:len(s.Units)-1]
			return s
		}
	}
	// orphanOldSpawned is orphanOld with the other work another user's, run in a system unit
	// on their behalf: a Slurm job under cgroup/v2 (slurmstepd.scope), a notebook hub's
	// spawner's unit. That user chose when it started, as with work started by hand.
	orphanOldSpawned := func(cg parse.Cgroup) func() *parse.Snapshot {
		return func() *parse.Snapshot {
			s := orphanOld()
			w := &s.Processes[len(s.Processes)-1]
			w.UID, w.User, w.Cgroup = ip(1001), "mallory", cg
			s.Units = s.Units[:len(s.Units)-1]
			return s
		}
	}
	handWorkers := func() *parse.Snapshot {
		// Two spawn workers of a launcher that holds no GPU device, so the probe did not
		// describe it: one job, not two.
		s := idle()
		for i, pid := range []int{8001, 8002} {
			w := proc(pid, 8000, "S", 1000, "bob", time.Hour, "python3", "-c", "from multiprocessing.spawn import spawn_main")
			w.Cgroup = sessionCgroup(5)
			s.Processes = append(s.Processes, w)
			s.Apps = append(s.Apps, app(pid, i, 70_000, "python3"))
			s.GPUs[i].MemoryUsedMiB, s.GPUs[i].MemoryFreeMiB = i64(70_010), i64(27_242)
		}
		return s
	}
	ghostNoHolder := func() *parse.Snapshot {
		s := idle()
		s.Host = baseHost(1000)
		s.Notes = []parse.Note{{Code: "not-root", Message: "not root: other users' fds not visible"}}
		s.GPUs[2].MemoryUsedMiB, s.GPUs[2].MemoryFreeMiB = i64(10_240), i64(87_012)
		return s
	}
	ghostHolder := func() *parse.Snapshot {
		s := idle()
		s.GPUs[3].MemoryUsedMiB, s.GPUs[3].MemoryFreeMiB = i64(20_000), i64(77_252)
		p := proc(5555, 5540, "S", 0, "root", 3*time.Hour, "python3", "infer.py")
		p.Cgroup = parse.Cgroup{Unit: "cri-containerd-abc.scope", ContainerID: "abcdef1234567890abcdef", Runtime: "docker"}
		s.Processes = append(s.Processes, p)
		s.Holders = append(s.Holders, holders(5555, "/dev/nvidiactl", "/dev/nvidia3")...)
		return s
	}
	mixedIdle := func() *parse.Snapshot {
		s := idle()
		s.GPUs = []parse.GPU{
			gpu(0, "NVIDIA GeForce RTX 4090", 24564, 0, 24210),
			gpu(1, "NVIDIA GeForce RTX 4090", 24564, 0, 24210),
			gpu(2, "NVIDIA H100 80GB HBM3", 81559, 0, 81080),
			gpu(3, "NVIDIA H100 80GB HBM3", 81559, 1, 81079),
		}
		s.Holders = nil
		return s
	}
	partitioned := func() *parse.Snapshot {
		// A healthy job on GPUs 0-3, GPUs 4-7 free: a wide launch fails, but nothing is wrong.
		s := busyTP8()
		s.Apps = s.Apps[:4]
		for i := 4; i < 8; i++ {
			s.GPUs[i].MemoryUsedMiB, s.GPUs[i].MemoryFreeMiB = i64(0), i64(97252)
		}
		var ps []parse.Process
		for _, p := range s.Processes {
			if p.PID < 3014 {
				ps = append(ps, p)
			}
		}
		s.Processes = ps
		return s
	}
	stale := func() *parse.Snapshot {
		s := idle()
		old := refTime.Add(-50 * time.Hour)
		s.Shm.Entries = []parse.ShmEntry{
			{Path: "/dev/shm/Llama-3-70B", Type: 'd', Bytes: 4096, TreeBytes: 140 * gib, MTime: old},
			{Path: "/dev/shm/Llama-3-70B/model-00001-of-00030.safetensors", Type: 'f', Bytes: 140 * gib, TreeBytes: 140 * gib, MTime: old.Add(time.Minute)},
			{Path: "/dev/shm/nccl-AbCd12", Type: 'f', Bytes: 100 * mib, TreeBytes: 100 * mib, MTime: old},
			{Path: "/dev/shm/torch_1_2", Type: 'f', Bytes: 10 * mib, TreeBytes: 10 * mib, MTime: old},
			{Path: "/dev/shm/notes.bin", Type: 'f', Bytes: 500 * mib, TreeBytes: 500 * mib, MTime: old},
			{Path: "/dev/shm/it's", Type: 'd', TreeBytes: 2 * gib, MTime: old, UID: 1000},
			{Path: "/dev/shm/live", Type: 'd', TreeBytes: 50 * gib, MTime: old, Holders: []int{20629}},
			{Path: "/dev/shm/live/a.safetensors", Type: 'f', TreeBytes: 50 * gib, MTime: old, Holders: []int{20629}},
		}
		return s
	}
	shmFull := func(size, used int64) func() *parse.Snapshot {
		return func() *parse.Snapshot {
			s := idle()
			s.Shm = parse.Shm{SizeBytes: i64(size), UsedBytes: i64(used), AvailBytes: i64(size - used), Listed: true,
				Entries: []parse.ShmEntry{{Path: "/dev/shm/big", Type: 'f', TreeBytes: used, MTime: refTime.Add(-time.Hour)}}}
			return s
		}
	}

	tests := []struct {
		name  string
		snap  func() *parse.Snapshot
		want  []want
		not   []string // codes that must not appear
		worst Severity
	}{
		{
			name: "ct200 incident",
			snap: ct200,
			want: []want{
				{code: CodeMemoryImbalance, severity: Error, gpus: []int{0, 1, 2, 3, 4, 5, 6, 7}, pids: []int{20629},
					title: []string{"GPU 0", "41,958 MiB", "97,252 MiB"},
					evidence: []string{
						"SGLang TP check: min free 41,958 MiB (GPU 0) < 0.9 × max free 97,252 MiB (GPU 1) = 87,527 MiB → fails",
						"GPU 0: PID 20629 holds 55,286 MiB",
						"GPU 0: used 55,295 MiB, free 41,958 MiB (40.97 GiB)",
						"GPUs 1-7: used 0 MiB, free 97,252 MiB (94.97 GiB)",
						"vLLM check (gpu_memory_utilization=0.9): needs 0.9 × 97,887 = 88,099 MiB free per GPU → fails on GPU 0",
					},
					text: []string{"41,958 < 0.9 × 97,252 = 87,527 MiB", "PID 20629"},
					fix:  []string{"kill 20629", "nvidia-smi --query-gpu=index,memory.used,memory.free --format=csv"}},
				{code: CodeLeftoverProcess, severity: Error, gpus: []int{0}, pids: []int{20629},
					title: []string{"PID 20629", "55,286 MiB", "GPU 0"},
					evidence: []string{"cmdline: python3 -m sglang.launch_server --model-path /dev/shm/Qwen3.6-27B --tp 8",
						"user: root (uid 0)", "running for 2h13m", "parent: PID 1 (orphaned", "GPU 0: 55,286 MiB",
						"systemd unit: session-4.scope (active/abandoned)",
						"reason: the model path on its command line, /dev/shm/Qwen3.6-27B, no longer exists"},
					text:  []string{"were deleted"},
					fix:   []string{"kill 20629", "sleep 30; kill -0 20629 2>/dev/null && kill -9 20629", verifyGPU.Line},
					files: []string{"/dev/shm/Qwen3.6-27B/model-00001-of-00012.safetensors", "/dev/shm/Qwen3.6-27B"}},
				{code: CodeShmDeletedMapped, severity: Warning, pids: []int{20629}, gpus: []int{0},
					title:    []string{"PID 20629", "4.25 GiB"},
					evidence: []string{"/dev/shm/Qwen3.6-27B/model-00001-of-00012.safetensors (deleted): 4.25 GiB, mapped", "held by PID 20629: python3 -m sglang.launch_server"},
					text:     []string{"comes back only when PID 20629"},
					fix:      []string{"kill 20629", "df -h /dev/shm"},
					files:    []string{"/dev/shm/Qwen3.6-27B/model-00001-of-00012.safetensors"}},
			},
			not:   []string{CodeGhostMemory, CodeGPUBusy, CodeShmStale, CodeShmFull, CodeSMIFailed},
			worst: Error,
		},
		{name: "clean idle host", snap: idle, worst: -1},
		{
			name: "busy healthy TP-8",
			snap: busyTP8,
			want: []want{{code: CodeGPUBusy, severity: Info, gpus: []int{0, 1, 2, 3, 4, 5, 6, 7},
				pids:     []int{3010, 3011, 3012, 3013, 3014, 3015, 3016, 3017},
				title:    []string{"sglang.service"},
				evidence: []string{"systemd unit: sglang.service (active/running)", "GPU 0: 71,800 MiB used by this job"}}},
			not:   []string{CodeMemoryImbalance, CodeLeftoverProcess, CodeShmDeletedMapped, CodeGhostMemory},
			worst: Info,
		},
		{
			name: "hand-started workers of one launcher",
			snap: handWorkers,
			want: []want{{code: CodeGPUBusy, severity: Info, pids: []int{8001, 8002}, gpus: []int{0, 1},
				title: []string{"python3 processes started by PID 8000", "140,000 MiB in 2 processes"}}},
			not:   []string{CodeLeftoverProcess},
			worst: Info,
		},
		{name: "mixed GPU sizes idle", snap: mixedIdle, worst: -1, not: []string{CodeMemoryImbalance}},
		{
			name: "partitioned host: healthy job on half the GPUs",
			snap: partitioned,
			want: []want{{code: CodeMemoryImbalance, severity: Info, pids: []int{3010, 3011, 3012, 3013},
				text:   []string{"looks healthy"},
				fixHas: []string{"CUDA_VISIBLE_DEVICES=4,5,6,7"}}},
			not:   []string{CodeLeftoverProcess},
			worst: Info,
		},
		{
			name: "ghost memory, no holder, not root",
			snap: ghostNoHolder,
			want: []want{
				{code: CodeGhostMemory, severity: Warning, gpus: []int{2},
					title:    []string{"10,240 MiB", "GPU 2"},
					evidence: []string{"GPU 2: 10,240 MiB (10.00 GiB) used of 97,887 MiB, no compute process listed", "a driver helper"},
					text:     []string{"--sudo", "PID namespace"},
					fix:      []string{"sudo fuser -v /dev/nvidia*"}},
				{code: CodeProbeLimited, severity: Warning, evidence: []string{"not-root: not root"}, text: []string{"--sudo"}},
				{code: CodeMemoryImbalance, severity: Error, gpus: []int{0, 1, 2, 3, 4, 5, 6, 7},
					evidence: []string{"GPU 2: 10,240 MiB used by no listed process (see ghost-memory)"}},
			},
			not:   []string{CodeLeftoverProcess},
			worst: Error,
		},
		{
			name: "ghost memory held by a container process",
			snap: ghostHolder,
			want: []want{{code: CodeGhostMemory, severity: Warning, gpus: []int{3}, pids: []int{5555},
				evidence: []string{"GPU 3: /dev/nvidia3 open in PID 5555, root (uid 0)", "container: docker:abcdef123456"},
				fix:      []string{"docker stop -- abcdef123456", verifyGPU.Line}}},
			not:   []string{CodeLeftoverProcess},
			worst: Error,
		},
		{
			name: "zombie leftover: reap through the parent",
			snap: zombie,
			want: []want{{code: CodeLeftoverProcess, severity: Error, pids: []int{3001}, gpus: []int{1},
				evidence: []string{"reason: it is a zombie", "state: Z", "parent: PID 2999 (bash)"},
				text:     []string{"cannot be killed"},
				fixHas:   []string{"kill 2999"}}},
			worst: Error,
		},
		{
			name: "leftover in a failed systemd unit",
			snap: unitFailed,
			want: []want{{code: CodeLeftoverProcess, severity: Error, pids: []int{4000}, gpus: []int{2},
				title:    []string{"60,000 MiB", "GPU 2"},
				evidence: []string{"reason: its systemd unit vllm.service is failed (result: exit-code)", "systemd unit: vllm.service (failed/failed, result exit-code)"},
				fix:      []string{"kill 4000", "sleep 30; kill -0 4000 2>/dev/null && kill -9 4000", verifyGPU.Line}}},
			worst: Error,
		},
		{
			name: "leftover in a docker container",
			snap: docker,
			want: []want{{code: CodeLeftoverProcess, severity: Error, pids: []int{5000},
				evidence: []string{"container: docker:b708f3d89365"},
				fix:      []string{"docker stop -- b708f3d89365", verifyGPU.Line}}},
			worst: Error,
		},
		{
			name: "stopped process in a Slurm job",
			snap: slurm,
			want: []want{{code: CodeLeftoverProcess, severity: Error, pids: []int{6000},
				evidence: []string{"Slurm job: 12345 step 0", "reason: it is stopped (state T"},
				fix:      []string{"scancel -- 12345", verifyGPU.Line}}},
			worst: Error,
		},
		{
			name: "orphaned alone is not a leftover",
			snap: orphanOnly,
			want: []want{{code: CodeGPUBusy, severity: Info, pids: []int{7000}},
				{code: CodeMemoryImbalance, severity: Info, pids: []int{7000}}},
			not:   []string{CodeLeftoverProcess},
			worst: Info,
		},
		{
			// root's server, as the ct200 leftover ran: the host's services are its yardstick.
			name: "orphaned and much older than the other work is no leftover",
			snap: func() *parse.Snapshot {
				s := orphanOld()
				p := &s.Processes[len(s.Processes)-2]
				p.UID, p.User = ip(0), "root"
				return s
			},
			// Age says nothing of abandonment: root's server of days beside a fresh service is
			// named as healthy work, its age in its evidence, and stopped by no one.
			want: []want{
				{code: CodeGPUBusy, severity: Info, pids: []int{7000}, evidence: []string{"2d02h"}},
				{code: CodeGPUBusy, severity: Info, pids: []int{7100}},
			},
			not:   []string{CodeLeftoverProcess},
			worst: Info,
		},
		{
			// A person's server is not aged by the host's services: any user of a service's API
			// may crash it, and its restart says nothing of the other server.
			name: "a user's server orphaned and much older than a service",
			snap: orphanOld,
			want: []want{{code: CodeGPUBusy, severity: Info, pids: []int{7000}}},
			not:  []string{CodeLeftoverProcess},
		},
		{
			// Anyone can start GPU work at any time: another user's fresh job must not make a
			// healthy long-running server look abandoned.
			name: "orphaned and much older than another user's work",
			snap: orphanOldOthers(1001, "mallory"),
			want: []want{{code: CodeGPUBusy, severity: Info, pids: []int{7000}}},
			not:  []string{CodeLeftoverProcess},
		},
		{
			name: "orphaned and much older than another user's Slurm job (cgroup/v2)",
			snap: orphanOldSpawned(parse.Cgroup{Path: "/system.slice/slurmstepd.scope/job_77/step_0/user/task_0",
				Unit: "slurmstepd.scope", SlurmJob: "77", SlurmStep: "0"}),
			want: []want{{code: CodeGPUBusy, severity: Info, pids: []int{7000}}},
			not:  []string{CodeLeftoverProcess},
		},
		{
			name: "orphaned and much older than another user's spawned system unit",
			snap: orphanOldSpawned(serviceCgroup("jupyter-mallory-singleuser.service")),
			want: []want{{code: CodeGPUBusy, severity: Info, pids: []int{7000}}},
			not:  []string{CodeLeftoverProcess},
		},
		{
			name: "orphaned and much older than its own user's other work is no leftover",
			snap: orphanOldOthers(1000, "bob"),
			// A researcher's nohup'd training of days beside her own fresh experiment.
			want: []want{
				{code: CodeGPUBusy, severity: Info, pids: []int{7000}, evidence: []string{"2d02h"}},
			},
			not:   []string{CodeLeftoverProcess},
			worst: Info,
		},
		{
			name: "stale /dev/shm entries",
			snap: stale,
			want: []want{{code: CodeShmStale, severity: Warning,
				title: []string{"142.10 GiB", "3 entries"},
				evidence: []string{"/dev/shm/Llama-3-70B: directory, 140.00 GiB, owner root (uid 0), last modified 2d01h ago",
					"/dev/shm/nccl-AbCd12: file, 100 MiB", "/dev/shm/it's: directory, 2.00 GiB, owner uid 1000"},
				fix:   []string{"rm -rf -- '/dev/shm/Llama-3-70B'", "rm -rf -- '/dev/shm/nccl-AbCd12'", `rm -rf -- '/dev/shm/it'\''s'`},
				files: []string{"/dev/shm/Llama-3-70B"}}},
			worst: Warning,
		},
		{
			name: "/dev/shm 99% full",
			snap: shmFull(64*gib, 63*gib+512*mib),
			want: []want{{code: CodeShmFull, severity: Error, title: []string{"100% full"},
				evidence: []string{"/dev/shm/big: file, 63.50 GiB", "used by no process"},
				text:     []string{"posix_fallocate", "bus error"},
				fix:      []string{"rm -rf -- '/dev/shm/big'", "df -h /dev/shm"}}},
			worst: Error,
		},
		{
			name:  "/dev/shm 92% full",
			snap:  shmFull(100*gib, 92*gib),
			want:  []want{{code: CodeShmFull, severity: Warning, title: []string{"92% full"}}},
			worst: Warning,
		},
		{
			name:  "Docker's 64 MiB /dev/shm",
			snap:  shmFull(64*mib, 0),
			want:  []want{{code: CodeShmFull, severity: Warning, title: []string{"only 64 MiB free"}, text: []string{"--shm-size"}}},
			worst: Warning,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Diagnose(tc.snap(), refTime.Add(time.Hour))
			for _, w := range tc.want {
				checkFinding(t, r.Findings, w)
			}
			for _, c := range tc.not {
				if f := findCode(r.Findings, c); f != nil {
					t.Errorf("unexpected %s: %s", c, f.Title)
				}
			}
			if got := r.Worst(); got != tc.worst {
				t.Errorf("worst severity %v, want %v; findings:\n%s", got, tc.worst, dump(r.Findings))
			}
			if again := Diagnose(tc.snap(), refTime.Add(time.Hour)); !reflect.DeepEqual(r, again) {
				t.Error("two runs on the same snapshot differ")
			}
			checkSorted(t, r.Findings)
		})
	}
}

func TestSMIFailures(t *testing.T) {
	tests := []struct {
		kind     parse.SMIFailureKind
		severity Severity
		fixHas   string
	}{
		{parse.SMIMissing, Warning, "lspci"},
		{parse.SMINoDriver, Critical, "modprobe nvidia"},
		{parse.SMIVersionMismatch, Critical, "cat /proc/driver/nvidia/version"},
		{parse.SMIGPULost, Critical, "reboot"},
		{parse.SMIDeviceHandle, Critical, "dmesg"},
		{parse.SMINoDevices, Warning, "lspci -nnk"},
		{parse.SMITimeout, Error, "awk '$2 ~ /D/'"},
		{parse.SMIOther, Error, "dmesg"},
		{"", Error, "dmesg"},
	}
	for _, tc := range tests {
		t.Run(string(tc.kind), func(t *testing.T) {
			s := idle()
			s.GPUs, s.Apps = nil, nil
			s.SMI.Failure = &parse.SMIFailure{Kind: tc.kind, Message: "NVIDIA-SMI has failed\nsecond line", ExitCode: ip(9), BusID: "0000:9b:00.0"}
			r := Diagnose(s, refTime)
			kind := string(tc.kind)
			if kind == "" {
				kind = string(parse.SMIOther)
			}
			checkFinding(t, r.Findings, want{code: CodeSMIFailed, severity: tc.severity, kind: kind,
				evidence: []string{"nvidia-smi: NVIDIA-SMI has failed", "nvidia-smi: second line", "exit status 9"},
				fixHas:   []string{tc.fixHas}})
			if r.Worst() != tc.severity {
				t.Errorf("worst %v, want %v:\n%s", r.Worst(), tc.severity, dump(r.Findings))
			}
		})
	}
}

func TestProcessesJoin(t *testing.T) {
	r := Diagnose(ct200(), time.Time{})
	if len(r.Processes) != 2 || r.Processes[0].PID != 1403 || r.Processes[1].PID != 20629 {
		t.Fatalf("processes: %+v", r.Processes)
	}
	p := r.Processes[1]
	if !p.Listed || !reflect.DeepEqual(p.GPUs, []int{0}) || !reflect.DeepEqual(p.GPUMemoryMiB, map[int]int64{0: 55286}) {
		t.Errorf("GPU join: listed %v gpus %v mem %v", p.Listed, p.GPUs, p.GPUMemoryMiB)
	}
	if p.Elapsed == nil || *p.Elapsed != 7980*time.Second {
		t.Errorf("elapsed %v, want 7980s measured from the host's clock", p.Elapsed)
	}
	if p.User != "root" || p.Unit != "session-4.scope" || p.Name != "python3" || len(p.Shm) != 2 {
		t.Errorf("joined fields: %+v", p)
	}
	helper := r.Processes[0]
	if helper.Listed || len(helper.GPUs) != 8 || helper.GPUMemoryMiB != nil {
		t.Errorf("device holder: %+v", helper)
	}

	// Container names and Slurm jobs come from the cgroup.
	for _, tc := range []struct {
		cg                  parse.Cgroup
		container, slurmJob string
	}{
		{parse.Cgroup{ContainerID: "b708f3d89365aabbccdd", Runtime: "docker"}, "docker:b708f3d89365", ""},
		{parse.Cgroup{ContainerID: "0123456789abcdef01", Runtime: "containerd", PodUID: "6c1a7c1e-1111-2222-3333-444455556666"}, "k8s pod 6c1a7c1e-1111-2222-3333-444455556666", ""},
		{parse.Cgroup{ContainerID: "0123456789abcdef01", Runtime: "containerd"}, "containerd:0123456789ab", ""},
		{parse.Cgroup{SlurmJob: "77", SlurmStep: "batch"}, "", "77"},
	} {
		s := ct200()
		s.Processes[1].Cgroup = tc.cg
		p := Diagnose(s, refTime).Processes[1]
		if p.Container != tc.container || p.SlurmJob != tc.slurmJob {
			t.Errorf("cgroup %+v: container %q job %q, want %q %q", tc.cg, p.Container, p.SlurmJob, tc.container, tc.slurmJob)
		}
	}
}

// The snapshot's own clock wins over now; now is the fallback.
func TestReferenceTime(t *testing.T) {
	s := ct200()
	s.Host.Time = nil
	r := Diagnose(s, refTime.Add(time.Hour))
	if e := r.Processes[1].Elapsed; e == nil || *e != 7980*time.Second+time.Hour {
		t.Errorf("elapsed %v, want 3h13m from now", e)
	}
	if got := Diagnose(nil, refTime); len(got.Findings) != 0 || len(got.Processes) != 0 {
		t.Errorf("nil snapshot: %+v", got)
	}
}

func TestProbeLimited(t *testing.T) {
	s := idle()
	s.Truncated = true
	s.Sections = []parse.SectionInfo{{Name: "smi-gpu", ExitCode: ip(0)}, {Name: "smi-apps", ExitCode: ip(0)}, {Name: "procs", Truncated: true, Limit: 4194304}}
	r := Diagnose(s, refTime)
	checkFinding(t, r.Findings, want{code: CodeProbeLimited, severity: Warning,
		evidence: []string{"the capture ended before the probe's final marker", "section procs was cut at its limit of 4,194,304 bytes"}})

	// An app list that failed makes an empty list meaningless: no ghost memory from it.
	s = idle()
	s.GPUs[2].MemoryUsedMiB = i64(50_000)
	s.Sections = []parse.SectionInfo{{Name: "smi-gpu", ExitCode: ip(0)}, {Name: "smi-apps", ExitCode: ip(124)}}
	s.Host.HasTimeout = true
	r = Diagnose(s, refTime)
	if f := findCode(r.Findings, CodeGhostMemory); f != nil {
		t.Errorf("ghost memory from a failed app query: %s", f.Title)
	}
	checkFinding(t, r.Findings, want{code: CodeProbeLimited, severity: Warning, evidence: []string{"compute-app query failed"}})
}

// MIG GPUs show some memory with no process; they are left out of the TP check.
func TestMIG(t *testing.T) {
	s := idle()
	s.GPUs = []parse.GPU{gpu(0, "NVIDIA H200", 143771, 55, 143100), gpu(1, "NVIDIA H200", 143771, 40000, 103000)}
	s.GPUs[0].MIGMode, s.GPUs[1].MIGMode = "Enabled", "Enabled"
	s.Holders = nil
	r := Diagnose(s, refTime)
	if f := findCode(r.Findings, CodeMemoryImbalance); f != nil {
		t.Errorf("imbalance on MIG GPUs: %s", f.Title)
	}
	checkFinding(t, r.Findings, want{code: CodeGhostMemory, severity: Warning, gpus: []int{1}, text: []string{"MIG"}})
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{thousands(0), "0"}, {thousands(999), "999"}, {thousands(1000), "1,000"}, {thousands(97252), "97,252"},
		{thousands(-1234567), "-1,234,567"}, {fmtMiBGiB(41958), "41,958 MiB (40.97 GiB)"},
		{fmtBytes(512), "512 bytes"}, {fmtBytes(3 * mib), "3 MiB"}, {fmtBytes(4_563_402_752), "4.25 GiB"},
		{FormatAge(7980 * time.Second), "2h13m"}, {FormatAge(50 * time.Hour), "2d02h"}, {FormatAge(59 * time.Second), "59s"},
		{fmtIndexes([]int{0, 1, 2, 3, 5, 7, 8}), "0-3, 5, 7, 8"}, {FormatGPUs([]int{4}), "GPU 4"},
		{shellQuote("/dev/shm/a b"), "'/dev/shm/a b'"}, {shellQuote("/dev/shm/it's"), `'/dev/shm/it'\''s'`},
		{shellQuote("/dev/shm/\x1b[31mx"), `$'/dev/shm/\x1b[31mx'`},
		{fmtArgv([]string{"python3", "-c", "print(1)", "a b"}, false), "python3 -c 'print(1)' 'a b'"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func ptrTime(t time.Time) *time.Time { return &t }

func findCode(fs []Finding, code string) *Finding {
	for i := range fs {
		if fs[i].Code == code {
			return &fs[i]
		}
	}
	return nil
}

// checkFinding finds the finding w describes (by code, and by PIDs or GPUs when given) and
// checks it.
func checkFinding(t *testing.T, fs []Finding, w want) {
	t.Helper()
	var f *Finding
	for i := range fs {
		if fs[i].Code == w.code && (w.pids == nil || slices.Equal(fs[i].PIDs, w.pids)) &&
			(w.gpus == nil || slices.Equal(fs[i].GPUs, w.gpus)) {
			f = &fs[i]
			break
		}
	}
	if f == nil {
		t.Errorf("no %s finding with PIDs %v GPUs %v; findings:\n%s", w.code, w.pids, w.gpus, dump(fs))
		return
	}
	if f.Severity != w.severity {
		t.Errorf("%s: severity %v, want %v", w.code, f.Severity, w.severity)
	}
	if w.kind != "" && f.Kind != w.kind {
		t.Errorf("%s: kind %q, want %q", w.code, f.Kind, w.kind)
	}
	if f.Title == "" || f.Explanation == "" {
		t.Errorf("%s: empty title or explanation", w.code)
	}
	for _, s := range w.title {
		if !strings.Contains(f.Title, s) {
			t.Errorf("%s: title %q lacks %q", w.code, f.Title, s)
		}
	}
	for _, s := range w.text {
		if !strings.Contains(f.Explanation, s) {
			t.Errorf("%s: explanation lacks %q:\n%s", w.code, s, f.Explanation)
		}
	}
	for _, s := range w.evidence {
		if !slices.ContainsFunc(f.Evidence, func(e string) bool { return strings.Contains(e, s) }) {
			t.Errorf("%s: no evidence line contains %q:\n  %s", w.code, s, strings.Join(f.Evidence, "\n  "))
		}
	}
	for _, s := range w.fix {
		if !slices.Contains(f.Fix, s) {
			t.Errorf("%s: fix lacks %q:\n  %s", w.code, s, strings.Join(f.Fix, "\n  "))
		}
	}
	for _, s := range w.fixHas {
		if !slices.ContainsFunc(f.Fix, func(e string) bool { return strings.Contains(e, s) }) {
			t.Errorf("%s: no fix contains %q:\n  %s", w.code, s, strings.Join(f.Fix, "\n  "))
		}
	}
	for _, s := range w.files {
		if !slices.Contains(f.Files, s) {
			t.Errorf("%s: files %v lack %q", w.code, f.Files, s)
		}
	}
}

func checkSorted(t *testing.T, fs []Finding) {
	t.Helper()
	for i := 1; i < len(fs); i++ {
		a, b := fs[i-1], fs[i]
		if a.Severity < b.Severity || a.Severity == b.Severity && a.Code > b.Code {
			t.Errorf("findings out of order: %s/%v before %s/%v", a.Code, a.Severity, b.Code, b.Severity)
		}
	}
}

func dump(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString("  " + f.Severity.String() + " " + f.Code + ": " + f.Title + "\n")
		for _, e := range f.Evidence {
			b.WriteString("      " + e + "\n")
		}
		for _, e := range f.Fix {
			b.WriteString("      $ " + e + "\n")
		}
	}
	return b.String()
}

// Unknown values (nil pointers, empty strings, references to nothing) must never panic or
// be read as zero.
func TestDegenerateSnapshots(t *testing.T) {
	bare := parse.Snapshot{
		GPUs:      []parse.GPU{{Index: 0}, {Index: 1, MemoryTotalMiB: i64(0), MemoryFreeMiB: i64(0)}, {Index: 2, MemoryUsedMiB: i64(5000)}},
		Apps:      []parse.ComputeApp{{PID: 9}, {PID: 10, GPUUUID: "MIG-1234"}, {PID: 11, GPUUUID: uuidOf(0)}},
		Holders:   []parse.DeviceHolder{{PID: 9, Device: "/dev/nvidia"}, {PID: 9, Device: "/dev/nvidia-caps/nvidia-cap1"}, {PID: 12, Device: "/dev/nvidia99999999999999999999"}},
		Processes: []parse.Process{{PID: 9, Gone: true}, {PID: 11, State: "Z"}, {PID: 13, Shm: []parse.ShmUse{{Path: "/dev/shm/x/y", Deleted: true}}}},
		Shm: parse.Shm{SizeBytes: i64(0), Listed: true, Entries: []parse.ShmEntry{
			{Path: "/dev/shm"}, {Path: "relative", TreeBytes: 5 * gib}, {Path: "/dev/shm/a", Type: 'd', TreeBytes: 2 * gib, Holders: []int{1}},
			{Path: "/dev/shm/a/b", Type: 'l', TreeBytes: 2 * gib}}},
		Units:    []parse.Unit{{}},
		Sections: []parse.SectionInfo{{Name: "smi-apps"}},
		SMI:      parse.SMIResult{FieldFallback: true},
	}
	for _, s := range []*parse.Snapshot{{}, &bare} {
		r := Diagnose(s, refTime)
		for _, f := range r.Findings {
			if f.Code == "" || f.Title == "" || f.Explanation == "" {
				t.Errorf("incomplete finding %+v", f)
			}
		}
	}
	r := Diagnose(&bare, refTime)
	if f := findCode(r.Findings, CodeGhostMemory); f != nil {
		t.Errorf("ghost memory despite an app on an unknown GPU UUID: %s", f.Title)
	}
	checkFinding(t, r.Findings, want{code: CodeShmDeletedMapped, severity: Warning, pids: []int{13}, title: []string{"an unknown amount"}})
}

// /dev/nvidiaN names the GPU whose minor number is N, which need not be index N.
func TestDeviceNodeByMinorNumber(t *testing.T) {
	total, used, free := int64(81559), int64(30000), int64(51000)
	gpu := func(index, minor int) parse.GPU {
		return parse.GPU{Index: index, UUID: fmt.Sprintf("GPU-%d", index), MemoryTotalMiB: &total,
			MemoryUsedMiB: &used, MemoryFreeMiB: &free, MinorNumber: &minor}
	}
	s := &parse.Snapshot{
		GPUs:      []parse.GPU{gpu(0, 1), gpu(1, 0)},
		Holders:   []parse.DeviceHolder{{PID: 7, FD: 3, Device: "/dev/nvidia1"}},
		Processes: []parse.Process{{PID: 7, Argv: []string{"python3"}}},
	}
	r := Diagnose(s, time.Unix(0, 0))
	if len(r.Processes) != 1 || len(r.Processes[0].GPUs) != 1 || r.Processes[0].GPUs[0] != 0 {
		t.Errorf("/dev/nvidia1 with minor_number 1 = GPU index 0; got %+v", r.Processes)
	}
}
