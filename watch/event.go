package watch

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// EventKind names what changed. The names are stable: JSON Lines carry them.
type EventKind string

// The kinds of change.
const (
	Present       EventKind = "holder"          // first round: a holder that is there
	Appeared      EventKind = "holder-appeared" // a holder that the previous round did not see
	Vanished      EventKind = "holder-vanished" // a holder that the previous round saw is gone
	MemoryChanged EventKind = "memory-changed"  // a GPU's used memory moved by MemoryChangeMiB or more
	Released      EventKind = "memory-released" // a vanished holder's memory is back
	Unreachable   EventKind = "unreachable"     // the host could not be probed
	Reconnected   EventKind = "reconnected"     // a new connection after a drop
)

// Event is one change.
type Event struct {
	Kind   EventKind
	GPU    *int    // MemoryChanged, Released
	Holder *Holder // holder kinds, Released

	// MemoryChanged: used MiB in the previous round and now, and free MiB now.
	FromMiB, ToMiB int64
	Free           *int64

	// Released: the holder's share of the GPU (MiB). After is the time between the round that
	// first saw the holder gone (GoneAt) and the first round whose used memory had dropped by
	// the share (BackAt), by the host's probe clock. Both ends are known only to within a
	// round: Resolution is the longest time between the rounds involved.
	MiB        int64
	GoneAt     time.Time
	BackAt     time.Time
	After      time.Duration
	Resolution time.Duration

	// Unreachable: why. Reconnected: the gap, from the last good round (LastGood) to the
	// round that reconnected (Back), by the caller's clock.
	Err      string
	LastGood time.Time
	Back     time.Time
	Gap      time.Duration
}

// String is the event in words, one line. Program names and errors are host data: the
// caller sanitizes the line before printing it.
func (e Event) String() string {
	switch e.Kind {
	case Present:
		return "holder " + e.Holder.String()
	case Appeared:
		return "appeared: " + e.Holder.String()
	case Vanished:
		return "gone: " + e.Holder.String()
	case MemoryChanged:
		s := fmt.Sprintf("GPU %d: used %s -> %s", *e.GPU, mib(e.FromMiB), mib(e.ToMiB))
		if e.Free != nil {
			s += " (free " + mib(*e.Free) + ")"
		}
		return s
	case Released:
		return fmt.Sprintf("GPU %d: %s released %s after PID %d was gone (probes at %s and %s; to within the %s between rounds)",
			*e.GPU, mib(e.MiB), seconds(e.After), e.Holder.PID, e.GoneAt.UTC().Format("15:04:05"), e.BackAt.UTC().Format("15:04:05"), seconds(e.Resolution))
	case Unreachable:
		return "unreachable: " + e.Err
	case Reconnected:
		s := "reconnected after a gap of " + seconds(e.Gap)
		if !e.LastGood.IsZero() {
			s += " (last good round " + e.LastGood.UTC().Format("15:04:05") + ")"
		}
		return s
	}
	return string(e.Kind)
}

// String is "PID 20629 python3 -m sglang.launch_server [leftover]: 55,286 MiB on GPU 0".
func (h Holder) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "PID %d", h.PID)
	if h.Program != "" {
		b.WriteString(" " + h.Program)
	}
	if h.Leftover {
		b.WriteString(" [leftover]")
	}
	var parts []string
	for _, g := range h.GPUs {
		if m := h.MiB[g]; m > 0 {
			parts = append(parts, fmt.Sprintf("%s on GPU %d", mib(m), g))
		} else {
			parts = append(parts, fmt.Sprintf("GPU %d", g))
		}
	}
	if len(parts) > 0 {
		b.WriteString(": " + strings.Join(parts, ", "))
	}
	return b.String()
}

// mib is "55,286 MiB".
func mib(n int64) string {
	s := strconv.FormatInt(abs(n), 10)
	var b strings.Builder
	if n < 0 {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String() + " MiB"
}

// seconds is a duration in seconds for people: "6 s", "0.5 s".
func seconds(d time.Duration) string {
	if d < 10*time.Second && d%time.Second != 0 {
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	}
	return strconv.FormatInt(int64(d.Round(time.Second)/time.Second), 10) + " s"
}

func itoa(n int) string { return strconv.Itoa(n) }
