//go:build linux

package scenario_test

import (
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/scenario"
)

// The situations of TestLibrary, each with the public report it is drawn from.

type actor = scenario.Actor

const (
	alice = 1000
	bob   = 1001
	rayU  = 1002
)

// ctrID is a container's ID, as Docker names its scope.
const ctrID = "4f2c9d81e6a7b3c5d0e9f8a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f"

var libUsers = []string{
	"alice:x:1000:1000:Alice:/home/alice:/bin/bash",
	"bob:x:1001:1001:Bob:/home/bob:/bin/bash",
	"ray:x:1002:1002:Ray:/home/ray:/bin/bash",
	"gdm:x:120:125:Gnome Display Manager:/var/lib/gdm3:/bin/false",
}

func h100s(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = 81559
	}
	return out
}

func upto(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func on(gpu int, mib int64) map[int]int64 { return map[int]int64{gpu: mib} }

// as runs the actors and their descendants as uid.
func as(uid int, as ...actor) []actor {
	for i := range as {
		as[i].Walk(func(a *actor) { a.UID = uid })
	}
	return as
}

// shell is a user's login shell in a session scope, with what it started.
func shell(name string, uid, session int, kids ...actor) actor {
	for i := range kids {
		kids[i].Job = true // each command line a job of its own, as bash's job control runs it
	}
	return as(uid, actor{Name: name, Argv: []string{"-bash"}, Exe: "bash",
		Cgroup: fmt.Sprintf("user.slice/user-%d.slice/session-%d.scope", uid, session), Children: kids})[0]
}

// spawnWorker is a multiprocessing "spawn" child, as vLLM's and SGLang's workers and
// torch.multiprocessing's are started.
func spawnWorker(name string, gpu int, mib int64, devices []int) actor {
	return actor{Name: name, Argv: []string{"/usr/bin/python3", "-c",
		"from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=8, pipe_handle=14)", "--multiprocessing-fork"},
		Devices: devices, GPUMiB: on(gpu, mib)}
}

func resourceTracker(name string) actor {
	return actor{Name: name, Argv: []string{"/usr/bin/python3", "-c", "from multiprocessing.resource_tracker import main;main(7)"}}
}

// vllmServe is vllm serve with TP workers on GPUs first..first+tp-1, each opening every device.
func vllmServe(name, model string, tp, first, devices int, mib int64) actor {
	a := actor{Name: name, Argv: []string{"/usr/bin/python3", "/usr/local/bin/vllm", "serve", model,
		"--tensor-parallel-size", fmt.Sprint(tp), "--gpu-memory-utilization", "0.90"}, Exe: "vllm",
		Children: []actor{resourceTracker(name + "-tracker")}}
	for i := 0; i < tp; i++ {
		a.Children = append(a.Children, spawnWorker(fmt.Sprintf("%s-tp%d", name, i), first+i, mib, upto(devices)))
	}
	return a
}

// torchrun is the elastic agent with nproc ranks on GPUs 0..nproc-1.
func torchrun(name string, nproc int, mib int64, script ...string) actor {
	a := actor{Name: name, Argv: append([]string{"/usr/bin/python3", "/usr/local/bin/torchrun", "--nproc-per-node", fmt.Sprint(nproc)}, script...),
		Exe: "torchrun"}
	for i := 0; i < nproc; i++ {
		r := rank(fmt.Sprintf("%s-rank%d", name, i), i, mib, nproc, script...)
		r.Env = elasticEnv(i, nproc, 0)
		a.Children = append(a.Children, r)
	}
	return a
}

// elasticEnv is what torch.distributed.elastic's local agent adds to each rank's environment
// (LocalElasticAgent._start_workers), for a single-node torchrun without --standalone: the
// static rendezvous, whose run id is "none"; restart is the attempt (TORCHELASTIC_RESTART_COUNT,
// 0 for the first). The agent sets OMP_NUM_THREADS=1 for itself when it starts more than one
// rank, and passes it on.
func elasticEnv(local, world, restart int) []string {
	return []string{"OMP_NUM_THREADS=1",
		fmt.Sprintf("LOCAL_RANK=%d", local), fmt.Sprintf("RANK=%d", local), "GROUP_RANK=0", fmt.Sprintf("ROLE_RANK=%d", local),
		"ROLE_NAME=default", fmt.Sprintf("LOCAL_WORLD_SIZE=%d", world), fmt.Sprintf("WORLD_SIZE=%d", world), "GROUP_WORLD_SIZE=1",
		fmt.Sprintf("ROLE_WORLD_SIZE=%d", world), "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500",
		fmt.Sprintf("TORCHELASTIC_RESTART_COUNT=%d", restart), "TORCHELASTIC_MAX_RESTARTS=3", "TORCHELASTIC_RUN_ID=none",
		"TORCHELASTIC_USE_AGENT_STORE=True", "TORCH_NCCL_ASYNC_ERROR_HANDLING=1"}
}

// rank is a torchrun worker: torchrun runs the script as sys.executable -u SCRIPT ARGS.
func rank(name string, gpu int, mib int64, devices int, script ...string) actor {
	return actor{Name: name, Argv: append([]string{"/usr/bin/python3", "-u"}, script...), Devices: upto(devices), GPUMiB: on(gpu, mib)}
}

// deletedWeights are weights copied to /dev/shm and then deleted while mapped, by their owner:
// the directory, the server user's own (0755), stays, so only that user or root could have
// deleted them.
func deletedWeights(dir string) []scenario.ShmFile {
	return []scenario.ShmFile{
		{Path: dir + "/model-00001-of-00002.safetensors", Delete: true},
		{Path: dir + "/model-00002-of-00002.safetensors", Delete: true},
	}
}

// removedWeightsDir are weights whose whole directory was then rm -rf'd while mapped: with the
// directory gone, nobody can tell whose it was, and so who could have removed it.
func removedWeightsDir(dir string) []scenario.ShmFile {
	return []scenario.ShmFile{
		{Path: dir + "/model-00001-of-00002.safetensors"},
		{Path: dir + "/model-00002-of-00002.safetensors", DeleteDir: true},
	}
}

// bobTrainingWatched is bob's live trainer on GPU 0 with its DataLoader workers (holding the
// device, as every worker does), and nvtop watching it, in his session.
func bobTrainingWatched(session int) actor {
	return shell("bash", bob, session,
		actor{Name: "btrain", Argv: []string{"python3", "finetune.py"}, Devices: []int{0}, GPUMiB: on(0, 20_000),
			Children: []actor{
				{Name: "bdl0", Argv: []string{"python3", "finetune.py"}, Devices: []int{0}},
				{Name: "bdl1", Argv: []string{"python3", "finetune.py"}, Devices: []int{0}}}},
		actor{Name: "nvtop", Argv: []string{"nvtop"}, Devices: []int{0}})
}

func vllmService(name string, gpu int, mib int64, devices int) actor {
	return actor{Name: name, Argv: []string{"/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server",
		"--model", "meta-llama/Llama-3.1-8B-Instruct", "--port", "8000"}, Cgroup: "system.slice/vllm.service",
		Devices: upto(devices), GPUMiB: on(gpu, mib)}
}

var (
	xorg = actor{Name: "Xorg", Argv: []string{"/usr/lib/xorg/Xorg", "vt2", "-displayfd", "3", "-auth", "/run/user/1000/gdm/Xauthority",
		"-nolisten", "tcp", "-background", "none", "-noreset", "-keeptty", "-novtswitch", "-verbose", "3"},
		Cgroup: "user.slice/user-1000.slice/session-2.scope", Devices: []int{0}, Type: "G", GPUMiB: on(0, 421)}
	gnomeShell = actor{Name: "gnome-shell", Argv: []string{"/usr/bin/gnome-shell"}, UID: alice,
		Cgroup:  "user.slice/user-1000.slice/user@1000.service/session.slice/org.gnome.Shell@x11.service",
		Devices: []int{0}, Type: "G", GPUMiB: on(0, 96)}
)

func library() []situation {
	return []situation{
		// vllm-project/vllm#11996: vllm/vllm-openai with --tensor-parallel-size 4, its
		// VllmWorkerProcess workers; here a TP-8 service, all well.
		{name: "healthy TP-8 vLLM service", gpus: h100s(8), users: libUsers,
			procs: func() []actor {
				v := vllmServe("vllm", "meta-llama/Llama-3.1-70B-Instruct", 8, 0, 8, 71_234)
				v.Cgroup = "system.slice/vllm.service"
				return []actor{v}
			}(),
			units: []libUnit{{name: "vllm.service", state: "active", main: "vllm"}},
			want:  verdict{healthy: true}},

		// vllm-project/vllm#16259 and #42017: the server died, its TP workers keep the GPUs.
		{name: "workers of a crashed vllm serve", gpus: h100s(2), users: libUsers,
			procs: func() []actor {
				v := vllmServe("vllm", "Qwen/Qwen2.5-32B-Instruct", 2, 0, 2, 70_112)
				v.Exit = true
				return []actor{shell("bash", alice, 3, v)}
			}(),
			want: verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"vllm-tp0", "vllm-tp1"}, mayName: []string{"vllm-tracker"}}},

		// vllm-project/vllm#42017: one replica crashed and left its workers; the other
		// replica's workers, with the very same command line, serve on.
		{name: "crashed replica's workers beside a live replica with the same argv", gpus: h100s(4), users: libUsers,
			procs: func() []actor {
				live := vllmServe("live", "Qwen/Qwen2.5-32B-Instruct", 2, 0, 4, 70_112)
				live.Cgroup = "system.slice/vllm-a.service"
				dead := vllmServe("dead", "Qwen/Qwen2.5-32B-Instruct", 2, 2, 4, 70_112)
				dead.Exit = true
				return []actor{live, shell("bash", alice, 4, dead)}
			}(),
			units: []libUnit{{name: "vllm-a.service", state: "active", main: "live"}},
			want:  verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"dead-tp0", "dead-tp1"}, mayName: []string{"dead-tracker"}}},

		// sgl-project/sglang#15165: kill -9 of the launch process leaves its children; here
		// the TP schedulers, which hold the GPUs.
		{name: "SGLang schedulers of a killed launch_server", gpus: h100s(2), users: libUsers,
			procs: []actor{shell("bash", bob, 5, actor{Name: "sglang", Exit: true,
				Argv: []string{"/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--tp", "2", "--port", "30000"},
				Children: []actor{spawnWorker("sched0", 0, 62_000, upto(2)), spawnWorker("sched1", 1, 62_000, upto(2)),
					{Name: "detok", Argv: []string{"/usr/bin/python3", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=8, pipe_handle=18)", "--multiprocessing-fork"}}}})},
			want: verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"sched0", "sched1"}, mayName: []string{"detok"}}},

		// ray-project/ray#11608: after the driver's death, the actors' processes remain and
		// hold GPU memory (there, until pkill -9 ray); here raylet is gone too.
		{name: "orphaned Ray actor, driver and raylet gone", gpus: h100s(2), users: libUsers,
			procs: as(rayU, actor{Name: "raylet", Exit: true, Argv: []string{"/usr/local/lib/python3.10/dist-packages/ray/core/src/ray/raylet/raylet",
				"--raylet_socket_name=/tmp/ray/session_2026-11-30_09-12-44_118204_1877/sockets/raylet", "--node_manager_port=0", "--num_prestart_python_workers=0"},
				Cgroup:   "user.slice/user-1002.slice/session-7.scope",
				Children: []actor{{Name: "actor", Argv: []string{"ray::RayWorkerWrapper"}, Exe: "python3", Comm: "ray::RayWorkerWrapper", Devices: upto(2), GPUMiB: on(0, 45_000)}}},
				actor{Name: "driver", Exit: true, Argv: []string{"python3", "train_ray.py"}, Cgroup: "user.slice/user-1002.slice/session-7.scope"}),
			want: verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"actor"}}},

		// ray-project/ray#31780: a ray::IDLE worker keeps its GPU memory after its task; here
		// its raylet and driver are gone.
		{name: "ray::IDLE worker of a dead raylet", gpus: h100s(2), users: libUsers,
			procs: as(rayU, actor{Name: "raylet", Exit: true, Argv: []string{"/usr/local/lib/python3.10/dist-packages/ray/core/src/ray/raylet/raylet",
				"--raylet_socket_name=/tmp/ray/session_2026-11-30_09-12-44_118204_1877/sockets/raylet"}, Cgroup: "user.slice/user-1002.slice/session-8.scope",
				Children: []actor{{Name: "idle", Argv: []string{"ray::IDLE"}, Exe: "python3", Comm: "ray::IDLE", Devices: upto(2), GPUMiB: on(1, 9_800)}}}),
			want: verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"idle"}}},

		// ray-project/ray#10739: workers of a live Ray cluster hold GPUs while their tasks run.
		{name: "Ray actors under a live raylet and driver", gpus: h100s(2), users: libUsers,
			procs: as(rayU, actor{Name: "raylet", Argv: []string{"/usr/local/lib/python3.10/dist-packages/ray/core/src/ray/raylet/raylet",
				"--raylet_socket_name=/tmp/ray/session_2026-11-30_09-12-44_118204_1877/sockets/raylet"}, Cgroup: "user.slice/user-1002.slice/session-9.scope",
				Children: []actor{
					{Name: "w0", Argv: []string{"ray::RayWorkerWrapper"}, Exe: "python3", Comm: "ray::RayWorkerWrapper", Devices: upto(2), GPUMiB: on(0, 45_000)},
					{Name: "w1", Argv: []string{"ray::RayWorkerWrapper"}, Exe: "python3", Comm: "ray::RayWorkerWrapper", Devices: upto(2), GPUMiB: on(1, 45_000)}}},
				actor{Name: "driver", Argv: []string{"python3", "train_ray.py"}, Cgroup: "user.slice/user-1002.slice/session-9.scope"}),
			want: verdict{healthy: true}},

		// vllm-project/vllm#16259: vLLM with the Ray executor; here the server and its Ray
		// workers, all alive.
		{name: "vLLM on Ray, all alive", gpus: h100s(4), users: libUsers,
			procs: []actor{{Name: "vllm", Argv: []string{"/usr/bin/python3", "/usr/local/bin/vllm", "serve", "meta-llama/Llama-3.3-70B-Instruct",
				"--tensor-parallel-size", "4", "--distributed-executor-backend", "ray"}, Exe: "vllm", Cgroup: "system.slice/vllm.service",
				Children: []actor{{Name: "raylet", Argv: []string{"/usr/local/lib/python3.12/dist-packages/ray/core/src/ray/raylet/raylet",
					"--raylet_socket_name=/tmp/ray/session_2026-12-01_08-00-00_000001_77/sockets/raylet"},
					Children: []actor{
						{Name: "r0", Argv: []string{"ray::RayWorkerWrapper"}, Exe: "python3", Comm: "ray::RayWorkerWrapper", Devices: upto(4), GPUMiB: on(0, 70_000)},
						{Name: "r1", Argv: []string{"ray::RayWorkerWrapper"}, Exe: "python3", Comm: "ray::RayWorkerWrapper", Devices: upto(4), GPUMiB: on(1, 70_000)},
						{Name: "r2", Argv: []string{"ray::RayWorkerWrapper"}, Exe: "python3", Comm: "ray::RayWorkerWrapper", Devices: upto(4), GPUMiB: on(2, 70_000)},
						{Name: "r3", Argv: []string{"ray::RayWorkerWrapper"}, Exe: "python3", Comm: "ray::RayWorkerWrapper", Devices: upto(4), GPUMiB: on(3, 70_000)}}}}}},
			units: []libUnit{{name: "vllm.service", state: "active", main: "vllm"}},
			want:  verdict{healthy: true}},

		// pytorch/pytorch#76287: torch.elastic killed most workers but not the failing
		// node's, which hung on; here the old generation's rank beside the restarted job's.
		{name: "old torchrun rank beside the live one", gpus: h100s(2), users: libUsers,
			procs: []actor{shell("bash", alice, 10,
				actor{Name: "old-agent", Exit: true, Argv: []string{"/usr/bin/python3", "/usr/local/bin/torchrun", "--nproc-per-node", "2", "train.py", "--config", "llama.yaml"}, Exe: "torchrun",
					Children: []actor{func() actor {
						r := rank("old-rank0", 0, 31_000, 2, "train.py", "--config", "llama.yaml")
						r.Age, r.Env = 3*time.Hour, elasticEnv(0, 2, 0)
						return r
					}()}},
				torchrun("job", 2, 40_000, "train.py", "--config", "llama.yaml"))},
			want: verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"old-rank0"}}},

		// pytorch/pytorch#76287: on a restart the elastic agent stops its ranks, and one stuck
		// in the driver hangs on; the agent starts the next attempt beside it. Here the stuck
		// rank of attempt 0, still the live agent's child, beside attempt 1's ranks.
		{name: "stuck rank of an earlier torchrun attempt", gpus: h100s(2), users: libUsers,
			procs: []actor{shell("bash", alice, 18, func() actor {
				a := torchrun("job", 2, 40_000, "train.py", "--config", "llama.yaml")
				a.Argv, a.Age = slices.Insert(a.Argv, 4, "--max-restarts", "3"), 2*time.Hour
				for i := range a.Children {
					a.Children[i].Env = elasticEnv(i, 2, 1)
				}
				old := rank("stuck-rank0", 0, 12_000, 2, "train.py", "--config", "llama.yaml")
				old.Age, old.Env = time.Hour, elasticEnv(0, 2, 0)
				a.Children = append(a.Children, old)
				return a
			}())},
			want: verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"stuck-rank0"}}},

		// pytorch/pytorch#147064: killing the torchrun agent leaves its ranks running.
		{name: "ranks of a killed torchrun agent", gpus: h100s(2), users: libUsers,
			procs: []actor{shell("bash", alice, 11, func() actor {
				a := torchrun("job", 2, 40_000, "elastic-demo.py")
				a.Exit = true
				return a
			}())},
			want: verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"job-rank0", "job-rank1"}}},

		// pytorch/pytorch#147064: a healthy torchrun job, 8 ranks.
		{name: "healthy torchrun job, 8 ranks", gpus: h100s(8), users: libUsers,
			procs: []actor{shell("bash", alice, 12, torchrun("job", 8, 60_000, "train.py", "--config", "llama.yaml"))},
			want:  verdict{healthy: true}},

		// torchrun's documentation has a rank read its LOCAL_RANK from the environment
		// (local_rank = int(os.environ["LOCAL_RANK"])), and users run one rank's script by hand
		// with it set: here under nohup, its shell gone. Nothing but the user's own
		// LOCAL_RANK says a launcher started it, and no launcher did: a process the elastic
		// agent starts carries its TORCHELASTIC_RUN_ID too. Orphaned by design, alone on its
		// GPU: weak, and healthy.
		{name: "nohup'd script that sets LOCAL_RANK", gpus: h100s(1), users: libUsers,
			procs: as(alice, actor{Name: "script", Argv: []string{"/usr/bin/python3", "-u", "train.py", "--config", "llama.yaml"}, Env: []string{"LOCAL_RANK=0"},
				Cgroup: "user.slice/user-1000.slice/session-27.scope", Devices: []int{0}, GPUMiB: on(0, 40_000)}),
			want: verdict{healthy: true, notSaid: []*regexp.Regexp{abandoned}}},

		// pytorch/pytorch#1085 and #5736: the DataLoader's workers outlive the killed trainer
		// and keep /dev/nvidia0 ("lsof /dev/nvidia0 ... kill that process"); nvidia-smi still
		// lists the dead trainer with its memory.
		{name: "dead trainer's DataLoader workers keep the device", gpus: h100s(2), users: libUsers,
			procs: []actor{shell("bash", alice, 13, actor{Name: "trainer", Exit: true, Argv: []string{"python3", "train.py", "--epochs", "90"},
				Devices: []int{0}, GPUMiB: on(0, 30_500),
				Children: []actor{
					{Name: "dl0", Argv: []string{"python3", "train.py", "--epochs", "90"}, Devices: []int{0}},
					{Name: "dl1", Argv: []string{"python3", "train.py", "--epochs", "90"}, Devices: []int{0}}}})},
			want: verdict{code: diagnose.CodeDeadPIDMemory, culprits: []string{"dl0", "dl1"}, gpus: []int{0}, mayName: []string{"trainer"}}},

		// NVIDIA/Megatron-LM#3684: DataLoader workers keep /dev/nvidia* open while the rank
		// runs; nothing is wrong while it does.
		{name: "live trainer with DataLoader workers on the device", gpus: h100s(1), users: libUsers,
			procs: []actor{shell("bash", alice, 14, actor{Name: "trainer", Argv: []string{"python3", "train.py", "--epochs", "90"},
				Devices: []int{0}, GPUMiB: on(0, 30_500),
				Children: []actor{
					{Name: "dl0", Argv: []string{"python3", "train.py", "--epochs", "90"}, Devices: []int{0}},
					{Name: "dl1", Argv: []string{"python3", "train.py", "--epochs", "90"}, Devices: []int{0}}}})},
			want: verdict{healthy: true}},

		// NVIDIA/Megatron-LM#3684 (async checkpoint workers): a job mid-checkpoint, its ranks
		// staging the checkpoint in /dev/shm and their NCCL segments unlinked, as NCCL does.
		{name: "healthy training job mid-checkpoint", gpus: h100s(2), users: libUsers,
			procs: []actor{shell("bash", alice, 15, func() actor {
				a := torchrun("job", 2, 52_000, "pretrain_gpt.py", "--save", "/checkpoints/gpt")
				for i := range a.Children {
					a.Children[i].Shm = []scenario.ShmFile{
						{Path: fmt.Sprintf("/dev/shm/ckpt-stage-rank%d/iter_0042000.distcp", i), Bytes: 4 << 20},
						{Path: fmt.Sprintf("/dev/shm/nccl-Kx%d", i), Delete: true}}
					a.Children[i].Children = []actor{{Name: fmt.Sprintf("ckpt%d", i), Argv: a.Children[i].Argv, Devices: []int{i}}}
				}
				return a
			}())},
			want: verdict{healthy: true}},

		// apache/mxnet#4242: the training process's leader is a zombie while it keeps its GPU
		// memory.
		{name: "zombie leader with live threads", gpus: h100s(2), users: libUsers,
			procs: []actor{shell("bash", bob, 16, actor{Name: "train", ExitLeader: true, Argv: []string{"python3", "train.py"}, Devices: upto(2), GPUMiB: on(1, 20_480)})},
			want:  verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"train"}}},

		// pytorch/pytorch#4293: a zombie nvidia-smi lists; its parent is the same user's
		// sweep script, which never reaps it.
		{name: "true zombie of a user's own script", gpus: h100s(1), users: libUsers,
			procs: []actor{shell("bash", alice, 17, actor{Name: "sweep", NoReap: true, Argv: []string{"python3", "sweep.py"},
				Children: []actor{{Name: "zombie", Exit: true, Argv: []string{"python3", "eval.py", "--ckpt", "step-900"}, GPUMiB: on(0, 8_200)}}})},
			want: verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"zombie"}, mayName: []string{"sweep"}}},

		// pytorch/pytorch#4293: a zombie whose parent is a unit's main process: never kill it.
		{name: "true zombie of a unit's main process", gpus: h100s(2), users: libUsers,
			procs: []actor{func() actor {
				v := vllmService("svc", 1, 40_000, 2)
				v.NoReap = true
				v.Children = []actor{{Name: "zombie", Exit: true, Argv: []string{"/usr/bin/python3", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=8, pipe_handle=14)", "--multiprocessing-fork"}, GPUMiB: on(0, 2_048)}}
				return v
			}()},
			units: []libUnit{{name: "vllm.service", state: "active", main: "svc"}},
			want:  verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"zombie"}, notKilled: []string{"svc"}}},

		// jupyter/help#221 and wookayin/gpustat#18: Xorg (551 MiB there) and the desktop are
		// graphics processes, not compute apps.
		{name: "Xorg and gnome-shell on a workstation", gpus: []int64{24564}, users: libUsers,
			procs: []actor{xorg, gnomeShell},
			want:  verdict{healthy: true}},

		// jupyter/help#221: a user's notebook beside Xorg on a workstation's one GPU.
		{name: "workstation: desktop beside a user's training", gpus: []int64{24564}, users: libUsers,
			procs: []actor{xorg, gnomeShell, shell("bash", alice, 3, actor{Name: "train", Argv: []string{"python3", "train.py"}, Devices: []int{0}, GPUMiB: on(0, 9_000)})},
			want:  verdict{healthy: true}},

		// Syllo/nvtop#243: Xorg on one GPU, compute on another.
		{name: "Xorg on GPU 0 of a server, a job on GPU 1", gpus: []int64{24564, 24564}, users: libUsers,
			procs: []actor{xorg, shell("bash", bob, 4, actor{Name: "job", Argv: []string{"python3", "infer.py"}, Devices: upto(2), GPUMiB: on(1, 12_000)})},
			want:  verdict{healthy: true}},

		// jupyter/notebook#5421: the notebook was cut off, the memory stayed; here its
		// kernel is left behind a dead jupyter server, beside the desktop.
		{name: "workstation: a dead notebook server's kernel beside the desktop", gpus: []int64{24564}, users: libUsers,
			procs: []actor{xorg, gnomeShell, shell("bash", alice, 3, actor{Name: "jupyter", Exit: true,
				Argv: []string{"/usr/bin/python3", "/usr/local/bin/jupyter-lab", "--no-browser", "--port", "8888"}, Exe: "jupyter-lab",
				Children: []actor{{Name: "kernel", Argv: []string{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f",
					"/home/alice/.local/share/jupyter/runtime/kernel-6628f1d1-8d60-4917-8726-51201bc21ff6.json"},
					Devices: []int{0}, GPUMiB: on(0, 8_525), Shm: deletedWeights("/dev/shm/sd-xl")}}})},
			want: verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"kernel"}}},

		// ipython/ipykernel#407 (the kernel's command line) and jupyter/notebook#2201: a live
		// user's notebook kernel idle for days is idle, not abandoned.
		{name: "idle notebook of a live user", gpus: h100s(1), users: libUsers,
			procs: []actor{shell("bash", alice, 20, actor{Name: "jupyter", Argv: []string{"/usr/bin/python3", "/usr/local/bin/jupyter-lab", "--no-browser", "--port", "8888"},
				Exe: "jupyter-lab", Age: 80 * time.Hour,
				Children: []actor{{Name: "kernel", Argv: []string{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f",
					"/home/alice/.local/share/jupyter/runtime/kernel-6628f1d1-8d60-4917-8726-51201bc21ff6.json"},
					Age: 72 * time.Hour, Devices: []int{0}, GPUMiB: on(0, 12_288)}}})},
			want: verdict{healthy: true, notSaid: []*regexp.Regexp{abandoned}}},

		// NVIDIA/k8s-device-plugin#720 and openmm/openmm#3873: an MPS control daemon, its
		// server, and live clients (type M+C).
		{name: "MPS server with live clients", gpus: h100s(1), users: libUsers,
			procs: []actor{{Name: "mps-control", Argv: []string{"nvidia-cuda-mps-control", "-d"}, Cgroup: "system.slice/nvidia-mps.service",
				Children: []actor{as(alice, actor{Name: "mps-server", Argv: []string{"nvidia-cuda-mps-server"}, Devices: []int{0}, Type: "C", GPUMiB: on(0, 310)})[0]}},
				shell("bash", alice, 21,
					actor{Name: "c0", Argv: []string{"python3", "infer.py", "--shard", "0"}, Devices: []int{0}, Type: "M+C", GPUMiB: on(0, 9_000)},
					actor{Name: "c1", Argv: []string{"python3", "infer.py", "--shard", "1"}, Devices: []int{0}, Type: "M+C", GPUMiB: on(0, 9_000)})},
			units: []libUnit{{name: "nvidia-mps.service", state: "active", main: "mps-control"}},
			want:  verdict{healthy: true}},

		// NVIDIA/nvidia-docker#1593 (MPS clients that exit and return): a client left over
		// from a dead launcher, the server serving a live one.
		{name: "MPS: a leftover client beside a live one", gpus: h100s(2), users: libUsers,
			procs: []actor{{Name: "mps-control", Argv: []string{"nvidia-cuda-mps-control", "-d"}, Cgroup: "system.slice/nvidia-mps.service",
				Children: []actor{as(alice, actor{Name: "mps-server", Argv: []string{"nvidia-cuda-mps-server"}, Devices: upto(2), Type: "C", GPUMiB: map[int]int64{0: 310, 1: 310}})[0]}},
				shell("bash", alice, 22,
					actor{Name: "live", Argv: []string{"python3", "infer.py", "--shard", "0"}, Devices: upto(2), Type: "M+C", GPUMiB: on(0, 9_000)},
					actor{Name: "launcher", Exit: true, Argv: []string{"python3", "launch.py"},
						Children: []actor{{Name: "left", Argv: []string{"python3", "-m", "sglang.launch_server", "--model-path", "/dev/shm/Qwen3-4B"}, Devices: upto(2), Type: "M+C",
							GPUMiB: on(1, 21_000), Shm: deletedWeights("/dev/shm/Qwen3-4B")}}})},
			units: []libUnit{{name: "nvidia-mps.service", state: "active", main: "mps-control"}},
			want:  verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"left"}, mayName: []string{"launcher"}}},

		// The ct200 report (issue 13): a server whose /dev/shm weights were rm -rf'd while
		// mapped, left running after its launcher exited, beside a healthy service.
		{name: "leftover with deleted /dev/shm weights beside a healthy service", gpus: h100s(2), users: libUsers,
			procs: []actor{vllmService("svc", 1, 30_000, 2),
				shell("bash", bob, 23, actor{Name: "left", Argv: []string{"python3", "-m", "sglang.launch_server", "--model-path", "/dev/shm/Qwen3.6-27B", "--tp", "1"},
					Devices: upto(2), GPUMiB: on(0, 50_000), Shm: deletedWeights("/dev/shm/Qwen3.6-27B")})},
			units: []libUnit{{name: "vllm.service", state: "active", main: "svc"}},
			want:  verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"left"}}},

		// The ct200 report's own cleanup (issue 13), seen as issue 17 §1 weighs it: the weights
		// directory rm -rf'd whole while mapped. Gone, it no longer says whose it was, and so
		// who could have removed it: the server is named for the operator's judgement, and no
		// line suggests killing it.
		{name: "weights directory removed whole: the operator judges", gpus: h100s(2), users: libUsers,
			procs: []actor{vllmService("svc", 1, 30_000, 2),
				shell("bash", bob, 25, actor{Name: "left", Argv: []string{"python3", "-m", "sglang.launch_server", "--model-path", "/dev/shm/Qwen3-8B", "--tp", "1"},
					Devices: upto(2), GPUMiB: on(0, 50_000), Shm: removedWeightsDir("/dev/shm/Qwen3-8B")})},
			units: []libUnit{{name: "vllm.service", state: "active", main: "svc"}},
			want: verdict{code: diagnose.CodeLeftoverUnconfirmed, culprits: []string{"left"},
				notSaid: []*regexp.Regexp{regexp.MustCompile(`(?m)^\s*(sudo )?kill `)}}},

		// Issue 16 §2: a leftover holding memory on GPU 2 and the device files of 0-3 is
		// blamed on GPU 2 alone, in Prometheus too.
		{name: "leftover on GPU 2 holding device files 0-3", gpus: h100s(4), users: libUsers,
			procs: []actor{vllmService("svc", 0, 30_000, 4),
				shell("bash", bob, 24, actor{Name: "launcher", Exit: true, Argv: []string{"bash", "serve.sh"},
					Children: []actor{{Name: "left", Argv: []string{"python3", "-m", "sglang.launch_server", "--model-path", "/dev/shm/Qwen3-14B"},
						Devices: upto(4), GPUMiB: on(2, 41_000), Shm: deletedWeights("/dev/shm/Qwen3-14B")}}})},
			units: []libUnit{{name: "vllm.service", state: "active", main: "svc"}},
			want:  verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"left"}, mayName: []string{"launcher"}}},

		// systemd KillMode=process (sgl-project/sglang#15165's lingering children, under a
		// unit): the old server stays in the unit's cgroup after a restart.
		{name: "KillMode=process stray beside the restarted service", gpus: h100s(2), users: libUsers,
			procs: []actor{
				{Name: "old", Argv: []string{"/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--tp", "1"},
					Cgroup: "system.slice/sglang.service", Age: 2 * time.Hour, Devices: upto(2), GPUMiB: on(0, 60_000)},
				{Name: "new", Argv: []string{"/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--tp", "1"},
					Cgroup: "system.slice/sglang.service", Devices: upto(2), GPUMiB: on(1, 60_000)}},
			units: []libUnit{{name: "sglang.service", state: "active", main: "new"}},
			want:  verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"old"}}},

		// A healthy unit service (vllm-project/vllm#11996's deployment, one GPU).
		{name: "healthy unit service", gpus: h100s(1), users: libUsers,
			procs: []actor{vllmService("svc", 0, 70_000, 1)},
			units: []libUnit{{name: "vllm.service", state: "active", main: "svc"}},
			want:  verdict{healthy: true}},

		// sgl-project/sglang#15165: tokenizer processes of a killed server linger without
		// GPU memory; the restarted server holds the GPU. Nothing on the GPUs is wrong.
		{name: "restarted SGLang beside lingering GPU-less tokenizers", gpus: h100s(1), users: libUsers,
			procs: []actor{shell("bash", bob, 25,
				actor{Name: "old", Exit: true, Argv: []string{"python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--tokenizer-worker-num", "2"},
					Children: []actor{
						{Name: "tok0", Argv: []string{"python3", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=8, pipe_handle=20)", "--multiprocessing-fork"}},
						{Name: "tok1", Argv: []string{"python3", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=8, pipe_handle=22)", "--multiprocessing-fork"}}}},
				actor{Name: "new", Argv: []string{"python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--tokenizer-worker-num", "2"},
					Children: []actor{spawnWorker("sched", 0, 70_000, []int{0})}})},
			want: verdict{healthy: true, mayName: []string{"tok0", "tok1"}}},

		// A long-running server a user started with nohup (the staged suite's "another user's
		// fresh GPU job" case): orphaned by design, alone on its GPU, and healthy.
		{name: "nohup'd server of a user", gpus: h100s(1), users: libUsers,
			procs: []actor{as(alice, actor{Name: "srv", Argv: []string{"python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "mistralai/Mistral-7B-Instruct-v0.3"},
				Cgroup: "user.slice/user-1000.slice/session-26.scope", Age: 20 * 24 * time.Hour, Devices: []int{0}, GPUMiB: on(0, 70_000)})[0]},
			want: verdict{healthy: true}},

		// ray-project/ray#18299 and qizhou000/VisEdit#5: memory in use that no process is
		// listed for: ghost memory, which blames no process.
		{name: "ghost memory beside a healthy service blames no one", gpus: h100s(2), users: libUsers,
			procs: []actor{vllmService("svc", 0, 40_000, 2)},
			units: []libUnit{{name: "vllm.service", state: "active", main: "svc"}},
			extra: map[int]int64{1: 10_151},
			want:  verdict{code: diagnose.CodeGhostMemory, gpus: []int{1}}},

		// A Slurm job's step on a node without GPU GRES (issue 16 §3): its GPU use is normal.
		{name: "Slurm job without GRES", gpus: h100s(2), users: libUsers,
			procs: []actor{as(alice, actor{Name: "step", Argv: []string{"python3", "train.py", "--config", "resnet.yaml"},
				Cgroup: "system.slice/slurmstepd.scope/job_4242/step_0/user/task_0", Devices: upto(2), GPUMiB: map[int]int64{0: 20_000, 1: 20_000}})[0]},
			want: verdict{healthy: true}},
		// facebookresearch/XLM#40: memory on GPU 0 that is "probably some other process";
		// here two users' jobs, each on its own GPUs, both alive.
		{name: "two users' jobs on their own GPUs", gpus: h100s(4), users: libUsers,
			procs: []actor{
				shell("bash", alice, 30, actor{Name: "a", Argv: []string{"python3", "finetune.py", "--model", "Qwen/Qwen3-8B"}, Devices: upto(4),
					Children: []actor{spawnWorker("a0", 0, 40_000, upto(4)), spawnWorker("a1", 1, 40_000, upto(4))}}),
				shell("bash", bob, 31, actor{Name: "b", Argv: []string{"python3", "eval.py"}, Devices: upto(4), GPUMiB: map[int]int64{2: 30_000, 3: 30_000}})},
			want: verdict{healthy: true}},

		// noctalia-dev/noctalia#1949: a Wayland session's compositor and Xwayland hold GPU
		// memory as graphics processes.
		{name: "Wayland session: compositor and Xwayland", gpus: []int64{24564}, users: libUsers,
			procs: []actor{as(alice, actor{Name: "compositor", Argv: []string{"/usr/bin/gnome-shell"}, Cgroup: "user.slice/user-1000.slice/user@1000.service/session.slice/org.gnome.Shell@wayland.service",
				Devices: []int{0}, Type: "G", GPUMiB: on(0, 295),
				Children: []actor{{Name: "Xwayland", Argv: []string{"/usr/bin/Xwayland", ":1", "-rootless", "-noreset", "-accessx", "-core", "-listenfd", "51", "-listenfd", "52", "-displayfd", "98"},
					Devices: []int{0}, Type: "G", GPUMiB: on(0, 44)}}})[0]},
			want: verdict{healthy: true}},

		// Issue 16 §2 on an 8-GPU server: a leftover with memory on GPU 3 alone holds the
		// device files of all eight, beside a TP-4 vLLM on GPUs 4-7.
		{name: "leftover on GPU 3 of 8 beside a TP-4 service", gpus: h100s(8), users: libUsers,
			procs: []actor{func() actor {
				v := vllmServe("svc", "meta-llama/Llama-3.3-70B-Instruct", 4, 4, 8, 70_000)
				v.Cgroup = "system.slice/vllm.service"
				return v
			}(), shell("bash", bob, 32, actor{Name: "launcher", Exit: true, Argv: []string{"python3", "bench.py"},
				Children: []actor{{Name: "left", Argv: []string{"python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/dev/shm/Mistral-7B"},
					Devices: upto(8), GPUMiB: on(3, 20_000), Shm: deletedWeights("/dev/shm/Mistral-7B")}}})},
			units: []libUnit{{name: "vllm.service", state: "active", main: "svc"}},
			want:  verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"left"}, mayName: []string{"launcher", "svc-tracker"}}},
		// --- A fresh pair of eyes (the attack pass): everyday hosts and a tenant's tricks. ---

		// vllm-project/vllm's Docker deployment (docs "Using Docker"; vllm/vllm-openai's
		// ENTRYPOINT is python3 -m vllm.entrypoints.openai.api_server): run without --init,
		// the API server is PID 1 of the container's PID namespace, and it launched the engine
		// core (VLLM::EngineCore) that launched the TP workers. Its children are its own, not
		// orphans it adopted: nothing is wrong.
		{name: "vLLM TP-2 in a container: the API server is the namespace's PID 1", gpus: h100s(2), users: libUsers,
			procs: []actor{{Name: "api", PIDNS: true, Argv: []string{"python3", "-m", "vllm.entrypoints.openai.api_server",
				"--model", "Qwen/Qwen2.5-32B-Instruct", "--tensor-parallel-size", "2"},
				Cgroup: "system.slice/docker-" + ctrID + ".scope",
				Children: []actor{{Name: "engine", Argv: []string{"VLLM::EngineCore"}, Exe: "python3", Comm: "VLLM::EngineCore",
					Children: []actor{
						{Name: "tp0", Argv: []string{"VLLM::Worker_TP0"}, Exe: "python3", Comm: "VLLM::Worker_TP0", Devices: upto(2), GPUMiB: on(0, 70_112)},
						{Name: "tp1", Argv: []string{"VLLM::Worker_TP1"}, Exe: "python3", Comm: "VLLM::Worker_TP1", Devices: upto(2), GPUMiB: on(1, 70_112)}}}}}},
			want: verdict{healthy: true, notSaid: []*regexp.Regexp{abandoned}}},

		// The same deployment with a script as the container's command (docker run IMAGE bash
		// -c "python3 serve.py ..."; sgl-project/sglang#15165's lingering children): the
		// launcher died, its workers were re-parented to bash, PID 1 of the namespace, which
		// launches no multiprocessing worker itself. They are the leftovers.
		{name: "bash as a container's PID 1 adopts the workers of a dead launcher", gpus: h100s(2), users: libUsers,
			procs: []actor{{Name: "bash", PIDNS: true, Argv: []string{"bash", "-c", "python3 serve.py --tp 2; sleep infinity"},
				Cgroup: "system.slice/docker-" + ctrID + ".scope",
				Children: []actor{{Name: "launcher", Exit: true, Argv: []string{"python3", "serve.py", "--tp", "2"},
					Children: []actor{spawnWorker("w0", 0, 60_000, upto(2)), spawnWorker("w1", 1, 60_000, upto(2))}}}}},
			want: verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"w0", "w1"}, mayName: []string{"launcher"}, notKilled: []string{"bash"}}},

		// pytorch/pytorch#4293's sweep script that never waits for its children, one level up:
		// the launcher it started exited and stays a zombie (its parent never reaps it); the
		// launcher's worker was re-parented at once to the box's init and keeps the GPU. The
		// worker is the leftover; the sweep, alive, is not to be killed, and the zombie
		// launcher holds nothing.
		{name: "a worker whose launcher is a zombie of a sweep that never reaps", gpus: h100s(1), users: libUsers,
			procs: []actor{shell("bash", alice, 62, actor{Name: "sweep", NoReap: true, Argv: []string{"python3", "sweep.py", "--trials", "64"},
				Children: []actor{{Name: "launcher", Exit: true, Argv: []string{"python3", "trial.py", "--lr", "3e-4"},
					Children: []actor{spawnWorker("w", 0, 22_000, []int{0})}}}})},
			want: verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"w"}, mayName: []string{"launcher"}}},

		// Supervisor's docs ("Running supervisord" in a container, nodaemon=true) with vLLM as
		// one of its programs: the API server crashed (vllm-project/vllm#16259) and its engine
		// core and TP workers were re-parented to supervisord, PID 1 of the container. A Python
		// init that launches no vLLM engine core adopted them: they are the leftovers.
		{name: "vLLM's orphans under supervisord, its container's PID 1", gpus: h100s(2), users: libUsers,
			procs: []actor{{Name: "supervisord", PIDNS: true, Argv: []string{"/usr/bin/python3", "/usr/bin/supervisord", "-n", "-c", "/etc/supervisor/supervisord.conf"},
				Exe: "supervisord", Cgroup: "system.slice/docker-" + ctrID + ".scope",
				Children: []actor{{Name: "api", Exit: true, Argv: []string{"python3", "-m", "vllm.entrypoints.openai.api_server",
					"--model", "Qwen/Qwen2.5-32B-Instruct", "--tensor-parallel-size", "2"},
					Children: []actor{{Name: "engine", Argv: []string{"VLLM::EngineCore"}, Exe: "python3", Comm: "VLLM::EngineCore",
						Children: []actor{
							{Name: "tp0", Argv: []string{"VLLM::Worker_TP0"}, Exe: "python3", Comm: "VLLM::Worker_TP0", Devices: upto(2), GPUMiB: on(0, 70_112)},
							{Name: "tp1", Argv: []string{"VLLM::Worker_TP1"}, Exe: "python3", Comm: "VLLM::Worker_TP1", Devices: upto(2), GPUMiB: on(1, 70_112)}}}}}}}},
			want: verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"tp0", "tp1"}, mayName: []string{"engine", "api"}, notKilled: []string{"supervisord"}}},

		// wookayin/gpustat#18 and jupyter/help#221 (a desktop's Xorg and gnome-shell on the
		// compute GPU) with the staged suite's nohup'd server: GDM runs Xorg as the logged-in
		// user, restarted at each login; the user's server, nohup'd weeks ago, is no older
		// "than the host's other GPU work" because a display started since.
		{name: "a user's nohup'd server beside the desktop of a fresh login", gpus: []int64{49140}, users: libUsers,
			procs: []actor{
				as(alice, actor{Name: "userXorg", Argv: xorg.Argv, Exe: "Xorg", Cgroup: "user.slice/user-1000.slice/session-2.scope",
					Age: 26 * time.Hour, Devices: []int{0}, Type: "G", GPUMiB: on(0, 421)})[0],
				func() actor { g := gnomeShell; g.Age = 26 * time.Hour; return g }(),
				as(alice, actor{Name: "srv", Argv: []string{"python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "mistralai/Mistral-7B-Instruct-v0.3"},
					Cgroup: "user.slice/user-1000.slice/session-1.scope", Age: 20 * 24 * time.Hour, Devices: []int{0}, GPUMiB: on(0, 40_000)})[0]},
			want: verdict{healthy: true, notSaid: []*regexp.Regexp{abandoned}}},

		// A tenant names a leftover of their own Xorg (exec -a Xorg) to hide it beside a real
		// desktop and another user's job: it may hide itself (the name protects it), but
		// nothing else may be blamed for its 40 GB.
		{name: "a tenant's leftover titled Xorg blames no one else", gpus: []int64{49140, 49140}, users: libUsers,
			procs: []actor{xorg, gnomeShell,
				shell("bash", alice, 3, actor{Name: "train", Argv: []string{"python3", "train.py"}, Devices: upto(2), GPUMiB: on(1, 20_000)}),
				shell("bash", bob, 4, actor{Name: "launcher", Exit: true, Argv: []string{"python3", "launch.py"},
					Children: []actor{{Name: "fakeX", Argv: []string{"Xorg", ":7"}, Exe: "Xorg", Devices: upto(2), GPUMiB: on(0, 40_000)}}})},
			want: verdict{mayName: []string{"fakeX", "launcher"}}},

		// The same trick with the MPS server's name, beside a real MPS with a live client
		// (NVIDIA/k8s-device-plugin#720's setup).
		{name: "a tenant's leftover titled nvidia-cuda-mps-server blames no one else", gpus: h100s(2), users: libUsers,
			procs: []actor{{Name: "mps-control", Argv: []string{"nvidia-cuda-mps-control", "-d"}, Cgroup: "system.slice/nvidia-mps.service",
				Children: []actor{as(alice, actor{Name: "mps-server", Argv: []string{"nvidia-cuda-mps-server"}, Devices: []int{0}, GPUMiB: on(0, 310)})[0]}},
				shell("bash", alice, 21, actor{Name: "client", Argv: []string{"python3", "infer.py"}, Devices: []int{0}, Type: "M+C", GPUMiB: on(0, 9_000)}),
				shell("bash", bob, 22, actor{Name: "launcher", Exit: true, Argv: []string{"python3", "launch.py"},
					Children: []actor{{Name: "fakeMPS", Argv: []string{"nvidia-cuda-mps-server"}, Devices: upto(2), GPUMiB: on(1, 40_000)}}})},
			units: []libUnit{{name: "nvidia-mps.service", state: "active", main: "mps-control"}},
			want:  verdict{mayName: []string{"fakeMPS", "launcher"}}},

		// A tenant's process titled VLLM::Worker_TP0 (setproctitle) run by the tenant's own
		// user manager (systemd-run --user): read as an orphaned vLLM worker, it is the
		// tenant's own; the user manager, and the other user's service, are innocent.
		{name: "a process titled VLLM::Worker_TP0 under its owner's systemd --user", gpus: h100s(2), users: libUsers,
			procs: []actor{vllmService("svc", 1, 40_000, 2),
				as(bob, actor{Name: "manager", Argv: []string{"/lib/systemd/systemd", "--user"}, Exe: "systemd",
					Cgroup: "user.slice/user-1001.slice/user@1001.service/init.scope",
					// In the manager's own cgroup: the box cannot hand bob a cgroup of his own to move to.
					Children: []actor{{Name: "titled", Argv: []string{"VLLM::Worker_TP0"}, Exe: "python3", Comm: "VLLM::Worker_TP0",
						Devices: upto(2), GPUMiB: on(0, 40_000)}}})[0]},
			units: []libUnit{{name: "vllm.service", state: "active", main: "svc"}},
			want:  verdict{mayName: []string{"titled"}, notKilled: []string{"manager"}}},

		// NVIDIA's MPS documentation: the server stays while the control daemon runs; here
		// no client is left. The daemon and its unit are never to stop for the server's
		// memory (the server may be named).
		{name: "MPS server with no live clients", gpus: h100s(1), users: libUsers,
			procs: []actor{{Name: "mps-control", Argv: []string{"nvidia-cuda-mps-control", "-d"}, Cgroup: "system.slice/nvidia-mps.service",
				Children: []actor{as(alice, actor{Name: "mps-server", Argv: []string{"nvidia-cuda-mps-server"}, Devices: []int{0}, GPUMiB: on(0, 310)})[0]}}},
			units: []libUnit{{name: "nvidia-mps.service", state: "active", main: "mps-control"}},
			want:  verdict{mayName: []string{"mps-server"}}},

		// pytorch/pytorch#76287's command lines on a shared host: alice's torchrun, nohup'd
		// three days ago, and bob's with the very same argv started since on other GPUs. No
		// generation spans users or GPUs.
		{name: "two users' torchrun jobs with identical argv", gpus: h100s(4), users: libUsers,
			procs: []actor{
				as(alice, func() actor {
					a := torchrun("ajob", 2, 40_000, "train.py", "--config", "llama.yaml")
					a.Cgroup, a.Age = "user.slice/user-1000.slice/session-40.scope", 72*time.Hour
					for i := range a.Children {
						a.Children[i].Age = 72 * time.Hour
					}
					return a
				}())[0],
				shell("bash", bob, 41, actor{Name: "bjob", Argv: []string{"/usr/bin/python3", "/usr/local/bin/torchrun", "--nproc-per-node", "2", "train.py", "--config", "llama.yaml"},
					Exe: "torchrun", Children: []actor{
						rank("bjob-rank0", 2, 40_000, 4, "train.py", "--config", "llama.yaml"),
						rank("bjob-rank1", 3, 40_000, 4, "train.py", "--config", "llama.yaml")}})},
			want: verdict{healthy: true}},

		// A pre-forking server (gunicorn's model, and vLLM's forked frontend processes) nohup'd
		// days ago: its forked child holds memory of its own on the same GPU with the very same
		// command line. It is the server's work, not its next generation.
		{name: "a forked child of a live nohup'd server holds memory itself", gpus: h100s(1), users: libUsers,
			procs: []actor{as(alice, actor{Name: "srv", Argv: []string{"python3", "serve.py", "--port", "9000"}, Cgroup: "user.slice/user-1000.slice/session-42.scope",
				Age: 5 * 24 * time.Hour, Devices: []int{0}, GPUMiB: on(0, 20_000),
				Children: []actor{{Name: "child", Argv: []string{"python3", "serve.py", "--port", "9000"}, Devices: []int{0}, GPUMiB: on(0, 2_000)}}})[0]},
			want: verdict{healthy: true, notSaid: []*regexp.Regexp{abandoned}}},

		// jupyter/notebook#2201 on a server: the jupyter server was nohup'd and its user logged
		// out; the kernel, a live server's, has sat idle for days beside another user's fresh
		// job on the same GPU. It is idle, never abandoned.
		{name: "idle kernel of a nohup'd jupyter beside another user's fresh job", gpus: h100s(1), users: libUsers,
			procs: []actor{as(alice, actor{Name: "jupyter", Argv: []string{"/usr/bin/python3", "/usr/local/bin/jupyter-lab", "--no-browser", "--port", "8888"},
				Exe: "jupyter-lab", Age: 10 * 24 * time.Hour, Cgroup: "user.slice/user-1000.slice/session-43.scope",
				Children: []actor{{Name: "kernel", Argv: []string{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f",
					"/home/alice/.local/share/jupyter/runtime/kernel-6628f1d1-8d60-4917-8726-51201bc21ff6.json"},
					Age: 9 * 24 * time.Hour, Devices: []int{0}, GPUMiB: on(0, 12_288)}}})[0],
				shell("bash", bob, 44, actor{Name: "bjob", Argv: []string{"python3", "finetune.py"}, Devices: []int{0}, GPUMiB: on(0, 30_000)})},
			want: verdict{healthy: true, notSaid: []*regexp.Regexp{abandoned}}},

		// pytorch/pytorch#19529 (each DataLoader worker that touches CUDA makes a context of
		// its own): a live trainer listed on GPU 0 and its forked workers listed with a few
		// hundred MiB each. Nothing is wrong.
		{name: "live trainer's DataLoader workers with contexts of their own", gpus: h100s(1), users: libUsers,
			procs: []actor{shell("bash", alice, 45, actor{Name: "trainer", Argv: []string{"python3", "train.py", "--epochs", "90"},
				Devices: []int{0}, GPUMiB: on(0, 30_500), Age: 30 * time.Hour,
				Children: []actor{
					{Name: "dl0", Argv: []string{"python3", "train.py", "--epochs", "90"}, Devices: []int{0}, GPUMiB: on(0, 420)},
					{Name: "dl1", Argv: []string{"python3", "train.py", "--epochs", "90"}, Devices: []int{0}, GPUMiB: on(0, 420)}}})},
			want: verdict{healthy: true}},

		// pytorch/pytorch#1085 on a shared GPU: alice's trainer was OOM-killed and its
		// DataLoader workers keep its memory, while bob trains on the same GPU (his workers hold
		// /dev/nvidia0 too, as every DataLoader worker does) and watches it in nvtop, which holds
		// every device as NVML does. Only alice's workers are to stop; bob's are no suspects.
		{name: "dead trainer's workers beside another user's live trainer and nvtop", gpus: h100s(1), users: libUsers,
			procs: []actor{
				shell("bash", alice, 50, actor{Name: "trainer", Exit: true, Argv: []string{"python3", "train.py", "--epochs", "90"},
					Devices: []int{0}, GPUMiB: on(0, 30_500),
					Children: []actor{
						{Name: "dl0", Argv: []string{"python3", "train.py", "--epochs", "90"}, Devices: []int{0}},
						{Name: "dl1", Argv: []string{"python3", "train.py", "--epochs", "90"}, Devices: []int{0}}}}),
				bobTrainingWatched(51)},
			want: verdict{code: diagnose.CodeDeadPIDMemory, culprits: []string{"dl0", "dl1"}, gpus: []int{0}, mayName: []string{"trainer"}}},

		// The same host a moment later (pytorch/pytorch#1085's "the memory stays listed"): no
		// survivor of alice's trainer holds the device, the driver has yet to free its memory;
		// bob's live trainer's DataLoader workers and his nvtop hold the device. None of them
		// is a suspect for alice's memory.
		{name: "memory of a gone PID with only another user's live work on the device", gpus: h100s(1), users: libUsers,
			procs: []actor{
				shell("bash", alice, 52, actor{Name: "trainer", Exit: true, Argv: []string{"python3", "train.py", "--epochs", "90"},
					Devices: []int{0}, GPUMiB: on(0, 30_500)}),
				bobTrainingWatched(53)},
			want: verdict{code: diagnose.CodeDeadPIDMemory, gpus: []int{0}, mayName: []string{"trainer"}}},

		// A cloud GPU VM where everyone is root (Lambda, RunPod and vast.ai images log in as
		// root): root nohup'd a vLLM server three weeks ago; a container (vllm/vllm-openai, run
		// as root) was started on the other GPU two hours ago. A container's start says nothing
		// of the hand-started server's age: nothing is wrong.
		{name: "root's nohup'd server beside a fresh container on a cloud VM", gpus: h100s(2), users: libUsers,
			procs: []actor{
				{Name: "srv", Argv: []string{"python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "mistralai/Mistral-7B-Instruct-v0.3"},
					Cgroup: "user.slice/user-0.slice/session-1.scope", Age: 21 * 24 * time.Hour, Devices: upto(2), GPUMiB: on(0, 70_000)},
				{Name: "ctr", PIDNS: true, Argv: []string{"python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen3-8B"},
					Cgroup: "system.slice/docker-" + ctrID + ".scope", Age: 2 * time.Hour, Devices: upto(2), GPUMiB: on(1, 70_000)}},
			want: verdict{healthy: true, notSaid: []*regexp.Regexp{abandoned}}},

		// The same VM with the second server a system service (ollama's installer runs
		// ollama.service as a system user) restarted an hour ago.
		{name: "root's nohup'd server beside a freshly restarted system service", gpus: h100s(2), users: append(libUsers, "ollama:x:998:998::/usr/share/ollama:/bin/false"),
			procs: []actor{
				{Name: "srv", Argv: []string{"python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "mistralai/Mistral-7B-Instruct-v0.3"},
					Cgroup: "user.slice/user-0.slice/session-1.scope", Age: 21 * 24 * time.Hour, Devices: upto(2), GPUMiB: on(0, 70_000)},
				as(998, actor{Name: "ollama", Argv: []string{"/usr/local/bin/ollama", "serve"}, Cgroup: "system.slice/ollama.service",
					Age: time.Hour, Devices: upto(2), GPUMiB: on(1, 30_000)})[0]},
			units: []libUnit{{name: "ollama.service", state: "active", main: "ollama"}},
			want:  verdict{healthy: true, notSaid: []*regexp.Regexp{abandoned}}},

		// A launcher whose main thread ended while its other threads run (a zombie leader,
		// apache/mxnet#4242's state) with its worker on the GPU: the launcher lives, so its
		// worker is no orphan.
		{name: "worker of a zombie-leader launcher", gpus: h100s(1), users: libUsers,
			procs: []actor{shell("bash", bob, 54, actor{Name: "launcher", ExitLeader: true, Argv: []string{"python3", "launch.py"},
				Children: []actor{spawnWorker("w", 0, 30_000, []int{0})}})},
			want: verdict{mayName: []string{"launcher"}}},

		// DLR-RM/stable-baselines3's SubprocVecEnv (multiprocessing workers, forkserver or
		// spawn) with MuJoCo rendering through EGL (MUJOCO_GL=egl) and torch on CUDA: nvidia-smi
		// types each worker C+G. The trainer was killed; its workers, orphaned, keep their
		// compute contexts. A graphics context beside a compute one makes no desktop: they are
		// the leftovers, and the workstation's Xorg is not blamed.
		{name: "EGL-rendering workers (C+G) of a killed RL trainer beside the desktop", gpus: []int64{24564}, users: libUsers,
			procs: []actor{xorg, shell("bash", alice, 55, actor{Name: "trainer", Exit: true,
				Argv: []string{"python3", "train_ppo.py", "--env", "Humanoid-v4", "--n-envs", "2"}, Devices: []int{0},
				Children: []actor{
					func() actor { w := spawnWorker("env0", 0, 1_210, []int{0}); w.Type = "C+G"; return w }(),
					func() actor { w := spawnWorker("env1", 0, 1_210, []int{0}); w.Type = "C+G"; return w }()}})},
			want: verdict{code: diagnose.CodeLeftoverProcess, culprits: []string{"env0", "env1"}, mayName: []string{"trainer"}}},

		// A researcher's everyday week (pytorch/pytorch#147064's nohup'd runs): alice nohup'd a
		// three-day training on GPU 0 and logged out; today she started a short experiment on
		// GPU 1 from a live shell. Debatable, and so pending: muchOlder calls the training "much
		// older than its user's other work" and, orphaned, abandoned (the seed's "orphaned and
		// much older than its own user's other work" wants exactly that), yet nothing but its
		// age and nohup speaks against it, and both are how long runs are started by hand.
		{name: "a researcher's nohup'd training beside her fresh experiment", gpus: h100s(2), users: libUsers,
			procs: []actor{
				as(alice, actor{Name: "train", Argv: []string{"python3", "train.py", "--config", "llama-8b.yaml"}, Cgroup: "user.slice/user-1000.slice/session-60.scope",
					Age: 3 * 24 * time.Hour, Devices: upto(2), GPUMiB: on(0, 70_000)})[0],
				shell("bash", alice, 61, actor{Name: "exp", Argv: []string{"python3", "probe_lr.py"}, Devices: upto(2), GPUMiB: on(1, 20_000)})},
			want: verdict{healthy: true, notSaid: []*regexp.Regexp{abandoned}}},
	}
}
