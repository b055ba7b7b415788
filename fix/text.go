package fix

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// How is how a plan will be run, which the plan's text shows: it changes what runs on the
// host.
type How struct {
	Sudo      bool          // the script runs under sudo -n
	KillAfter time.Duration // SIGKILL to a target still running this long after the stop; 0: none
}

// WritePlan writes the plan for people: for each target, the commands the apply script runs on
// it once its identity is confirmed, as the script runs them. clean makes host text safe to
// print (the caller's sanitizer: a program name is the host's bytes).
func WritePlan(w io.Writer, p Plan, how How, clean func(string) string) {
	through := ""
	if how.Sudo {
		through = ", through sudo -n"
	}
	for _, h := range p.Hosts {
		boot := "boot " + short(h.BootID)
		if h.BootID == "" {
			boot = "boot id not captured" // an older probe: every holder is explained, none a target
		}
		fmt.Fprintf(w, "%s (%s)%s:\n", clean(h.Host), boot, through)
		if len(h.Targets) == 0 {
			fmt.Fprintf(w, "  nothing to stop\n")
		}
		for _, t := range h.Targets {
			fmt.Fprintf(w, "  %s\n", clean(t.Line()))
			if how.KillAfter > 0 {
				fmt.Fprintf(w, "      then, if PID %d still runs %s after the apply started: %s\n", t.PID, how.KillAfter, t.KillLine())
			}
			fmt.Fprintf(w, "      %s of %s, started at tick %d, argv sha256 %s; %s: %s\n", clean(t.Program), clean(userOf(t)),
				t.StartTicks, short(t.ArgvSHA256), t.Finding, strings.Join(t.Reasons, ", "))
			if s := freesText(t.FreesMiB); s != "" {
				fmt.Fprintf(w, "      frees %s\n", s)
			}
			if t.PodUID != "" {
				fmt.Fprintf(w, "      in Kubernetes pod UID %s, which is not deleted: its process is signalled by PID\n", clean(t.PodUID))
			}
		}
		for _, t := range h.Judge {
			fmt.Fprintf(w, "  needs your judgement, not applied: PID %d %s of %s; %s: %s\n", t.PID, clean(t.Program), clean(userOf(t)), t.Finding, clean(t.Judge))
			fmt.Fprintf(w, "      if you judge it abandoned, name it (--include %d, or \"include\": true in a plan file) to run: %s\n", t.PID, clean(t.Line()))
		}
		for _, x := range h.Explained {
			fmt.Fprintf(w, "  not signalled: PID %d %s: %s\n      instead: %s\n", x.PID, clean(x.Program), clean(x.Why), clean(x.Instead))
			for _, s := range x.Steps {
				fmt.Fprintf(w, "        %s\n", clean(s))
			}
		}
	}
}

// Line is what applying t runs on the host, word for word as the apply script runs it (a
// finding's suggested commands, for a person to type, may differ: systemctl stop waits for
// the unit, where the script queues the stop and watches the process itself).
func (t Target) Line() string {
	pid := fmt.Sprint(t.PID)
	switch t.Kind {
	case KindStopUnit:
		return "systemctl stop --no-block -- " + t.Name + "   (holds PID " + pid + ")"
	case KindStopContainer:
		return t.Runtime + " stop -- " + t.Name + "   (holds PID " + pid + ")"
	case KindCancelJob:
		return "scancel -- " + t.Name + "   (holds PID " + pid + ")"
	}
	if t.Stopped {
		return "kill -s TERM " + pid + "; kill -s CONT " + pid
	}
	return "kill -s TERM " + pid
}

// KillLine is what the apply script runs on t's process when it outlives the stop (with
// --kill-after, or once the operator has confirmed SIGKILL): whatever the kind, SIGKILL to the
// PID, its start time checked again first.
func (t Target) KillLine() string {
	return "kill -s KILL " + fmt.Sprint(t.PID)
}

func userOf(t Target) string {
	if t.User != "" {
		return fmt.Sprintf("%s (uid %d)", t.User, t.UID)
	}
	return fmt.Sprintf("uid %d", t.UID)
}

func short(hex string) string {
	if len(hex) > 12 {
		return hex[:12]
	}
	return hex
}

// freesText: "55,286 MiB on GPU 0, 1,024 MiB on GPU 1".
func freesText(m map[int]int64) string {
	var gpus []int
	for g := range m {
		gpus = append(gpus, g)
	}
	slices.Sort(gpus)
	var parts []string
	for _, g := range gpus {
		parts = append(parts, fmt.Sprintf("%s MiB on GPU %d", thousands(m[g]), g))
	}
	return strings.Join(parts, ", ")
}

func thousands(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// WriteResult writes what became of one target: "gpu07: PID 20629 sglang.launch_server:
// stopped 270ms after the signal; nvidia-smi no longer lists it (it held 55,286 MiB on GPU 0)",
// or why not, with what would help.
func WriteResult(w io.Writer, host string, t Target, r Result, sudo bool, clean func(string) string) {
	head := clean(host) + ": PID " + fmt.Sprint(t.PID) + " " + clean(t.Program)
	switch r.Outcome {
	case Stopped:
		took := ""
		if r.Signal != nil && r.Exit != nil {
			took = " " + (*r.Exit - *r.Signal).Round(10*time.Millisecond).String() + " after the signal"
		}
		fmt.Fprintf(w, "%s: stopped%s%s; nvidia-smi no longer lists it", head, via(r), took)
		if freed := freesText(t.FreesMiB); freed != "" {
			fmt.Fprintf(w, " (it held %s)", freed)
		}
		fmt.Fprintln(w)
	case MemoryHeld:
		fmt.Fprintf(w, "%s: exited%s, but nvidia-smi still lists it: memory still held (look for threads stuck in the driver: dmesg -T | grep -iE 'NVRM|Xid')\n", head, via(r))
	case StillRunning:
		fmt.Fprintf(w, "%s: still running after SIGTERM%s\n", head, via(r))
	case Refused:
		fmt.Fprintf(w, "%s: refused: %s\n", head, refusal(r.Detail, sudo))
	case Unconfirmed:
		did := "signalled"
		if r.Detail == "no-answer" {
			did = "perhaps signalled"
		}
		fmt.Fprintf(w, "%s: %s; what became of it is not known: gputriage watch %s --until free\n", head, did, clean(host))
	}
}

func via(r Result) string {
	if r.Detail == "sigkill" {
		return " (after SIGKILL)"
	}
	return ""
}

// refusal says why the script refused a target, and what would help.
func refusal(d string, sudo bool) string {
	switch {
	case d == "permission" && !sudo:
		return "permission denied: it is another user's process; --sudo would signal it as root"
	case strings.HasPrefix(d, "command-exit-") && !sudo:
		return "the stop command failed (" + d + "); --sudo would run it as root"
	}
	if s, ok := refusals[d]; ok {
		return s
	}
	return d
}

// refusals are the apply script's reasons, in words.
var refusals = map[string]string{
	"boot-id-differs":    "the host has rebooted since the plan was made: probe it again",
	"start-time-differs": "PID reused or process restarted (its start time differs from the plan's)",
	"uid-differs":        "its owner differs from the plan's",
	"argv-differs":       "its command line differs from the plan's",
	"gone":               "it is gone already",
	"pid-1":              "PID 1 is never signalled",
	"kernel-thread":      "a kernel thread",
	"sshd":               "sshd is never signalled",
	"own-session":        "it is the fix session's own process or ancestor",
	"zombie":             "a zombie now: end its parent",
	"uninterruptible":    "in state D (stuck in the driver): a signal would wait; reset the GPU or reboot",
	"not-in-unit":        "it is no longer in the unit the plan names",
	"not-in-container":   "it is no longer in the container the plan names",
	"not-in-job":         "it is no longer in the job the plan names",
	"no-sha256sum":       "the host has no sha256sum to check its command line",
	"argv-read-timeout":  "its command line could not be read within 2 s (a read of its memory that does not end): check it by hand",
	"argv-unreadable":    "its command line could not be read",
	"no-tempdir":         "the host has no writable /tmp or /var/tmp to bound the read of its command line in",
	DetailNotNamed:       "the probe just before applying names no problem with it any more; nothing was sent",
	DetailActionDiffers:  "the probe just before applying names it for another action than the plan's; nothing was sent",
	DetailNotReprobed:    "the host could not be probed again just before applying; nothing was sent",
}
