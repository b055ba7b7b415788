package report

import (
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gputriage/gputriage/diagnose"
)

// Prometheus writes the hosts in Prometheus's text exposition format (version 0.0.4), for
// node_exporter's textfile collector: per-GPU memory in bytes, the memory held by processes
// judged left over, one gputriage_finding series per finding, and each host's probe outcome
// and duration, every series labelled with its host. Options.Now is the run's time
// (gputriage_last_run_timestamp_seconds; left out when zero). Only, Sort, Verbose, Color and
// Width do not apply: every host is exported, in the order given.
//
// Label values are the host's strings: each is sanitized, cut to maxLabelBytes and escaped,
// so that none can end its line or forge a series. Series whose labels come out equal (two
// findings of one code on one GPU, two names equal once cut) are one series.
func Prometheus(w io.Writer, hosts []Host, o Options) error {
	hosts, err := prepare(hosts, o)
	if err != nil {
		return err
	}
	m := newMetrics()
	for _, h := range hosts {
		m.host(h)
	}
	if !o.Now.IsZero() {
		ms := o.Now.UnixMilli()
		m.add(mLastRun, nil, strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64))
	}
	_, err = io.WriteString(w, m.String())
	return err
}

// The metric families, in the order they are written. Names and units follow Prometheus's
// conventions: base units (bytes, seconds), a gputriage_ prefix, gauges throughout (every value
// is what the last run saw). The Slurm job is "slurm_job", not "job": Prometheus sets "job" on
// every scraped series itself, and a "job" of ours would be renamed exported_job.
var families = []struct{ name, help string }{
	mProbeSuccess:  {"gputriage_probe_success", "1 when the host was probed and its output read, 0 when it could not be triaged (gputriage_host_failure says why)."},
	mProbeDuration: {"gputriage_probe_duration_seconds", "Wall time of the host's probe, the SSH connection included; absent for a replay."},
	mHostFailure:   {"gputriage_host_failure", "1 for a host that could not be triaged, labelled with the phase and kind of the failure."},
	mMemTotal:      {"gputriage_gpu_memory_total_bytes", "Total memory of the GPU, as nvidia-smi reports it."},
	mMemUsed:       {"gputriage_gpu_memory_used_bytes", "Memory in use on the GPU, as nvidia-smi reports it."},
	mMemFree:       {"gputriage_gpu_memory_free_bytes", "Free memory on the GPU, as nvidia-smi reports it."},
	mMemReserved:   {"gputriage_gpu_memory_reserved_bytes", "Memory the driver keeps for itself on the GPU, as nvidia-smi reports it (absent where the driver does not report it); total = used + reserved + free, to nvidia-smi's rounding of each figure to the MiB."},
	mMemProcesses:  {"gputriage_gpu_memory_processes_bytes", "GPU memory nvidia-smi gives for the processes it lists on the GPU; used minus this is memory not attributed to a listed process."},
	mMemLeftover:   {"gputriage_gpu_memory_leftover_bytes", "GPU memory held by processes gputriage judged left over (leftover-process findings)."},
	mFinding:       {"gputriage_finding", "1 for each finding of the last run, labelled with its code, severity, kind, GPUs and Slurm job (docs/findings.md)."},
	mLastRun:       {"gputriage_last_run_timestamp_seconds", "When gputriage last wrote these metrics, in seconds since the Unix epoch."},
}

const (
	mProbeSuccess = iota
	mProbeDuration
	mHostFailure
	mMemTotal
	mMemUsed
	mMemFree
	mMemReserved
	mMemProcesses
	mMemLeftover
	mFinding
	mLastRun
)

// maxLabelBytes bounds a label value made of a host's string (a host name, a UUID, a Slurm
// job): the exposition stays small whatever a host sends.
const maxLabelBytes = 128

// metrics collects each family's series, rendered, without duplicates.
type metrics struct {
	series [][]string // per family: `{labels} value` lines, in the order added
	seen   []map[string]bool
}

func newMetrics() *metrics {
	m := &metrics{series: make([][]string, len(families)), seen: make([]map[string]bool, len(families))}
	for i := range m.seen {
		m.seen[i] = map[string]bool{}
	}
	return m
}

// add records a series of family f with labels (name, value pairs; an empty value leaves its
// label out, as Prometheus reads it) unless one with the same labels is already there.
func (m *metrics) add(f int, labels []string, value string) {
	var b strings.Builder
	for i := 0; i+1 < len(labels); i += 2 {
		if labels[i+1] == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(labels[i] + `="` + labelValue(labels[i+1]) + `"`)
	}
	key := b.String()
	if m.seen[f][key] {
		return
	}
	m.seen[f][key] = true
	if key != "" {
		key = "{" + key + "}"
	}
	m.series[f] = append(m.series[f], key+" "+value)
}

// String is the exposition: HELP and TYPE, then the series, for every family that has any.
func (m *metrics) String() string {
	var b strings.Builder
	for f, ss := range m.series {
		if len(ss) == 0 {
			continue
		}
		name := families[f].name
		b.WriteString("# HELP " + name + " " + families[f].help + "\n# TYPE " + name + " gauge\n")
		for _, s := range ss {
			b.WriteString(name + s + "\n")
		}
	}
	return b.String()
}

// host adds one host's series.
func (m *metrics) host(h Host) {
	name := h.Name
	ok := "1"
	if fail := h.failure(); fail != nil {
		ok = "0"
		m.add(mHostFailure, []string{"host", name, "phase", fail.Phase, "kind", fail.Kind}, "1")
	}
	m.add(mProbeSuccess, []string{"host", name}, ok)
	if h.ProbeDuration > 0 {
		m.add(mProbeDuration, []string{"host", name}, strconv.FormatFloat(h.ProbeDuration.Seconds(), 'f', 3, 64))
	}
	if h.Snapshot != nil {
		leftover := leftoverMiB(h.Result)
		mem := memoryOf(h)
		for i, g := range h.Snapshot.GPUs {
			labels := []string{"host", name, "gpu", strconv.Itoa(g.Index), "uuid", g.UUID}
			for _, mem := range []struct {
				family int
				mib    *int64
			}{{mMemTotal, g.MemoryTotalMiB}, {mMemUsed, g.MemoryUsedMiB}, {mMemFree, g.MemoryFreeMiB}, {mMemReserved, g.MemoryReservedMiB}} {
				if mem.mib != nil { // unknown is left out, never 0
					m.add(mem.family, labels, mibBytes(*mem.mib))
				}
			}
			m.add(mMemProcesses, labels, mibBytes(mem[i].ListedMiB))
			m.add(mMemLeftover, labels, mibBytes(leftover[g.Index]))
		}
	}
	for _, f := range h.Result.Findings {
		labels := []string{"host", name, "code", f.Code, "severity", f.Severity.String(), "kind", f.Kind,
			"gpu", joinInts(f.GPUs), "slurm_job", findingJobs(h.Result, f)}
		m.add(mFinding, append(labels, findingPods(h.Result, f)...), "1")
	}
}

// leftoverMiB is the GPU memory, per GPU index, of the processes that leftover-process
// findings name.
func leftoverMiB(r diagnose.Result) map[int]int64 {
	var pids []int
	for _, f := range r.Findings {
		if f.Code == diagnose.CodeLeftoverProcess {
			pids = append(pids, f.PIDs...)
		}
	}
	out := map[int]int64{}
	for _, p := range r.Processes {
		if slices.Contains(pids, p.PID) {
			for gpu, v := range p.GPUMemoryMiB {
				out[gpu] += v
			}
		}
	}
	return out
}

// findingJobs is the Slurm jobs of the processes a finding is about, sorted and comma-joined;
// "" when none is known. A memory imbalance is about its leftovers: the healthy work it names
// on its short GPUs is no fault of its jobs, and an alert routed by job must not page them.
func findingJobs(r diagnose.Result, f diagnose.Finding) string {
	pids := f.PIDs
	if f.Imbalance != nil {
		pids = f.Imbalance.Leftover
	}
	var jobs []string
	for _, p := range r.Processes {
		if p.SlurmJob != "" && slices.Contains(pids, p.PID) && !slices.Contains(jobs, p.SlurmJob) {
			jobs = append(jobs, p.SlurmJob)
		}
	}
	slices.Sort(jobs)
	return strings.Join(jobs, ",")
}

// findingPods are the labels namespace, pod, container and pod_uid of the Kubernetes pods
// of the processes a finding is about (as findingJobs picks them), each sorted and
// comma-joined; empty values (left out) when none is known.
func findingPods(r diagnose.Result, f diagnose.Finding) []string {
	pids := f.PIDs
	if f.Imbalance != nil {
		pids = f.Imbalance.Leftover
	}
	var ns, pods, containers, uids []string
	add := func(xs *[]string, s string) {
		if s != "" && !slices.Contains(*xs, s) {
			*xs = append(*xs, s)
		}
	}
	for _, p := range r.Processes {
		if k := p.Pod; k != nil && slices.Contains(pids, p.PID) {
			add(&ns, k.Namespace)
			add(&pods, k.Name)
			add(&containers, k.Container)
			add(&uids, k.UID)
		}
	}
	var out []string
	for _, l := range []struct {
		name string
		xs   []string
	}{{"namespace", ns}, {"pod", pods}, {"container", containers}, {"pod_uid", uids}} {
		slices.Sort(l.xs)
		out = append(out, l.name, strings.Join(l.xs, ","))
	}
	return out
}

// mibBytes is a MiB count in bytes, the base unit; as a float past what an int64 holds.
func mibBytes(v int64) string {
	if v > math.MaxInt64>>20 || v < math.MinInt64>>20 {
		return strconv.FormatFloat(float64(v)*(1<<20), 'g', -1, 64)
	}
	return strconv.FormatInt(v<<20, 10)
}

// labelValue makes a host's string a label value: sanitized (valid UTF-8, no control or
// invisible characters), cut to maxLabelBytes on a character boundary with "…" to say so,
// and escaped as the exposition format wants (\\, \" and \n).
func labelValue(s string) string {
	s = Sanitize(s)
	if len(s) > maxLabelBytes {
		cut := maxLabelBytes - len("…")
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return labelEscaper.Replace(s)
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
