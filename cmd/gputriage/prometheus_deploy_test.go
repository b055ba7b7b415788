package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/promtest"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/report"
)

// contrib reads a file of contrib/prometheus.
func contrib(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "contrib", "prometheus", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPrometheusRules: the alerting rules pass `promtool check rules`, their unit tests pass
// `promtool test rules` (every alert is tested), and they use only metrics gputriage writes.
func TestPrometheusRules(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "contrib", "prometheus")
	for _, args := range [][]string{
		{"check", "rules", filepath.Join(dir, "gputriage.rules.yml")},
		{"test", "rules", filepath.Join(dir, "gputriage.rules.test.yml")},
	} {
		if out, err := promtest.Promtool(t, args...); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	rules, tests := contrib(t, "gputriage.rules.yml"), contrib(t, "gputriage.rules.test.yml")
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\S+)`).FindAllStringSubmatch(rules, -1)
	if len(alerts) < 3 {
		t.Fatalf("%d alerts in the rules", len(alerts))
	}
	for _, a := range alerts {
		if !regexp.MustCompile(`(?m)^\s*alertname: ` + a[1] + `$`).MatchString(tests) {
			t.Errorf("alert %s has no unit test", a[1])
		}
	}

	// Every metric family gputriage can write: a replayed fleet, and a failed host probed live.
	var b bytes.Buffer
	hosts := []report.Host{{Name: "down", Err: &report.HostError{Phase: "connect", Kind: "refused"}, ProbeDuration: time.Second}}
	fx, _, _ := cli(t, nil, "--replay", filepath.Join(repoRoot(t), "fixtures"), "--format", "prometheus")
	if err := report.Prometheus(&b, hosts, report.Options{}); err != nil {
		t.Fatal(err)
	}
	written := fx + b.String()
	for _, name := range regexp.MustCompile(`\bgputriage_[a-z_]+`).FindAllString(rules+tests, -1) {
		if !strings.Contains(written, "# TYPE "+name+" gauge\n") {
			t.Errorf("the rules use %s, which gputriage does not write", name)
		}
	}
}

// TestPrometheusDeployFiles: the systemd service and the cron line run the same command, and
// that command, run here as they would run it (fake nvidia-smi, the file in a directory of the
// test's), writes metrics promtool accepts, with an exit status the service counts as success,
// into the directory Debian's prometheus-node-exporter reads by default. docs/prometheus.md
// shows the files as they are.
func TestPrometheusDeployFiles(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the probe reads /proc: Linux only")
	}
	service, cron := contrib(t, "gputriage-textfile.service"), contrib(t, "gputriage.cron")
	exec1 := regexp.MustCompile(`(?m)^ExecStart=/usr/local/bin/gputriage (.*)$`).FindStringSubmatch(service)
	cronArgs := regexp.MustCompile(`(?m)^\* \* \* \* \* root flock -n \S+ /usr/local/bin/gputriage (.*)$`).FindStringSubmatch(cron)
	if exec1 == nil || cronArgs == nil || exec1[1] != cronArgs[1] {
		t.Fatalf("the service's ExecStart and the cron line differ:\n%v\n%v", exec1, cronArgs)
	}
	if !strings.Contains(contrib(t, "gputriage-textfile.timer"), "\nOnUnitActiveSec=1min\n") {
		t.Error("the timer does not run the service every minute")
	}
	args := strings.Fields(exec1[1])
	i := slices.Index(args, "--output")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("no --output in %q", args)
	}
	textfileDir := filepath.Dir(args[i+1])
	if !strings.Contains(service, "\nReadWritePaths="+textfileDir+"\n") {
		t.Errorf("the service cannot write %s", textfileDir)
	}
	if bin, err := exec.LookPath("prometheus-node-exporter"); err == nil {
		help, _ := exec.Command(bin, "--help").CombinedOutput()
		if !strings.Contains(string(help), `--collector.textfile.directory="`+textfileDir+`"`) {
			t.Errorf("Debian's node exporter does not read %s by default:\n%s", textfileDir, help)
		}
	}

	smiDir := t.TempDir()
	if err := scenario.WriteFakeSMI(smiDir, *cleanSMI(2)); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", smiDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	file := filepath.Join(t.TempDir(), "gputriage.prom")
	args[i+1] = file
	out, errOut, code := cli(t, nil, args...)
	success := regexp.MustCompile(`(?m)^SuccessExitStatus=(.*)$`).FindStringSubmatch(service)
	if out != "" || errOut != "" || (code != exitOK && (success == nil || !slices.Contains(strings.Fields(success[1]), strconv.Itoa(code)))) {
		t.Errorf("%q: exit %d (the service accepts 0 and %v), stdout %q, stderr %q", args, code, success, out, errOut)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	promtest.CheckMetrics(t, string(b))

	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "prometheus.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gputriage-textfile.service", "gputriage-textfile.timer", "gputriage.cron", "gputriage.rules.yml"} {
		if !strings.Contains(string(doc), "```\n"+contrib(t, name)+"```\n") && !strings.Contains(string(doc), "```yaml\n"+contrib(t, name)+"```\n") &&
			!strings.Contains(string(doc), "```ini\n"+contrib(t, name)+"```\n") {
			t.Errorf("docs/prometheus.md does not show contrib/prometheus/%s as it is", name)
		}
	}
}
