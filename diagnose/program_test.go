package diagnose

import (
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
