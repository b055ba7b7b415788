package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/charmbracelet/lipgloss"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/explain"
)

// Tie is what a host says about a process an error message names: the PyTorch message's
// "Process 12345 has 54.00 GiB" becomes that process's command line, user, unit and age.
type Tie struct {
	Host    string
	PID     int
	LogGiB  float64
	Process *diagnose.GPUProcess // nil: no such GPU process on the host now
}

// Explanations writes the explanations of a pasted error (from package explain) and, when
// hosts were triaged with it, what each host says about the processes it names, followed by
// the hosts' own report in the same format.
func Explanations(w io.Writer, ex []explain.Explanation, ties []Tie, hosts []Host, format string, o Options) error {
	if o.masks() {
		// A pasted log can carry a command line too; the hosts are masked where they render.
		ex = rewriteValue(ex, rewriter(secretMasker{}))
		ties = rewriteValue(ties, rewriter(secretMasker{}))
	}
	switch format {
	case "json":
		return explanationsJSON(w, ex, ties, hosts, o)
	case "markdown":
		return explanationsMarkdown(w, ex, ties, hosts, o)
	}
	return explanationsText(w, ex, ties, hosts, o)
}

// nextCommands are the Next lines with HOST replaced by the one host triaged (quoted for the
// shell where it needs it, so the line still runs as printed), or left as HOST.
func nextCommands(ex explain.Explanation, hosts []Host) []string {
	host := ""
	if len(hosts) == 1 {
		host = shellWord(hosts[0].Name)
	}
	out := make([]string, len(ex.Next))
	for i, n := range ex.Next {
		if host != "" {
			n = strings.ReplaceAll(n, "HOST", host)
		}
		out[i] = n
	}
	return out
}

// shellWord quotes s for a POSIX shell unless it is made only of characters no shell treats
// specially ("user@[::1]:22" has a glob; zsh refuses it unquoted).
func shellWord(s string) string {
	safe := s != ""
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("@%+=:,./_-", c)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func tieLine(t Tie) string {
	if t.Process == nil {
		return fmt.Sprintf("PID %d (%.2f GiB in the log): not a GPU process on %s now (it exited, or it runs in another PID namespace)",
			t.PID, t.LogGiB, Sanitize(t.Host))
	}
	p := t.Process
	s := fmt.Sprintf("PID %d (%.2f GiB in the log) on %s: %s", t.PID, t.LogGiB, Sanitize(t.Host), Sanitize(strings.Join(p.Argv, " ")))
	var extra []string
	if p.User != "" {
		extra = append(extra, "user "+Sanitize(p.User))
	}
	if p.Elapsed != nil {
		extra = append(extra, "running for "+age(p.Elapsed))
	}
	for _, v := range []string{p.UnitLabel(), p.Container, p.SlurmJob} {
		if v != "" {
			extra = append(extra, Sanitize(v))
		}
	}
	if len(extra) > 0 {
		s += " (" + strings.Join(extra, ", ") + ")"
	}
	return s
}

func explanationsText(w io.Writer, ex []explain.Explanation, ties []Tie, hosts []Host, o Options) error {
	var out, b strings.Builder
	for i, e := range ex {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s: %s\n", e.Family, Sanitize(e.Title))
		b.WriteString("  from the log:\n")
		for _, l := range e.Lines {
			fmt.Fprintf(&b, "    > %s\n", Sanitize(l))
		}
		if e.MoreLines > 0 {
			fmt.Fprintf(&b, "    (%d more such lines)\n", e.MoreLines)
		}
		fmt.Fprintf(&b, "  %s\n", Sanitize(e.Meaning))
		for _, n := range e.Notes {
			fmt.Fprintf(&b, "  - %s\n", Sanitize(n))
		}
		if next := nextCommands(e, hosts); len(next) > 0 {
			b.WriteString("  next:\n")
			// Commands are never wrapped: each line must run as printed when pasted.
			out.WriteString(wrapLines(b.String(), o.Width))
			b.Reset()
			for _, n := range next {
				fmt.Fprintf(&out, "    %s\n", Sanitize(n))
			}
		}
	}
	if len(ties) > 0 {
		b.WriteString("\nprocesses the log names:\n")
		for _, t := range ties {
			fmt.Fprintf(&b, "  %s\n", tieLine(t))
		}
	}
	out.WriteString(wrapLines(b.String(), o.Width))
	if _, err := io.WriteString(w, out.String()); err != nil {
		return err
	}
	if len(hosts) > 0 {
		if _, err := io.WriteString(w, "\n"); err != nil {
			return err
		}
		return Text(w, hosts, o)
	}
	return nil
}

// wrapLines keeps plain explanation text within width, breaking at spaces and indenting
// continuations like their line.
func wrapLines(s string, width int) string {
	if width <= 0 {
		width = 100
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		nl := strings.HasSuffix(line, "\n")
		line = strings.TrimSuffix(line, "\n")
		body := strings.TrimLeft(line, " ")
		out.WriteString(strings.Join(fillLine(line[:len(line)-len(body)], body, width), "\n"))
		if nl {
			out.WriteString("\n")
		}
	}
	return out.String()
}

// fillLine breaks body into lines of at most width cells, the first after indent and the
// others after indent and two spaces. It breaks only where wrapping may (glueWords: a number
// keeps its unit); a word longer than a line is left whole, as it may be a value to copy.
func fillLine(indent, body string, width int) []string {
	var lines []string
	cur, curW, words := indent, lipgloss.Width(indent), 0
	for _, w := range glueWords(strings.Split(body, " ")) {
		if w == "" { // a run of spaces inside the line is kept
			if words > 0 {
				cur, curW = cur+" ", curW+1
			}
			continue
		}
		ww := lipgloss.Width(w)
		if words > 0 && curW+1+ww > width {
			lines = append(lines, strings.TrimRight(cur, " "))
			cur, curW, words = indent+"  ", len(indent)+2, 0
		}
		if words > 0 {
			cur, curW = cur+" ", curW+1
		}
		cur, curW, words = cur+w, curW+ww, words+1
	}
	return append(lines, cur)
}

func explanationsMarkdown(w io.Writer, ex []explain.Explanation, ties []Tie, hosts []Host, o Options) error {
	var b strings.Builder
	b.WriteString("# gputriage explain\n\n")
	for _, e := range ex {
		fmt.Fprintf(&b, "## `%s`: %s\n\n", e.Family, mdText(e.Title))
		fc := fence(strings.Join(e.Lines, "\n"))
		fmt.Fprintf(&b, "%stext\n", fc)
		for _, l := range e.Lines {
			b.WriteString(Sanitize(l) + "\n")
		}
		fmt.Fprintf(&b, "%s\n\n", fc)
		fmt.Fprintf(&b, "%s\n\n", mdText(e.Meaning))
		for _, n := range e.Notes {
			fmt.Fprintf(&b, "- %s\n", mdText(n))
		}
		if len(e.Notes) > 0 {
			b.WriteString("\n")
		}
		if next := nextCommands(e, hosts); len(next) > 0 {
			fc := fence(strings.Join(next, "\n"))
			fmt.Fprintf(&b, "Next:\n\n%ssh\n", fc)
			for _, n := range next {
				b.WriteString(Sanitize(n) + "\n")
			}
			fmt.Fprintf(&b, "%s\n\n", fc)
		}
	}
	if len(ties) > 0 {
		b.WriteString("## Processes the log names\n\n")
		for _, t := range ties {
			fmt.Fprintf(&b, "- %s\n", mdText(tieLine(t)))
		}
		b.WriteString("\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if len(hosts) > 0 {
		return Markdown(w, hosts, o)
	}
	return nil
}

func explanationsJSON(w io.Writer, ex []explain.Explanation, ties []Tie, hosts []Host, o Options) error {
	type number struct {
		Name  string  `json:"name"`
		Value float64 `json:"value"`
		Unit  string  `json:"unit"`
		Rank  *int    `json:"rank"`
	}
	type pid struct {
		PID        int     `json:"pid"`
		GiB        float64 `json:"gib"`
		LikelySelf bool    `json:"likely_self"`
	}
	type jex struct {
		Family    string   `json:"family"`
		Variant   string   `json:"variant"`
		Title     string   `json:"title"`
		Lines     []string `json:"lines"`
		MoreLines int      `json:"more_lines"`
		Meaning   string   `json:"meaning"`
		Notes     []string `json:"notes"`
		Numbers   []number `json:"numbers"`
		Next      []string `json:"next"`
		PIDs      []pid    `json:"pids"`
		Device    *int     `json:"device"`
		BusID     string   `json:"bus_id"`
	}
	type jtie struct {
		Host    string   `json:"host"`
		PID     int      `json:"pid"`
		LogGiB  float64  `json:"log_gib"`
		Running bool     `json:"running"`
		Argv    []string `json:"argv"`
		User    string   `json:"user"`
		Elapsed *float64 `json:"elapsed_seconds"`
		Unit    string   `json:"unit"`
	}
	doc := struct {
		Schema       string          `json:"schema"`
		Explanations []jex           `json:"explanations"`
		Ties         []jtie          `json:"processes_named"`
		Hosts        json.RawMessage `json:"hosts"`
	}{Schema: Schema, Explanations: []jex{}, Ties: []jtie{}, Hosts: json.RawMessage("[]")}
	for _, e := range ex {
		j := jex{Family: e.Family, Variant: e.Variant, Title: e.Title, Lines: nonNilStrings(e.Lines), MoreLines: e.MoreLines,
			Meaning: e.Meaning, Notes: nonNilStrings(e.Notes), Numbers: []number{}, Next: nonNilStrings(nextCommands(e, hosts)),
			PIDs: []pid{}, Device: e.Device, BusID: e.BusID}
		for _, n := range e.Numbers {
			j.Numbers = append(j.Numbers, number{n.Name, n.Value, n.Unit, n.Rank})
		}
		for _, p := range e.PIDs {
			j.PIDs = append(j.PIDs, pid{p.PID, p.GiB, p.LikelySelf})
		}
		doc.Explanations = append(doc.Explanations, j)
	}
	for _, t := range ties {
		jt := jtie{Host: t.Host, PID: t.PID, LogGiB: t.LogGiB, Argv: []string{}}
		if p := t.Process; p != nil {
			jt.Running, jt.Argv, jt.User, jt.Unit = true, nonNilStrings(p.Argv), p.User, p.Unit
			if p.Elapsed != nil {
				s := p.Elapsed.Seconds()
				jt.Elapsed = &s
			}
		}
		doc.Ties = append(doc.Ties, jt)
	}
	if len(hosts) > 0 {
		var hb strings.Builder
		if err := JSON(&hb, hosts, o); err != nil {
			return err
		}
		var full struct {
			Hosts json.RawMessage `json:"hosts"`
		}
		if err := json.Unmarshal([]byte(hb.String()), &full); err != nil {
			return err
		}
		doc.Hosts = full.Hosts
	}
	return writeJSON(w, doc)
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ExplainUnrecognized is the message for text that names no known error.
func ExplainUnrecognized(n int) string {
	return "no known GPU error in this text (" + strconv.Itoa(n) + " bytes read): gputriage explain recognizes SGLang's " +
		"\"memory capacity is unbalanced\", vLLM's \"Free memory on device\", PyTorch's CUDA out of memory, NCCL " +
		"/dev/shm errors, DataLoader bus errors, nvidia-smi failures and NVRM/Xid kernel messages"
}
