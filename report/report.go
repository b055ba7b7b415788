// Package report renders the triage of one or more hosts — their snapshots, diagnoses and
// failures — as text for a terminal, Markdown for a ticket, or JSON for scripts, onto an
// io.Writer. It never inspects the terminal: the caller decides color and width and passes
// them in Options. Every string that came from a remote host goes through Sanitize before it
// reaches text or Markdown output.
package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/readiness"
)

// Host is one host's outcome, as the caller collected it.
type Host struct {
	Name     string          // the host as the user named it
	Snapshot *parse.Snapshot // nil when the host could not be triaged
	Result   diagnose.Result // findings and joined processes
	Err      *HostError      // non-nil when the host failed
	Capture  []byte          // the raw probe output, shown in Markdown; may be nil
	// CaptureSize is the raw output's whole length when Capture holds only its beginning
	// (at least MarkdownCaptureBytes of it); 0 when Capture is whole.
	CaptureSize int
	// Readiness answers "will this job start here?" when --tp was given; nil otherwise.
	Readiness *readiness.Readiness
	// ProbeDuration is the wall time of the host's probe as the caller measured it (over SSH,
	// from the connect on); 0 when unknown, as for a replay.
	ProbeDuration time.Duration
	// Scheduler is what the cluster's scheduler said of the host when it chose it (Slurm's
	// node state and drain reason); nil when no scheduler chose the hosts.
	Scheduler *Scheduler
}

// HostError says why a host could not be triaged: in which phase (e.g. "connect", "auth",
// "probe", "parse") and how (a stable kind such as "refused" or "timeout"), with a message
// for people.
type HostError struct {
	Phase   string
	Kind    string
	Message string
}

func (e *HostError) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.Phase, e.Kind, e.Message)
}

// Options are the caller's decisions about presentation.
type Options struct {
	// Color enables lipgloss colors in Text. When false not one escape byte is written.
	Color bool
	// Width is the terminal width Text lays out for; 0 means 80, what a pipe or a file gets.
	Width int
	// Verbose shows each finding's explanation, all its evidence and its weak reasons (Text
	// shows only its strong reasons, key numbers and files without it), informational
	// findings in full, each process's whole command line and per-GPU details.
	Verbose bool
	// Now, when set, is printed as the time of the report.
	Now time.Time
	// Only selects the hosts whose details are shown: OnlyAll, OnlyFindings (hosts with a
	// finding at warning or worse, or that failed) or OnlyFailed. "" means OnlyFindings for a
	// fleet in Text and Markdown (OnlyAll with Verbose), and OnlyAll for one host and in JSON.
	// The summary always counts every host.
	Only string
	// Sort orders the details: SortHost ("" too) keeps the order the hosts were given,
	// SortSeverity puts the worst first.
	Sort string
	// Redact replaces hostnames, user names, IP addresses and home directory names with
	// placeholders (host-1, user-1, ip-1, ...) and leaves raw captures out; see redact.
	// It masks secrets too, whatever ShowSecrets says.
	Redact bool
	// ShowSecrets shows the credentials found in remote strings (--api-key VALUE, HF_TOKEN=...,
	// user:password@ in URLs) as they are; by default they are masked as *** (see secrets.go).
	ShowSecrets bool
}

// masks reports whether secrets are masked.
func (o Options) masks() bool { return o.Redact || !o.ShowSecrets }

// Values of Options.Only and Options.Sort.
const (
	OnlyAll      = "all"
	OnlyFindings = "findings"
	OnlyFailed   = "failed"
	SortHost     = "host"
	SortSeverity = "severity"
)

// check rejects Only and Sort values the report does not know; the CLI validates its flags
// first, so this only catches a caller's mistake.
func (o Options) check() error {
	switch o.Only {
	case "", OnlyAll, OnlyFindings, OnlyFailed:
	default:
		return fmt.Errorf("report: unknown Only %q", o.Only)
	}
	switch o.Sort {
	case "", SortHost, SortSeverity:
	default:
		return fmt.Errorf("report: unknown Sort %q", o.Sort)
	}
	return nil
}

// prepare validates o and returns the hosts to render: copies with their secrets masked
// (unless o.ShowSecrets), and redacted when o.Redact. It is for formats that do not show raw
// captures, which it leaves unmasked; Markdown uses prepareCaptures.
func prepare(hosts []Host, o Options) ([]Host, error) {
	return prepareFor(hosts, o, false)
}

// prepareCaptures is prepare for a format that shows the raw captures: masked too.
func prepareCaptures(hosts []Host, o Options) ([]Host, error) {
	return prepareFor(hosts, o, true)
}

func prepareFor(hosts []Host, o Options, captures bool) ([]Host, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if o.masks() {
		hosts = maskSecrets(hosts, captures)
	}
	if o.Redact {
		hosts = redact(hosts)
	}
	return hosts, nil
}

const defaultWidth = 80

func (o Options) width() int {
	if o.Width <= 0 {
		return defaultWidth
	}
	return o.Width
}

// failure returns the host's error; a host with neither a snapshot nor an error is reported
// as failed rather than as healthy.
func (h Host) failure() *HostError {
	if h.Err != nil {
		return h.Err
	}
	if h.Snapshot == nil {
		return &HostError{Phase: "triage", Kind: "no-data", Message: "no snapshot was produced for this host"}
	}
	return nil
}

// severityCounts counts findings per severity, indexed by diagnose.Severity.
type severityCounts [4]int

func countFindings(fs []diagnose.Finding) severityCounts {
	var c severityCounts
	for _, f := range fs {
		if f.Severity >= 0 && int(f.Severity) < len(c) {
			c[f.Severity]++
		}
	}
	return c
}

// problems is the number of findings at warning or worse.
func (c severityCounts) problems() int {
	return c[diagnose.Warning] + c[diagnose.Error] + c[diagnose.Critical]
}

// String lists the counts at warning or worse, most severe first: "1 error, 1 warning".
func (c severityCounts) String() string {
	var parts []string
	for s := diagnose.Critical; s >= diagnose.Warning; s-- {
		switch n := c[s]; {
		case n > 0 && s == diagnose.Critical:
			parts = append(parts, strconv.Itoa(n)+" critical") // an adjective: "2 critical"
		case n > 0:
			parts = append(parts, plural(n, s.String()))
		}
	}
	return strings.Join(parts, ", ")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// sweep summarizes all hosts for the closing line.
type sweep struct {
	hosts, ok, withProblems, failed int
	findings                        severityCounts // of the hosts with problems
}

func summarize(hosts []Host) sweep {
	s := sweep{hosts: len(hosts)}
	for _, h := range hosts {
		c := countFindings(h.Result.Findings)
		switch {
		case h.failure() != nil:
			s.failed++
		case c.problems() > 0:
			s.withProblems++
			for i := range c {
				s.findings[i] += c[i]
			}
		default:
			s.ok++
		}
	}
	return s
}

func (s sweep) String() string {
	parts := []string{plural(s.hosts, "host")}
	if s.ok > 0 {
		parts = append(parts, fmt.Sprintf("%d ok", s.ok))
	}
	if s.withProblems > 0 {
		p := fmt.Sprintf("%d with problems", s.withProblems)
		if f := s.findings.String(); f != "" {
			p += " (" + f + ")"
		}
		parts = append(parts, p)
	}
	if s.failed > 0 {
		parts = append(parts, fmt.Sprintf("%d failed", s.failed))
	}
	return strings.Join(parts, ", ")
}

// mib formats a MiB count with thousands separators: "55,286".
func mib(v int64) string {
	s := strconv.FormatInt(v, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// age formats a process age as the findings do; "?" when unknown.
func age(d *time.Duration) string {
	if d == nil || *d < 0 {
		return "?"
	}
	return diagnose.FormatAge(*d)
}

// percent is used/total as a whole percentage, or -1 when it cannot be known.
func percent(used, total *int64) int {
	if used == nil || total == nil || *total <= 0 {
		return -1
	}
	p := int(float64(*used) * 100 / float64(*total))
	return min(max(p, 0), 100)
}

// gpuSummary describes a host's GPUs by model: "8× NVIDIA H100", "7× A100, 1× H100".
func gpuSummary(gpus []parse.GPU) string {
	var names []string
	count := map[string]int{}
	for _, g := range gpus {
		n := Sanitize(g.Name)
		if n == "" {
			n = "unknown GPU"
		}
		if count[n] == 0 {
			names = append(names, n)
		}
		count[n]++
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%d× %s", count[n], n)
	}
	return strings.Join(parts, ", ")
}

func driverVersion(s *parse.Snapshot) string {
	for _, g := range s.GPUs {
		if g.DriverVersion != "" {
			return g.DriverVersion
		}
	}
	return ""
}

// processGPUs is the sorted GPU indexes a process uses, from its GPU list and memory rows.
func processGPUs(p diagnose.GPUProcess) []int {
	gpus := slices.Clone(p.GPUs)
	for i := range p.GPUMemoryMiB {
		if !slices.Contains(gpus, i) {
			gpus = append(gpus, i)
		}
	}
	slices.Sort(gpus)
	return slices.Compact(gpus)
}

// processMemory is the GPU memory nvidia-smi reports for p across all GPUs; ok is false when
// it reports none.
func processMemory(p diagnose.GPUProcess) (total int64, ok bool) {
	for _, v := range p.GPUMemoryMiB {
		total += v
		ok = true
	}
	return total, ok
}

// owner names who started p: its systemd unit, container and Slurm job, sanitized; on a
// Kubernetes node (the capture's Kubernetes block), its pod as the API names it.
func owner(p diagnose.GPUProcess) string {
	switch k := p.Pod; {
	case k != nil && k.Gone && k.Static:
		return "k8s static pod " + Sanitize(k.UID)
	case k != nil && k.Gone && k.StartedDuringProbe:
		return "k8s pod " + Sanitize(k.UID) + " (not in the API; started during the probe)"
	case k != nil && k.Gone:
		return "k8s pod " + Sanitize(k.UID) + " (deleted)"
	case k != nil && k.GoneDuringProbe:
		return "pod " + Sanitize(k.Namespace+"/"+k.Name) + " (deleted during the probe)"
	case k != nil:
		return "pod " + Sanitize(k.Namespace+"/"+k.Name)
	}
	var parts []string
	if p.Unit != "" {
		parts = append(parts, Sanitize(p.UnitLabel()))
	}
	if p.Container != "" {
		parts = append(parts, Sanitize(p.Container))
	}
	if p.SlurmJob != "" {
		parts = append(parts, "slurm:"+Sanitize(p.SlurmJob))
	}
	return strings.Join(parts, " ")
}

// programText answers "who" for the process table: the program, its engine, and for a
// worker its launcher, or for a multiprocessing worker whose launcher the probe did not
// capture, its parent's PID. "sglang.launch_server", "tritonserver (Triton)",
// "vllm serve meta-llama/Llama-3.1-8B (PID 20973), worker 0 of 8", "worker of PID 20973". The
// text is the host's: callers sanitize it for their format.
func programText(p diagnose.GPUProcess) string {
	prog := p.Program
	switch {
	case p.LauncherPID != 0:
		prog = fmt.Sprintf("%s (PID %d), worker %d of %d", p.Launcher, p.LauncherPID, p.WorkerIndex, p.Workers)
	case p.LauncherGone:
		prog += ", its launcher died"
	case p.Program == "multiprocessing worker" && p.PPID != nil:
		prog = fmt.Sprintf("worker of PID %d", *p.PPID)
	}
	if prog == "" {
		prog = p.Name
	}
	if prog == "" {
		prog = "?"
	}
	// The engine is named where the program does not already say it: "vllm serve" needs no
	// "(vLLM)", "tritonserver" does.
	if p.Engine != "" && !strings.Contains(strings.ToLower(prog), strings.ToLower(p.Engine)) {
		prog += " (" + p.Engine + ")"
	}
	return prog
}

// commandLine joins a sanitized argv for display, quoting arguments that are empty or hold
// spaces or quotes so the boundaries stay visible; with no argv it falls back to name.
func commandLine(argv []string, name string) string {
	if len(argv) == 0 {
		if name == "" {
			return "?"
		}
		return "[" + Sanitize(name) + "]"
	}
	parts := make([]string, len(argv))
	for i, a := range argv {
		a = Sanitize(a)
		if a == "" || strings.ContainsAny(a, " '\"") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// lines is an explanation as the lines to show, sanitized: one paragraph. diagnose writes an
// explanation without line breaks, so a newline in it came from the host (a file name, a
// path) and is shown escaped: split there, the rest of a name could read as a line of its own,
// a verdict on another process.
func lines(s string) []string {
	if s = strings.TrimSpace(s); s == "" {
		return nil
	}
	return []string{Sanitize(s)}
}
