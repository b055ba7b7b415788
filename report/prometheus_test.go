package report

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/promtest"
)

// promHosts are the standard hosts with the probe durations a sweep measures.
func promHosts() []Host {
	hosts := append(standardHosts(), busyHost())
	for i := range hosts {
		hosts[i].ProbeDuration = time.Duration(i+1)*850*time.Millisecond + 1234*time.Microsecond
	}
	return hosts
}

func TestPrometheusGolden(t *testing.T) {
	for _, tt := range []struct {
		file  string
		hosts []Host
	}{
		{"metrics.prom", promHosts()},
		{"hostile.prom", []Host{hostileHost(), forgeryHost()}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			checkGolden(t, tt.file, render(t, Prometheus, tt.hosts, Options{Now: reportTime}))
		})
	}
}

// TestPrometheusPromtool: every exposition, hostile ones included, passes promtool's own
// parser and linter (names, units, HELP, TYPE) with exit status 0.
func TestPrometheusPromtool(t *testing.T) {
	for name, tt := range map[string]struct {
		hosts []Host
		o     Options
	}{
		"standard":  {promHosts(), Options{Now: reportTime}},
		"fleet":     {fleetHosts(), Options{Now: reportTime}},
		"hostile":   {[]Host{hostileHost(), forgeryHost(), hostileHost()}, Options{Now: reportTime}},
		"redacted":  {append(promHosts(), hostileHost()), Options{Redact: true, Now: reportTime}},
		"secrets":   {[]Host{forgeryHost()}, Options{ShowSecrets: true}},
		"no hosts":  {nil, Options{Now: reportTime}},
		"no time":   {[]Host{cleanHost()}, Options{}},
		"failed":    {[]Host{failedHost(), hostKeyChangedHost()}, Options{Now: reportTime}},
		"no memory": {[]Host{noDriverHost()}, Options{Now: reportTime}},
	} {
		t.Run(name, func(t *testing.T) {
			promtest.CheckMetrics(t, render(t, Prometheus, tt.hosts, tt.o))
		})
	}
}

// forgeryHost's strings try to end their line and add a series of their own, to escape their
// quotes with a backslash, and to blow up the file with a huge label value.
func forgeryHost() Host {
	h := incidentHost()
	forge := "x\"} 1\ngputriage_probe_success{host=\"forged\"} 1\n# TYPE"
	h.Name = "gpu\\\"99" + forge
	h.Snapshot.GPUs[0].UUID = "GPU-" + strings.Repeat("\u00e9", 200) + forge
	h.Snapshot.GPUs[1].UUID = "GPU-\\"
	h.Result.Processes[0].SlurmJob = "4242\\" + forge + " HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123"
	return h
}

// series matches one sample line: a name, its labels (each value a quoted string with the
// exposition's escapes only) and a value.
var series = regexp.MustCompile(`^(gputriage_[a-z_]+)(\{(?:[a-z_]+="(?:[^"\\\n]|\\[\\"n])*",?)*\})? (\S+)$`)

var labelPair = regexp.MustCompile(`([a-z_]+)="((?:[^"\\]|\\[\\"n])*)"`)

// parseExposition reads an exposition back: each series as its name and labels, unescaped.
func parseExposition(t *testing.T, out string) []map[string]string {
	t.Helper()
	var got []map[string]string
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if strings.HasPrefix(line, "# HELP gputriage_") || strings.HasPrefix(line, "# TYPE gputriage_") && strings.HasSuffix(line, " gauge") {
			continue
		}
		m := series.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("line %d is neither HELP, TYPE nor a series: %q", i+1, line)
			continue
		}
		labels := map[string]string{"__name__": m[1], "__value__": m[3]}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			labels[p[1]] = strings.NewReplacer(`\\`, `\`, `\"`, `"`, `\n`, "\n").Replace(p[2])
		}
		got = append(got, labels)
	}
	return got
}

// TestPrometheusHostileLabels: a host's strings stay inside their label values whatever they
// hold: no forged series, no broken line, every value valid UTF-8 and bounded; and the secret
// in a Slurm job's name is masked as in every format.
func TestPrometheusHostileLabels(t *testing.T) {
	out := render(t, Prometheus, []Host{hostileHost(), forgeryHost()}, Options{})
	if !utf8.ValidString(out) {
		t.Error("the exposition is not valid UTF-8")
	}
	for _, bad := range forbidden {
		if strings.Contains(out, bad) {
			t.Errorf("the exposition carries %q raw", bad)
		}
	}
	all := parseExposition(t, out)
	// The hostile host: one GPU of known memory, two with leftovers, one finding; the forgery
	// (ct200): eight GPUs, three findings.
	counts := map[string]int{}
	for _, s := range all {
		counts[s["__name__"]]++
		for k, v := range s {
			if len(v) > maxLabelBytes {
				t.Errorf("label %s is %d bytes: %.40q...", k, len(v), v)
			}
		}
		if s["host"] == "forged" {
			t.Errorf("a forged series: %v", s)
		}
	}
	want := map[string]int{
		"gputriage_probe_success":             2,
		"gputriage_gpu_memory_total_bytes":    1 + 8,
		"gputriage_gpu_memory_leftover_bytes": 2 + 8,
		"gputriage_finding":                   1 + 3,
	}
	for name, n := range want {
		if counts[name] != n {
			t.Errorf("%d %s series, want %d: %v", counts[name], name, n, counts)
		}
	}
	if strings.Contains(out, "hf_abcdefghijklmnopqrstuvwxyz0123") || !strings.Contains(out, `HF_TOKEN=***`) {
		t.Error("the Slurm job's token is not masked")
	}
	if shown := render(t, Prometheus, []Host{forgeryHost()}, Options{ShowSecrets: true}); !strings.Contains(shown, "hf_abcdefghijklmnopqrstuvwxyz0123") {
		t.Error("--show-secrets: the token is masked")
	}
	// The forged host's name comes back whole from its label, escapes undone.
	name := forgeryHost().Name
	found := false
	for _, s := range all {
		found = found || s["host"] == Sanitize(name)
	}
	if !found {
		t.Errorf("no series with host %q", Sanitize(name))
	}
}

// TestPrometheusValues: what the metrics say of the incident host, a failed host and a fleet,
// in base units.
func TestPrometheusValues(t *testing.T) {
	out := render(t, Prometheus, promHosts(), Options{Now: reportTime})
	value := func(name string, labels map[string]string) string {
		t.Helper()
		var found []string
	next:
		for _, s := range parseExposition(t, out) {
			if s["__name__"] != name {
				continue
			}
			for k, v := range labels {
				if s[k] != v {
					continue next
				}
			}
			found = append(found, s["__value__"])
		}
		if len(found) != 1 {
			t.Errorf("%s%v: %d series, want 1", name, labels, len(found))
			return ""
		}
		return found[0]
	}
	mib := func(v int64) string { return strconv.FormatInt(v*1024*1024, 10) }
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		// ct200: PID 20629, a leftover, holds 55,286 MiB on GPU 0.
		{"gputriage_gpu_memory_leftover_bytes", map[string]string{"host": "ct200", "gpu": "0", "uuid": "GPU-6793b112-91ac-b02e-b2b2-a7e4143a878b"}, mib(55286)},
		{"gputriage_gpu_memory_leftover_bytes", map[string]string{"host": "ct200", "gpu": "1"}, "0"},
		{"gputriage_gpu_memory_total_bytes", map[string]string{"host": "ct200", "gpu": "0"}, mib(97887)},
		{"gputriage_gpu_memory_used_bytes", map[string]string{"host": "ct200", "gpu": "0"}, mib(55295)},
		{"gputriage_gpu_memory_free_bytes", map[string]string{"host": "ct200", "gpu": "0"}, mib(41958)},
		{"gputriage_finding", map[string]string{"host": "ct200", "code": "leftover-process", "severity": "error", "gpu": "0"}, "1"},
		{"gputriage_finding", map[string]string{"host": "gpu07", "code": "smi-failed", "severity": "critical", "kind": "no-driver"}, "1"},
		{"gputriage_finding", map[string]string{"host": "h100-02", "code": "gpu-busy", "gpu": "0,1,2,3"}, "1"},
		{"gputriage_probe_success", map[string]string{"host": "ct200"}, "1"},
		{"gputriage_probe_success", map[string]string{"host": "gpu07"}, "1"},
		{"gputriage_probe_success", map[string]string{"host": "gpu12"}, "0"},
		{"gputriage_host_failure", map[string]string{"host": "gpu12", "phase": "connect", "kind": "refused"}, "1"},
		{"gputriage_probe_duration_seconds", map[string]string{"host": "ct200"}, "0.851"},
		{"gputriage_probe_duration_seconds", map[string]string{"host": "gpu12"}, "3.401"},
		{"gputriage_last_run_timestamp_seconds", nil, strconv.FormatInt(reportTime.Unix(), 10) + ".000"},
	} {
		if got := value(tt.name, tt.labels); got != tt.want {
			t.Errorf("%s%v = %s, want %s", tt.name, tt.labels, got, tt.want)
		}
	}
	// A failed host has no GPU series; a host whose nvidia-smi failed none either.
	for _, s := range parseExposition(t, out) {
		if strings.HasPrefix(s["__name__"], "gputriage_gpu_") && (s["host"] == "gpu12" || s["host"] == "gpu07") {
			t.Errorf("GPU series for a host without GPU data: %v", s)
		}
	}
}

// TestPrometheusSlurmJob: a finding's series names the Slurm job of the processes it names.
func TestPrometheusSlurmJob(t *testing.T) {
	h := incidentHost()
	h.Result.Processes[0].SlurmJob = "4242"
	out := render(t, Prometheus, []Host{h}, Options{})
	if !strings.Contains(out, `gputriage_finding{host="ct200",code="leftover-process",severity="error",gpu="0",slurm_job="4242"} 1`) {
		t.Errorf("no leftover-process series with slurm_job 4242:\n%s", out)
	}
	if strings.Contains(out, ` job="`) || strings.Contains(out, `{job="`) {
		t.Error(`a "job" label: Prometheus renames it exported_job`)
	}
}

// TestPrometheusLeftoverFolded: memory of every PID a folded leftover finding names counts.
func TestPrometheusLeftoverFolded(t *testing.T) {
	r := diagnose.Result{
		Findings: []diagnose.Finding{{Code: diagnose.CodeLeftoverProcess, PIDs: []int{1, 2}}, {Code: diagnose.CodeGPUBusy, PIDs: []int{3}}},
		Processes: []diagnose.GPUProcess{
			{PID: 1, GPUMemoryMiB: map[int]int64{0: 10, 1: 5}},
			{PID: 2, GPUMemoryMiB: map[int]int64{0: 7}},
			{PID: 3, GPUMemoryMiB: map[int]int64{0: 1000}},
		},
	}
	got := leftoverMiB(r)
	if got[0] != 17 || got[1] != 5 || len(got) != 2 {
		t.Errorf("leftoverMiB = %v, want map[0:17 1:5]", got)
	}
}

// FuzzPrometheusLabel: any string a host sends becomes one well-formed label value: escaped,
// valid UTF-8 once unescaped, on one line and bounded.
func FuzzPrometheusLabel(f *testing.F) {
	for _, s := range []string{"", "gpu01", forgeryHost().Name, osc + rlo + invalid, strings.Repeat("\\\"", 100), strings.Repeat("é", 100)} {
		f.Add(s)
	}
	quoted := regexp.MustCompile(`^(?:[^"\\\n]|\\[\\"n])*$`)
	f.Fuzz(func(t *testing.T, in string) {
		v := labelValue(in)
		if !quoted.MatchString(v) {
			t.Fatalf("labelValue(%q) = %q: not one escaped label value", in, v)
		}
		raw := strings.NewReplacer(`\\`, `\`, `\"`, `"`, `\n`, "\n").Replace(v)
		if !utf8.ValidString(raw) || len(raw) > maxLabelBytes || strings.ContainsAny(raw, "\n\r\x00") {
			t.Fatalf("labelValue(%q) reads back as %q", in, raw)
		}
	})
}

// TestPrometheusNoDuplicateSeries: series whose labels come out equal are written once (a
// host named twice, a GPU index a host reports twice, two findings of one code on one GPU):
// node_exporter refuses a repeated series ("was collected before with the same name and label
// values") and Prometheus would drop it.
func TestPrometheusNoDuplicateSeries(t *testing.T) {
	h := incidentHost()
	h.Snapshot.GPUs = append(h.Snapshot.GPUs, h.Snapshot.GPUs[0])
	h.Result.Findings = append(h.Result.Findings, h.Result.Findings[0])
	out := render(t, Prometheus, []Host{h, incidentHost()}, Options{})
	seen := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			name, _, _ := strings.Cut(line, " ")
			if seen[name] {
				t.Errorf("series written twice: %s", line)
			}
			seen[name] = true
		}
	}
	if !seen[`gputriage_finding{host="ct200",code="leftover-process",severity="error",gpu="0"}`] || len(seen) != 1+8*6+3 {
		t.Errorf("%d series:\n%s", len(seen), out)
	}
}
