package diagnose

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/parse"
)

// crowded is a hostile host with n compute-app rows and n described processes on 8 GPUs,
// shaped to hit every per-process path at once: one long parent chain (job grouping, ancestry
// walks), every process keeping the same deleted /dev/shm weights file (leftovers, "also
// kept by" lists), every process in the same unit, and the GPUs out of balance. separate
// makes each process its own healthy job instead (one gpu-busy finding each).
func crowded(n int, separate bool) *parse.Snapshot {
	s := &parse.Snapshot{Host: baseHost(0), Shm: okShm()}
	s.GPUs = idleRTX(8)
	shared := []parse.ShmUse{{Path: "/dev/shm/w/model.safetensors", Deleted: true, Mapped: true, Bytes: i64(gib)}}
	used := make([]int64, 8)
	for i := range n {
		pid := 1000 + i
		g := i % 8
		if g == 0 || i%3 == 0 {
			g = 0 // GPU 0 gets most of them: the short GPU of the imbalance
		}
		mem := int64(1)
		used[g] += mem
		s.Apps = append(s.Apps, app(pid, g, mem, "python3"))
		s.Holders = append(s.Holders, parse.DeviceHolder{PID: pid, FD: 3, Device: fmt.Sprintf("/dev/nvidia%d", g)})
		p := proc(pid, pid-1, "S", 1000, "bob", time.Duration(n-i)*time.Second, "python3", "-m", "worker")
		p.Cgroup = serviceCgroup("crowd.service")
		p.Shm = shared
		if separate {
			// Each its own healthy job, started by hand.
			p = proc(pid, 1, "S", 1000, "bob", time.Hour, "python3", "-m", "worker")
			p.Cgroup = sessionCgroup(i)
		}
		s.Processes = append(s.Processes, p)
	}
	used[0] += 60_000 // memory no process is listed for
	for g := range s.GPUs {
		*s.GPUs[g].MemoryUsedMiB = used[g]
		*s.GPUs[g].MemoryFreeMiB = 97_252 - used[g]
	}
	s.Units = []parse.Unit{{Name: "crowd.service", LoadState: "loaded", ActiveState: "active", SubState: "running", MainPID: ip(1000)}}
	return s
}

// TestDiagnoseScales diagnoses 200,000 compute-app rows and /proc entries: every check must be
// linear or n·log n, so it takes seconds and well under 1 GiB.
func TestDiagnoseScales(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a 200,000-process snapshot")
	}
	for _, separate := range []bool{false, true} {
		t.Run(fmt.Sprintf("separate=%v", separate), func(t *testing.T) { checkScales(t, crowded(scaleN, separate)) })
	}
}

func checkScales(t *testing.T, s *parse.Snapshot) {
	n := len(s.Processes)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	res := Diagnose(s, refTime)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d processes: %d findings in %s, %.0f MiB allocated", n, len(res.Findings), took, float64(alloc)/float64(mib))
	if took > testenv.Scale(15*time.Second) {
		t.Errorf("diagnosing %d processes took %s", n, took)
	}
	if alloc > uint64(gib) {
		t.Errorf("diagnosing %d processes allocated %.0f MiB, more than 1 GiB", n, float64(alloc)/float64(mib))
	}
	if len(res.Processes) != n {
		t.Errorf("%d processes joined, want %d", len(res.Processes), n)
	}
}

// scaleN is what the issue asks for: 200,000 compute-app rows and /proc entries.
const scaleN = 200_000
