package diagnose

import (
	"reflect"
	"testing"

	"github.com/gputriage/gputriage/parse"
)

func mem(total, used, reserved, free *int64) parse.GPU {
	return parse.GPU{MemoryTotalMiB: total, MemoryUsedMiB: used, MemoryReservedMiB: reserved, MemoryFreeMiB: free}
}

// TestMemoryBalance: the reconciliation rule, total = used + reserved + free, on ct200's
// figures and around its edges.
func TestMemoryBalance(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name string
		g    parse.GPU
		want Balance
		off  *int64
		note string
	}{
		{"ct200 GPU 1", mem(n(97887), n(0), n(635), n(97252)), BalanceExact, n(0), ""},
		{"ct200 GPU 0", mem(n(97887), n(55295), n(635), n(41958)), BalanceRounding, n(1),
			"GPU 0: used + reserved + free = total + 1 MiB (nvidia-smi rounds each figure)"},
		{"2 MiB under", mem(n(100), n(10), n(5), n(83)), BalanceRounding, n(-2),
			"GPU 0: used + reserved + free = total − 2 MiB (nvidia-smi rounds each figure)"},
		{"3 MiB over", mem(n(100), n(10), n(5), n(88)), BalanceMismatch, n(3),
			"GPU 0: used + reserved + free = total + 3 MiB, more than nvidia-smi's rounding of each figure explains: each is shown as it gave it"},
		{"old driver", mem(n(81920), n(4), nil, n(81451)), BalanceReservedUnknown, nil,
			"GPU 0: reserved unknown (nvidia-smi gave no memory.reserved, as older drivers do not), so used + free need not come to the total"},
		{"no total", mem(nil, n(0), n(103), n(16280)), BalanceUnknown, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := AccountMemory([]parse.GPU{tc.g}, nil)
			if ms[0].Balance != tc.want || !reflect.DeepEqual(ms[0].OffByMiB, tc.off) {
				t.Errorf("balance %q off by %v, want %q %v", ms[0].Balance, ms[0].OffByMiB, tc.want, tc.off)
			}
			var want []string
			if tc.note != "" {
				want = []string{tc.note}
			}
			if got := BalanceNotes(ms); !reflect.DeepEqual(got, want) {
				t.Errorf("notes %q, want %q", got, want)
			}
		})
	}
}

// TestAttributionWords: the processes' memory is set against used so that the two add up,
// GPUs with neither left out, and a process without a figure makes the rest unknown.
func TestAttributionWords(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	gpus := []parse.GPU{
		{Index: 0, MemoryUsedMiB: n(55295)}, {Index: 1, MemoryUsedMiB: n(0)}, {Index: 2, MemoryUsedMiB: n(4)},
	}
	procs := []GPUProcess{{PID: 20629, Listed: true, GPUs: []int{0}, GPUMemoryMiB: map[int]int64{0: 55286}}}
	if got, want := AttributionWords(AccountMemory(gpus, procs)),
		"GPUs 0, 2: 55,299 MiB used in all: processes listed 55,286 MiB; not attributed to a listed process 13 MiB"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	ms := AccountMemory(gpus, append(procs, GPUProcess{PID: 7, Listed: true, GPUs: []int{2}}))
	if ms[2].UnattributedMiB != nil || ms[2].ListedUnknown != 1 {
		t.Errorf("GPU 2 with a process of unknown memory: unattributed %v", ms[2].UnattributedMiB)
	}
	if got, want := AttributionWords(ms),
		"GPU 0: 55,295 MiB used: processes listed 55,286 MiB; not attributed to a listed process 9 MiB; GPU 2: nvidia-smi gives no memory figure for some processes listed, so what they hold is unknown"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := AttributionWords(AccountMemory(gpus[1:2], nil)); got != "" {
		t.Errorf("an idle GPU: %q", got)
	}
}
