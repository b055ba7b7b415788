package report

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/parse"
)

// leftoverHost is ct200's incident on another host: the same leftover server with the same
// numbers, so its findings are identical to every other leftoverHost's.
func leftoverHost(name string, uuid byte) Host {
	h := incidentHost()
	h.Name = name
	h.Snapshot.Host.Hostname = name + ".lab.example"
	for i := range h.Snapshot.GPUs {
		h.Snapshot.GPUs[i].UUID = "GPU-" + string(rune(uuid)) + h.Snapshot.GPUs[i].UUID[5:]
	}
	h.Capture = []byte(strings.ReplaceAll(string(h.Capture), "ct200", name))
	return h
}

// driverMismatchHost has the fleet-wide problem of an unattended driver upgrade: every such
// host has the same finding.
func driverMismatchHost(name string, probed time.Time) Host {
	msg := "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 570.133"
	s := &parse.Snapshot{
		Host: parse.HostFacts{ProbeVersion: "1", Hostname: name, Kernel: "6.8.0-60-generic", Time: ptr(probed),
			UptimeSeconds: ptr(float64(probed.Second()) * 1000), User: "root", UID: ptr(0)},
		SMI: parse.SMIResult{Failure: &parse.SMIFailure{Kind: parse.SMIVersionMismatch, ExitCode: ptr(18), Message: msg}},
		Shm: parse.Shm{SizeBytes: ptr(int64(1 << 30)), UsedBytes: ptr(int64(probed.Second())), Listed: true},
	}
	return Host{
		Name:     name,
		Snapshot: s,
		Result: diagnose.Result{Findings: []diagnose.Finding{{
			Code: diagnose.CodeSMIFailed, Severity: diagnose.Critical, Kind: string(parse.SMIVersionMismatch),
			Title:       "NVIDIA driver/library version mismatch",
			Explanation: "The NVIDIA libraries on disk are a different version from the kernel module still loaded.",
			Evidence:    []string{"nvidia-smi: Failed to initialize NVML: Driver/library version mismatch", "exit status 18"},
			Fix:         []string{"cat /proc/driver/nvidia/version", "sudo reboot"},
		}}},
	}
}

func cleanFleetHost(name string) Host {
	h := cleanHost()
	h.Name = name
	h.Snapshot.Host.Hostname = name
	h.Result.Findings[0].Fix = []string{"gputriage --sudo HOST"}
	return h
}

// fleetHosts is a small sweep with every kind of outcome: a clean host, two identical
// leftovers (gpu03, gpu07), two hosts with the same driver mismatch (gpu05, gpu06), a changed
// host key and two handshake timeouts.
func fleetHosts() []Host {
	return []Host{
		cleanFleetHost("gpu01"),
		leftoverHost("gpu03", '3'),
		driverMismatchHost("gpu05", probeTime),
		driverMismatchHost("gpu06", probeTime.Add(2*time.Second)),
		leftoverHost("gpu07", '7'),
		{Name: "gpu12", Err: &HostError{Phase: "hostkey", Kind: "host-key-changed",
			Message: "host key for gpu12 changed: got SHA256:Xr3XyEfo9D3sQ0bJ2m0yq5Jc4yq3iQ6p7a8b9c0d1e2, known_hosts has ssh-ed25519 at /home/ops/.ssh/known_hosts:12"}},
		{Name: "gpu20", Err: &HostError{Phase: "handshake", Kind: "timeout", Message: "ssh handshake with 10.0.0.20:22 did not finish within 60s"}},
		{Name: "gpu21", Err: &HostError{Phase: "handshake", Kind: "timeout", Message: "ssh handshake with 10.0.0.21:22 did not finish within 60s"}},
	}
}

func TestFleetGolden(t *testing.T) {
	plain := Options{Width: 100, Now: reportTime}
	tests := []struct {
		file string
		f    renderFunc
		o    Options
	}{
		{"fleet.txt", Text, plain},
		{"fleet.md", Markdown, plain},
		{"fleet.json", JSON, plain},
		{"fleet-severity-all.txt", Text, Options{Width: 100, Sort: SortSeverity, Only: OnlyAll}},
		{"fleet-redacted.md", Markdown, Options{Width: 100, Redact: true}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			checkGolden(t, tt.file, render(t, tt.f, fleetHosts(), tt.o))
		})
	}
}

func checkGolden(t *testing.T, file, got string) {
	t.Helper()
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./report -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test ./report -update rewrites it); got:\n%s", path, got)
	}
}

func TestFleetSummary(t *testing.T) {
	out := render(t, Text, fleetHosts(), Options{Width: 100})
	for _, want := range []string{
		"summary: 8 hosts, 1 ok, 4 with problems (2 critical, 2 errors, 2 warnings), 3 failed",
		"CRITICAL  smi-failed on gpu[05-06]",
		"ERROR     leftover-process on gpu[03,07]",
		"WARNING   shm-deleted-mapped on gpu[03,07]",
		"FAILED    host key changed: gpu12",
		"FAILED    timeout (handshake): gpu[20-21]",
		"not shown (--only findings): 1 host without problems: gpu01",
		// The two driver-mismatch hosts share one block, probed two seconds apart.
		"gpu[05-06]  1 critical",
		"probed 2025-06-01T12:00:00Z to 2025-06-01T12:00:02Z",
		// The leftover is explained once, on gpu03, and referred to on gpu07.
		"on: gpu[03,07]",
		"the same finding as on gpu03, explained above",
		// Its fix is not repeated either.
		"what to do: as on gpu03, above",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("fleet text lacks %q:\n%s", want, out)
		}
	}
	// With -v each shared finding's detail is written once, on its first host.
	out = render(t, Text, fleetHosts(), Options{Width: 100, Verbose: true, Only: OnlyFindings})
	if n := strings.Count(out, "PID 20629 holds 55,286 MiB"); n != 1 {
		t.Errorf("the shared leftover is explained %d times, want once", n)
	}
	if n := strings.Count(out, "The NVIDIA libraries on disk"); n != 1 {
		t.Errorf("the shared driver mismatch is explained %d times, want once", n)
	}
	if strings.Contains(out, "gpu01  OK") {
		t.Error("the clean host is shown without --only all")
	}
}

// hostOrder is the hosts whose details a text report shows, in order.
func hostOrder(out string) []string {
	re := regexp.MustCompile(`(?m)^(gpu\S*)  `)
	var names []string
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		names = append(names, m[1])
	}
	return names
}

func TestFleetOnlyAndSort(t *testing.T) {
	tests := []struct {
		o    Options
		want string
	}{
		{Options{}, "gpu03 gpu[05-06] gpu07 gpu12 gpu20 gpu21"},
		{Options{Only: OnlyFindings}, "gpu03 gpu[05-06] gpu07 gpu12 gpu20 gpu21"},
		{Options{Verbose: true}, "gpu01 gpu03 gpu[05-06] gpu07 gpu12 gpu20 gpu21"},
		{Options{Only: OnlyAll}, "gpu01 gpu03 gpu[05-06] gpu07 gpu12 gpu20 gpu21"},
		{Options{Only: OnlyFailed}, "gpu12 gpu20 gpu21"},
		{Options{Only: OnlyFailed, Verbose: true}, "gpu12 gpu20 gpu21"},
		{Options{Sort: SortHost}, "gpu03 gpu[05-06] gpu07 gpu12 gpu20 gpu21"},
		// Worst first: critical, error, failed, then info only.
		{Options{Sort: SortSeverity, Only: OnlyAll}, "gpu[05-06] gpu03 gpu07 gpu12 gpu20 gpu21 gpu01"},
	}
	for _, tt := range tests {
		got := strings.Join(hostOrder(render(t, Text, fleetHosts(), tt.o)), " ")
		if got != tt.want {
			t.Errorf("only=%q sort=%q verbose=%v: hosts %q, want %q", tt.o.Only, tt.o.Sort, tt.o.Verbose, got, tt.want)
		}
	}
	// Sorting by severity moves the reference: the first host shown explains a shared finding.
	out := render(t, Text, []Host{leftoverHost("gpu03", '3'), driverMismatchHost("gpu05", probeTime), leftoverHost("gpu07", '7')},
		Options{Sort: SortSeverity})
	if !strings.Contains(out, "the same finding as on gpu03") {
		t.Errorf("severity order:\n%s", out)
	}
	// One host keeps today's layout: no fleet summary, shown whatever its state.
	one := render(t, Text, []Host{cleanFleetHost("gpu01")}, Options{})
	if strings.Contains(one, "not shown") || !strings.Contains(one, "gpu01  OK") || strings.Count(one, "summary:") != 1 {
		t.Errorf("single host:\n%s", one)
	}
	// Unknown values are the caller's mistake.
	for _, o := range []Options{{Only: "some"}, {Sort: "name"}} {
		for _, f := range []renderFunc{Text, Markdown, JSON} {
			if err := f(new(strings.Builder), fleetHosts(), o); err == nil {
				t.Errorf("%+v: no error", o)
			}
		}
	}
}

func TestFleetJSONSummary(t *testing.T) {
	var doc struct {
		Redacted bool `json:"redacted"`
		Summary  struct {
			Hosts, OK, WithFindings, Failed int
			ByCode                          []struct {
				Code, Severity, Hosts string
				HostList              []string `json:"host_list"`
			} `json:"by_code"`
			Failures []struct {
				Phase, Kind, Hosts string
				HostList           []string `json:"host_list"`
			}
		}
		Hosts []struct{ Host string }
	}
	decode := func(o Options) {
		t.Helper()
		if err := json.Unmarshal([]byte(render(t, JSON, fleetHosts(), o)), &doc); err != nil {
			t.Fatal(err)
		}
	}
	decode(Options{})
	s := doc.Summary
	// encoding/json matches with_findings to WithFindings only by its tag; read it by hand.
	var raw map[string]map[string]any
	_ = json.Unmarshal([]byte(render(t, JSON, fleetHosts(), Options{})), &raw)
	if s.Hosts != 8 || s.OK != 1 || raw["summary"]["with_findings"] != 4.0 || s.Failed != 3 {
		t.Errorf("counts: %+v %v", s, raw["summary"]["with_findings"])
	}
	if len(s.ByCode) != 3 || s.ByCode[0].Code != "smi-failed" || s.ByCode[0].Severity != "critical" ||
		s.ByCode[0].Hosts != "gpu[05-06]" || strings.Join(s.ByCode[1].HostList, ",") != "gpu03,gpu07" {
		t.Errorf("by_code: %+v", s.ByCode)
	}
	if len(s.Failures) != 2 || s.Failures[1].Phase != "handshake" || s.Failures[1].Kind != "timeout" ||
		s.Failures[1].Hosts != "gpu[20-21]" || len(s.Failures[1].HostList) != 2 {
		t.Errorf("failures: %+v", s.Failures)
	}
	// JSON lists every host unless asked otherwise: scripts see the whole sweep.
	if len(doc.Hosts) != 8 || doc.Redacted {
		t.Errorf("%d hosts, redacted %v", len(doc.Hosts), doc.Redacted)
	}
	decode(Options{Only: OnlyFailed})
	if len(doc.Hosts) != 3 || doc.Hosts[0].Host != "gpu12" || doc.Summary.Hosts != 8 {
		t.Errorf("--only failed: %+v, summary of %d", doc.Hosts, doc.Summary.Hosts)
	}
	decode(Options{Sort: SortSeverity})
	if len(doc.Hosts) != 8 || doc.Hosts[0].Host != "gpu05" || doc.Hosts[7].Host != "gpu01" {
		t.Errorf("--sort severity: %+v", doc.Hosts)
	}
}

func TestFailureLabel(t *testing.T) {
	for _, tt := range []struct{ phase, kind, want string }{
		{"hostkey", "host-key-changed", "host key changed"},
		{"handshake", "timeout", "timeout (handshake)"},
		{"connect", "refused", "connection refused"},
		{"probe", "exit", "exit (probe)"},
		{"resolve", "name-lookup", "name lookup failed"},
	} {
		if got := failureLabel(tt.phase, tt.kind); got != tt.want {
			t.Errorf("failureLabel(%q, %q) = %q, want %q", tt.phase, tt.kind, got, tt.want)
		}
	}
}

func TestMarkdownCaptureBudgetShared(t *testing.T) {
	var hosts []Host
	for _, n := range []string{"gpu03", "gpu07", "gpu08"} {
		h := leftoverHost(n, n[4])
		h.Result.Findings[0].Title += " " + n                                          // not shared, so not folded either
		h.Capture = []byte(strings.Repeat("x123456789abcdef0123456789abcdef\n", 1000)) // 33,000 bytes
		hosts = append(hosts, h)
	}
	md := render(t, Markdown, hosts, Options{})
	if strings.Count(md, "<details><summary>raw capture") != 2 || !strings.Contains(md, "the first 16,") ||
		!strings.Contains(md, "Raw capture (33,000 bytes) left out: the report already holds 4") {
		t.Errorf("three 33 KB captures under a 48 KiB budget:\n%s", md)
	}
}

// TestFleetMarkdownRendersWithCmarkGFM renders a fleet ticket, with a failed host and a hostile
// one, through GitHub's CommonMark implementation and checks its structure.
func TestFleetMarkdownRendersWithCmarkGFM(t *testing.T) {
	html := cmarkGFM(t, render(t, Markdown, append(fleetHosts(), hostileHost()), Options{Now: reportTime}))
	for _, want := range []string{
		"<h1>gputriage: 9 hosts, 1 ok, 5 with problems",
		"<h2>Details</h2>",
		"<h3>gpu[05-06]</h3>",
		"<h3>gpu12</h3>",
		"<td>failed</td>\n<td>host key changed</td>\n<td><code>gpu12</code></td>",
		"<td>failed</td>\n<td>timeout (handshake)</td>\n<td><code>gpu[20-21]</code></td>",
		// A hostile name makes the host list plain escaped text; its | does not split the cell.
		"<td><code>leftover-process</code></td>\n<td>gpu[03,07],evil\\x1b[31m|host\\u202e</td>\n<td align=\"right\">3</td>",
		"<p>On <code>gpu[03,07]</code>.</p>",
		"<p>The same finding as on <code>gpu03</code>, explained above.</p>",
		`<pre><code class="language-sh">sudo systemctl stop sglang-qwen.service` + "\nsudo kill 20629\n</code></pre>",
		`<pre><code class="language-sh">cat /proc/driver/nvidia/version` + "\nsudo reboot\n</code></pre>",
		"<strong>FAILED</strong> (handshake: timeout): ssh handshake with 10.0.0.20:22",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if n := strings.Count(html, "<h1>"); n != 1 {
		t.Errorf("%d h1 headings, want the title only", n)
	}
	// The summary table, a GPU and a process table for gpu03, gpu07 and the hostile host, and
	// the table of each GPU (collapsed) where a GPU table folds identical GPUs.
	if n := strings.Count(html, "<table>"); n != 9 {
		t.Errorf("%d tables, want 9", n)
	}
	// The only HTML is ours: details blocks for the captures; nothing from a remote string.
	tags := regexp.MustCompile(`<(/?)([a-z0-9]+)`).FindAllStringSubmatch(html, -1)
	allowed := map[string]bool{"h1": true, "h2": true, "h3": true, "h4": true, "p": true, "table": true, "thead": true,
		"tbody": true, "tr": true, "th": true, "td": true, "code": true, "pre": true, "ul": true, "li": true,
		"strong": true, "details": true, "summary": true}
	for _, tag := range tags {
		if !allowed[tag[2]] {
			t.Errorf("unexpected HTML element <%s%s>", tag[1], tag[2])
		}
	}
	if n := strings.Count(html, "<details><summary>raw capture"); n != 3 { // gpu03, gpu07 and the hostile host's captures
		t.Errorf("%d raw capture <details>, want 3", n)
	}
}

func cmarkGFM(t *testing.T, md string) string {
	t.Helper()
	bin := testenv.Need(t, "GFM renderer", "apt-get install cmark-gfm", "cmark-gfm")
	cmd := exec.Command(bin, "--unsafe", "-e", "table", "-e", "strikethrough", "-e", "autolink")
	cmd.Stdin = strings.NewReader(md)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
