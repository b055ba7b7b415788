package report

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/hostlist"
	"github.com/gputriage/gputriage/parse"
)

// maxCaptureBytes bounds the raw capture embedded in a Markdown report: GitHub refuses issue
// bodies over 65,536 characters. The report says when it shows only part of a capture.
const maxCaptureBytes = 48 << 10

// MarkdownCaptureBytes is the most of any one host's raw capture a Markdown report shows: a
// caller that renders Markdown needs to keep no more of it (see Host.CaptureSize).
const MarkdownCaptureBytes = maxCaptureBytes

// Markdown writes the report for a ticket (GitHub-flavored Markdown): a summary line per host,
// then per host its GPU and process tables, its findings as the text report shows them (each
// one's full explanation and evidence in a collapsed <details> block), one "what to do" with
// its commands in sh blocks, and its raw capture in a collapsed <details> block. A report of more than one host has a title
// line, a summary table of problems and failures with their hosts folded, and the details
// Options.Only selects. Remote strings are sanitized and escaped so they cannot break a
// table, open a link or HTML, or close a code block.
func Markdown(w io.Writer, hosts []Host, o Options) error {
	hosts, err := prepareCaptures(hosts, o)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	m := &mdWriter{b: &b, o: o, captureLeft: maxCaptureBytes}
	d := newDetails(hosts, o)
	if len(hosts) > 1 {
		m.fleet = true
		m.fleetHead(hosts, d)
	} else {
		fmt.Fprintf(&b, "## gputriage: %s\n\n", summarize(hosts))
		m.preamble()
		for _, h := range hosts {
			fmt.Fprintf(&b, "- %s\n", m.oneLine(h))
		}
		b.WriteByte('\n')
		if note := d.hiddenNote(); note != "" {
			m.p("Not shown: %s.\n\n", mdText(note))
		}
	}
	for i, g := range d.groups {
		m.host(g, i, d)
	}
	out := append(bytes.TrimRight(b.Bytes(), "\n"), '\n')
	_, err = w.Write(out)
	return err
}

// preamble writes the report time and says what redaction did.
func (m *mdWriter) preamble() {
	if !m.o.Now.IsZero() {
		m.p("Report time: %s\n\n", m.o.Now.Format(time.RFC3339))
	}
	if m.o.Redact {
		m.p("Redacted: hostnames, user names, IP addresses and home directories are replaced by placeholders " +
			"(host-1, user-1, ip-1, ...), and raw captures are left out.\n\n")
	}
}

// fleetHead writes a fleet report's title line and its summary table.
func (m *mdWriter) fleetHead(hosts []Host, d *details) {
	fs := summarizeFleet(hosts)
	m.p("# gputriage: %s\n\n", fs.sweep)
	m.preamble()
	if len(fs.byCode) > 0 || len(fs.failures) > 0 {
		m.p("| Severity | Problem | Hosts | Count |\n")
		m.p("|---|---|---|---:|\n")
		for _, c := range fs.byCode {
			m.p("| %s | %s | %s | %d |\n", c.severity, mdCode(c.code), mdHosts(hostlist.Fold(c.hosts)), len(c.hosts))
		}
		for _, f := range fs.failures {
			m.p("| failed | %s | %s | %d |\n", mdText(failureLabel(f.phase, f.kind)), mdHosts(hostlist.Fold(f.hosts)), len(f.hosts))
		}
		m.p("\n")
	} else {
		m.p("No problems found.\n\n")
	}
	if f := fleetReadiness(hosts); f != nil {
		m.p("**Readiness:**\n\n")
		for _, l := range FleetReadinessLines(*f) {
			m.p("- %s\n", mdText(l))
		}
		m.p("\n")
	}
	if note := d.hiddenNote(); note != "" {
		m.p("Not shown (`--only %s`): %s.\n\n", d.only, mdText(note))
	}
	if len(d.groups) > 0 {
		m.p("## Details\n\n")
	}
}

var plainHosts = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@:,\[\]-]*$`)

// mdHosts shows a folded host list in a code span, where its brackets need no escaping, when
// it holds only hostname characters; as escaped text otherwise.
func mdHosts(s string) string {
	if plainHosts.MatchString(s) {
		return "`" + s + "`"
	}
	return mdText(s)
}

type mdWriter struct {
	b     *bytes.Buffer
	o     Options
	fleet bool // more than one host: each host's heading is followed by its status
	// captureLeft is how many bytes of raw captures the report may still embed: all hosts
	// share one budget.
	captureLeft int
}

func (m *mdWriter) p(format string, args ...any) {
	fmt.Fprintf(m.b, format, args...)
}

var plainCode = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`)

// mdCode shows a finding code in a code span when it is a plain code, as escaped text when not.
func mdCode(code string) string {
	if plainCode.MatchString(code) {
		return "`" + code + "`"
	}
	return mdText(code)
}

// oneLine is a host's summary: "**ct200**: 1 error, 1 warning — GPU 0 held by PID 20629
// (`leftover-process`)".
func (m *mdWriter) oneLine(h Host) string {
	name := "**" + mdText(h.Name) + "**"
	if f := h.failure(); f != nil {
		s := fmt.Sprintf("%s: FAILED (%s: %s)", name, mdText(f.Phase), mdText(f.Kind))
		if f.Message != "" {
			s += " — " + mdText(f.Message)
		}
		return s
	}
	c := countFindings(h.Result.Findings)
	if c.problems() == 0 {
		s := name + ": OK"
		if n := c[diagnose.Info]; n > 0 {
			s += " (" + plural(n, "note") + ")"
		}
		return s
	}
	top := h.Result.Findings[0]
	for _, f := range h.Result.Findings {
		if f.Severity > top.Severity {
			top = f
		}
	}
	return fmt.Sprintf("%s: %s — %s (%s)", name, c, mdText(top.Title), mdCode(top.Code))
}

// host writes the details of group gi of d: one host, or hosts whose details are identical.
func (m *mdWriter) host(g hostGroup, gi int, d *details) {
	h := g.hosts[0]
	m.p("### %s\n\n", mdText(g.name()))
	if f := h.failure(); f != nil {
		m.p("**FAILED** (%s: %s)", mdText(f.Phase), mdText(f.Kind))
		if f.Message != "" {
			m.p(": %s", mdText(f.Message))
		}
		m.p("\n\n")
	} else if m.fleet {
		status := "OK"
		if c := countFindings(h.Result.Findings); c.problems() > 0 {
			status = c.String()
		}
		m.p("**%s**\n\n", status)
	}
	if l := h.Scheduler.line(); l != "" {
		m.p("%s\n\n", mdLine(l))
	}
	if s := h.Snapshot; s != nil {
		m.facts(g)
		m.gpus(s)
	}
	m.processes(h.Result.Processes)
	if s := h.Snapshot; s != nil {
		if a := diagnose.AttributionWords(memoryOf(h)); a != "" {
			m.p("%s\n\n", mdText(a))
		}
	}
	if h.Readiness != nil {
		lines := ReadinessLines(*h.Readiness)
		m.p("**Readiness:** %s\n\n", mdText(lines[0]))
		for _, l := range lines[1:] {
			indent := ""
			if strings.HasPrefix(l, "  ") {
				indent = "  "
			}
			m.p("%s- %s\n", indent, mdText(strings.TrimLeft(l, " ")))
		}
		m.p("\n")
	}
	m.findings(h, gi, d)
	for _, gh := range g.hosts {
		of := ""
		if len(g.hosts) > 1 {
			of = " of " + gh.Name
		}
		m.capture(gh.Capture, max(gh.CaptureSize, len(gh.Capture)), of)
	}
}

func (m *mdWriter) facts(g hostGroup) {
	s := g.hosts[0].Snapshot
	var items []string
	if len(s.GPUs) > 0 {
		items = append(items, mdText(gpuSummary(s.GPUs)))
	}
	if d := driverVersion(s); d != "" {
		items = append(items, "driver "+mdText(d))
	}
	if p := g.probeTimes(); p != "" {
		items = append(items, "probed "+p)
	}
	if g.showHostname() {
		items = append(items, "hostname "+mdText(s.Host.Hostname))
	}
	if s.Host.Kernel != "" {
		items = append(items, "kernel "+mdText(s.Host.Kernel))
	}
	if s.Host.User != "" {
		items = append(items, "probe user "+mdText(s.Host.User))
	}
	if len(items) > 0 {
		m.p("%s\n\n", strings.Join(items, " · "))
	}
}

// opt formats an optional number for a table cell.
func opt(v *int64) string {
	if v == nil {
		return "?"
	}
	return mib(*v)
}

func (m *mdWriter) gpus(s *parse.Snapshot) {
	if f := s.SMI.Failure; f != nil {
		m.p("**nvidia-smi failed** (%s): %s\n\n", mdText(string(f.Kind)), messageLines(f.Message, mdText))
		return
	}
	if len(s.GPUs) == 0 {
		m.p("No GPUs reported.\n\n")
		return
	}
	rows := mdGPURows(s.GPUs)
	m.gpuTable(rows)
	if len(rows) < len(s.GPUs) {
		// Folded like the terminal's bars ("GPUs 1-7 ... each"); each GPU, with its bus ID,
		// stays a click away.
		each := make([][]parse.GPU, len(s.GPUs))
		for i := range s.GPUs {
			each[i] = s.GPUs[i : i+1]
		}
		m.p("<details><summary>Each GPU, with its bus ID</summary>\n\n")
		m.gpuTable(each)
		m.p("</details>\n\n")
	}
	for _, n := range diagnose.BalanceNotes(diagnose.AccountMemory(s.GPUs, nil)) {
		m.p("%s\n\n", mdText(n))
	}
}

// mdGPURows folds consecutive GPUs whose cells but the bus ID are the same into one row.
func mdGPURows(gpus []parse.GPU) [][]parse.GPU {
	var rows [][]parse.GPU
	for i, g := range gpus {
		if n := len(rows); n > 0 {
			last := rows[n-1][len(rows[n-1])-1]
			if g.Index == last.Index+1 && mdGPUCells(g) == mdGPUCells(last) {
				rows[n-1] = gpus[i-len(rows[n-1]) : i+1]
				continue
			}
		}
		rows = append(rows, gpus[i:i+1])
	}
	return rows
}

// mdGPUCells are a GPU's table cells from its name to its utilization.
func mdGPUCells(g parse.GPU) string {
	pct, util := "?", "?"
	if p := percent(g.MemoryUsedMiB, g.MemoryTotalMiB); p >= 0 {
		pct = fmt.Sprintf("%d%%", p)
	}
	if g.UtilizationPct != nil {
		util = fmt.Sprintf("%d%%", *g.UtilizationPct)
	}
	c := memCells(g)
	return fmt.Sprintf("%s | %s | %s | %s | %s | %s | %s", mdText(g.Name), c[0], c[1], c[2], c[3], pct, util)
}

// gpuTable writes a table of GPU rows: one GPU, with its bus ID, or several folded ("1-7",
// their figures each).
func (m *mdWriter) gpuTable(rows [][]parse.GPU) {
	heads := make([]string, len(diagnose.MemoryHeads))
	for i, h := range diagnose.MemoryHeads {
		heads[i] = strings.ToUpper(h[:1]) + h[1:] + " MiB"
	}
	m.p("| GPU | Name | %s | Used | Util | Bus ID |\n", strings.Join(heads, " | "))
	m.p("|---:|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		first, last := r[0], r[len(r)-1]
		if len(r) == 1 {
			m.p("| %d | %s | %s |\n", first.Index, mdGPUCells(first), mdText(first.BusID))
			continue
		}
		m.p("| %d-%d (each) | %s | (below) |\n", first.Index, last.Index, mdGPUCells(first))
	}
	m.p("\n")
}

func (m *mdWriter) processes(ps []diagnose.GPUProcess) {
	if len(ps) == 0 {
		return
	}
	m.p("| PID | User | GPU | Memory MiB | Age | Unit / container / job | Program | Command |\n")
	m.p("|---:|---|---|---:|---:|---|---|---|\n")
	for _, p := range ps {
		mem := "—"
		if v, ok := processMemory(p); ok {
			mem = mib(v)
		}
		user := mdText(p.User)
		if user == "" && p.UID != nil {
			user = fmt.Sprintf("uid %d", *p.UID)
		}
		cmd := mdText(commandLine(p.Argv, p.Name))
		if len(p.ParentArgv) > 0 {
			cmd += " (parent: " + mdText(commandLine(p.ParentArgv, "")) + ")"
		}
		m.p("| %d | %s | %s | %s | %s | %s | %s | %s |\n", p.PID, user, joinInts(processGPUs(p)), mem,
			age(p.Elapsed), mdText(owner(p)), mdText(programText(p)), cmd)
	}
	m.p("\n")
}

// capture embeds the raw probe output, sanitized (it is remote bytes: NULs and escapes are
// shown, not sent), in a collapsed block whose fence no line of it can close. The captures of
// a report share maxCaptureBytes; once it is spent the others are named, not shown.
func (m *mdWriter) capture(raw []byte, size int, of string) {
	if raw == nil {
		return
	}
	const minShown = 1 << 10
	if m.captureLeft < minShown && size > m.captureLeft {
		m.p("Raw capture%s (%s bytes) left out: the report already holds %s bytes of captures.\n\n",
			mdText(of), mib(int64(size)), mib(maxCaptureBytes-int64(m.captureLeft)))
		return
	}
	shown := raw
	if size > m.captureLeft {
		cut := bytes.LastIndexByte(raw[:min(len(raw), m.captureLeft)], '\n')
		if cut <= 0 {
			cut = min(len(raw), m.captureLeft)
		}
		shown = raw[:cut]
	}
	summary := fmt.Sprintf("raw capture%s (%s bytes)", htmlText(Sanitize(of)), mib(int64(size)))
	if len(shown) < size {
		summary = fmt.Sprintf("raw capture%s (%s bytes; the first %s shown)", htmlText(Sanitize(of)),
			mib(int64(size)), mib(int64(len(shown))))
	}
	m.captureLeft -= len(shown)
	body := sanitizeBlock(strings.TrimSuffix(string(shown), "\n"))
	fc := fence(body)
	m.p("<details><summary>%s</summary>\n\n%stext\n%s\n%s\n\n</details>\n\n", summary, fc, body, fc)
}
