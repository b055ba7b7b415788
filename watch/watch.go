// Package watch turns one host's successive probe rounds into what changed between them:
// GPU holders that appeared or vanished, per-GPU memory that moved, how long each vanished
// holder's memory took to come back, the host dropping and coming back, and whether the
// condition a watch waits for (--until free, clean or ready) holds.
//
// Host, its rounds and events are pure: no I/O and no clock. Times come from the captures
// (the host's probe time) and from the caller (when a round ended, for a host that could not
// be probed).
//
// It also runs `gputriage watch` (Watcher): it follows each host's rounds from a triage.Pool
// (RoundOf), judges them one at a time, decides when the watch ends and with what exit
// status, and shows them: one screen redrawn in place, one line per change, or JSON Lines
// (docs/json.md). The command line (flags, which hosts, how they are reached) stays in
// cmd/gputriage; fix/remote uses Host and RoundOf to see a stopped target's memory come back.
package watch

import (
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/readiness"
)

// Until is the condition a watch waits for.
type Until int

// The conditions.
const (
	// UntilNone: watch until interrupted.
	UntilNone Until = iota
	// UntilFree: every holder diagnose judged left over (leftover-process, zombies and stopped
	// processes included) is gone and its GPU memory is back; healthy holders do not count.
	UntilFree
	// UntilClean: no finding at warning or worse.
	UntilClean
	// UntilReady: the job (Config.Job) would start on the host's default GPUs.
	UntilReady
)

// MemoryChangeMiB is the smallest change of a GPU's used memory reported on its own: smaller
// ones are allocator noise.
const MemoryChangeMiB = 256

// Config says what a Host waits for.
type Config struct {
	Until Until
	Job   *readiness.Job // for UntilReady
}

// Round is one probe of one host.
type Round struct {
	// At is when the caller had the round's answer, by the caller's clock: the time of a round
	// that has no capture, and the clock of reconnect gaps.
	At time.Time
	// Snapshot and Result are the probe's; nil Snapshot when the host could not be probed.
	Snapshot *parse.Snapshot
	Result   diagnose.Result
	// Err says why the host could not be probed (Snapshot is nil).
	Err string
	// Dialed: this round opened a new connection to the host.
	Dialed bool
}

// HolderKey identifies a holder: a PID and its start time, so that a reused PID is a new
// holder. Start is the Unix time in seconds; 0 when unknown.
type HolderKey struct {
	PID   int
	Start int64
}

// Holder is one process that holds GPU memory or a GPU device in a round.
type Holder struct {
	HolderKey
	Program  string        // diagnose's name for it (host data: sanitize before printing)
	MiB      map[int]int64 // per GPU index, as nvidia-smi reports it
	GPUs     []int
	Leftover bool // a leftover-process finding names it
}

// GPU is one GPU's memory in a round.
type GPU struct {
	Index                      int
	UsedMiB, FreeMiB, TotalMiB *int64
}

// Status is a host after a round.
type Status struct {
	Reachable bool
	Err       string
	Time      time.Time // the capture's probe time, or Round.At
	GPUs      []GPU
	Holders   []Holder
	Worst     diagnose.Severity // -1 when no finding
	// Holds: the Config's condition holds after this round (false with UntilNone).
	Holds bool
	// Waiting says, when it does not hold, what it waits for.
	Waiting string
}
