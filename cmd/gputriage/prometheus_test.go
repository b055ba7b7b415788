package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/promtest"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/sshdtest"
)

// scraped is one series of a scrape: its name, labels and value.
type scraped struct {
	name   string
	labels map[string]string
	value  float64
}

var (
	scrapeLine  = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
	scrapeLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// parseScrape reads the series of an exposition (node_exporter's or ours), comments skipped.
func parseScrape(t *testing.T, text string) []scraped {
	t.Helper()
	var out []scraped
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := scrapeLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("not a series: %q", line)
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Errorf("%q: %v", line, err)
		}
		s := scraped{name: m[1], labels: map[string]string{}, value: v}
		for _, l := range scrapeLabel.FindAllStringSubmatch(m[2], -1) {
			s.labels[l[1]] = strings.NewReplacer(`\\`, `\`, `\"`, `"`, `\n`, "\n").Replace(l[2])
		}
		out = append(out, s)
	}
	return out
}

// find returns the series named name whose labels include want.
func find(all []scraped, name string, want map[string]string) []scraped {
	var out []scraped
next:
	for _, s := range all {
		if s.name != name {
			continue
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// TestPrometheusNodeExporter is the textfile exporter as docs/prometheus.md sets it up, end
// to end: on a machine whose nvidia-smi names a real orphaned server that maps deleted
// /dev/shm files, `gputriage --local --format prometheus --output DIR/gputriage.prom` writes
// a file promtool accepts, and a real prometheus-node-exporter reading DIR serves its series
// over loopback: the leftover's memory on GPU 0, its finding, the probe's success and
// duration, and the time of the run.
func TestPrometheusNodeExporter(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the probe reads /proc: Linux only")
	}
	shmDir := "/dev/shm/gputriage-prom-" + strconv.Itoa(os.Getpid())
	p, err := scenario.Start(scenario.Server{
		Module: "sglang.launch_server", Args: []string{"--model-path", shmDir, "--tp-size", "1"},
		ShmDir: shmDir, ShmFiles: 2, ShmBytes: 1 << 20, Delete: true, Orphan: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	smiDir := t.TempDir()
	smi := cleanSMI(2)
	smi.GPUs[0].UsedMiB = 40000
	smi.Apps = []scenario.App{{PID: p.PID, GPUUUID: smi.GPUs[0].UUID, UsedMiB: 39990, Name: "python3"}}
	if err := scenario.WriteFakeSMI(smiDir, *smi); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", smiDir+string(os.PathListSeparator)+os.Getenv("PATH"))

	dir := t.TempDir()
	file := filepath.Join(dir, "gputriage.prom")
	before := time.Now()
	out, errOut, code := cli(t, nil, "--local", "--format", "prometheus", "--output", file)
	if code != exitFindings || out != "" {
		t.Errorf("exit %d (want %d), stdout %q, stderr %s", code, exitFindings, out, errOut)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	promtest.CheckMetrics(t, string(b))

	ne := promtest.StartNodeExporter(t, dir)
	all := parseScrape(t, ne.Scrape(t))
	if s := find(all, "node_textfile_scrape_error", nil); len(s) != 1 || s[0].value != 0 {
		t.Errorf("node_textfile_scrape_error = %v, want 0", s)
	}
	host, _ := os.Hostname()
	gpu0 := map[string]string{"host": host, "gpu": "0", "uuid": smi.GPUs[0].UUID}
	checks := []struct {
		name   string
		labels map[string]string
		ok     func(float64) bool
		want   string
	}{
		{"gputriage_gpu_memory_leftover_bytes", gpu0, func(v float64) bool { return v == 39990<<20 }, "39990 MiB"},
		{"gputriage_gpu_memory_leftover_bytes", map[string]string{"host": host, "gpu": "1"}, func(v float64) bool { return v == 0 }, "0"},
		{"gputriage_gpu_memory_used_bytes", gpu0, func(v float64) bool { return v == 40000<<20 }, "40000 MiB"},
		{"gputriage_gpu_memory_total_bytes", gpu0, func(v float64) bool { return v == 81559<<20 }, "81559 MiB"},
		{"gputriage_finding", map[string]string{"host": host, "code": "leftover-process", "severity": "error", "gpu": "0"}, func(v float64) bool { return v == 1 }, "1"},
		{"gputriage_probe_success", map[string]string{"host": host}, func(v float64) bool { return v == 1 }, "1"},
		{"gputriage_probe_duration_seconds", map[string]string{"host": host}, func(v float64) bool { return v > 0 && v < 30 }, "the probe's wall time"},
		{"gputriage_last_run_timestamp_seconds", nil, func(v float64) bool {
			return v >= float64(before.Unix()) && v <= float64(time.Now().Unix()+1)
		}, "the time of the run"},
	}
	for _, c := range checks {
		s := find(all, c.name, c.labels)
		if len(s) != 1 || !c.ok(s[0].value) {
			t.Errorf("%s%v = %v, want one series of %s", c.name, c.labels, s, c.want)
		}
	}
	if t.Failed() {
		t.Logf("the file:\n%s", b)
	}
}

// TestPrometheusFleet: a sweep from the laptop exports the same metrics for every host, each
// with its host label: a real OpenSSH host with its GPUs and the probe's duration over SSH,
// and a host whose port refuses, exported as a failed probe with the failure's phase and kind.
func TestPrometheusFleet(t *testing.T) {
	dir := t.TempDir()
	key, pub := sshdtest.UserKey(t, dir, "ed25519")
	up := sshdtest.Start(t, sshdtest.Config{Name: "prom-a", Addr: "127.0.0.171", Port: 2271,
		AuthorizedKeys: []string{pub}, SMI: cleanSMI(2)})
	known := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(known, []byte(up.KnownHostsLine(up.Addr)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "ssh_config")
	conf := fmt.Sprintf("Host prom-a\n  HostName 127.0.0.171\n  Port 2271\nHost prom-b\n  HostName 127.0.0.172\n  Port 2272\n"+
		"Host *\n  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  GlobalKnownHostsFile none\n", key, known)
	if err := os.WriteFile(config, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := cli(t, nil, "-F", config, "--timeout", "20s", "--format", "prometheus", "prom-a,prom-b")
	if code != exitHostsFailed {
		t.Errorf("exit %d, want %d; stderr %s", code, exitHostsFailed, errOut)
	}
	promtest.CheckMetrics(t, out)
	all := parseScrape(t, out)
	for _, c := range []struct {
		name   string
		labels map[string]string
		ok     func(float64) bool
	}{
		{"gputriage_probe_success", map[string]string{"host": "prom-a"}, func(v float64) bool { return v == 1 }},
		{"gputriage_probe_duration_seconds", map[string]string{"host": "prom-a"}, func(v float64) bool { return v > 0 && v < 20 }},
		{"gputriage_gpu_memory_total_bytes", map[string]string{"host": "prom-a", "gpu": "1", "uuid": cleanSMI(2).GPUs[1].UUID}, func(v float64) bool { return v == 81559<<20 }},
		{"gputriage_gpu_memory_leftover_bytes", map[string]string{"host": "prom-a", "gpu": "0"}, func(v float64) bool { return v == 0 }},
		{"gputriage_probe_success", map[string]string{"host": "prom-b"}, func(v float64) bool { return v == 0 }},
		{"gputriage_host_failure", map[string]string{"host": "prom-b", "phase": "connect", "kind": "refused"}, func(v float64) bool { return v == 1 }},
	} {
		if s := find(all, c.name, c.labels); len(s) != 1 || !c.ok(s[0].value) {
			t.Errorf("%s%v = %v", c.name, c.labels, s)
		}
	}
	for _, s := range all {
		if s.name != "gputriage_last_run_timestamp_seconds" && s.labels["host"] != "prom-a" && s.labels["host"] != "prom-b" {
			t.Errorf("a series without its host: %+v", s)
		}
	}
	if t.Failed() {
		t.Logf("the exposition:\n%s", out)
	}
}

// TestPrometheusReplay: a saved sweep (the fixtures directory) exports every host with its
// host label, the ct200 leftover's 55,286 MiB on GPU 0 among them; redacted, no host name
// is left; and explain, which has no metrics to give, refuses the format.
func TestPrometheusReplay(t *testing.T) {
	fx := filepath.Join(repoRoot(t), "fixtures")
	out, errOut, code := cli(t, nil, "--replay", fx, "--format", "prometheus")
	if code != exitFindings {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
	promtest.CheckMetrics(t, out)
	all := parseScrape(t, out)
	for _, host := range []string{"busy", "clean", "ct200", "driver-mismatch", "ghost"} {
		if s := find(all, "gputriage_probe_success", map[string]string{"host": host}); len(s) != 1 || s[0].value != 1 {
			t.Errorf("gputriage_probe_success{host=%q} = %v", host, s)
		}
	}
	if s := find(all, "gputriage_gpu_memory_leftover_bytes", map[string]string{"host": "ct200", "gpu": "0"}); len(s) != 1 || s[0].value != 55286<<20 {
		t.Errorf("ct200's leftover on GPU 0: %v", s)
	}
	if s := find(all, "gputriage_probe_duration_seconds", nil); len(s) != 0 {
		t.Errorf("a replay has no probe duration, got %v", s)
	}

	red, _, _ := cli(t, nil, "--replay", fx, "--format", "prometheus", "--redact")
	promtest.CheckMetrics(t, red)
	for _, name := range []string{"ct200", "ghost", "busy"} {
		if strings.Contains(red, `host="`+name) {
			t.Errorf("--redact left host %s", name)
		}
	}

	for _, tt := range []struct {
		args []string
		err  string
	}{
		{[]string{"explain", "--format", "prometheus", "CUDA out of memory"}, "explain writes text, markdown or json"},
		{[]string{"--replay", fx, "--format", "openmetrics"}, "--format must be text, markdown, json or prometheus"},
	} {
		if out, errOut, code := cli(t, nil, tt.args...); code != exitUsage || !strings.Contains(errOut, tt.err) || out != "" {
			t.Errorf("%q: exit %d, stderr %q, stdout %q", tt.args, code, errOut, out)
		}
	}
}
