package watch

import "testing"

// What another holder of the same GPU does with its own memory says nothing about the
// leftover's: nvidia-smi lists each process's share. A leftover whose memory the driver still
// holds after it exited is not released because a healthy holder beside it freed as much at
// the same time (a host user can time that), and --until free does not hold.
func TestReleaseNotFakedByAnotherHolderFreeing(t *testing.T) {
	h := NewHost(Config{Until: UntilFree})
	leftover := proc{pid: 20629, start: 10, mib: map[int]int64{0: 40000}, leftover: true}
	user := proc{pid: 300, start: 20, mib: map[int]int64{0: 41000}}
	h.Observe(round(0, []int64{81009}, leftover, user))
	// The leftover has exited, its 40,000 MiB still held; the user's process frees 40,000.
	user.mib = map[int]int64{0: 1000}
	st, evs := h.Observe(round(2, []int64{41009}, user))
	for _, e := range evs {
		if e.Kind == Released {
			t.Errorf("released while still held: %s", e)
		}
	}
	if st.Holds {
		t.Errorf("--until free holds with the leftover's memory still held")
	}
	// Now the driver lets it go.
	st, evs = h.Observe(round(4, []int64{1009}, user))
	if kinds(evs) != "memory-changed memory-released" || !st.Holds {
		t.Errorf("events %q holds=%v (%s)", kinds(evs), st.Holds, st.Waiting)
	}
}

// The leftover's memory comes back and a new job takes it at once, as a scheduler does with a
// freed GPU: the release is seen (the new holder's share is its own), and --until free holds
// rather than waiting for ever.
func TestReleaseSeenWhenNewHolderTakesIt(t *testing.T) {
	h := NewHost(Config{Until: UntilFree})
	leftover := proc{pid: 20629, start: 10, mib: map[int]int64{0: 55286}, leftover: true}
	h.Observe(round(0, []int64{55295}, leftover))
	next := proc{pid: 400, start: 3600, mib: map[int]int64{0: 60000}}
	st, evs := h.Observe(round(2, []int64{60009}, next))
	if kinds(evs) != "holder-vanished holder-appeared memory-changed memory-released" || !st.Holds {
		t.Errorf("events %q holds=%v (%s)", kinds(evs), st.Holds, st.Waiting)
	}
	// The same when a holder already there grows into it.
	h = NewHost(Config{Until: UntilFree})
	other := proc{pid: 300, start: 20, mib: map[int]int64{0: 1000}}
	h.Observe(round(0, []int64{56295}, leftover, other))
	other.mib = map[int]int64{0: 50000}
	st, evs = h.Observe(round(2, []int64{50009}, other))
	if kinds(evs) != "holder-vanished memory-changed memory-released" || !st.Holds {
		t.Errorf("grown: events %q holds=%v (%s)", kinds(evs), st.Holds, st.Waiting)
	}
}

// A host user's new process handed the leftover's PID, after the leftover exited with its
// memory still held: nvidia-smi's line for that PID may be the dead process's memory, so it is
// not counted as the new process's own, and --until free does not hold.
func TestReleaseNotFakedByReusedPID(t *testing.T) {
	h := NewHost(Config{Until: UntilFree})
	h.Observe(round(0, []int64{55295}, proc{pid: 7, start: 1, mib: map[int]int64{0: 55286}, leftover: true}))
	st, evs := h.Observe(round(2, []int64{55295}, proc{pid: 7, start: 1500, mib: map[int]int64{0: 55286}}))
	if kinds(evs) != "holder-vanished holder-appeared" || st.Holds {
		t.Errorf("events %q holds=%v", kinds(evs), st.Holds)
	}
}
