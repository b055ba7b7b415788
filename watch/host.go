package watch

import (
	"slices"
	"sort"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/readiness"
)

// Host follows one host from round to round. Its zero value is not usable: see NewHost.
type Host struct {
	cfg      Config
	rounds   int                // good rounds so far
	prev     *state             // the last good round
	lastAt   time.Time          // Round.At of the last good round
	down     bool               // the last round failed
	pending  []pending          // vanished holders whose memory is not back yet
	leftover map[HolderKey]bool // holders ever judged left over
}

// NewHost starts following a host.
func NewHost(cfg Config) *Host {
	return &Host{cfg: cfg, leftover: map[HolderKey]bool{}}
}

// state is what one good round saw.
type state struct {
	clock   clock
	holders map[HolderKey]Holder
	gpus    map[int]GPU
	order   []int // GPU indexes in the capture's order
}

// pending is a vanished holder's share of one GPU, not yet seen back.
type pending struct {
	holder   Holder
	gpu      int
	share    int64 // the holder's MiB on gpu when last seen
	baseline int64 // gpu's used MiB in that round
	// others are the MiB on gpu that nvidia-smi listed in that round for the other holders.
	others  map[HolderKey]int64
	goneAt  clock // the round that first saw the holder gone
	goneRes time.Duration
}

// Observe takes the host's next round and returns the host's status and what changed since
// the previous round.
func (h *Host) Observe(r Round) (Status, []Event) {
	if r.Snapshot == nil {
		return h.failed(r)
	}
	cur := stateOf(r.Snapshot, r.Result, r.At)
	var evs []Event
	if h.rounds > 0 && (h.down || r.Dialed) {
		evs = append(evs, Event{Kind: Reconnected, LastGood: h.lastAt, Back: r.At, Gap: r.At.Sub(h.lastAt)})
	}
	if h.prev == nil {
		for _, k := range sortedKeys(cur.holders) {
			hd := cur.holders[k]
			evs = append(evs, Event{Kind: Present, Holder: &hd})
		}
	} else {
		evs = append(evs, h.diff(cur)...)
	}
	evs = append(evs, h.released(cur)...)
	for k, hd := range cur.holders {
		if hd.Leftover {
			h.leftover[k] = true
		}
	}
	h.prev, h.lastAt, h.down = cur, r.At, false
	h.rounds++
	st := Status{Reachable: true, Time: cur.clock.wall, Worst: r.Result.Worst(), GPUs: cur.gpuList(), Holders: cur.holderList()}
	st.Holds, st.Waiting = h.holds(r, cur)
	return st, evs
}

// failed records a round without a capture: the host is shown unreachable once, when it goes.
func (h *Host) failed(r Round) (Status, []Event) {
	st := Status{Err: r.Err, Time: r.At, Worst: -1, Waiting: "the host to answer"}
	if h.prev != nil {
		st.GPUs, st.Holders = h.prev.gpuList(), h.prev.holderList()
	}
	var evs []Event
	if !h.down {
		evs = append(evs, Event{Kind: Unreachable, Err: r.Err, LastGood: h.lastAt})
	}
	h.down = true
	return st, evs
}

// diff compares the round with the previous good one: holders that vanished (their memory is
// then awaited) or appeared, and GPUs whose used memory moved.
func (h *Host) diff(cur *state) []Event {
	var evs []Event
	res := cur.clock.since(h.prev.clock)
	for _, k := range sortedKeys(h.prev.holders) {
		if _, ok := cur.holders[k]; ok {
			continue
		}
		hd := h.prev.holders[k]
		evs = append(evs, Event{Kind: Vanished, Holder: &hd})
		for _, g := range hd.GPUs {
			used := h.prev.gpus[g].UsedMiB
			if hd.MiB[g] > 0 && used != nil {
				h.pending = append(h.pending, pending{holder: hd, gpu: g, share: hd.MiB[g], baseline: *used,
					others: h.prev.listed(g, k), goneAt: cur.clock, goneRes: res})
			}
		}
	}
	for _, k := range sortedKeys(cur.holders) {
		if _, ok := h.prev.holders[k]; !ok {
			hd := cur.holders[k]
			evs = append(evs, Event{Kind: Appeared, Holder: &hd})
		}
	}
	for _, i := range cur.order {
		was, now := h.prev.gpus[i].UsedMiB, cur.gpus[i].UsedMiB
		if was != nil && now != nil && abs(*now-*was) >= MemoryChangeMiB {
			g := i
			evs = append(evs, Event{Kind: MemoryChanged, GPU: &g, FromMiB: *was, ToMiB: *now, Free: cur.gpus[i].FreeMiB})
		}
	}
	return evs
}

// released finds the vanished holders whose memory is back: their GPU's used memory is below
// the round they were last seen in by at least their share, plus the shares of holders that
// vanished from that GPU before them and are still awaited, once what the holders listed now
// do with their own shares is taken out (see drop). A release lowers the baseline of the
// holders still awaited on that GPU by its share, so that it is counted once.
func (h *Host) released(cur *state) []Event {
	var evs []Event
	awaited := map[int]int64{} // per GPU: shares of earlier holders still awaited
	gone := map[int]bool{}     // PIDs of the holders awaited
	for _, p := range h.pending {
		gone[p.holder.PID] = true
	}
	for i := 0; i < len(h.pending); i++ {
		p := h.pending[i]
		d, ok := p.drop(cur, gone)
		if !ok || d < p.share+awaited[p.gpu] {
			awaited[p.gpu] += p.share
			continue
		}
		g, hd := p.gpu, p.holder
		evs = append(evs, Event{Kind: Released, GPU: &g, Holder: &hd, MiB: p.share,
			GoneAt: p.goneAt.wall, BackAt: cur.clock.wall, After: cur.clock.since(p.goneAt),
			Resolution: max(p.goneRes, cur.clock.since(h.prevOr(cur).clock))})
		h.pending = slices.Delete(h.pending, i, i+1)
		i--
		for j := range h.pending {
			if h.pending[j].gpu == p.gpu {
				h.pending[j].baseline -= p.share
			}
		}
	}
	return evs
}

// drop is how far p's GPU's used memory has come down since p's holder was last seen, less
// what the holders nvidia-smi lists now freed of their own shares since then (a healthy holder
// beside a leftover freeing as much as it held at the moment the leftover exits, which a host
// user can time, is not the leftover's memory coming back) and plus what they took since (a
// new job given the freed GPU at once does not hold the release off for ever). A holder with
// the PID of an awaited one (gone) is not counted: the driver may still list what it holds for
// the process that has gone under that PID, which a new process may be handed. ok is false
// when the GPU's used memory is unknown.
func (p pending) drop(cur *state, gone map[int]bool) (mib int64, ok bool) {
	used := cur.gpus[p.gpu].UsedMiB
	if used == nil {
		return 0, false
	}
	mib = p.baseline - *used
	for k, hd := range cur.holders {
		if !gone[k.PID] {
			mib += hd.MiB[p.gpu] - p.others[k]
		}
	}
	return mib, true
}

// listed is the MiB on gpu nvidia-smi lists for each holder of the round but except.
func (s *state) listed(gpu int, except HolderKey) map[HolderKey]int64 {
	m := map[HolderKey]int64{}
	for k, hd := range s.holders {
		if k != except && hd.MiB[gpu] != 0 {
			m[k] = hd.MiB[gpu]
		}
	}
	return m
}

// prevOr is the previous good round, or cur on the first one.
func (h *Host) prevOr(cur *state) *state {
	if h.prev == nil {
		return cur
	}
	return h.prev
}

// holds judges the Config's condition on a good round; when it does not hold, it says what the
// watch waits for.
func (h *Host) holds(r Round, cur *state) (bool, string) {
	switch h.cfg.Until {
	case UntilFree:
		return h.free(r, cur)
	case UntilClean:
		if w := r.Result.Worst(); w >= diagnose.Warning {
			return false, "no finding at warning or worse (worst now: " + w.String() + ")"
		}
		return true, ""
	case UntilReady:
		if h.cfg.Job == nil || r.Snapshot == nil {
			return false, "a job to check"
		}
		if rd := readiness.Check(r.Snapshot, r.Result, *h.cfg.Job); !rd.Ready {
			return false, "the job to fit: " + rd.Reason
		}
		return true, ""
	}
	return false, ""
}

// free: nvidia-smi answered, no holder is judged left over now, and every holder that ever was
// has vanished with its memory back.
func (h *Host) free(r Round, cur *state) (bool, string) {
	if f := r.Snapshot.SMI.Failure; f != nil {
		return false, "nvidia-smi to answer (" + string(f.Kind) + ")"
	}
	for _, k := range sortedKeys(cur.holders) {
		// One judged left over in any round is awaited until it is gone, whatever this round
		// says of it: killed and not yet reaped, a zombie still listed with its memory is no
		// longer judged left over, and its memory is not back.
		if hd := cur.holders[k]; hd.Leftover || h.leftover[k] {
			return false, "leftover PID " + itoa(k.PID) + " to exit"
		}
	}
	for _, p := range h.pending {
		if h.leftover[p.holder.HolderKey] {
			return false, "GPU " + itoa(p.gpu) + "'s " + mib(p.share) + " from PID " + itoa(p.holder.PID) + " to come back"
		}
	}
	return true, ""
}

// stateOf reads a round's holders and GPUs.
func stateOf(s *parse.Snapshot, r diagnose.Result, at time.Time) *state {
	st := &state{clock: clockOf(s, at), holders: map[HolderKey]Holder{}, gpus: map[int]GPU{}}
	for _, g := range s.GPUs {
		if _, dup := st.gpus[g.Index]; !dup {
			st.order = append(st.order, g.Index)
		}
		st.gpus[g.Index] = GPU{Index: g.Index, UsedMiB: g.MemoryUsedMiB, FreeMiB: g.MemoryFreeMiB, TotalMiB: g.MemoryTotalMiB}
	}
	leftover := map[int]bool{}
	for _, f := range r.Findings {
		if f.Code == diagnose.CodeLeftoverProcess {
			for _, pid := range f.PIDs {
				leftover[pid] = true
			}
		}
	}
	starts := map[int]int64{}
	for _, p := range s.Processes {
		if p.StartTime != nil {
			starts[p.PID] = p.StartTime.Unix()
		}
	}
	for _, p := range r.Processes {
		k := HolderKey{PID: p.PID, Start: starts[p.PID]}
		st.holders[k] = Holder{HolderKey: k, Program: p.Program, MiB: p.GPUMemoryMiB, GPUs: slices.Clone(p.GPUs), Leftover: leftover[p.PID]}
	}
	return st
}

func (s *state) gpuList() []GPU {
	out := make([]GPU, 0, len(s.order))
	for _, i := range s.order {
		out = append(out, s.gpus[i])
	}
	return out
}

func (s *state) holderList() []Holder {
	out := make([]Holder, 0, len(s.holders))
	for _, k := range sortedKeys(s.holders) {
		out = append(out, s.holders[k])
	}
	return out
}

func sortedKeys(m map[HolderKey]Holder) []HolderKey {
	ks := make([]HolderKey, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if ks[i].PID != ks[j].PID {
			return ks[i].PID < ks[j].PID
		}
		return ks[i].Start < ks[j].Start
	})
	return ks
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// clock is a round's probe time: the host's wall clock (whole seconds) and, when the capture
// has it, its uptime (hundredths), which measures delays between rounds of one boot finely.
type clock struct {
	wall   time.Time
	uptime *float64
	boot   int64 // the boot time the uptime counts from, Unix seconds
}

func clockOf(s *parse.Snapshot, at time.Time) clock {
	c := clock{wall: at}
	if s.Host.Time != nil {
		c.wall = *s.Host.Time
	}
	if s.Host.UptimeSeconds != nil && s.Host.BootTime != nil {
		c.uptime, c.boot = s.Host.UptimeSeconds, s.Host.BootTime.Unix()
	}
	return c
}

// since is c - old: by uptime within one boot, else by wall clock; never negative.
func (c clock) since(old clock) time.Duration {
	var d time.Duration
	if c.uptime != nil && old.uptime != nil && c.boot == old.boot {
		d = time.Duration((*c.uptime - *old.uptime) * float64(time.Second))
	} else {
		d = c.wall.Sub(old.wall)
	}
	return max(d, 0)
}
