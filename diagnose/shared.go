package diagnose

import (
	"math"
	"time"

	"github.com/gputriage/gputriage/parse"
)

// What the readiness and nodecheck packages share with diagnose's judgement, so that a
// readiness answer and node-check's idle gate judge a host by the same rules as the findings:
// the same groups of GPUs, the same thresholds, the same names of the driver's helpers. They
// are thin doors onto diagnose's own functions, which stay the one definition.

// SGLangRatio is SGLang's tensor-parallel startup check: every rank fails when the smallest
// free memory across ranks is below SGLangRatio × its own (memory-imbalance).
const SGLangRatio = sglangRatio

// VLLMUtilization is vLLM's default gpu_memory_utilization.
const VLLMUtilization = vllmUtilization

// CeilMul is the smallest whole number of MiB that is >= f × n. Free memory is a whole
// number of MiB, so free >= f × n exactly when free >= CeilMul(f, n). Both engines compute
// f × n in float64 (in bytes or GiB: a power-of-two scale, which rounds the same), so this
// reproduces their comparison bit for bit at nvidia-smi's granularity.
func CeilMul(f float64, n int64) int64 { return int64(math.Ceil(f * float64(n))) }

// SGLangNeed is the least min free that passes SGLang's check against a rank with max free.
func SGLangNeed(maxFree int64) int64 { return CeilMul(SGLangRatio, maxFree) }

func ceilMul(f float64, n int64) int64 { return CeilMul(f, n) }
func sglangNeed(maxFree int64) int64   { return SGLangNeed(maxFree) }

// StaleSegmentMinBytes is the smallest /dev/shm entry shm-stale reports.
const StaleSegmentMinBytes = staleSegmentMinBytes

// GPUGroups splits the GPUs with known total and free memory, MIG off, into groups of the
// same size (within 2%), each sorted by index: what memory-imbalance compares.
func GPUGroups(s *parse.Snapshot) [][]*parse.GPU {
	var out [][]*parse.GPU
	for _, grp := range (&host{s: s}).gpuGroups() {
		gs := make([]*parse.GPU, len(grp))
		for i, m := range grp {
			gs[i] = m.g
		}
		out = append(out, gs)
	}
	return out
}

// GroupImbalance is SGLang's check failing on one group of same-size GPUs: Lo has the least
// free memory, Hi the most.
type GroupImbalance struct {
	Lo, Hi       int // GPU indexes
	LoMiB, HiMiB int64
}

// Imbalances are the groups of GPUs on which memory-imbalance would fire.
func Imbalances(s *parse.Snapshot) []GroupImbalance {
	var out []GroupImbalance
	for _, grp := range (&host{s: s}).gpuGroups() {
		if len(grp) < 2 {
			continue
		}
		if c, failed := checkGroup(grp); failed {
			out = append(out, GroupImbalance{Lo: c.lo.g.Index, Hi: c.hi.g.Index, LoMiB: c.lo.free, HiMiB: c.hi.free})
		}
	}
	return out
}

// GhostBaseline is the memory.used a GPU may show with no process on it (ghost-memory).
func GhostBaseline(g *parse.GPU) int64 { return new(host).ghostBaseline(g) }

// CUDATotal is a GPU's memory as CUDA reports it: nvidia-smi's total less what the driver
// reserves, when nvidia-smi reports that. g's total must be known.
func CUDATotal(g *parse.GPU) int64 { return cudaTotal(g) }

// SMIFailed is the kind of smi-failed finding s would get; false when nvidia-smi did not fail.
func SMIFailed(s *parse.Snapshot) (kind string, failed bool) {
	f, failed := newHost(s, time.Time{}).smiFinding()
	return f.Kind, failed
}

// AppsUnknown reports whether nvidia-smi's compute-app list of s cannot be trusted: its
// query did not run or failed.
func AppsUnknown(s *parse.Snapshot) bool { return (&host{s: s}).appsUnknown() }

// ShmFull is what shm-full says of s's /dev/shm numbers: known is false when df's numbers are
// unknown; full with the finding's title when it would fire.
func ShmFull(s *parse.Snapshot) (title string, known, full bool) {
	h := newHost(s, time.Time{})
	if _, known = h.shmUsage(); !known {
		return "", false, false
	}
	f, full := h.shmFullFinding()
	return f.Title, true, full
}

// DriverHelper reports whether a process of this comm and command line is one of the
// driver's helpers (nvidia-persistenced and the like), which hold GPU devices on healthy hosts.
func DriverHelper(comm string, argv []string) bool { return driverHelper(comm, argv) }

// DeviceGPU is the minor number of a GPU device node (/dev/nvidia3: 3); false for the
// control nodes (/dev/nvidiactl, /dev/nvidia-uvm), which name no GPU.
func DeviceGPU(dev string) (int, bool) { return deviceGPU(dev) }

// Words shared with the packages that compose their own sentences, so that every sentence
// writes numbers alike.

// FormatMiB is "55,286 MiB".
func FormatMiB(n int64) string { return fmtMiB(n) }

// FormatBytesAuto picks the unit a reader expects for a size in bytes ("2.00 GiB", "12 KiB",
// "512 bytes"), as the findings write sizes.
func FormatBytesAuto(n int64) string { return fmtBytes(n) }

// FormatPIDs is "PID 7" or "PIDs 7, 9".
func FormatPIDs(xs []int) string { return fmtPIDs(xs) }

// Thousands writes n with comma thousands separators: 97252 -> "97,252".
func Thousands(n int64) string { return thousands(n) }

// Plural is one when n is 1, else many.
func Plural(n int, one, many string) string { return plural(n, one, many) }
