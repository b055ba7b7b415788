package fix

import (
	"bytes"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ApplyScript is the one fixed POSIX sh script that applies a host's targets (see the comment
// at its top). It is run by `sh -s`, or under sudo -n, with ApplyInput on its standard input.
//
//go:embed apply.sh
var ApplyScript string

// Mode is what the apply script sends.
type Mode int

// Modes.
const (
	ModeTerm Mode = 1 // SIGTERM (SIGCONT to a stopped process), SIGKILL at KillAfter if set
	ModeKill Mode = 2 // SIGKILL now: targets a ModeTerm run left running
)

// ApplyOptions are the apply script's parameters besides the targets.
type ApplyOptions struct {
	Nonce, PlanID string // hex
	Mode          Mode
	Wait          time.Duration // how long to watch for exit and release
	KillAfter     time.Duration // 0: no SIGKILL in ModeTerm
}

// ApplyInput is what `sh -s` reads on the host: a first line that sets the parameters and
// targets as positional parameters, then the script. Every word is validated here (and again
// by the script): digits and lower-case hex, and for names [A-Za-z0-9@._:-].
func ApplyInput(o ApplyOptions, hp HostPlan) ([]byte, error) {
	if !isHex(o.Nonce, -1) || !isHex(o.PlanID, 16) || !isHex(hp.BootID, 32) {
		return nil, fmt.Errorf("%w: nonce, plan id or boot id is not hex", ErrPlan)
	}
	if o.Mode != ModeTerm && o.Mode != ModeKill {
		return nil, fmt.Errorf("%w: mode %d", ErrPlan, o.Mode)
	}
	if len(hp.Targets) == 0 {
		return nil, fmt.Errorf("%w: host %q: no targets", ErrPlan, hp.Host)
	}
	words := []string{o.Nonce, o.PlanID, hp.BootID, strconv.Itoa(int(o.Mode)), strconv.FormatInt(Centis(o.Wait), 10), strconv.FormatInt(Centis(o.KillAfter), 10)}
	for _, t := range hp.Targets {
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("%w: host %q: %v", ErrPlan, hp.Host, err)
		}
		name := t.Name
		if name == "" {
			name = "-"
		}
		stopped := "0"
		if t.Stopped {
			stopped = "1"
		}
		words = append(words, kindCode(t), strconv.Itoa(t.PID), strconv.FormatInt(t.StartTicks, 10),
			strconv.Itoa(t.UID), t.ArgvSHA256, stopped, name)
	}
	return []byte("set -- " + strings.Join(words, " ") + "\n" + ApplyScript), nil
}

func kindCode(t Target) string {
	switch t.Kind {
	case KindStopUnit:
		return "2"
	case KindStopContainer:
		return map[string]string{"docker": "3", "podman": "4", "crictl": "5"}[t.Runtime]
	case KindCancelJob:
		return "6"
	}
	return "1"
}

// Centis is d as the apply script takes it: whole centiseconds, rounded up (0 for none). The
// script keeps time in centiseconds, so --kill-after 2.5s --wait 3s stay 250 and 300.
func Centis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	const cs = 10 * time.Millisecond
	return int64((d + cs - 1) / cs)
}

// Outcome is what became of one target.
type Outcome string

// Outcomes, as the apply script prints them.
const (
	Stopped      Outcome = "stopped"       // it exited and nvidia-smi no longer lists it
	MemoryHeld   Outcome = "memory-held"   // it exited, nvidia-smi still lists it
	StillRunning Outcome = "still-running" // signalled, still running when the watch ended
	Refused      Outcome = "refused"       // not signalled: Detail says why
	// Unconfirmed: signalled (or its stop command run), but the session ended before the
	// script said what became of it.
	Unconfirmed Outcome = "unconfirmed"
)

// Result is one target's outcome on the host.
type Result struct {
	PID     int     `json:"pid"`
	Outcome Outcome `json:"outcome"`
	// Detail is why it was refused (boot-id-differs, start-time-differs, uid-differs,
	// argv-differs, gone, pid-1, kernel-thread, sshd, own-session, zombie, uninterruptible,
	// permission, not-in-unit, not-in-container, not-in-job, command-exit-N, no-sha256sum,
	// argv-read-timeout, argv-unreadable, no-tempdir),
	// or "sigkill" when SIGKILL followed SIGTERM; empty otherwise.
	Detail string `json:"detail,omitempty"`
	// Times since the script started: signalled, exited, released by nvidia-smi; nil: not.
	Signal  *time.Duration `json:"signal_ns,omitempty"`
	Exit    *time.Duration `json:"exit_ns,omitempty"`
	Release *time.Duration `json:"release_ns,omitempty"`
}

// ParseResults reads the apply script's output for n targets. Lines without the nonce are
// not the script's and are skipped. A target with an "acted" line but no result (the session
// ended during the watch) is Unconfirmed when it was signalled, Refused when it was refused; a
// target with neither is an error.
func ParseResults(out []byte, nonce string, n int) ([]Result, error) {
	res := make([]Result, n)
	seen := make([]bool, n)  // a result line
	acted := make([]bool, n) // an acted line
	for line := range bytes.Lines(out) {
		f := strings.Fields(string(line))
		if len(f) < 2 || f[0] != nonce {
			continue
		}
		switch {
		case f[1] == "bad-input":
			return nil, fmt.Errorf("apply script refused its input: %q", strings.Join(f[2:], " "))
		case f[1] == "result" && len(f) == 9:
			i, err := targetIndex(f[2], n, seen)
			if err != nil {
				return nil, fmt.Errorf("apply script: bad result line %q", line)
			}
			seen[i] = true
			if res[i], err = parseResult(f[3:]); err != nil {
				return nil, fmt.Errorf("apply script: %v: %q", err, line)
			}
		case f[1] == "acted" && len(f) == 6:
			i, err := targetIndex(f[2], n, acted)
			if err != nil || !seen[i] && parseActed(&res[i], f[3:]) != nil {
				return nil, fmt.Errorf("apply script: bad acted line %q", line)
			}
			acted[i] = true
		}
	}
	for i := range seen {
		if !seen[i] && !acted[i] {
			return res, fmt.Errorf("apply script: no result for target %d", i)
		}
	}
	return res, nil
}

// targetIndex reads a target's index, which must be below n and not yet in done.
func targetIndex(s string, n int, done []bool) (int, error) {
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || i >= n || done[i] {
		return 0, fmt.Errorf("bad index %q", s)
	}
	return i, nil
}

// parseActed reads "PID signalled|refused DETAIL" into r, for a target whose result line has
// not come (yet).
func parseActed(r *Result, f []string) error {
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		return fmt.Errorf("bad pid")
	}
	*r = Result{PID: pid, Outcome: Unconfirmed}
	switch f[1] {
	case "signalled":
	case "refused":
		r.Outcome = Refused
	default:
		return fmt.Errorf("unknown action")
	}
	if f[2] != "-" {
		r.Detail = f[2]
	}
	return nil
}

func parseResult(f []string) (Result, error) {
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		return Result{}, fmt.Errorf("bad pid")
	}
	r := Result{PID: pid, Outcome: Outcome(f[1])}
	switch r.Outcome {
	case Stopped, MemoryHeld, StillRunning, Refused:
	default:
		return Result{}, fmt.Errorf("unknown outcome")
	}
	if f[2] != "-" {
		r.Detail = f[2]
	}
	for i, p := range []**time.Duration{&r.Signal, &r.Exit, &r.Release} {
		if f[3+i] == "-" {
			continue
		}
		cs, err := strconv.ParseInt(f[3+i], 10, 64)
		if err != nil || cs < 0 {
			return Result{}, fmt.Errorf("bad time")
		}
		d := time.Duration(cs) * 10 * time.Millisecond
		*p = &d
	}
	return r, nil
}
