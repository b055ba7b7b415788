package watch

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/report"
)

// output shows a watch: one screen redrawn in place on a terminal, one timestamped line
// per change when piped, or one JSON object per host round (JSON Lines).
type output struct {
	w      io.Writer
	errw   io.Writer
	mode   string // "screen", "lines" or "json"
	labels []string
	header string
	until  bool            // a condition is awaited: a host that does not hold it has a problem
	notes  map[string]bool // printed already: each note once per host
	recent []string        // the screen's last changes
	said   map[int]string  // lines: the last state said per host ("holds", or what it waits for)
	rounds map[int]int     // rounds per host, for JSON
	last   []*Status       // the screen's view of every host
	// clean makes host text safe to print; masks says it masks credentials (--show-secrets
	// not given), as rounds then are before any mode shows them.
	clean func(string) string
	masks bool
}

func newOutput(w *Watcher) output {
	out := output{w: w.Stdout, errw: w.Stderr, mode: "lines", notes: map[string]bool{},
		said: map[int]string{}, rounds: map[int]int{}, clean: maskedText, masks: true} // watch has no --show-secrets
	if w.Format == "json" || w.Format == "screen" {
		out.mode = w.Format
	}
	for _, h := range w.Hosts {
		out.labels = append(out.labels, report.Sanitize(h.Label))
	}
	out.until = w.Until != ""
	until := w.Until
	if until == "" {
		until = "Ctrl-C"
	}
	out.header = fmt.Sprintf("gputriage watch: %d host%s every %s until %s", len(w.Hosts), plural(len(w.Hosts)), w.Interval, until)
	return out
}

// maskedText makes host text safe to print, credentials masked.
func maskedText(s string) string { return report.Sanitize(report.MaskSecrets(s)) }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// note prints a host's note on stderr once.
func (o *output) note(i int, n string) {
	key := o.labels[i] + "\x00" + n
	if !o.notes[key] {
		o.notes[key] = true
		fmt.Fprintf(o.errw, "gputriage: %s: %s\n", o.labels[i], o.clean(n))
	}
}

// round shows host i's round.
func (o *output) round(i int, at time.Time, s Status, evs []Event, all []*Status) {
	o.rounds[i]++
	if o.masks {
		s, evs, all = report.MaskSecretsIn(s), report.MaskSecretsIn(evs), report.MaskSecretsIn(all)
	}
	switch o.mode {
	case "json":
		_ = report.JSONLine(o.w, jsonRoundOf(o.labels[i], o.rounds[i], at, s, evs))
	case "lines":
		o.lines(i, at, s, evs)
	default:
		for _, e := range evs {
			o.recent = append(o.recent, at.Format("15:04:05")+" "+o.labels[i]+": "+report.Sanitize(e.String()))
		}
		o.recent = o.recent[max(0, len(o.recent)-10):]
		o.last = all
		o.screen(at)
	}
}

// lines prints one timestamped line per change; nothing when nothing changed.
func (o *output) lines(i int, at time.Time, s Status, evs []Event) {
	stamp := at.UTC().Format("2006-01-02T15:04:05.000Z")
	if o.rounds[i] == 1 && s.Reachable {
		fmt.Fprintf(o.w, "%s %s: watching: %d GPU%s, %d holder%s\n", stamp, o.labels[i], len(s.GPUs), plural(len(s.GPUs)),
			len(s.Holders), plural(len(s.Holders)))
	}
	for _, e := range evs {
		fmt.Fprintf(o.w, "%s %s: %s\n", stamp, o.labels[i], report.Sanitize(e.String()))
	}
	say := ""
	switch {
	case !s.Reachable:
		return
	case s.Holds:
		say = "holds"
	case s.Waiting != "":
		say = "waiting for " + report.Sanitize(s.Waiting)
	}
	if say != o.said[i] {
		o.said[i] = say
		fmt.Fprintf(o.w, "%s %s: %s\n", stamp, o.labels[i], say)
	}
}

// end says why the watch ended.
func (o *output) end(at time.Time, code int, why string) {
	switch o.mode {
	case "json":
		_ = report.JSONLine(o.w, struct {
			Time       string `json:"time"`
			End        string `json:"end"`
			ExitStatus int    `json:"exit_status"`
		}{at.UTC().Format(time.RFC3339Nano), report.Sanitize(why), code})
	case "lines":
		fmt.Fprintf(o.w, "%s watch ended: %s (exit %d)\n", at.UTC().Format("2006-01-02T15:04:05.000Z"), report.Sanitize(why), code)
	default:
		fmt.Fprintf(o.w, "\nwatch ended: %s (exit %d)\n", report.Sanitize(why), code)
	}
}

// screen redraws the whole terminal: the fleet table, per-GPU bars for the hosts with
// problems, and the last changes.
func (o *output) screen(at time.Time) {
	var b strings.Builder
	b.WriteString("\x1b[H\x1b[2J")
	fmt.Fprintf(&b, "%s  %s\n\n", o.header, at.Format("15:04:05"))
	fmt.Fprintf(&b, "%-20s %-10s %-11s %s\n", "HOST", "STATE", "HOLDERS", "WAITING FOR")
	var bars []int
	for i, s := range o.last {
		state, holders, waiting := "probing", "", ""
		if s != nil {
			state, holders, waiting = screenRow(*s)
			if (o.until && !s.Holds) || !s.Reachable || s.Worst >= diagnose.Warning {
				bars = append(bars, i)
			}
		}
		fmt.Fprintf(&b, "%-20s %-10s %-11s %s\n", o.labels[i], state, holders, report.Sanitize(waiting))
	}
	for _, i := range bars {
		for _, g := range o.last[i].GPUs {
			b.WriteString(gpuBar(o.labels[i], g) + "\n")
		}
	}
	if len(o.recent) > 0 {
		b.WriteString("\nchanges:\n  " + strings.Join(o.recent, "\n  ") + "\n")
	}
	io.WriteString(o.w, b.String())
}

func screenRow(s Status) (state, holders, waiting string) {
	left := 0
	for _, h := range s.Holders {
		if h.Leftover {
			left++
		}
	}
	holders = fmt.Sprint(len(s.Holders))
	if left > 0 {
		holders += fmt.Sprintf(" (%d left)", left)
	}
	switch {
	case !s.Reachable:
		return "DOWN", holders, s.Err
	case s.Holds:
		return "holds", holders, ""
	case s.Worst >= diagnose.Warning:
		state = worstName(s.Worst)
	default:
		state = "ok"
	}
	return state, holders, s.Waiting
}

// gpuBar is "  gpu07 GPU 0 [##########----------] 55,295 / 81,559 MiB".
func gpuBar(label string, g GPU) string {
	if g.UsedMiB == nil || g.TotalMiB == nil || *g.TotalMiB <= 0 {
		return fmt.Sprintf("  %s GPU %d [%s] unknown", label, g.Index, strings.Repeat("?", 20))
	}
	n := int(min(max(*g.UsedMiB*20 / *g.TotalMiB, 0), 20))
	return fmt.Sprintf("  %s GPU %d [%s%s] %s / %s", label, g.Index, strings.Repeat("#", n), strings.Repeat("-", 20-n),
		fmtMiB(*g.UsedMiB), fmtMiB(*g.TotalMiB))
}

func fmtMiB(n int64) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String() + " MiB"
}
