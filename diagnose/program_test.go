package diagnose

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/parse"
)

func TestProgramOf(t *testing.T) {
	spawn := []string{"/usr/bin/python3", "-B", "-c",
		"from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=4, pipe_handle=6)", "--multiprocessing-fork"}
	tests := []struct {
		argv            []string
		comm            string
		program, engine string
	}{
		{[]string{"/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "/m"}, "python3", "sglang.launch_server", "SGLang"},
		{[]string{"python3", "-u", "-m", "vllm.entrypoints.openai.api_server", "--model", "x"}, "", "vllm.entrypoints.openai.api_server", "vLLM"},
		{[]string{"/usr/bin/python3.12", "/usr/local/bin/vllm", "serve", "meta/Llama"}, "", "vllm serve", "vLLM"},
		{[]string{"/opt/venv/bin/vllm", "serve", "--model", "x"}, "", "vllm serve", "vLLM"},
		{[]string{"vllm", "--version"}, "", "vllm", "vLLM"},
		{[]string{"/usr/bin/python", "/opt/venv/bin/torchrun", "--nproc-per-node=8", "train.py", "--lr", "3e-4"}, "", "torchrun train.py", "torchrun"},
		{[]string{"torchrun", "--nnodes", "2", "/src/train/train.py"}, "", "torchrun train.py", "torchrun"},
		{[]string{"python3", "-m", "torch.distributed.run", "--nproc_per_node", "8", "pretrain.py"}, "", "torchrun pretrain.py", "torchrun"},
		{[]string{"torchrun", "-m", "mypkg.train"}, "", "torchrun -m mypkg.train", "torchrun"},
		{[]string{"ray::RayWorkerWrapper.execute_method"}, "", "ray::RayWorkerWrapper.execute_method", "Ray"},
		{[]string{"ray::IDLE", "", ""}, "", "ray::IDLE", "Ray"},
		{[]string{"sglang::scheduler_TP0"}, "", "sglang::scheduler_TP0", "SGLang"},
		{[]string{"VLLM::EngineCore"}, "", "VLLM::EngineCore", "vLLM"},
		{[]string{"/usr/local/bin/text-generation-launcher", "--model-id", "x"}, "", "text-generation-launcher", "TGI"},
		{[]string{"/opt/conda/bin/python", "-m", "text_generation_server.cli", "serve"}, "", "text_generation_server.cli", "TGI"},
		{[]string{"/opt/tritonserver/bin/tritonserver", "--model-repository=/models"}, "", "tritonserver", "Triton"},
		{[]string{"python3", "-m", "jax.distributed"}, "", "jax.distributed", "JAX"},
		{[]string{"python3", "train.py", "--epochs", "3"}, "", "train.py", ""},
		{[]string{"python3", "-W", "ignore", "-X", "faulthandler", "serve.py"}, "", "serve.py", ""},
		{[]string{"python3", "-c", "import torch; torch.cuda.init()"}, "", "python -c", ""},
		{[]string{"python3"}, "", "python", ""},
		{spawn, "python3", "multiprocessing worker", ""},
		{[]string{"/usr/bin/gcs_server", "--x"}, "", "gcs_server", "Ray"},
		{nil, "kworker/0:1", "kworker/0:1", ""},
		{[]string{"/bin/sh", "-c", "x"}, "", "sh", ""},
		{[]string{strings.Repeat("é", 100)}, "", strings.Repeat("é", 32) + "…", ""},
	}
	for _, tt := range tests {
		p, e := programOf(tt.argv, tt.comm)
		if p != tt.program || e != tt.engine {
			t.Errorf("programOf(%q) = %q, %q; want %q, %q", tt.argv, p, e, tt.program, tt.engine)
		}
	}
}

// A multiprocessing worker is named after its parent when the probe captured the parent, and
// carries the parent's command line; without the parent it stays a worker of unknown program.
func TestProgramWorkerParent(t *testing.T) {
	one, zero := int64(70000), 0
	uuid := "GPU-0"
	parentArgv := []string{"/usr/bin/python3", "/usr/local/bin/vllm", "serve", "/models/llama"}
	workerArgv := []string{"python3", "-c", "from multiprocessing.spawn import spawn_main", "--multiprocessing-fork"}
	ppid, orphan := 100, 999
	s := &parse.Snapshot{
		GPUs: []parse.GPU{{Index: 0, UUID: uuid}},
		Apps: []parse.ComputeApp{{PID: 101, GPUUUID: uuid, UsedMiB: &one}, {PID: 201, GPUUUID: uuid, UsedMiB: &one}},
		Processes: []parse.Process{
			{PID: 100, UID: &zero, Argv: parentArgv, Comm: "python3"},
			{PID: 101, UID: &zero, PPID: &ppid, Argv: workerArgv, Comm: "python3"},
			{PID: 201, UID: &zero, PPID: &orphan, Argv: workerArgv, Comm: "python3"},
		},
	}
	r := Diagnose(s, time.Unix(0, 0))
	got := map[int]GPUProcess{}
	for _, p := range r.Processes {
		got[p.PID] = p
	}
	if p := got[101]; p.Program != "vllm serve worker" || p.Engine != "vLLM" || strings.Join(p.ParentArgv, " ") != strings.Join(parentArgv, " ") {
		t.Errorf("worker with parent: program %q engine %q parent %q", p.Program, p.Engine, p.ParentArgv)
	}
	if p := got[201]; p.Program != "multiprocessing worker" || p.Engine != "" || p.ParentArgv != nil {
		t.Errorf("worker without parent: program %q engine %q parent %q", p.Program, p.Engine, p.ParentArgv)
	}
}

// A worker is named after what launched it whatever the probe described its parent for: a
// spawn child of a server that holds no GPU (described only as a parent), a fork that kept
// the server's command line, a worker of a spawned engine whose own parent is the server. A
// parent that started after its child holds a reused PID, and a parent that exited says
// nothing; a process that is no worker keeps its own name.
func TestProgramWorkerOrigins(t *testing.T) {
	spawn := []string{"python3", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)", "--multiprocessing-fork"}
	vllm := []string{"/usr/bin/python3", "/usr/local/bin/vllm", "serve", "--model", "/m"}
	train := []string{"python3", "train.py", "--lr", "3e-4"}
	sglang := []string{"python3", "-m", "sglang.launch_server", "--tp", "2"}
	forkserver := []string{"python3", "-m", "multiprocessing.forkserver"}
	ctx := func(p parse.Process) parse.Process { p.ParentOnly = true; return p }
	gone := parse.Process{PID: 600, Gone: true, ParentOnly: true}
	procs := []parse.Process{
		ctx(proc(100, 50, "S", 0, "root", time.Hour, vllm...)),
		proc(101, 100, "S", 0, "root", time.Hour-time.Second, spawn...),
		proc(102, 100, "S", 0, "root", time.Hour-time.Second, spawn...),
		ctx(proc(300, 50, "S", 0, "root", time.Hour, train...)),
		proc(301, 300, "S", 0, "root", time.Minute, train...),
		ctx(proc(399, 50, "S", 0, "root", time.Hour, sglang...)),
		proc(400, 399, "S", 0, "root", time.Hour, spawn...),
		proc(401, 400, "S", 0, "root", time.Hour, spawn...),
		ctx(proc(500, 50, "S", 0, "root", time.Second, vllm...)), // started after 501
		proc(501, 500, "S", 0, "root", time.Hour, spawn...),
		gone,
		proc(601, 600, "S", 0, "root", time.Hour, spawn...),
		ctx(proc(700, 50, "S", 0, "root", time.Hour, "torchrun", "--nproc-per-node=1", "train.py")),
		proc(701, 700, "S", 0, "root", time.Hour, train...),
		ctx(proc(801, 800, "S", 0, "root", time.Hour, forkserver...)),
		proc(802, 801, "S", 0, "root", time.Hour, forkserver...),
	}
	s := &parse.Snapshot{Host: baseHost(0), GPUs: idleRTX(1), Processes: procs}
	for _, p := range procs {
		if !p.ParentOnly {
			s.Apps = append(s.Apps, app(p.PID, 0, 1000, "python3"))
		}
	}
	want := map[int]struct {
		program, engine string
		parent          []string
	}{
		101: {"vllm serve worker", "vLLM", vllm},
		301: {"train.py worker", "", train},
		400: {"sglang.launch_server worker", "SGLang", sglang},
		401: {"sglang.launch_server worker", "SGLang", spawn},
		501: {"multiprocessing worker", "", nil},
		601: {"multiprocessing worker", "", nil},
		701: {"train.py", "", nil},
		802: {"multiprocessing worker", "", forkserver}, // one level up: 801's parent 800 is not known
	}
	h := newHost(s, refTime)
	for _, gp := range h.procs {
		w, ok := want[gp.PID]
		if !ok {
			continue
		}
		if gp.Program != w.program || gp.Engine != w.engine || !slices.Equal(gp.ParentArgv, w.parent) {
			t.Errorf("PID %d: program %q engine %q parent %q; want %q %q %q", gp.PID, gp.Program, gp.Engine, gp.ParentArgv, w.program, w.engine, w.parent)
		}
	}
	// A parent described only as such is context: the workers still group under it, not under
	// the shell above it with every other job started there.
	for _, pid := range []int{101, 102} {
		if k := h.jobKey(h.gpByPID[pid]); k != "ppid 100" {
			t.Errorf("PID %d: job %q, want ppid 100", pid, k)
		}
	}
	for _, gp := range h.procs {
		if gp.PID == 100 || gp.PID == 300 {
			t.Errorf("parent PID %d became a GPU process: %+v", gp.PID, gp)
		}
	}
}
