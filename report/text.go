package report

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/hostlist"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/readiness"
)

// Text writes the report for a terminal: per host a header, a memory bar per GPU (identical
// neighbours folded), the GPU processes, the findings in their compact form (see compact.go)
// and one "what to do" (see todo.go), then one summary line across hosts. A report of more than one
// host starts with the fleet summary (problems and failures with their hosts folded) and shows
// the details Options.Only selects. No line is wider than Options.Width cells but the
// commands of "what to do", which are never wrapped or cut: they are copied. With
// Options.Color false it writes no escape sequence at all.
func Text(w io.Writer, hosts []Host, o Options) error {
	hosts, err := prepare(hosts, o)
	if err != nil {
		return err
	}
	t := newTextWriter(w, o)
	if !o.Now.IsZero() {
		t.line(t.st.dim.Render("report time " + o.Now.Format(time.RFC3339)))
		t.line("")
	}
	if o.Redact {
		t.wrap(t.st.dim.Render("redacted:")+" ", "  ", "hostnames, user names, IP addresses and home directories are replaced by placeholders")
		t.line("")
	}
	d := newDetails(hosts, o)
	if len(hosts) > 1 {
		t.fleetSummary(summarizeFleet(hosts))
		if f := fleetReadiness(hosts); f != nil {
			t.line(t.st.bold.Render("readiness:"))
			for _, l := range FleetReadinessLines(*f) {
				t.wrap("  ", "    ", l)
			}
		}
		if note := d.hiddenNote(); note != "" {
			t.wrap(t.st.dim.Render("not shown (--only "+d.only+"):")+" ", "  ", note)
		}
		t.line("")
	} else if note := d.hiddenNote(); note != "" {
		t.wrap(t.st.dim.Render("not shown:")+" ", "  ", note)
		t.line("")
	}
	for i, g := range d.groups {
		if i > 0 {
			t.line("")
		}
		t.host(g, i, d)
	}
	if len(d.groups) > 0 {
		t.line("")
	}
	t.wrap(t.st.bold.Render("summary:")+" ", "  ", summarize(hosts).String())
	_, err = w.Write(t.buf.Bytes())
	return err
}

// fleetSummary writes the counts, then a line per problem and per cause of failure with its
// hosts folded: "ERROR     leftover-process on gpu[03,07]".
func (t *textWriter) fleetSummary(fs fleetSummary) {
	t.wrap(t.st.bold.Render("summary:")+" ", "  ", fs.sweep.String())
	indent := strings.Repeat(" ", findingIndent)
	for _, c := range fs.byCode {
		badge := "  " + t.sevStyle(c.severity).Render(fit(strings.ToUpper(c.severity.String()), badgeWidth)) + "  "
		t.wrap(badge, indent, Sanitize(c.code)+" on "+Sanitize(hostlist.Fold(c.hosts)))
	}
	for _, f := range fs.failures {
		badge := "  " + t.st.failed.Render(fit("FAILED", badgeWidth)) + "  "
		t.wrap(badge, indent, Sanitize(failureLabel(f.phase, f.kind))+": "+Sanitize(hostlist.Fold(f.hosts)))
	}
}

// Layout of a finding: a badge column, then the text.
const (
	badgeWidth    = len("CRITICAL")
	findingIndent = 2 + badgeWidth + 2
)

type textStyles struct {
	bold, dim, ok, failed lipgloss.Style
	sev                   [4]lipgloss.Style
	// A GPU's bar is colored by the diagnosis, not by how full it is: green unless a
	// finding blames the GPU (yellow for a warning, red for an error or worse).
	barOK, barWarn   lipgloss.Style
	barBad, barEmpty lipgloss.Style
}

type textWriter struct {
	buf   bytes.Buffer
	o     Options
	width int
	st    textStyles
	// Bar glyphs: block characters on a color terminal, plain ASCII otherwise so that logs
	// and pipes stay readable anywhere.
	full, empty string
}

func newTextWriter(w io.Writer, o Options) *textWriter {
	profile := termenv.Ascii
	if o.Color {
		profile = termenv.ANSI256
	}
	// The renderer belongs to this writer; forcing the profile and background keeps lipgloss
	// from querying the terminal or the environment.
	r := lipgloss.NewRenderer(w, termenv.WithProfile(profile))
	r.SetColorProfile(profile)
	r.SetHasDarkBackground(true)
	fg := func(c string) lipgloss.Style { return r.NewStyle().Foreground(lipgloss.Color(c)) }
	t := &textWriter{o: o, width: o.width(), full: "#", empty: "-"}
	t.st = textStyles{
		bold:     r.NewStyle().Bold(true),
		dim:      r.NewStyle().Faint(true),
		ok:       fg("2").Bold(true),
		failed:   fg("1").Bold(true),
		barOK:    fg("2"),
		barWarn:  fg("3"),
		barBad:   fg("1"),
		barEmpty: fg("8"),
	}
	t.st.sev[diagnose.Info] = fg("4").Bold(true)
	t.st.sev[diagnose.Warning] = fg("3").Bold(true)
	t.st.sev[diagnose.Error] = fg("1").Bold(true)
	t.st.sev[diagnose.Critical] = fg("5").Bold(true).Reverse(true)
	if o.Color {
		t.full, t.empty = "█", "░"
	}
	return t
}

func (t *textWriter) sevStyle(s diagnose.Severity) lipgloss.Style {
	if s < 0 || int(s) >= len(t.st.sev) {
		return t.st.bold
	}
	return t.st.sev[s]
}

// line writes one line, cut to the width as a last resort: the layout keeps lines within the
// width, and this guarantees it for inputs the layout did not foresee.
func (t *textWriter) line(s string) {
	if lipgloss.Width(s) > t.width {
		s = ansi.Truncate(s, t.width, "…")
	}
	t.buf.WriteString(strings.TrimRight(s, " "))
	t.buf.WriteByte('\n')
}

// wrap writes plain text word-wrapped to the width, the first line after first (which may be
// styled) and the others after rest.
func (t *textWriter) wrap(first, rest, text string) {
	ls := wrapWords(text, t.width-lipgloss.Width(first), t.width-lipgloss.Width(rest))
	for i, l := range ls {
		if i == 0 {
			t.line(first + l)
		} else {
			t.line(rest + l)
		}
	}
}

// fit pads or truncates plain s to exactly n cells.
func fit(s string, n int) string {
	if w := lipgloss.Width(s); w > n {
		s = ansi.Truncate(s, n, "…")
	}
	return s + strings.Repeat(" ", max(0, n-lipgloss.Width(s)))
}

// fitRight right-aligns plain s in n cells.
func fitRight(s string, n int) string {
	return strings.Repeat(" ", max(0, n-lipgloss.Width(s))) + s
}

// host writes the details of group gi of d: one host, or hosts whose details are identical.
func (t *textWriter) host(g hostGroup, gi int, d *details) {
	h := g.hosts[0]
	name := t.st.bold.Render(Sanitize(g.name()))
	fail := h.failure()
	counts := countFindings(h.Result.Findings)
	switch {
	case fail != nil:
		head := name + "  " + t.st.failed.Render("FAILED") + " (" + Sanitize(fail.Phase) + ": " + Sanitize(fail.Kind) + ") "
		t.wrap(head, "  ", Sanitize(fail.Message))
	case counts.problems() > 0:
		t.line(name + "  " + t.sevStyle(h.Result.Worst()).Render(counts.String()))
	default:
		status := "OK"
		if n := counts[diagnose.Info]; n > 0 {
			status += " (" + plural(n, "note") + ")"
		}
		t.line(name + "  " + t.st.ok.Render(status))
	}
	if l := h.Scheduler.line(); l != "" {
		t.wrap("  ", "    ", Sanitize(l))
	}
	// A failed host may still have a partial snapshot, and findings about the failure itself
	// (a changed host key).
	if s := h.Snapshot; s != nil {
		t.facts(g)
		t.gpus(s, h.Result.BlamedGPUs())
	}
	if len(h.Result.Processes) > 0 {
		t.line("")
		t.processes(h.Result.Processes, h.Result.BlamedPIDs())
	}
	if s := h.Snapshot; s != nil {
		if a := diagnose.AttributionWords(memoryOf(h)); a != "" {
			t.wrap("  ", "    ", a)
		}
	}
	if h.Readiness != nil {
		t.readiness(*h.Readiness)
	}
	t.findings(h, gi, d)
}

// readiness shows the --tp verdict: its first line (the answer) styled by outcome, the
// formulas and what to do under it.
func (t *textWriter) readiness(r readiness.Readiness) {
	lines := ReadinessLines(r)
	st := t.st.failed
	if r.Ready || r.Subset != nil {
		st = t.st.ok
	}
	t.line("")
	t.wrap("  "+t.st.bold.Render("readiness")+"  ", "    ", st.Render(lines[0]))
	for _, l := range lines[1:] {
		t.wrap("    ", "      ", l)
	}
}

func (t *textWriter) facts(g hostGroup) {
	s := g.hosts[0].Snapshot
	var items []string
	if len(s.GPUs) > 0 {
		items = append(items, gpuSummary(s.GPUs))
	}
	if d := driverVersion(s); d != "" {
		items = append(items, "driver "+Sanitize(d))
	}
	if p := g.probeTimes(); p != "" {
		items = append(items, "probed "+p)
	}
	if g.showHostname() {
		items = append(items, "hostname "+Sanitize(s.Host.Hostname))
	}
	if t.o.Verbose {
		if s.Host.Kernel != "" {
			items = append(items, "kernel "+Sanitize(s.Host.Kernel))
		}
		if s.Host.User != "" {
			items = append(items, "probe user "+Sanitize(s.Host.User))
		}
		if s.Host.ProbeVersion != "" {
			items = append(items, "probe "+Sanitize(s.Host.ProbeVersion))
		}
	}
	if len(items) == 0 {
		return
	}
	// Keep each fact whole on a line where it fits.
	cur := "  "
	for i, it := range items {
		sep := ""
		if i > 0 {
			sep = " · "
		}
		if cur != "  " && lipgloss.Width(cur+sep+it) > t.width {
			t.line(t.st.dim.Render(cur))
			cur, sep = "  ", ""
		}
		cur += sep + it
	}
	t.line(t.st.dim.Render(cur))
}

// gpuRow is one line of the GPU bars: one GPU, or consecutive GPUs whose lines would be
// identical, folded ("GPUs 1-7 ... MiB each").
type gpuRow struct {
	gpus    []int
	g       parse.GPU // the first GPU of the row
	sev     diagnose.Severity
	blamed  bool
	details string // the name on a mixed host, and -v's details
}

// gpuRows folds consecutive GPUs with the same memory, blame and details into rows.
func (t *textWriter) gpuRows(s *parse.Snapshot, blamed map[int]diagnose.Severity) []gpuRow {
	mixed := false
	for _, g := range s.GPUs {
		mixed = mixed || g.Name != s.GPUs[0].Name
	}
	var rows []gpuRow
	for _, g := range s.GPUs {
		sev, isBlamed := blamed[g.Index]
		r := gpuRow{gpus: []int{g.Index}, g: g, sev: sev, blamed: isBlamed, details: t.gpuDetails(g, mixed)}
		if n := len(rows); n > 0 && rows[n-1].sameAs(r) {
			rows[n-1].gpus = append(rows[n-1].gpus, g.Index)
			continue
		}
		rows = append(rows, r)
	}
	return rows
}

func (r gpuRow) sameAs(o gpuRow) bool {
	return r.blamed == o.blamed && r.sev == o.sev && r.details == o.details &&
		memCells(r.g) == memCells(o.g)
}

// gpuDetails is what a GPU's line adds after its bar: its name on a host of mixed GPUs, and
// with -v its utilization, bus ID and MIG mode (its reserved memory has its column).
func (t *textWriter) gpuDetails(g parse.GPU, mixed bool) string {
	var extra []string
	if mixed {
		extra = append(extra, Sanitize(g.Name))
	}
	if t.o.Verbose {
		if g.UtilizationPct != nil {
			extra = append(extra, fmt.Sprintf("util %d%%", *g.UtilizationPct))
		}
		if g.BusID != "" {
			extra = append(extra, Sanitize(g.BusID))
		}
		if g.MIGMode != "" {
			extra = append(extra, "MIG "+Sanitize(g.MIGMode))
		}
	}
	return strings.Join(extra, " · ")
}

// gpus draws a memory bar per GPU, identical consecutive ones folded into one, under the
// heads of their figures (the line that parts them from the facts above); those in blamed
// (by a finding's severity) are drawn in its color, with their label, and the others green
// however full they are.
func (t *textWriter) gpus(s *parse.Snapshot, blamed map[int]diagnose.Severity) {
	if len(s.GPUs) == 0 || s.SMI.Failure != nil {
		t.line("")
	}
	if f := s.SMI.Failure; f != nil {
		t.wrap("  "+t.st.failed.Render("nvidia-smi failed")+" ("+Sanitize(string(f.Kind))+"): ", "    ", messageLines(f.Message, Sanitize))
		return
	}
	if len(s.GPUs) == 0 {
		t.line("  no GPUs reported")
		return
	}
	rows := t.gpuRows(s, blamed)
	labelW, unitW := 0, len("MiB")
	var colW [4]int
	for i, h := range diagnose.MemoryHeads {
		colW[i] = len(h)
	}
	for _, r := range rows {
		labelW = max(labelW, len(diagnose.FormatGPUs(r.gpus)))
		for i, c := range memCells(r.g) {
			colW[i] = max(colW[i], len(c))
		}
		if len(r.gpus) > 1 {
			unitW = len("MiB each")
		}
	}
	// "  GPU 0  [bar]  55,295       635  41,958  97,887 MiB"
	fixed := 2 + labelW + 2 + 2 + 2 + colW[0] + 2 + colW[1] + 2 + colW[2] + 2 + colW[3] + 1 + unitW
	barW := min(max(t.width-fixed, 10), 40)
	t.line(t.st.dim.Render(strings.Repeat(" ", 2+labelW+2+barW+2) + memColumns(diagnose.MemoryHeads, colW)))
	for _, r := range rows {
		label := fit(diagnose.FormatGPUs(r.gpus), labelW)
		if r.blamed {
			label = t.sevStyle(r.sev).Render(label)
		}
		label = "  " + label + "  "
		g := r.g
		pct := percent(g.MemoryUsedMiB, g.MemoryTotalMiB)
		var row string
		unit := "MiB"
		if len(r.gpus) > 1 {
			unit = "MiB each"
		}
		switch {
		case memCells(g) == [4]string{"?", "?", "?", "?"}:
			row = label + "memory unknown"
		case pct < 0: // no bar without used and total; the figures nvidia-smi gave still show
			row = label + strings.Repeat(" ", barW+2) + "  " + memColumns(memCells(g), colW) + " " + fit(unit, unitW)
		default:
			row = label + t.bar(pct, barW, t.barStyle(r.sev, r.blamed)) + "  " + memColumns(memCells(g), colW) + " " + fit(unit, unitW)
		}
		t.gpuLine(strings.TrimRight(row, " "), r.details, 2+labelW+2)
	}
	for _, n := range diagnose.BalanceNotes(diagnose.AccountMemory(s.GPUs, nil)) {
		t.wrap("  ", "    ", n)
	}
}

// gpuLine writes a GPU's row with its details beside it, or below it where they do not fit.
func (t *textWriter) gpuLine(row, details string, indent int) {
	switch {
	case details == "":
		t.line(row)
	case lipgloss.Width(row)+2+lipgloss.Width(details) <= t.width:
		t.line(row + "  " + t.st.dim.Render(details))
	default:
		t.line(row)
		pad := strings.Repeat(" ", indent)
		for _, l := range wrapWords(details, t.width-indent, t.width-indent) {
			t.line(pad + t.st.dim.Render(l))
		}
	}
}

// barStyle is the color of a GPU's bar: what the findings say of it, not its fill level.
func (t *textWriter) barStyle(sev diagnose.Severity, blamed bool) lipgloss.Style {
	switch {
	case !blamed:
		return t.st.barOK
	case sev >= diagnose.Error:
		return t.st.barBad
	default:
		return t.st.barWarn
	}
}

func (t *textWriter) bar(pct, n int, st lipgloss.Style) string {
	filled := (pct*n + 50) / 100
	if pct > 0 && filled == 0 {
		filled = 1
	}
	return "[" + styled(st, strings.Repeat(t.full, filled)) + styled(t.st.barEmpty, strings.Repeat(t.empty, n-filled)) + "]"
}

// styled renders s in st; an empty s stays empty rather than becoming a bare color sequence.
func styled(st lipgloss.Style, s string) string {
	if s == "" {
		return ""
	}
	return st.Render(s)
}

// processes writes the process table; the PIDs of processes in blamed are in the color of
// the finding that blames them.
func (t *textWriter) processes(ps []diagnose.GPUProcess, blamed map[int]diagnose.Severity) {
	rows := []procRow{{"PID", "USER", "GPU", "MEMORY", "AGE", "UNIT/CONTAINER", "PROGRAM", "COMMAND"}}
	for _, p := range ps {
		rows = append(rows, newProcRow(p))
	}
	w := procWidths(rows, t.width)
	// Too narrow for the command beside the other columns: it goes on a line of its own.
	cmdBelow := w.cmd < 16
	for i, r := range rows {
		pid := fit(r.pid, w.pid)
		if i > 0 {
			if sev, ok := blamed[ps[i-1].PID]; ok {
				pid = t.sevStyle(sev).Render(pid)
			}
		}
		cells := pid + "  " + fit(r.user, w.user) + "  " + fit(r.gpus, w.gpu) + "  " +
			fitRight(r.mem, w.mem) + "  " + fitRight(r.age, w.age) + "  " + fit(r.owner, w.owner)
		if !cmdBelow {
			cells += "  " + fit(r.prog, w.prog) + "  " + fit(r.cmd, w.cmd)
		}
		if i == 0 {
			t.line("  " + t.st.dim.Render(strings.TrimRight(cells, " ")))
			continue
		}
		t.line("  " + cells)
		if cmdBelow {
			// The program leads the line: it answers "who" before the command says how.
			below := r.prog
			if !t.o.Verbose {
				below += ": " + r.cmd
			}
			t.line("    " + fit(below, t.width-4))
		}
	}
	if !t.o.Verbose {
		return
	}
	for i, p := range ps {
		r := rows[i+1]
		t.wrap(fmt.Sprintf("  PID %d: ", p.PID), "    ", r.cmd)
		if len(p.ParentArgv) > 0 && p.PPID != nil {
			t.wrap(fmt.Sprintf("    parent PID %d: ", *p.PPID), "      ", commandLine(p.ParentArgv, ""))
		}
		for _, u := range p.Shm {
			t.wrap("    shm ", "      ", shmText(u))
		}
	}
}

// procRow is one row of the process table, its cells sanitized.
type procRow struct{ pid, user, gpus, mem, age, owner, prog, cmd string }

func newProcRow(p diagnose.GPUProcess) procRow {
	r := procRow{pid: fmt.Sprint(p.PID), user: Sanitize(p.User), gpus: joinInts(processGPUs(p)),
		mem: "-", age: age(p.Elapsed), owner: owner(p), prog: Sanitize(programText(p)),
		cmd: commandLine(p.Argv, p.Name)}
	if r.user == "" {
		r.user = "?"
		if p.UID != nil {
			r.user = fmt.Sprint(*p.UID)
		}
	}
	if m, ok := processMemory(p); ok {
		r.mem = mib(m) + " MiB"
	}
	if r.gpus == "" {
		r.gpus = "-"
	}
	if r.owner == "" {
		r.owner = "-"
	}
	return r
}

type procColumns struct{ pid, user, gpu, mem, age, owner, prog, cmd int }

// procWidths sizes the columns to their widest cell, within caps, and gives the command line
// what is left of width.
func procWidths(rows []procRow, width int) procColumns {
	var w procColumns
	for _, r := range rows {
		w.pid = max(w.pid, lipgloss.Width(r.pid))
		w.user = max(w.user, lipgloss.Width(r.user))
		w.gpu = max(w.gpu, lipgloss.Width(r.gpus))
		w.mem = max(w.mem, lipgloss.Width(r.mem))
		w.age = max(w.age, lipgloss.Width(r.age))
		w.owner = max(w.owner, lipgloss.Width(r.owner))
		w.prog = max(w.prog, lipgloss.Width(r.prog))
	}
	w.user, w.gpu, w.owner, w.prog = min(w.user, 12), min(w.gpu, 11), min(w.owner, 32), min(w.prog, 32)
	const gaps = 2 + 7*2 // indent and column gaps
	w.cmd = width - gaps - w.pid - w.user - w.gpu - w.mem - w.age - w.owner - w.prog
	// On a narrow terminal give the command line room before the owner and user columns, and
	// the program only where the command would otherwise go below: the program answers "who".
	for w.cmd < 24 && (w.owner > 14 || w.user > 8) {
		if w.owner > 14 {
			w.owner--
		} else {
			w.user--
		}
		w.cmd++
	}
	for w.cmd < 16 && w.prog > 20 {
		w.prog--
		w.cmd++
	}
	return w
}

// shmText describes one /dev/shm use: "/dev/shm/x (deleted, mapped, 51.2 GiB)".
func shmText(u parse.ShmUse) string {
	how := diagnose.ShmHow(u.Deleted, u.Mapped, u.Open)
	if u.Bytes != nil {
		how = append(how, diagnose.FormatBytes(*u.Bytes))
	}
	s := Sanitize(u.Path)
	if len(how) > 0 {
		s += " (" + strings.Join(how, ", ") + ")"
	}
	return s
}
