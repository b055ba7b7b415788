package explain

import (
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/testenv"
)

// FuzzExplain feeds arbitrary text to Explain: it must not panic, must finish quickly, and
// everything it returns must be printable as is.
func FuzzExplain(f *testing.F) {
	for _, s := range []string{
		incident,
		"ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes.",
		"ValueError: Free memory on device cuda:0 (4.22/79.14 GiB) on startup is less than desired GPU memory utilization (0.9, 71.22 GiB).",
		"torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 496.00 MiB. GPU 0 has a total capacty of 14.75 GiB of which 235.06 MiB is free. Process 20398 has 14.52 GiB memory in use. Of the allocated memory 14.06 GiB is allocated by PyTorch, and 330.42 MiB is reserved by PyTorch but unallocated.",
		"RuntimeError: CUDA out of memory. Tried to allocate 1024.00 KiB (GPU 0; 11.17 GiB total capacity; 10.90 GiB already allocated; 576.00 KiB free; 30.96 MiB cached)",
		"[3] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device\n[3] include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-1 (size 9637888)",
		"NCCL WARN Error: failed to extend /dev/shm/nccl-03v824 to 4194660 bytes",
		"ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
		"Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost. Reboot the system to recover this GPU",
		"[188549.976351] NVRM: The NVIDIA probe routine was not called for 3 device(s).",
		"NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s",
		"\x1b[31mCUDA out of memory.\x1b",
		"torch.OutOfMemoryError: ... Process 20629 has 54.00 GiB ...",
		"Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.144",
		"NVIDIA-SMI  has failed because it couldn\u2019t\ncommunicate with the NVIDIA driver",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		start := time.Now()
		got := Explain(s)
		if d := time.Since(start); d > 2*time.Second && d > testenv.Scale(2*time.Second) {
			t.Errorf("Explain took %v on %d bytes", d, len(s))
		}
		for _, ex := range got {
			if ex.Family == "" || ex.Meaning == "" {
				t.Errorf("incomplete explanation %+v", ex)
			}
			assertPrintable(t, ex)
		}
	})
}
