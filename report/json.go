package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/hostlist"
)

// Schema names the JSON format; docs/json.md documents every field. Fields may be added within
// a schema version, never renamed or removed.
const Schema = "gputriage/v1"

// JSON writes the report for scripts, in the shape docs/json.md documents. Strings are the
// remote values exactly, with every control, format and separator character written as a
// \u escape (escapeUnsafe), so the document is safe to print raw; bytes that are not valid
// UTF-8 become U+FFFD, one per byte. Unknown numbers and strings are null, empty lists [].
// Output is deterministic: fields in a fixed order, map keys sorted, two-space indentation and
// a trailing newline.
//
// The summary counts every host; hosts lists all of them in the order given unless
// Options.Only or Options.Sort say otherwise (Only "" means OnlyAll here, for every number of
// hosts).
func JSON(w io.Writer, hosts []Host, o Options) error {
	hosts, err := prepare(hosts, o)
	if err != nil {
		return err
	}
	doc := jsonDoc{Schema: Schema, Redacted: o.Redact, SecretsMasked: o.masks(), Summary: jsonSummaryOf(hosts), Hosts: []jsonHost{}}
	if f := fleetReadiness(hosts); f != nil {
		fj := FleetReadinessJSONOf(*f)
		doc.ReadinessSummary = &fj
	}
	if !o.Now.IsZero() {
		doc.ReportTime = optTime(&o.Now)
	}
	only := o.Only
	if only == "" {
		only = OnlyAll
	}
	shown, _ := selectHosts(hosts, only, o.Sort)
	// The document is encoded without its hosts, which are then encoded one at a time into
	// the "hosts" array: the same bytes as encoding it whole, but the report of a fleet never
	// holds more than one host's JSON at once.
	b, err := newJSONEncoder("").appendJSON(nil, doc)
	if err != nil {
		return err
	}
	head, tail, ok := bytes.Cut(b, []byte("\n  \"hosts\": []"))
	if !ok || len(shown) == 0 {
		_, err = w.Write(escapeUnsafe(b))
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.Write(escapeUnsafe(head))
	bw.WriteString("\n  \"hosts\": [")
	// One encoder and two buffers for every host, reused from one host to the next.
	enc := newJSONEncoder("    ")
	var hb, esc []byte
	for i, h := range shown {
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n    ")
		if hb, err = enc.appendJSON(hb[:0], jsonHostOf(h)); err != nil {
			return err
		}
		esc = appendEscapeUnsafe(esc[:0], bytes.TrimSuffix(hb, []byte("\n")))
		bw.Write(esc)
	}
	bw.WriteString("\n  ]")
	bw.Write(escapeUnsafe(tail))
	return bw.Flush()
}

// writeJSON encodes v as the report's JSON is written: two-space indentation, a trailing
// newline, "<>&" left as they are, and every rune a terminal would act on or hide escaped
// (escapeUnsafe).
func writeJSON(w io.Writer, v any) error {
	b, err := newJSONEncoder("").appendJSON(nil, v)
	if err != nil {
		return err
	}
	_, err = w.Write(escapeUnsafe(b))
	return err
}

// jsonEncoder encodes values as the report writes them: indented by two spaces after prefix
// on every line but the first, with a trailing newline. encoding/json encodes them compact,
// then indentJSON indents them.
type jsonEncoder struct {
	compact bytes.Buffer
	enc     *json.Encoder
	prefix  string
}

func newJSONEncoder(prefix string) *jsonEncoder {
	e := &jsonEncoder{prefix: prefix}
	e.enc = json.NewEncoder(&e.compact)
	// Scripts read this, not browsers: keep "2>&1" readable.
	e.enc.SetEscapeHTML(false)
	return e
}

// appendJSON appends v, encoded, to dst.
func (e *jsonEncoder) appendJSON(dst []byte, v any) ([]byte, error) {
	e.compact.Reset()
	if err := e.enc.Encode(v); err != nil {
		return dst, err
	}
	return indentJSON(dst, e.compact.Bytes(), e.prefix), nil
}

// indentJSON appends src, compact JSON as encoding/json writes it (no space outside strings
// but a trailing newline), to dst indented as json.Indent(dst, src, prefix, "  ") would: the
// same bytes, without json's scanner stepping through every byte (it was a third of the JSON
// report's CPU).
func indentJSON(dst, src []byte, prefix string) []byte {
	depth := 0
	opened := false // after '{' or '[': the newline waits, so that empty ones stay {} and []
	for i := 0; i < len(src); i++ {
		c := src[i]
		if opened && c != '}' && c != ']' {
			opened = false
			depth++
			dst = appendJSONLine(dst, prefix, depth)
		}
		switch c {
		case '"':
			end := jsonStringEnd(src, i)
			dst = append(dst, src[i:end]...)
			i = end - 1
		case '{', '[':
			opened = true
			dst = append(dst, c)
		case ',':
			dst = appendJSONLine(append(dst, c), prefix, depth)
		case ':':
			dst = append(dst, c, ' ')
		case '}', ']':
			if opened {
				opened = false
			} else {
				depth--
				dst = appendJSONLine(dst, prefix, depth)
			}
			dst = append(dst, c)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// jsonStringEnd is the index just past the end of the JSON string that starts at src[i].
func jsonStringEnd(src []byte, i int) int {
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(src)
}

// appendJSONLine starts a new line of indented JSON at depth.
func appendJSONLine(dst []byte, prefix string, depth int) []byte {
	dst = append(append(dst, '\n'), prefix...)
	for range depth {
		dst = append(dst, "  "...)
	}
	return dst
}

// escapeUnsafe rewrites, in encoded JSON, every rune that Sanitize escapes and encoding/json
// leaves raw (it escapes only U+0000–U+001F, U+2028 and U+2029) as a \uXXXX escape, a
// surrogate pair above U+FFFF: DEL and the C1 controls U+0080–U+009F (U+009B is a one-rune
// CSI), format characters (bidi overrides, isolates and marks, zero-width characters, the BOM,
// soft hyphen, tags) and the line and paragraph separators. Outside strings JSON is ASCII, and
// inside one the escape stands for the same rune, so the document decodes to exactly the same
// values while a terminal showing it raw (cat, less) has nothing to interpret or hide.
func escapeUnsafe(b []byte) []byte {
	if safePrefix(b) == len(b) {
		return b
	}
	return appendEscapeUnsafe(make([]byte, 0, len(b)+64), b)
}

// safePrefix is how many bytes at the start of b escapeUnsafe leaves as they are: ASCII but DEL.
func safePrefix(b []byte) int {
	i := 0
	for i < len(b) && b[i] < utf8.RuneSelf && b[i] != 0x7f {
		i++
	}
	return i
}

// appendEscapeUnsafe appends b to out escaped as escapeUnsafe escapes it.
func appendEscapeUnsafe(out, b []byte) []byte {
	i := 0
	for i < len(b) {
		if n := safePrefix(b[i:]); n > 0 {
			out = append(out, b[i:i+n]...)
			if i += n; i == len(b) {
				break
			}
		}
		r, n := utf8.DecodeRune(b[i:])
		if r < 0x7f || !unsafeRune(r) {
			out = append(out, b[i:i+n]...)
			i += n
			continue
		}
		i += n
		if r > 0xffff {
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
	}
	return out
}

type jsonDoc struct {
	Schema     string  `json:"schema"`
	ReportTime *string `json:"report_time"`
	Redacted   bool    `json:"redacted"`
	// SecretsMasked says credentials in strings are shown as *** (the default).
	SecretsMasked bool        `json:"secrets_masked"`
	Summary       jsonSummary `json:"summary"`
	// ReadinessSummary is set when --tp was given: which hosts can take the job.
	ReadinessSummary *FleetReadinessJSON `json:"readiness_summary,omitempty"`
	Hosts            []jsonHost          `json:"hosts"`
}

type jsonSummary struct {
	Hosts        int             `json:"hosts"`
	OK           int             `json:"ok"`
	WithFindings int             `json:"with_findings"`
	Failed       int             `json:"failed"`
	ByCode       []jsonCodeGroup `json:"by_code"`
	Failures     []jsonFailGroup `json:"failures"`
}

type jsonCodeGroup struct {
	Code     string   `json:"code"`
	Severity string   `json:"severity"`
	Hosts    string   `json:"hosts"`
	HostList []string `json:"host_list"`
}

type jsonFailGroup struct {
	Phase    string   `json:"phase"`
	Kind     string   `json:"kind"`
	Hosts    string   `json:"hosts"`
	HostList []string `json:"host_list"`
}

func jsonSummaryOf(hosts []Host) jsonSummary {
	fs := summarizeFleet(hosts)
	j := jsonSummary{Hosts: fs.hosts, OK: fs.ok, WithFindings: fs.withProblems, Failed: fs.failed,
		ByCode: []jsonCodeGroup{}, Failures: []jsonFailGroup{}}
	for _, c := range fs.byCode {
		j.ByCode = append(j.ByCode, jsonCodeGroup{Code: validUTF8(c.code), Severity: c.severity.String(),
			Hosts: validUTF8(hostlist.Fold(c.hosts)), HostList: validAll(c.hosts)})
	}
	for _, f := range fs.failures {
		j.Failures = append(j.Failures, jsonFailGroup{Phase: validUTF8(f.phase), Kind: validUTF8(f.kind),
			Hosts: validUTF8(hostlist.Fold(f.hosts)), HostList: validAll(f.hosts)})
	}
	return j
}

type jsonHost struct {
	Host          string          `json:"host"`
	OK            bool            `json:"ok"`
	Error         *jsonError      `json:"error"`
	WorstSeverity *string         `json:"worst_severity"`
	Hostname      *string         `json:"hostname"`
	Kernel        *string         `json:"kernel"`
	DriverVersion *string         `json:"driver_version"`
	ProbeTime     *string         `json:"probe_time"`
	ProbeVersion  *string         `json:"probe_version"`
	UptimeSeconds *float64        `json:"uptime_seconds"`
	ProbeUser     *string         `json:"probe_user"`
	ProbeUID      *int            `json:"probe_uid"`
	SMIFailure    *jsonSMIFailure `json:"smi_failure"`
	GPUs          []jsonGPU       `json:"gpus"`
	Processes     []jsonProcess   `json:"processes"`
	Findings      []jsonFinding   `json:"findings"`
	Shm           *jsonShm        `json:"shm"`
	Notes         []jsonNote      `json:"notes"`
	Truncated     bool            `json:"truncated"`
	// Readiness is set when --tp was given.
	Readiness *ReadinessJSON `json:"readiness,omitempty"`
	// Scheduler is set when Slurm chose the hosts (--slurm-*).
	Scheduler *jsonScheduler `json:"scheduler,omitempty"`
}

type jsonError struct {
	Phase   string `json:"phase"`
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

type jsonSMIFailure struct {
	Kind     string  `json:"kind"`
	Message  string  `json:"message"`
	ExitCode *int    `json:"exit_code"`
	BusID    *string `json:"bus_id"`
}

type jsonGPU struct {
	Index             int     `json:"index"`
	UUID              *string `json:"uuid"`
	Name              *string `json:"name"`
	BusID             *string `json:"bus_id"`
	MemoryTotalMiB    *int64  `json:"memory_total_mib"`
	MemoryUsedMiB     *int64  `json:"memory_used_mib"`
	MemoryFreeMiB     *int64  `json:"memory_free_mib"`
	MemoryReservedMiB *int64  `json:"memory_reserved_mib"`
	// How the four figures and the processes' memory reconcile (diagnose.MemoryAccount).
	MemoryBalance         string  `json:"memory_balance"`
	MemoryOffByMiB        *int64  `json:"memory_off_by_mib"`
	MemoryProcessesMiB    int64   `json:"memory_processes_mib"`
	MemoryProcesses       int     `json:"memory_processes"`
	MemoryUnattributedMiB *int64  `json:"memory_unattributed_mib"`
	UtilizationPct        *int    `json:"utilization_pct"`
	ComputeMode           *string `json:"compute_mode"`
	MIGMode               *string `json:"mig_mode"`
	MinorNumber           *int    `json:"minor_number"`
}

// jsonLauncher is what started a worker: its PID and name, the worker's place among its GPU
// processes and their number.
type jsonLauncher struct {
	PID     int    `json:"pid"`
	Name    string `json:"name"`
	Worker  int    `json:"worker"`
	Workers int    `json:"workers"`
}

type jsonProcess struct {
	PID            int              `json:"pid"`
	User           *string          `json:"user"`
	UID            *int             `json:"uid"`
	Name           *string          `json:"name"`
	Argv           []string         `json:"argv"`
	Program        *string          `json:"program"`
	Engine         *string          `json:"engine"`
	ParentArgv     []string         `json:"parent_argv"`
	Launcher       *jsonLauncher    `json:"launcher"`
	LauncherGone   bool             `json:"launcher_gone"`
	State          *string          `json:"state"`
	PPID           *int             `json:"ppid"`
	ElapsedSeconds *int64           `json:"elapsed_seconds"`
	GPUs           []int            `json:"gpus"`
	GPUMemoryMiB   map[string]int64 `json:"gpu_memory_mib"`
	Listed         bool             `json:"listed"`
	Unit           *string          `json:"unit"`
	UnitUserUID    *int             `json:"unit_user_uid"`
	Container      *string          `json:"container"`
	SlurmJob       *string          `json:"slurm_job"`
	Shm            []jsonShmUse     `json:"shm"`
	// K8s: its Kubernetes pod, from the capture's Kubernetes block.
	K8s *diagnose.PodFacts `json:"k8s,omitempty"`
}

type jsonShmUse struct {
	Path    string `json:"path"`
	Bytes   *int64 `json:"bytes"`
	Deleted bool   `json:"deleted"`
	Mapped  bool   `json:"mapped"`
	Open    bool   `json:"open"`
}

type jsonFinding struct {
	Code        string   `json:"code"`
	Severity    string   `json:"severity"`
	Kind        *string  `json:"kind"`
	Title       string   `json:"title"`
	GPUs        []int    `json:"gpus"`
	PIDs        []int    `json:"pids"`
	Files       []string `json:"files"`
	Explanation string   `json:"explanation"`
	Evidence    []string `json:"evidence"`
	Fix         []string `json:"fix"`
	// The typed facts the words above are composed from (diagnose/facts.go).
	Reasons []jsonReason  `json:"reasons"`
	Actions []jsonAction  `json:"actions"`
	Checks  []jsonCommand `json:"checks"`
	Shm     []jsonShmFile `json:"shm"`
	// IfAbandoned: leftover-unconfirmed's stop, for an operator who judges it abandoned.
	IfAbandoned []jsonAction `json:"if_abandoned"`
	// What the words say beyond the facts above (diagnose/facts_named.go), as diagnose holds
	// it: title, explanation, evidence and fix are composed from the facts in JSON alone.
	Named          []diagnose.Process   `json:"named"`
	Imbalance      *diagnose.Imbalance  `json:"imbalance"`
	Check          *diagnose.GroupCheck `json:"check"`
	Omitted        int                  `json:"omitted"`
	Job            *diagnose.BusyJob    `json:"job"`
	Memory         []diagnose.GPUMemory `json:"memory"`
	ShmUse         *diagnose.ShmUse     `json:"shm_use"`
	ShmTruncated   bool                 `json:"shm_truncated"`
	HoldersUnknown bool                 `json:"holders_unknown"`
	ServedBy       *string              `json:"served_by"`
	OthersMay      *jsonOthersMay       `json:"others_may"`
	SMI            *diagnose.SMIFailure `json:"smi"`
	NotRoot        bool                 `json:"not_root"`
	Folded         *diagnose.Folded     `json:"folded"`
}

type jsonReason struct {
	Code        string         `json:"code"`
	Strong      bool           `json:"strong"`
	PID         *int           `json:"pid"`
	Unit        *string        `json:"unit"`
	State       *string        `json:"state"`
	Result      *string        `json:"result"`
	Paths       []string       `json:"paths"`
	AgeSeconds  *int64         `json:"age_seconds"`
	ThanSeconds *int64         `json:"than_seconds"`
	Older       bool           `json:"older"`
	ServedBy    *string        `json:"served_by"`
	OthersMay   *jsonOthersMay `json:"others_may"`
	Orphaned    bool           `json:"orphaned"`
	Note        *string        `json:"note"`
	Detail      *string        `json:"detail"`
	// MiB is the GPU memory nvidia-smi charges to the gone PID (listed-pid-gone), or that the
	// job's process holds on the GPUs in Held (job-ended, gpu-not-allocated); absent otherwise.
	MiB  *int64 `json:"mib,omitempty"`
	Held []int  `json:"held,omitempty"`
	// Purged and Ended (job-ended): Slurm no longer knows the job; Slurm gave its end time.
	Purged  bool    `json:"purged,omitempty"`
	Ended   bool    `json:"ended,omitempty"`
	Bytes   *int64  `json:"bytes"`
	Job     *string `json:"slurm_job"`
	JobUser *string `json:"job_user"`
	Node    *string `json:"node"`
	GPUs    []int   `json:"gpus"`
	// ConstrainDevices and TaskCgroup: gpu-not-allocated's Slurm device confinement.
	ConstrainDevices *bool   `json:"constrain_devices"`
	TaskCgroup       *bool   `json:"task_cgroup"`
	Folded           *int    `json:"folded,omitempty"`
	Parent           *int    `json:"parent"`
	ParentName       *string `json:"parent_name"`
	Other            *int    `json:"other_pid"`
	// Links, PIDs, AsRoot: the fd links under /proc the probe could not read, the first
	// processes they belong to, and whether it ran as root (probe-note fds-unreadable).
	Links  *int  `json:"links,omitempty"`
	PIDs   []int `json:"pids,omitempty"`
	AsRoot bool  `json:"as_root,omitempty"`
	// Pod: the process's Kubernetes pod (pod-gone, pod-ended, pod-not-allocated).
	Pod *diagnose.PodFacts `json:"k8s,omitempty"`
}

// jsonOthersMay is diagnose.OthersMay: how another user could have made a clue.
type jsonOthersMay struct {
	Code string  `json:"code"`
	Dir  *string `json:"dir"`
	UID  *int    `json:"uid"`
	GID  *int    `json:"gid"`
}

func jsonOthersMayOf(o *diagnose.OthersMay) *jsonOthersMay {
	if o == nil {
		return nil
	}
	return &jsonOthersMay{Code: string(o.Code), Dir: optStr(validUTF8(o.Dir)), UID: o.UID, GID: o.GID}
}

type jsonAction struct {
	Kind   string        `json:"kind"`
	Target string        `json:"target"`
	PIDs   []int         `json:"pids"`
	Frees  jsonImpact    `json:"frees"`
	Steps  []jsonCommand `json:"steps"`
}

type jsonImpact struct {
	GPUMiB   map[string]int64 `json:"gpu_mib"`
	ShmBytes int64            `json:"shm_bytes"`
}

type jsonCommand struct {
	Line string  `json:"line"`
	Note *string `json:"note"`
}

type jsonShmFile struct {
	Path       string  `json:"path"`
	Bytes      *int64  `json:"bytes"`
	Dir        bool    `json:"dir"`
	Deleted    bool    `json:"deleted"`
	Mapped     bool    `json:"mapped"`
	Open       bool    `json:"open"`
	PIDs       []int   `json:"pids"`
	MorePIDs   int     `json:"more_pids"`
	ByName     bool    `json:"by_name"`
	Owner      *string `json:"owner"`
	AgeSeconds *int64  `json:"age_seconds"`
	Modified   *string `json:"modified"`
}

type jsonShm struct {
	SizeBytes  *int64 `json:"size_bytes"`
	UsedBytes  *int64 `json:"used_bytes"`
	AvailBytes *int64 `json:"avail_bytes"`
	Listed     bool   `json:"listed"`
	Truncated  bool   `json:"truncated"`
}

type jsonNote struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func jsonHostOf(h Host) jsonHost {
	j := jsonHost{
		Host:      validUTF8(h.Name),
		GPUs:      []jsonGPU{},
		Processes: []jsonProcess{},
		Findings:  []jsonFinding{},
		Notes:     []jsonNote{},
	}
	if h.Readiness != nil {
		r := ReadinessJSONOf(*h.Readiness)
		j.Readiness = &r
	}
	j.Scheduler = jsonSchedulerOf(h.Scheduler)
	if f := h.failure(); f != nil {
		j.Error = &jsonError{Phase: validUTF8(f.Phase), Kind: validUTF8(f.Kind), Message: validUTF8(f.Message)}
	}
	j.OK = j.Error == nil
	if w := h.Result.Worst(); w >= 0 {
		j.WorstSeverity = optStr(w.String())
	}
	for _, p := range h.Result.Processes {
		j.Processes = append(j.Processes, jsonProcessOf(p))
	}
	for _, f := range h.Result.Findings {
		j.Findings = append(j.Findings, jsonFindingOf(f))
	}
	s := h.Snapshot
	if s == nil {
		return j
	}
	j.Hostname = optStr(s.Host.Hostname)
	j.Kernel = optStr(s.Host.Kernel)
	j.DriverVersion = optStr(driverVersion(s))
	j.ProbeTime = optTime(s.Host.Time)
	j.ProbeVersion = optStr(s.Host.ProbeVersion)
	j.UptimeSeconds = s.Host.UptimeSeconds
	j.ProbeUser = optStr(s.Host.User)
	j.ProbeUID = s.Host.UID
	if f := s.SMI.Failure; f != nil {
		j.SMIFailure = &jsonSMIFailure{Kind: validUTF8(string(f.Kind)), Message: validUTF8(f.Message),
			ExitCode: f.ExitCode, BusID: optStr(f.BusID)}
	}
	mem := memoryOf(h)
	for i, g := range s.GPUs {
		m := mem[i]
		j.GPUs = append(j.GPUs, jsonGPU{
			Index: g.Index, UUID: optStr(g.UUID), Name: optStr(g.Name), BusID: optStr(g.BusID),
			MemoryTotalMiB: g.MemoryTotalMiB, MemoryUsedMiB: g.MemoryUsedMiB,
			MemoryFreeMiB: g.MemoryFreeMiB, MemoryReservedMiB: g.MemoryReservedMiB,
			MemoryBalance: string(m.Balance), MemoryOffByMiB: m.OffByMiB, MemoryProcessesMiB: m.ListedMiB,
			MemoryProcesses: m.Listed, MemoryUnattributedMiB: m.UnattributedMiB,
			UtilizationPct: g.UtilizationPct, ComputeMode: optStr(g.ComputeMode), MIGMode: optStr(g.MIGMode),
			MinorNumber: g.MinorNumber,
		})
	}
	j.Shm = &jsonShm{SizeBytes: s.Shm.SizeBytes, UsedBytes: s.Shm.UsedBytes, AvailBytes: s.Shm.AvailBytes,
		Listed: s.Shm.Listed, Truncated: s.Shm.Truncated}
	for _, n := range s.Notes {
		j.Notes = append(j.Notes, jsonNote{Code: validUTF8(n.Code), Message: validUTF8(n.Message)})
	}
	j.Truncated = s.Truncated
	return j
}

func jsonProcessOf(p diagnose.GPUProcess) jsonProcess {
	j := jsonProcess{
		PID: p.PID, User: optStr(p.User), UID: p.UID, Name: optStr(p.Name), Argv: validAll(p.Argv),
		Program: optStr(validUTF8(p.Program)), Engine: optStr(p.Engine),
		State: optStr(p.State), PPID: p.PPID, GPUs: processGPUs(p), GPUMemoryMiB: map[string]int64{},
		Listed: p.Listed, Unit: optStr(p.Unit), UnitUserUID: p.UnitUserUID, Container: optStr(p.Container),
		SlurmJob: optStr(p.SlurmJob), Shm: []jsonShmUse{}, K8s: p.Pod,
	}
	if p.Elapsed != nil && *p.Elapsed >= 0 {
		s := int64(*p.Elapsed / time.Second)
		j.ElapsedSeconds = &s
	}
	if len(p.ParentArgv) > 0 {
		j.ParentArgv = validAll(p.ParentArgv)
	}
	if p.LauncherPID != 0 {
		j.Launcher = &jsonLauncher{PID: p.LauncherPID, Name: validUTF8(p.Launcher), Worker: p.WorkerIndex, Workers: p.Workers}
	}
	j.LauncherGone = p.LauncherGone
	for gpu, v := range p.GPUMemoryMiB {
		j.GPUMemoryMiB[strconv.Itoa(gpu)] = v
	}
	for _, u := range p.Shm {
		j.Shm = append(j.Shm, jsonShmUse{Path: validUTF8(u.Path), Bytes: u.Bytes, Deleted: u.Deleted,
			Mapped: u.Mapped, Open: u.Open})
	}
	return j
}

func jsonFindingOf(f diagnose.Finding) jsonFinding {
	j := jsonFinding{
		Code: validUTF8(f.Code), Severity: f.Severity.String(), Kind: optStr(f.Kind),
		Title: validUTF8(f.Title), GPUs: orEmpty(f.GPUs), PIDs: orEmpty(f.PIDs), Files: validAll(f.Files),
		Explanation: validUTF8(f.Explanation), Evidence: validAll(f.Evidence), Fix: validAll(f.Fix),
		Reasons: []jsonReason{}, Checks: jsonCommands(f.Checks), Shm: []jsonShmFile{},
	}
	for _, r := range f.Reasons {
		j.Reasons = append(j.Reasons, jsonReason{Code: validUTF8(string(r.Code)), Strong: r.Strong, PID: optInt(r.PID),
			Unit: optStr(r.Unit), State: optStr(r.State), Result: optStr(r.Result), Paths: validAll(r.Paths),
			AgeSeconds: optSeconds(r.Age), ThanSeconds: optSeconds(r.Than), Older: r.Older,
			ServedBy: optStr(r.ServedBy), OthersMay: jsonOthersMayOf(r.OthersMay), Orphaned: r.Orphaned, Note: optStr(r.Note), Detail: optStr(r.Detail),
			Job: optStr(r.Job), JobUser: optStr(r.User), Node: optStr(r.Node), GPUs: orEmpty(r.GPUs),
			ConstrainDevices: r.ConstrainDevices, TaskCgroup: r.TaskCgroup, Folded: optInt(r.Folded),
			Parent: optInt(r.Parent), ParentName: optStr(r.ParentName), Other: optInt(r.Other),
			Links: optInt(r.Links), PIDs: r.PIDs, AsRoot: r.AsRoot, Pod: r.Pod})
		if r.Bytes > 0 {
			j.Reasons[len(j.Reasons)-1].Bytes = &r.Bytes
		}
		switch r.Code {
		case diagnose.ReasonListedPIDGone, diagnose.ReasonJobEnded, diagnose.ReasonGPUNotAllocated, diagnose.ReasonPodNotAllocated:
			jr := &j.Reasons[len(j.Reasons)-1]
			jr.MiB, jr.Purged, jr.Ended = &r.MiB, r.Purged, r.Ended
			if r.Code != diagnose.ReasonListedPIDGone {
				jr.Held = r.Held
			}
		}
	}
	j.Named, j.Memory = orEmptyOf(f.Named), orEmptyOf(f.Memory)
	j.Imbalance, j.Check, j.Omitted, j.Job = jsonImbalanceOf(f.Imbalance), jsonCheckOf(f.Check), f.Omitted, f.Job
	j.ShmUse, j.ShmTruncated, j.HoldersUnknown = f.ShmUse, f.ShmTruncated, f.HoldersUnknown
	j.ServedBy, j.OthersMay, j.SMI = optStr(f.ServedBy), jsonOthersMayOf(f.OthersMay), f.SMI
	j.NotRoot, j.Folded = f.NotRoot, f.Folded
	j.Actions, j.IfAbandoned = jsonActions(f.Actions), jsonActions(f.IfAbandoned)
	for _, sf := range f.Shm {
		js := jsonShmFile{Path: validUTF8(sf.Path), Bytes: sf.Bytes, Dir: sf.Dir, Deleted: sf.Deleted, Mapped: sf.Mapped,
			Open: sf.Open, PIDs: orEmpty(sf.PIDs), MorePIDs: sf.MorePIDs, ByName: sf.ByName, Owner: optStr(sf.Owner), Modified: optTime(sf.Modified)}
		if sf.Age != nil {
			js.AgeSeconds = optSeconds(*sf.Age)
		}
		j.Shm = append(j.Shm, js)
	}
	return j
}

// jsonImbalanceOf is im with its lists [] where empty, as JSON writes lists.
func jsonImbalanceOf(im *diagnose.Imbalance) *diagnose.Imbalance {
	if im == nil {
		return nil
	}
	c := *im
	c.Short = orEmptyOf(slices.Clone(c.Short))
	for i := range c.Short {
		c.Short[i].Holders, c.Short[i].DeviceOpen = orEmptyOf(c.Short[i].Holders), orEmpty(c.Short[i].DeviceOpen)
	}
	c.Leftover, c.Healthy, c.StillShort, c.RoomAfter = orEmpty(c.Leftover), orEmpty(c.Healthy), orEmpty(c.StillShort), orEmpty(c.RoomAfter)
	return &c
}

// jsonCheckOf is c with its lists [] where empty.
func jsonCheckOf(c *diagnose.GroupCheck) *diagnose.GroupCheck {
	if c == nil {
		return nil
	}
	d := *c
	d.VLLMFail, d.VLLMPass = orEmpty(d.VLLMFail), orEmpty(d.VLLMPass)
	return &d
}

func jsonActions(as []diagnose.Action) []jsonAction {
	out := []jsonAction{}
	for _, a := range as {
		frees := jsonImpact{GPUMiB: map[string]int64{}, ShmBytes: a.Frees.ShmBytes}
		for g, m := range a.Frees.GPUMiB {
			frees.GPUMiB[strconv.Itoa(g)] = m
		}
		out = append(out, jsonAction{Kind: validUTF8(string(a.Kind)), Target: validUTF8(a.Target),
			PIDs: orEmpty(a.PIDs), Frees: frees, Steps: jsonCommands(a.Steps)})
	}
	return out
}

func jsonCommands(cs []diagnose.Command) []jsonCommand {
	out := []jsonCommand{}
	for _, c := range cs {
		out = append(out, jsonCommand{Line: validUTF8(c.Line), Note: optStr(c.Note)})
	}
	return out
}

// optInt is n, or null for 0 (a fact not given: no PID is 0).
func optInt(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

// optSeconds is d in whole seconds, or null for 0 (not given) and below.
func optSeconds(d time.Duration) *int64 {
	if d <= 0 {
		return nil
	}
	s := int64(d / time.Second)
	return &s
}

// validUTF8 replaces each byte that is not valid UTF-8 with U+FFFD, as encoding/json would,
// made explicit so the rule is ours and documented rather than a library detail.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r) // utf8.RuneError, U+FFFD, for an invalid byte
		i += n
	}
	return b.String()
}

func validAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = validUTF8(s)
	}
	return out
}

func optStr(s string) *string {
	if s == "" {
		return nil
	}
	s = validUTF8(s)
	return &s
}

func optTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.Format(time.RFC3339)
	return &s
}

func orEmpty(xs []int) []int { return orEmptyOf(xs) }

// orEmptyOf is xs, or an empty list for nil: JSON lists are [], never null.
func orEmptyOf[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}
