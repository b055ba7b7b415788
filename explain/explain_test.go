package explain

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gputriage/gputriage/internal/testenv"
)

// want is what one explanation must say. Numbers are keyed by name, or name@rank for a
// number that belongs to a rank; values must match to 0.005.
type want struct {
	family, variant string
	numbers         map[string]float64
	pids            []PIDMemory
	device          *int
	bus             string
	meaning         []string // substrings of Meaning
	notes           []string // substrings of some note
	next            []string // substrings of some Next step
	lines           int      // lines quoted
}

// The incident that started this project: TP rank 3 of an 8-GPU SGLang server, with a leftover
// server holding memory on another GPU.
const incident = "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. " +
	"pre_model_load_memory=39.74761962890625, local_gpu_memory=93.7274169921875, local_gpu_memory * 0.9=84.35467529296875"

func TestExplainCorpus(t *testing.T) {
	dir := filepath.Join("..", "..", "shared", "corpus")
	if _, err := os.Stat(dir); err != nil {
		testenv.SkipSuite(t, "corpus", "../shared/corpus beside this checkout", fmt.Sprintf("corpus not present: %v", err))
	}
	zero, three := 0, 3
	cases := map[string]want{
		"sglang_unbalanced_v1_no-numbers.txt": {
			family: FamilySGLangUnbalanced, variant: "no-numbers", lines: 1,
			notes: []string{"raises unconditionally", "check your version's source"},
			next:  []string{"gputriage HOST   # and with --tp N --engine sglang"},
		},
		"vllm_free-memory_a100-80g_orphan-server.txt": {
			family: FamilyVLLMFreeMemory, variant: "with-device", device: &zero, lines: 1,
			numbers: map[string]float64{"free": 4.22, "total": 79.14, "gpu_memory_utilization": 0.9, "requested": 71.22,
				"in_use": 74.92, "shortfall": 67.00, "held_by_others_min": 73.42, "held_by_others_max": 74.92, "max_gpu_memory_utilization": 0.05, "suggested_gpu_memory_utilization": 0.04},
			meaning: []string{"74.92 GiB", "cuda:0"},
			notes:   []string{"free the memory instead"},
			next:    []string{"gputriage HOST --tp 1 --engine vllm --gpu-memory-utilization 0.9   #"},
		},
		"vllm_free-memory_no-device-name.txt": {
			family: FamilyVLLMFreeMemory, variant: "without-device", lines: 1,
			numbers: map[string]float64{"free": 30.02, "total": 31.84, "gpu_memory_utilization": 0.95, "requested": 30.25,
				"in_use": 1.82, "max_gpu_memory_utilization": 0.94, "suggested_gpu_memory_utilization": 0.93},
			next: []string{"--gpu-memory-utilization 0.93"},
		},
		"pytorch_oom_capacty-typo_process-line.txt": {
			family: FamilyTorchOOM, variant: "total-capacty", device: &zero, lines: 1,
			numbers: map[string]float64{"requested": 496.0 / 1024, "total": 14.75, "free": 235.06 / 1024,
				"allocated": 14.06, "reserved_unallocated": 330.42 / 1024},
			pids:    []PIDMemory{{PID: 20398, GiB: 14.52, LikelySelf: true}},
			meaning: []string{"PID 20398 holds 14.52 GiB", "most likely this process itself"},
			next:    []string{"ps -o pid,user,etime,args -p 20398"},
		},
		"pytorch_oom_0-bytes-free_no-process-line.txt": {
			family: FamilyTorchOOM, variant: "total-capacty", device: &zero, lines: 1,
			numbers: map[string]float64{"requested": 1.70, "total": 6.00, "free": 0, "allocated": 2.93, "reserved_unallocated": 2.30},
			meaning: []string{"only 0 bytes was free", "fragmented"},
		},
		"pytorch_oom_legacy-format_cached.txt": {
			family: FamilyTorchOOM, variant: "legacy", device: &zero, lines: 1,
			numbers: map[string]float64{"requested": 1024.0 / 1024 / 1024, "total": 11.17, "allocated": 10.90,
				"free": 576.0 / 1024 / 1024, "cached": 30.96 / 1024},
			meaning: []string{"1.00 MiB", "576.00 KiB"},
		},
		"nccl_shm_posix-fallocate_no-space_old-format.txt": {
			family: FamilyNCCLShm, variant: "no-space", lines: 2, device: &three,
			numbers: map[string]float64{"segment_size": 9637888},
			meaning: []string{"nccl-shm-recv-1462445a6f01cbfc-1-2-3", "full or too small"},
			next:    []string{"df -h /dev/shm", "--shm-size", "gputriage HOST"},
		},
		"nccl_shm_open-permission-denied_unhandled-system-error.txt": {
			family: FamilyNCCLShm, variant: "permission-denied", lines: 3, device: &zero,
			numbers: map[string]float64{"segment_size": 4460544, "pid": 27106},
			meaning: []string{"for process 27106 on its CUDA device 0", "permission denied"},
			next:    []string{"ls -ld /dev/shm"},
		},
		"dataloader_bus-error_shm_plain.txt": {
			family: FamilyDataLoaderBusError, lines: 1,
			next: []string{"df -h /dev/shm", "--ipc=host"},
		},
		"smi-error_couldnt-communicate_one-line.txt": {family: FamilySMIFailed, variant: "no-driver", lines: 1, next: []string{"lsmod"}},
		"smi-error_driver-mismatch_classic.txt":      {family: FamilySMIFailed, variant: "version-mismatch", lines: 1, next: []string{"/proc/driver/nvidia/version"}},
		"smi-error_gpu-is-lost.txt":                  {family: FamilySMIFailed, variant: "gpu-lost", bus: "0000:02:00.0", lines: 1, meaning: []string{"0000:02:00.0"}},
		"smi-error_device-handle_unknown-error.txt": {
			family: FamilySMIFailed, variant: "device-handle", bus: "0000:09:00.0", lines: 1, meaning: []string{"Unknown Error"},
		},
		"dmesg_xid-119_gsp-timeout_nvidia-smi.log": {
			family: FamilyXid, bus: "0000:9b:00", numbers: map[string]float64{"xid_119": 5},
			meaning: []string{"Xid 119 (5×", "nvidia-smi", "cache_mgr_main", "Timeout after 6s"},
			notes:   []string{"Xid catalog"}, lines: 6,
		},
		"dmesg_nvrm_no-adapter-probed_nouveau.txt": {
			family: FamilyNVRMProbe, numbers: map[string]float64{"devices_not_probed": 3}, lines: 6, next: []string{"blacklist nouveau"},
		},
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if name == "PROVENANCE.md" {
			continue // quotes the messages in prose
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Run(name, func(t *testing.T) {
			got := Explain(string(b))
			w, ok := cases[name]
			if !ok {
				// Captures of healthy tools (nvidia-smi tables, CSV, cgroups) are not errors.
				for _, ex := range got {
					t.Errorf("unexpected %s explanation for %s: %q", ex.Family, name, ex.Lines)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("got %d explanations, want 1: %+v", len(got), got)
			}
			check(t, got[0], w)
		})
	}
	for name := range cases {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("corpus file %s is missing", name)
		}
	}
}

func TestExplainVariants(t *testing.T) {
	zero, one, three := 0, 1, 3
	cases := []struct {
		name string
		in   string
		want []want
	}{
		{
			name: "sglang incident",
			in:   incident,
			want: []want{{
				family: FamilySGLangUnbalanced, variant: "pre_model_load_memory", lines: 1,
				numbers: map[string]float64{"min_free": 39.75, "local_free": 93.73, "threshold": 84.35, "shortfall": 44.61,
					"held_elsewhere_min": 53.98, "held_elsewhere_min_mib": 55275},
				meaning: []string{"39.75 GiB", "93.73 GiB", "53.98 GiB (55,275 MiB)", "not the one at fault"},
				notes:   []string{"SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=false", "CUDA context", "Free the memory instead"},
				next:    []string{"gputriage HOST   # and with --tp N --engine sglang"},
			}},
		},
		{
			name: "sglang ranks with prefixes, ANSI colors and CRLF",
			in: "[2025-03-09 14:40:47 TP1] Init torch distributed begin.\r\n" +
				"\x1b[31m[2025-03-09 14:40:48 TP3] RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. min_per_gpu_memory=16.28, local_gpu_memory=46.81, local_gpu_memory * 0.9=42.129\x1b[0m\r\n" +
				"[2025-03-09 14:40:48 TP1] RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. min_per_gpu_memory=16.28, local_gpu_memory=46.5, local_gpu_memory * 0.9=41.85\r\n" +
				"[2025-03-09 14:40:48 TP3] RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. min_per_gpu_memory=16.28, local_gpu_memory=46.81, local_gpu_memory * 0.9=42.129\r\n",
			want: []want{{
				family: FamilySGLangUnbalanced, variant: "min_per_gpu_memory", lines: 3,
				numbers: map[string]float64{"min_free": 16.28, "local_free@1": 46.5, "local_free@3": 46.81, "held_elsewhere_min": 30.53},
				meaning: []string{"TP1 saw 46.50 GiB free, TP3 saw 46.81 GiB free"},
				notes:   []string{"SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=false"},
				next:    []string{"gputriage HOST --tp 4 --engine sglang   # at least 4: the log shows TP3"},
			}},
		},
		{
			name: "sglang older ValueError with numbers",
			in: "ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. " +
				"min_per_gpu_memory=13.53, local_gpu_memory=23.09, local_gpu_memory * 0.9=20.781",
			want: []want{{
				family: FamilySGLangUnbalanced, variant: "min_per_gpu_memory",
				numbers: map[string]float64{"min_free": 13.53, "local_free": 23.09, "held_elsewhere_min": 9.56},
				notes:   []string{"SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK=true"}, lines: 1,
			}},
		},
		{
			name: "sglang without exception type names both switches",
			in:   "The memory capacity is unbalanced. Some GPUs may be occupied by other processes. min_per_gpu_memory=10.0, local_gpu_memory=20.0, local_gpu_memory * 0.9=18.0",
			want: []want{{
				family: FamilySGLangUnbalanced, variant: "min_per_gpu_memory", lines: 1,
				notes: []string{"SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=false", "SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK=true", "does not show whether"},
			}},
		},
		{
			name: "sglang message wrapped by the terminal",
			in: "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes.\n" +
				"pre_model_load_memory=147.9, local_gpu_memory=176.2, local_gpu_memory * 0.9=158.58\n",
			want: []want{{
				family: FamilySGLangUnbalanced, variant: "pre_model_load_memory", lines: 2,
				numbers: map[string]float64{"min_free": 147.9, "local_free": 176.2, "held_elsewhere_min": 28.3},
			}},
		},
		{
			name: "sgl-jax",
			in:   "ValueError: The memory capacity is unbalanced. min_available_device_memory=10.5, local_device_memory=15.0, local_device_memory*0.9=13.5",
			want: []want{{
				family: FamilySGLangUnbalanced, variant: "sgl-jax", lines: 1,
				numbers: map[string]float64{"min_free": 10.5, "local_free": 15, "held_elsewhere_min": 4.5},
				notes:   []string{"sgl-jax, SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK=true"},
			}},
		},
		{
			name: "vllm worker prefix, message wrapped",
			in: "(EngineCore_DP0 pid=253) ValueError: Free memory on device cuda:1 (85.92/121.69 GiB) on startup is less than desired\n" +
				"(EngineCore_DP0 pid=253) GPU memory utilization (0.92, 111.95 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.\n" +
				"(APIServer pid=1) RuntimeError: Engine core initialization failed.",
			want: []want{{
				family: FamilyVLLMFreeMemory, variant: "with-device", device: &one, lines: 2,
				numbers: map[string]float64{"free": 85.92, "total": 121.69, "in_use": 35.77, "max_gpu_memory_utilization": 0.70, "suggested_gpu_memory_utilization": 0.69},
			}},
		},
		{
			name: "pytorch current format, rank prefix, several processes",
			in: "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 876.00 MiB. GPU 0 has a total capacity of 23.68 GiB of which 251.06 MiB is free. " +
				"Process 2612630 has 458.00 MiB memory in use. Process 12345 has 54.00 GiB memory in use. Including non-PyTorch memory, this process has 22.98 GiB memory in use. " +
				"Of the allocated memory 22.65 GiB is allocated by PyTorch, and 77.68 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
			want: []want{{
				family: FamilyTorchOOM, variant: "total-capacity", device: &zero, lines: 1,
				numbers: map[string]float64{"requested@0": 876.0 / 1024, "this_process": 22.98, "other_processes": 54 + 458.0/1024},
				pids:    []PIDMemory{{PID: 2612630, GiB: 458.0 / 1024}, {PID: 12345, GiB: 54}},
				meaning: []string{"PID 12345 holds 54.00 GiB", "Other processes hold"},
				next:    []string{"-p 2612630,12345"},
			}},
		},
		{
			name: "pytorch message wrapped over lines",
			in: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.16 GiB.\n" +
				"GPU 0 has a total capacity of 31.36 GiB of which 471.69 MiB is free.\n" +
				"Including non-PyTorch memory, this process has 16.63 GiB memory in use.\n" +
				"Process 19239 has 14.26 GiB memory in use.\n" +
				"Of the allocated memory 15.03 GiB is allocated by PyTorch, and 1.00 GiB\n" +
				"is reserved by PyTorch but unallocated.\n" +
				"Traceback (most recent call last):\n",
			want: []want{{
				family: FamilyTorchOOM, variant: "total-capacity", device: &zero, lines: 6,
				numbers: map[string]float64{"total": 31.36, "this_process": 16.63, "allocated": 15.03, "reserved_unallocated": 1.0},
				pids:    []PIDMemory{{PID: 19239, GiB: 14.26}},
				meaning: []string{"Other processes hold 14.26 GiB"},
			}},
		},
		{
			name: "pytorch 1.x reserved in total",
			in: "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 3; 15.78 GiB total capacity; 14.56 GiB already allocated; " +
				"3.12 MiB free; 14.70 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb",
			want: []want{{
				family: FamilyTorchOOM, variant: "legacy", device: &three, lines: 1,
				numbers: map[string]float64{"requested": 20.0 / 1024, "total": 15.78, "allocated": 14.56, "reserved": 14.70, "free": 3.12 / 1024},
			}},
		},
		{
			name: "nccl current format",
			in: "3d3e22c3066f:168:168 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-UbzKZ9 to 9637892 bytes\n" +
				"3d3e22c3066f:168:168 [0] misc/shmutils.cc:113 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-UbzKZ9 (size 9637888)\n" +
				"3d3e22c3066f:168:168 [0] NCCL INFO transport/shm.cc:114 -> 2\n" +
				"torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled system error (run with NCCL_DEBUG=INFO for details)\n",
			want: []want{{
				family: FamilyNCCLShm, variant: "no-space", lines: 3, device: &zero,
				numbers: map[string]float64{"segment_size": 9637892, "pid": 168},
				meaning: []string{"nccl-UbzKZ9"},
			}},
		},
		{
			name: "dataloader killed by bus error",
			in:   "RuntimeError: DataLoader worker (pid 2479) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
			want: []want{{family: FamilyDataLoaderBusError, lines: 1, numbers: map[string]float64{"worker_pid": 2479}, meaning: []string{"PID 2479"}}},
		},
		{
			name: "gputriage's fds-unreadable note",
			in:   "            note (fds-unreadable): 263 fd links under /proc could not be read\n              (permission denied): processes using GPUs or /dev/shm may be\n              missing\n",
			want: []want{{family: FamilyFDsUnreadable, lines: 1, numbers: map[string]float64{"links": 263}, meaning: []string{"ptrace-mode read", "hidepid"}}},
		},
		{
			name: "find refused as root",
			in:   "find: '/proc/1/fd/0': Permission denied\nfind: '/proc/1/fd/1': Permission denied\n",
			want: []want{{family: FamilyFDsUnreadable, lines: 2, numbers: map[string]float64{"pid": 1}, meaning: []string{"The refused process is PID 1."}}},
		},
		{
			name: "no devices, NVML unknown error",
			in:   "$ nvidia-smi\nNo devices were found\n$ nvidia-smi -L\nFailed to initialize NVML: Unknown Error\n",
			want: []want{
				{family: FamilySMIFailed, variant: "no-devices", lines: 1},
				{family: FamilySMIFailed, variant: "nvml-init", lines: 1, meaning: []string{"Unknown Error"}},
			},
		},
		{
			name: "kernel log API mismatch",
			in: "[   41.974638] NVRM: API mismatch: the client has the version 535.171.04, but\n" +
				"[   41.974640] NVRM: this kernel module has the version 535.161.07.  Please\n" +
				"[   41.974641] NVRM: make sure that this kernel module and all NVIDIA driver\n",
			want: []want{{
				family: FamilySMIFailed, variant: "version-mismatch", lines: 2,
				meaning: []string{"the library is 535.171.04, the loaded kernel module 535.161.07"},
			}},
		},
		{
			name: "xid 79 and 48 with known meanings",
			in: "May 18 19:02:39 host kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.\n" +
				"May 18 19:02:40 host kernel: NVRM: Xid (PCI:0000:2b:00): 48, pid=77, name=python3, An uncorrectable double bit error\n",
			want: []want{{
				family: FamilyXid, bus: "0000:2b:00", lines: 2,
				numbers: map[string]float64{"xid_79": 1, "xid_48": 1, "xid_48_pid": 77},
				meaning: []string{"Xid 79 (1× on 0000:2b:00): GPU has fallen off the bus (NVIDIA)", "double bit ECC error", "by python3, PID 77"},
			}},
		},
		{
			name: "typographic apostrophes, doubled spaces and a tab are the same message",
			in: "NVIDIA-SMI has failed because it couldn\u2019t communicate with the NVIDIA driver.\n" +
				"$ nvidia-smi -L\nNVIDIA-SMI  has failed because it couldn\u2018t\tcommunicate with the  NVIDIA driver.\n",
			want: []want{{family: FamilySMIFailed, variant: "no-driver", lines: 2}},
		},
		{
			name: "a message wrapped inside its phrase",
			in: "[rank0]: NVIDIA-SMI has failed because it couldn't communicate\n" +
				"[rank0]: with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n",
			want: []want{{family: FamilySMIFailed, variant: "no-driver", lines: 1}},
		},
		{
			name: "an out-of-memory message wrapped mid-sentence",
			in: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 496.00 MiB. GPU 0 has a total capacity of\n" +
				"14.75 GiB of which 235.06 MiB is free. Process 20398 has 14.52 GiB memory in use. Including\n" +
				"non-PyTorch memory, this process has 14.36 GiB memory in use.\n",
			want: []want{{
				family: FamilyTorchOOM, variant: "total-capacity", device: &zero, lines: 3,
				numbers: map[string]float64{"requested": 496.0 / 1024, "total": 14.75, "free": 235.06 / 1024, "this_process": 14.36},
				pids:    []PIDMemory{{PID: 20398, GiB: 14.52}},
			}},
		},
		{
			name: "nvidia-smi's library version after a mismatch",
			in:   "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.144\n",
			want: []want{{
				family: FamilySMIFailed, variant: "version-mismatch", lines: 2,
				numbers: map[string]float64{"library_version_major": 550, "library_version_minor": 144},
				meaning: []string{"the NVML library is 550.144", "must be 550.144 too"},
			}},
		},
		{
			name: "one-line out-of-memory error",
			in:   "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
			want: []want{{
				family: FamilyTorchOOM, variant: "partial", lines: 1,
				numbers: map[string]float64{"requested": 2},
				meaning: []string{"2.00 GiB more"},
				next:    []string{"gputriage HOST"},
			}},
		},
		{
			name: "the README's abridged out-of-memory error",
			in:   "torch.OutOfMemoryError: ... Process 20629 has 54.00 GiB ...",
			want: []want{{
				family: FamilyTorchOOM, variant: "partial", lines: 1,
				numbers: map[string]float64{"other_processes": 54},
				pids:    []PIDMemory{{PID: 20629, GiB: 54}},
				next:    []string{"ps -o pid,user,etime,args -p 20629"},
			}},
		},
		{
			name: "several families in one log, in order",
			in:   "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n" + incident + "\n",
			want: []want{
				{family: FamilySMIFailed, variant: "no-driver", lines: 1},
				{family: FamilySGLangUnbalanced, variant: "pre_model_load_memory", lines: 1},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Explain(c.in)
			if len(got) != len(c.want) {
				t.Fatalf("got %d explanations, want %d: %+v", len(got), len(c.want), got)
			}
			for i := range got {
				check(t, got[i], c.want[i])
			}
		})
	}
}

func TestExplainUnrecognized(t *testing.T) {
	for name, in := range map[string]string{
		"empty":       "",
		"blank":       "\n\r\n   \n",
		"traceback":   "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    import torch\nModuleNotFoundError: No module named 'torch'\n",
		"prose":       "We keep seeing CUDA out of memory errors and the memory capacity is unbalanced, says the channel.",
		"vllm info":   "(Worker_TP1 pid=1806414) INFO 10-23 15:14:56 [gpu_worker.py:391] Free memory on device (139.21/139.81 GiB) on startup. Desired GPU memory utilization is (0.9, 125.83 GiB).",
		"oom no nums": "torch.OutOfMemoryError: CUDA out of memory.",
		"java oom":    "java.lang.OutOfMemoryError: Java heap space; Process 12 has 3.00 GiB",
		"xid prose":   "grep for 'NVRM: Xid' in dmesg",
		"smi table":   "| NVIDIA-SMI 550.90.07   Driver Version: 550.90.07   CUDA Version: 12.4 |\nNo running processes found\n",
		"ansi only":   "\x1b[31m\x1b[0m\x1b]0;title\x07",
	} {
		t.Run(name, func(t *testing.T) {
			if got := Explain(in); len(got) != 0 {
				t.Errorf("Explain(%q) = %+v, want nothing", in, got)
			}
		})
	}
}

// TestExplainLargeInput checks that a huge paste costs linear time and gives a bounded result:
// millions of matching lines, and one 8 MiB line full of matches.
func TestExplainLargeInput(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < MaxInputBytes/2; i++ {
		n := strconv.Itoa(i % 1000)
		b.WriteString("[rank" + n + "]: CUDA out of memory. Tried to allocate " + n + ".00 MiB. GPU 0 has a total capacity of 80.00 GiB of which 0 bytes is free. Process " + n + " has 1.00 GiB memory in use.\n")
		b.WriteString("[2025-01-01 TP" + n + "] RuntimeError: The memory capacity is unbalanced. min_per_gpu_memory=" + n + ", local_gpu_memory=99, x\n")
		b.WriteString("NVRM: Xid (PCI:0000:01:00): " + n + ", pid=1, name=x, y\n")
	}
	line := strings.Repeat("CUDA out of memory. Tried to allocate The memory capacity is unbalanced Free memory on device (1/2 GiB) NVRM: Xid (", 1<<17)
	b.WriteString(line[:min(len(line), MaxInputBytes/2)])
	b.WriteString("\n" + incident + "\n") // past the limit: not read
	in := b.String()
	if !Truncated(in) {
		t.Fatalf("test input of %d bytes is not over the limit", len(in))
	}
	start := time.Now()
	got := Explain(in)
	if d := time.Since(start); d > testenv.Scale(20*time.Second) {
		t.Errorf("Explain took %v on %d bytes", d, len(in))
	}
	perFamily := map[string]int{}
	for _, ex := range got {
		perFamily[ex.Family]++
		if len(ex.Lines) > maxLines {
			t.Errorf("%s quotes %d lines", ex.Family, len(ex.Lines))
		}
		if ex.MoreLines == 0 && ex.Family != FamilyXid {
			t.Errorf("%s: lines beyond the cap are not counted", ex.Family)
		}
		for _, l := range ex.Lines {
			if len(l) > maxQuote+8 {
				t.Errorf("%s quotes a line of %d bytes", ex.Family, len(l))
			}
		}
	}
	for f, n := range perFamily {
		if n > maxPerFamily {
			t.Errorf("%s: %d explanations, want at most %d", f, n, maxPerFamily)
		}
	}
	for _, ex := range got {
		if ex.Variant == "pre_model_load_memory" {
			t.Error("text past MaxInputBytes was read")
		}
	}
}

func TestQuoteRemovesControlCharacters(t *testing.T) {
	in := "ValueError: Free memory on device cuda:0 (4.22/79.14 GiB) on startup is less than desired GPU memory utilization (0.9, 71.22 GiB).\x07\x1b[2J\x1b]8;;http://x\x1b\\\x9b\xff"
	got := Explain(in)
	if len(got) != 1 {
		t.Fatalf("got %d explanations", len(got))
	}
	assertPrintable(t, got[0])
}

func check(t *testing.T, ex Explanation, w want) {
	t.Helper()
	if ex.Family != w.family || ex.Variant != w.variant {
		t.Errorf("family/variant = %s/%s, want %s/%s", ex.Family, ex.Variant, w.family, w.variant)
	}
	if ex.Title == "" || ex.Meaning == "" || len(ex.Next) == 0 {
		t.Errorf("%s: title, meaning or next steps missing: %+v", ex.Family, ex)
	}
	if len(ex.Lines) != w.lines {
		t.Errorf("%s: %d lines quoted, want %d: %q", ex.Family, len(ex.Lines), w.lines, ex.Lines)
	}
	for name, v := range w.numbers {
		got, ok := number(ex, name)
		if !ok {
			t.Errorf("%s: number %s missing in %+v", ex.Family, name, ex.Numbers)
			continue
		}
		if math.Abs(got-v) > 0.005 {
			t.Errorf("%s: %s = %v, want %v", ex.Family, name, got, v)
		}
	}
	if len(ex.PIDs) != len(w.pids) {
		t.Errorf("%s: PIDs = %+v, want %+v", ex.Family, ex.PIDs, w.pids)
	} else {
		for i, p := range w.pids {
			g := ex.PIDs[i]
			if g.PID != p.PID || math.Abs(g.GiB-p.GiB) > 0.005 || g.LikelySelf != p.LikelySelf {
				t.Errorf("%s: PID %d = %+v, want %+v", ex.Family, i, g, p)
			}
		}
	}
	if (ex.Device == nil) != (w.device == nil) || (ex.Device != nil && *ex.Device != *w.device) {
		t.Errorf("%s: device = %v, want %v", ex.Family, ex.Device, w.device)
	}
	if ex.BusID != w.bus {
		t.Errorf("%s: bus = %q, want %q", ex.Family, ex.BusID, w.bus)
	}
	for _, s := range w.meaning {
		if !strings.Contains(ex.Meaning, s) {
			t.Errorf("%s: meaning lacks %q:\n%s", ex.Family, s, ex.Meaning)
		}
	}
	for _, s := range w.notes {
		if !containsAny(ex.Notes, s) {
			t.Errorf("%s: no note says %q:\n%s", ex.Family, s, strings.Join(ex.Notes, "\n"))
		}
	}
	for _, s := range w.next {
		if !containsAny(ex.Next, s) {
			t.Errorf("%s: no next step says %q:\n%s", ex.Family, s, strings.Join(ex.Next, "\n"))
		}
	}
	assertPrintable(t, ex)
}

// number finds a number by name, or by name@rank.
func number(ex Explanation, key string) (float64, bool) {
	name, rank, hasRank := strings.Cut(key, "@")
	for _, n := range ex.Numbers {
		if n.Name != name {
			continue
		}
		if hasRank {
			if n.Rank == nil || strconv.Itoa(*n.Rank) != rank {
				continue
			}
		}
		return n.Value, true
	}
	return 0, false
}

func containsAny(list []string, s string) bool {
	for _, l := range list {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// assertPrintable checks that every string is valid UTF-8 without control characters, so a
// renderer can print it to a terminal as is.
func assertPrintable(t *testing.T, ex Explanation) {
	t.Helper()
	all := append([]string{ex.Family, ex.Variant, ex.Title, ex.Meaning, ex.BusID}, ex.Lines...)
	all = append(all, ex.Notes...)
	all = append(all, ex.Next...)
	for _, n := range ex.Numbers {
		all = append(all, n.Name, n.Unit)
		if math.IsNaN(n.Value) || math.IsInf(n.Value, 0) {
			t.Errorf("%s: number %s is %v", ex.Family, n.Name, n.Value)
		}
	}
	for _, s := range all {
		if !utf8.ValidString(s) {
			t.Errorf("%s: invalid UTF-8 in %q", ex.Family, s)
		}
		for _, r := range s {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				t.Errorf("%s: control character %U in %q", ex.Family, r, s)
				break
			}
		}
	}
}

// A record the logger wrote after a message, with its own prefix, is not the message's
// continuation even when it starts in lower case.
func TestExplainNextRecordIsNotAContinuation(t *testing.T) {
	got := Explain("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n" +
		"[rank0]: process group destroyed, 3 ranks left\n")
	if len(got) != 1 || len(got[0].Lines) != 1 {
		t.Fatalf("got %+v", got)
	}
}
