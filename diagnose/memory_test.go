package diagnose

import (
	"slices"
	"testing"
	"time"
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
