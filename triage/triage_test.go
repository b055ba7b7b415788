package triage

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/simfleet"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/readiness"
	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/sshexec"
)

// TestReportView: every report, in every format, with and without --verbose, --redact and
// --tp, is the same from the snapshot view the sweep keeps (and a Markdown report from the
// beginning of the capture it keeps) as from the whole snapshot and capture.
func TestReportView(t *testing.T) {
	var whole []report.Host
	for _, name := range []string{"ct200", "clean", "ghost", "driver-mismatch", "busy", "v1/ct200"} {
		raw, err := os.ReadFile(filepath.Join("..", "fixtures", name+".capture"))
		if err != nil {
			t.Fatal(err)
		}
		whole = append(whole, diagnoseCapture(name, raw))
	}
	whole = append(whole, diagnoseCapture("crowded", simfleet.SyntheticCapture(300, 3000)))
	job := &readiness.Job{TP: 8, Engines: []string{readiness.EngineVLLM}}
	for _, tp := range []*readiness.Job{nil, job} {
		full := make([]report.Host, len(whole))
		kept := make([]report.Host, len(whole))
		for i, h := range whole {
			full[i], kept[i] = h, h
			// What a report shows of a crowded host is its retained result (diagnose.Retain
			// folds processes past its budget, and says so: TestHostBudget): the whole is that
			// result beside the whole snapshot and capture.
			full[i].Result.Findings = slices.Clone(h.Result.Findings)
			full[i].Result.Processes = slices.Clone(h.Result.Processes)
			diagnose.Retain(&full[i].Result)
			if tp != nil {
				r := readiness.Check(h.Snapshot, h.Result, *tp)
				full[i].Readiness = &r
			}
			(&Config{Job: tp, Keep: report.MarkdownCaptureBytes}).finish(&kept[i])
		}
		if kept[len(kept)-1].CaptureSize <= report.MarkdownCaptureBytes || len(kept[len(kept)-1].Capture) != report.MarkdownCaptureBytes {
			t.Fatalf("the crowded host's capture (%d bytes) does not test keeping a beginning", len(whole[len(whole)-1].Capture))
		}
		for _, o := range []report.Options{{}, {Verbose: true}, {Redact: true}, {Only: report.OnlyAll, Sort: report.SortSeverity}} {
			for fname, render := range map[string]func(io.Writer, []report.Host, report.Options) error{
				"text": report.Text, "markdown": report.Markdown, "json": report.JSON, "prometheus": report.Prometheus} {
				for _, hosts := range [][2][]report.Host{{full, kept}, {full[:1], kept[:1]}, {full[len(full)-1:], kept[len(kept)-1:]}} {
					var a, b bytes.Buffer
					if err := render(&a, hosts[0], o); err != nil {
						t.Fatal(err)
					}
					if err := render(&b, hosts[1], o); err != nil {
						t.Fatal(err)
					}
					if a.String() != b.String() {
						t.Errorf("%s %+v tp=%v, %d hosts: the report differs when rendered from what the sweep keeps:\n%s",
							fname, o, tp != nil, len(hosts[0]), firstDiff(a.String(), b.String()))
					}
				}
			}
		}
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n- %q\n+ %q", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d lines", len(al), len(bl))
}

// TestHeadCheck: what the sweep accepts as the beginning of a host's output, what it refuses
// at once, and when it waits for more.
func TestHeadCheck(t *testing.T) {
	const nonce = "0123456789abcdef0123456789abcdef"
	header := parse.CaptureHeader(nonce)
	check := headCheck(nonce)
	tests := []struct {
		name, head     string
		accept, refuse bool
	}{
		{"this run's header", header + "@@gputriage", true, false},
		{"a banner first", "Welcome!\n" + header, true, false},
		{"a header line not yet whole", header[:20], false, false},
		{"a preamble at the bound", strings.Repeat("motd\n", preambleMax/5) + header, true, false},
		{"a preamble past the bound", strings.Repeat("motd\n", preambleMax/5+1) + header, false, true},
		{"another run's capture", strings.ReplaceAll(header, nonce, strings.Repeat("f", 32)), false, true},
		{"garbage, not yet enough", strings.Repeat("\x1b", preambleMax), false, false},
		{"garbage past the bound", strings.Repeat("\x1b", preambleMax+maxHeaderLine+1), false, true},
		{"a first line that never ends", strings.Repeat("g", 1<<20), false, true},
	}
	for _, tt := range tests {
		ok, err := check([]byte(tt.head))
		if ok != tt.accept || (err != nil) != tt.refuse {
			t.Errorf("%s: accepted %v, refused %v (%v)", tt.name, ok, err != nil, err)
		}
	}
}

// TestWatchRoundBounded: a pool's round is parsed and diagnosed holding one of the sweep's
// diagnose slots, which it keeps until its user (watch's judge) is done with the round, so
// that however many hosts are watched at most that many diagnosed rounds are in flight; the
// round carries no raw capture (the judge reads the snapshot and result only).
func TestWatchRoundBounded(t *testing.T) {
	defer func(s chan struct{}) { diagnoseSlots = s }(diagnoseSlots)
	diagnoseSlots = make(chan struct{}, 1)
	p := &Pool{c: &Config{}, hosts: []Host{{Label: "limit"}}, nonce: simfleet.LimitNonce}
	r := &sshexec.Result{Stdout: simfleet.LimitCapture()}
	rounds := make(chan Round)
	release, done := make(chan bool), make(chan bool)
	go func() {
		p.round(0, r, true, func(got Round) { rounds <- got; <-release })
		close(done)
	}()
	got := <-rounds // the round's user has it: its slot is held until the user returns
	if len(diagnoseSlots) != 1 {
		t.Fatal("the round holds no diagnose slot while its user has it")
	}
	select {
	case diagnoseSlots <- struct{}{}:
		t.Fatal("a second diagnosis could start while a round's user has it")
	default:
	}
	close(release)
	<-done
	if len(diagnoseSlots) != 0 {
		t.Error("the slot is still held once the user is done with the round")
	}
	if got.Host.Err != nil || got.Host.Snapshot == nil || got.Host.Capture != nil || r.Stdout != nil || !got.Dialed {
		t.Errorf("round: err %v, snapshot %v, capture %d bytes, result's stdout %d bytes; want a diagnosis without its capture",
			got.Host.Err, got.Host.Snapshot != nil, len(got.Host.Capture), len(r.Stdout))
	}
}

// TestSudoProbeCommandQuoting runs the --sudo command line through a real sh, with a sudo
// that runs its command unprivileged, and an nvidia-smi in a directory whose name is shell
// syntax: root's PATH is secure_path plus that directory, verbatim, and nothing in the name runs.
func TestSudoProbeCommandQuoting(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, `smi $(touch pwned1) `+"`touch pwned2`"+` ;'"x`)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"nvidia-smi": "#!/bin/sh\necho smi-ran\n",
		"sudo":       "#!/bin/sh\n[ \"$1\" = -n ] && shift\nexec \"$@\"\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("sh", "-c", probeCommand(true))
	cmd.Dir = base
	cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin"}
	cmd.Stdin = strings.NewReader("printf '%s\\n' \"$PATH\"; nvidia-smi\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if want := sudoPath + ":" + dir + "\nsmi-ran\n"; string(out) != want {
		t.Errorf("root's probe saw\n%q, want\n%q", out, want)
	}
	for _, f := range []string{"pwned1", "pwned2"} {
		if _, err := os.Stat(filepath.Join(base, f)); err == nil {
			t.Errorf("the directory name ran as shell code (%s)", f)
		}
	}
}
