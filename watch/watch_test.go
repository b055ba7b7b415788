package watch

import (
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/readiness"
)

var t0 = time.Date(2026, 12, 1, 1, 2, 3, 0, time.UTC)

// proc is a holder in a synthetic round.
type proc struct {
	pid      int
	start    int64 // seconds after t0 - 1h
	mib      map[int]int64
	leftover bool
}

// round builds a round probed sec seconds after t0 (uptime to the hundredth), with used MiB
// per GPU and the given holders.
func round(sec float64, used []int64, procs ...proc) Round {
	wall := t0.Add(time.Duration(sec) * time.Second)
	boot := t0.Add(-time.Hour)
	up := 3600 + sec
	s := &parse.Snapshot{Host: parse.HostFacts{Time: &wall, BootTime: &boot, UptimeSeconds: &up}}
	for i, u := range used {
		total := int64(81559)
		free := total - u
		s.GPUs = append(s.GPUs, parse.GPU{Index: i, MemoryUsedMiB: &u, MemoryTotalMiB: &total, MemoryFreeMiB: &free})
	}
	var r diagnose.Result
	var left []int
	for _, p := range procs {
		st := boot.Add(time.Duration(p.start) * time.Second)
		s.Processes = append(s.Processes, parse.Process{PID: p.pid, StartTime: &st})
		gp := diagnose.GPUProcess{PID: p.pid, Program: "python3 -m sglang.launch_server", GPUMemoryMiB: p.mib}
		for g := range used {
			if p.mib[g] > 0 {
				gp.GPUs = append(gp.GPUs, g)
			}
		}
		r.Processes = append(r.Processes, gp)
		if p.leftover {
			left = append(left, p.pid)
		}
	}
	if len(left) > 0 {
		r.Findings = append(r.Findings, diagnose.Finding{Code: diagnose.CodeLeftoverProcess, Severity: diagnose.Error, PIDs: left})
	}
	return Round{At: wall.Add(5 * time.Second), Snapshot: s, Result: r}
}

func kinds(evs []Event) string {
	var ks []string
	for _, e := range evs {
		ks = append(ks, string(e.Kind))
	}
	return strings.Join(ks, " ")
}

// TestReleaseDelay: a leftover exits, its memory comes back two rounds later; the release is
// timed between those rounds by the host's probe clock, and --until free then holds although a
// healthy holder remains.
func TestReleaseDelay(t *testing.T) {
	leftover := proc{pid: 20629, start: 10, mib: map[int]int64{0: 55286}, leftover: true}
	healthy := proc{pid: 300, start: 20, mib: map[int]int64{1: 30000}}
	h := NewHost(Config{Until: UntilFree})
	steps := []struct {
		r     Round
		kinds string
		holds bool
	}{
		{round(0, []int64{55295, 30009}, leftover, healthy), "holder holder", false},
		{round(2.5, []int64{55295, 30009}, healthy), "holder-vanished", false},
		{round(4.5, []int64{55295, 30009}, healthy), "", false},
		{round(6.75, []int64{9, 30009}, healthy), "memory-changed memory-released", true},
		{round(8.75, []int64{9, 30009}, healthy), "", true},
	}
	var last []Event
	for i, s := range steps {
		st, evs := h.Observe(s.r)
		if got := kinds(evs); got != s.kinds {
			t.Errorf("round %d: events %q, want %q", i, got, s.kinds)
		}
		if st.Holds != s.holds {
			t.Errorf("round %d: holds=%v (waiting for %s), want %v", i, st.Holds, st.Waiting, s.holds)
		}
		if i == 3 {
			last = evs
		}
	}
	rel := last[1]
	if rel.After != 4250*time.Millisecond || rel.Resolution != 2500*time.Millisecond || rel.MiB != 55286 || rel.Holder.PID != 20629 {
		t.Errorf("release %+v", rel)
	}
	want := "GPU 0: 55,286 MiB released 4.2 s after PID 20629 was gone (probes at 01:02:05 and 01:02:09; to within the 2.5 s between rounds)"
	if got := rel.String(); got != want {
		t.Errorf("release reads\n%s\nwant\n%s", got, want)
	}
}

// TestReleaseSameRound: memory that is back in the round that first sees the holder gone is
// released 0 s after it, to within one round.
func TestReleaseSameRound(t *testing.T) {
	h := NewHost(Config{Until: UntilFree})
	h.Observe(round(0, []int64{1000}, proc{pid: 7, start: 1, mib: map[int]int64{0: 990}, leftover: true}))
	_, evs := h.Observe(round(2, []int64{10}))
	if kinds(evs) != "holder-vanished memory-changed memory-released" || evs[2].After != 0 || evs[2].Resolution != 2*time.Second {
		t.Errorf("events %q: %+v", kinds(evs), evs)
	}
}

// TestReusedPID: the same PID with another start time is another holder.
func TestReusedPID(t *testing.T) {
	h := NewHost(Config{})
	h.Observe(round(0, []int64{1000}, proc{pid: 7, start: 1, mib: map[int]int64{0: 990}}))
	_, evs := h.Observe(round(2, []int64{1000}, proc{pid: 7, start: 1500, mib: map[int]int64{0: 990}}))
	if kinds(evs) != "holder-vanished holder-appeared" || evs[0].Holder.Start == evs[1].Holder.Start {
		t.Errorf("events %q", kinds(evs))
	}
}

// TestTwoHoldersOneGPU: two holders of one GPU vanish together; each release needs its own
// share back, so half the memory back releases one of them only.
func TestTwoHoldersOneGPU(t *testing.T) {
	h := NewHost(Config{Until: UntilFree})
	a := proc{pid: 10, start: 1, mib: map[int]int64{0: 10000}, leftover: true}
	b := proc{pid: 11, start: 1, mib: map[int]int64{0: 5000}, leftover: true}
	h.Observe(round(0, []int64{15009}, a, b))
	_, evs := h.Observe(round(2, []int64{5009}))
	if got := kinds(evs); got != "holder-vanished holder-vanished memory-changed memory-released" || evs[3].Holder.PID != 10 {
		t.Fatalf("events %q", got)
	}
	st, evs := h.Observe(round(4, []int64{5009}))
	if len(evs) != 0 || st.Holds {
		t.Errorf("PID 11's share counted twice: %q holds=%v", kinds(evs), st.Holds)
	}
	st, evs = h.Observe(round(6, []int64{9}))
	if kinds(evs) != "memory-changed memory-released" || evs[1].Holder.PID != 11 || !st.Holds {
		t.Errorf("events %q holds=%v", kinds(evs), st.Holds)
	}
}

// TestUnreachableAndBack: a host that stops answering is said once; the round that reconnects
// says the gap since the last good round, by the caller's clock.
func TestUnreachableAndBack(t *testing.T) {
	h := NewHost(Config{Until: UntilClean})
	r0 := round(0, []int64{9})
	st, _ := h.Observe(r0)
	if !st.Holds {
		t.Fatalf("a clean host does not hold --until clean: %s", st.Waiting)
	}
	down := Round{At: r0.At.Add(2 * time.Second), Err: "connect: connection refused"}
	st, evs := h.Observe(down)
	if kinds(evs) != "unreachable" || st.Reachable || st.Holds {
		t.Errorf("first failure: %q %+v", kinds(evs), st)
	}
	down.At = down.At.Add(2 * time.Second)
	if _, evs := h.Observe(down); len(evs) != 0 {
		t.Errorf("second failure said again: %q", kinds(evs))
	}
	back := round(7, []int64{9})
	back.At, back.Dialed = r0.At.Add(7*time.Second), true
	_, evs = h.Observe(back)
	if kinds(evs) != "reconnected" || evs[0].Gap != 7*time.Second {
		t.Errorf("back: %q %+v", kinds(evs), evs)
	}
	if s := evs[0].String(); s != "reconnected after a gap of 7 s (last good round 01:02:08)" {
		t.Errorf("reads %q", s)
	}
}

// TestUntilClean: a warning blocks --until clean; info does not.
func TestUntilClean(t *testing.T) {
	h := NewHost(Config{Until: UntilClean})
	r := round(0, []int64{9})
	r.Result.Findings = []diagnose.Finding{{Code: diagnose.CodeShmStale, Severity: diagnose.Warning}}
	if st, _ := h.Observe(r); st.Holds || !strings.Contains(st.Waiting, "warning") {
		t.Errorf("a warning holds --until clean: %+v", st)
	}
	r = round(2, []int64{9})
	r.Result.Findings = []diagnose.Finding{{Code: diagnose.CodeGPUBusy, Severity: diagnose.Info}}
	if st, _ := h.Observe(r); !st.Holds {
		t.Errorf("info blocks --until clean: %s", st.Waiting)
	}
}

// TestUntilReady: --until ready asks readiness.Check with the job.
func TestUntilReady(t *testing.T) {
	job := readiness.Job{TP: 2, Engines: []string{readiness.EngineVLLM}, GPUMemoryUtilization: 0.9, ContextOverheadMiB: 1280}
	h := NewHost(Config{Until: UntilReady, Job: &job})
	if st, _ := h.Observe(round(0, []int64{60000, 9})); st.Holds {
		t.Errorf("ready with GPU 0 three quarters full")
	}
	if st, _ := h.Observe(round(2, []int64{9, 9})); !st.Holds {
		t.Errorf("not ready on two empty GPUs: %s", st.Waiting)
	}
}

func TestMiB(t *testing.T) {
	for n, want := range map[int64]string{0: "0 MiB", 999: "999 MiB", 1000: "1,000 MiB", 55286: "55,286 MiB", 1234567: "1,234,567 MiB", -2048: "-2,048 MiB"} {
		if got := mib(n); got != want {
			t.Errorf("mib(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestKilledLeftoverNotYetReaped: a leftover killed and not yet reaped is still listed, with
// its memory, and no longer judged left over (a zombie's verdict is another): --until free
// does not hold until it is gone and its memory is back.
func TestKilledLeftoverNotYetReaped(t *testing.T) {
	h := NewHost(Config{Until: UntilFree})
	left := proc{pid: 7, start: 1, mib: map[int]int64{0: 55286}, leftover: true}
	zombie := left
	zombie.leftover = false
	for i, s := range []struct {
		r     Round
		holds bool
	}{
		{round(0, []int64{55295}, left), false},
		{round(2, []int64{55295}, zombie), false},
		{round(4, []int64{9}), true},
	} {
		if st, _ := h.Observe(s.r); st.Holds != s.holds {
			t.Errorf("round %d: holds=%v (waiting for %s), want %v", i, st.Holds, st.Waiting, s.holds)
		}
	}
}
