package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// cli runs gputriage in-process as a user would, with the given environment.
func cli(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string { return env[k] }
	notTerm := func(io.Writer) (bool, int) { return false, 0 }
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb, getenv, notTerm)
	return out.String(), errb.String(), code
}

// cliTerminal is cli with stdout a terminal of width columns.
func cliTerminal(t *testing.T, width int, env map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string { return env[k] }
	term := func(w io.Writer) (bool, int) { return w == &out, width }
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb, getenv, term)
	return out.String(), errb.String(), code
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// v1/ct200 is the ct200 capture recorded by the version 1 probe: it must replay exactly as it
// always has.
var fixtureNames = []string{"ct200", "clean", "ghost", "driver-mismatch", "busy", "v1/ct200"}

// TestGolden replays every fixture in every format and compares with testdata/golden: text
// piped (no COLUMNS: 80 columns) in NAME.txt, and with COLUMNS=120 in NAME.120.txt.
// Regenerate with: go test ./cmd/gputriage -run TestGolden -update (and review the diff).
func TestGolden(t *testing.T) {
	root := repoRoot(t)
	formats := []struct {
		format, ext string
		env         map[string]string
	}{
		{"text", "txt", nil}, {"text", "120.txt", map[string]string{"COLUMNS": "120"}},
		{"markdown", "md", nil}, {"json", "json", nil},
	}
	for _, name := range fixtureNames {
		for _, f := range formats {
			t.Run(name+"."+f.ext, func(t *testing.T) {
				out, errOut, code := cli(t, f.env, "--replay", filepath.Join(root, "fixtures", name+".capture"), "--format", f.format)
				if errOut != "" {
					t.Errorf("stderr: %s", errOut)
				}
				if code != exitOK && code != exitFindings {
					t.Errorf("exit status %d", code)
				}
				checkGolden(t, filepath.Join("testdata", "golden", name+"."+f.ext), out)
			})
		}
	}
}

// TestGoldenTerminal: on a terminal the report is as wide as the terminal, whatever COLUMNS
// says: a terminal of 80 and of 120 columns get the piped goldens of 80 and 120 columns.
func TestGoldenTerminal(t *testing.T) {
	root := repoRoot(t)
	for _, name := range fixtureNames {
		for _, tc := range []struct {
			width  int
			golden string
		}{{80, name + ".txt"}, {120, name + ".120.txt"}} {
			t.Run(fmt.Sprintf("%s/%d", name, tc.width), func(t *testing.T) {
				want, err := os.ReadFile(filepath.Join("testdata", "golden", tc.golden))
				if err != nil {
					t.Fatal(err)
				}
				env := map[string]string{"COLUMNS": "57"} // a stale COLUMNS loses to the terminal
				out, _, _ := cliTerminal(t, tc.width, env, "--replay", filepath.Join(root, "fixtures", name+".capture"), "--color", "never")
				if out != string(want) {
					t.Errorf("a %d-column terminal's report differs from %s:\n%s", tc.width, tc.golden, out)
				}
			})
		}
	}
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update and review the diff)\n--- got ---\n%s", path, got)
	}
}

// TestIncident is the README's first command: it must name GPU 0, PID 20629, its 55,286 MiB,
// the SGLang check with the host's numbers and its verdict, the deleted /dev/shm mapping and
// the fix, and exit 1.
func TestIncident(t *testing.T) {
	out, _, code := cli(t, nil, "--replay", filepath.Join(repoRoot(t), "fixtures", "ct200.capture"))
	if code != exitFindings {
		t.Errorf("exit status %d, want %d", code, exitFindings)
	}
	for _, want := range []string{
		"ct200", "GPU 0", "20629", "55,286 MiB", "41,958", "97,252", "87,527",
		"memory-imbalance", "leftover-process", "shm-deleted-mapped",
		"/dev/shm/Qwen3.6-27B", "sglang.launch_server", "kill 20629",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", out)
	}
}

func TestExitStatus(t *testing.T) {
	root := repoRoot(t)
	fx := func(n string) string { return filepath.Join(root, "fixtures", n+".capture") }
	tests := []struct {
		name string
		args []string
		want int
		err  string // in stderr
	}{
		{"clean host", []string{"--replay", fx("clean")}, exitOK, ""},
		{"busy healthy host", []string{"--replay", fx("busy")}, exitOK, ""},
		{"incident", []string{"--replay", fx("ct200")}, exitFindings, ""},
		{"driver failure", []string{"--replay", fx("driver-mismatch")}, exitFindings, ""},
		{"directory of captures", []string{"--replay", filepath.Join(root, "fixtures")}, exitFindings, ""},
		{"no source", nil, exitUsage, "nothing to triage"},
		{"bad format", []string{"--replay", fx("clean"), "--format", "yaml"}, exitUsage, "--format must be"},
		{"bad color", []string{"--replay", fx("clean"), "--color", "sometimes"}, exitUsage, "--color must be"},
		{"unknown flag", []string{"--frobnicate"}, exitUsage, "unknown flag: --frobnicate"},
		{"missing capture", []string{"--replay", filepath.Join(root, "nope.capture")}, exitUsage, "no such file"},
		{"two sources", []string{"--replay", fx("clean"), "--local"}, exitUsage, "only one of"},
		{"help", []string{"--help"}, exitOK, ""},
		{"version", []string{"--version"}, exitOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := cli(t, nil, tt.args...)
			if code != tt.want {
				t.Errorf("exit status %d, want %d (stderr %q)", code, tt.want, errOut)
			}
			if !strings.Contains(errOut, tt.err) {
				t.Errorf("stderr %q lacks %q", errOut, tt.err)
			}
			if strings.Contains(errOut, "goroutine ") {
				t.Errorf("stack trace on stderr: %s", errOut)
			}
		})
	}
}

func TestHelpDocumentsFlagsAndExitStatus(t *testing.T) {
	out, _, _ := cli(t, nil, "--help")
	for _, want := range []string{"--format", "--color", "--replay", "--local", "--timeout", "--verbose", "--version",
		"Exit status", "0 ", "1 ", "2 ", "3 ", "4 "} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

func TestColor(t *testing.T) {
	fx := filepath.Join(repoRoot(t), "fixtures", "ct200.capture")
	out, _, _ := cli(t, nil, "--replay", fx, "--color", "always")
	if !strings.Contains(out, "\x1b[") {
		t.Error("--color always wrote no escape sequence")
	}
	for _, args := range [][]string{{"--color", "never"}, {"--color", "auto"}, {"--format", "markdown", "--color", "always"}} {
		out, _, _ := cli(t, nil, append([]string{"--replay", fx}, args...)...)
		if strings.Contains(out, "\x1b") {
			t.Errorf("%v: ESC in output", args)
		}
	}
	out, _, _ = cli(t, map[string]string{"NO_COLOR": "1"}, "--replay", fx)
	if strings.Contains(out, "\x1b") {
		t.Error("NO_COLOR: ESC in output")
	}
}

// TestLocal is the second promise of the README: on a machine whose nvidia-smi names the PID
// of a real process that maps a deleted /dev/shm file, --local shows that process's real argv,
// user, age and mapping, and calls it a leftover.
func TestLocal(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the probe reads /proc: Linux only")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	shmDir := "/dev/shm/gputriage-test-" + strconv.Itoa(os.Getpid())
	p, err := scenario.Start(scenario.Server{
		Module: "sglang.launch_server",
		// A hostile served-model-name: terminal title and color sequences in the argv.
		Args:   []string{"--model-path", shmDir, "--tp-size", "1", "--served-model-name", hostileName},
		ShmDir: shmDir, ShmFiles: 3, ShmBytes: 2 << 20, Delete: true, Orphan: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	smiDir := t.TempDir()
	gpus := []scenario.GPU{
		{Index: 0, UUID: "GPU-aaaaaaaa-0000-0000-0000-000000000000", Name: "NVIDIA H100 80GB HBM3", TotalMiB: 81559, UsedMiB: 40000, ReservedMiB: 532, Driver: "550.90.07"},
		{Index: 1, UUID: "GPU-aaaaaaaa-0000-0000-0000-000000000001", Name: "NVIDIA H100 80GB HBM3", TotalMiB: 81559, UsedMiB: 0, ReservedMiB: 532, Driver: "550.90.07"},
	}
	if err := scenario.WriteFakeSMI(smiDir, scenario.SMI{GPUs: gpus,
		Apps: []scenario.App{{PID: p.PID, GPUUUID: gpus[0].UUID, UsedMiB: 39990, Name: "python3"}}}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", smiDir+string(os.PathListSeparator)+os.Getenv("PATH"))

	out, errOut, code := cli(t, nil, "--local", "--format", "json")
	if code != exitFindings {
		t.Errorf("exit status %d, want %d; stderr %s", code, exitFindings, errOut)
	}
	var doc struct {
		Schema string `json:"schema"`
		Hosts  []struct {
			OK        bool `json:"ok"`
			Processes []struct {
				PID     int               `json:"pid"`
				User    string            `json:"user"`
				Argv    []string          `json:"argv"`
				Elapsed *float64          `json:"elapsed_seconds"`
				GPUMem  map[string]int64  `json:"gpu_memory_mib"`
				Shm     []json.RawMessage `json:"shm"`
			} `json:"processes"`
			Findings []struct {
				Code string `json:"code"`
				PIDs []int  `json:"pids"`
			} `json:"findings"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.Schema != "gputriage/v1" || len(doc.Hosts) != 1 || !doc.Hosts[0].OK {
		t.Fatalf("unexpected document:\n%s", out)
	}
	h := doc.Hosts[0]
	found := false
	for _, pr := range h.Processes {
		if pr.PID != p.PID {
			continue
		}
		found = true
		wantArgv := []string{"python3", "-m", "sglang.launch_server", "--model-path", shmDir, "--tp-size", "1", "--served-model-name", hostileName}
		// argv[0] is the interpreter as exec'd: "python3" or the full path a version manager's
		// shim re-executes.
		if len(pr.Argv) != len(wantArgv) || !strings.HasSuffix(pr.Argv[0], "python3") ||
			strings.Join(pr.Argv[1:], "\x00") != strings.Join(wantArgv[1:], "\x00") {
			t.Errorf("argv = %q, want %q", pr.Argv, wantArgv)
		}
		if pr.User != currentUser(t) {
			t.Errorf("user = %q, want %q", pr.User, currentUser(t))
		}
		if pr.Elapsed == nil || *pr.Elapsed < 0 || *pr.Elapsed > 600 {
			t.Errorf("elapsed_seconds = %v", pr.Elapsed)
		}
		if pr.GPUMem["0"] != 39990 {
			t.Errorf("gpu_memory_mib = %v", pr.GPUMem)
		}
		if len(pr.Shm) != 3 {
			t.Errorf("shm = %s, want the 3 deleted files", pr.Shm)
		}
	}
	if !found {
		t.Fatalf("PID %d not in processes:\n%s", p.PID, out)
	}
	codes := map[string]bool{}
	for _, f := range h.Findings {
		for _, pid := range f.PIDs {
			if pid == p.PID {
				codes[f.Code] = true
			}
		}
	}
	if !codes["leftover-process"] && !codes["shm-deleted-mapped"] {
		t.Errorf("no leftover-process or shm-deleted-mapped finding for PID %d:\n%s", p.PID, out)
	}

	for _, format := range []string{"text", "markdown"} {
		text, _, _ := cli(t, nil, "--local", "--color", "never", "--format", format)
		for _, want := range []string{strconv.Itoa(p.PID), "sglang.launch", shmDir} {
			if !strings.Contains(text, want) {
				t.Errorf("%s report lacks %q:\n%s", format, want, text)
			}
		}
		if strings.ContainsAny(text, "\x1b\x07") {
			t.Errorf("%s report carries the argv's escape sequences raw:\n%q", format, text)
		}
	}
}

const hostileName = "\x1b]0;pwned\x07qwen\x1b[31m\u202eevil"

func currentUser(t *testing.T) string {
	out, err := exec.Command("id", "-un").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestLocalHungDriver: a wedged nvidia-smi is cut at its share of --timeout and reported as an
// smi-failed timeout, while the host itself is still triaged within its deadline.
func TestLocalHungDriver(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the probe reads /proc: Linux only")
	}
	smiDir := t.TempDir()
	if err := scenario.WriteFakeSMI(smiDir, scenario.SMI{Hang: true}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", smiDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	// 6 s on a quiet machine: the rest of the probe, a scan of this whole machine, must fit
	// in what the hung nvidia-smi leaves, and takes longer the more loaded the machine is.
	timeout := fmt.Sprintf("%ds", int(testenv.Scale(6*time.Second).Seconds()))
	out, errOut, code := cli(t, nil, "--local", "--timeout", timeout, "--format", "json")
	if code != exitFindings {
		t.Fatalf("exit status %d, want %d; stderr %s\n%s", code, exitFindings, errOut, out)
	}
	var doc struct {
		Hosts []struct {
			OK       bool `json:"ok"`
			Findings []struct {
				Code string `json:"code"`
				Kind string `json:"kind"`
			} `json:"findings"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Hosts) != 1 || !doc.Hosts[0].OK {
		t.Fatalf("host not triaged:\n%s", out)
	}
	for _, f := range doc.Hosts[0].Findings {
		if f.Code == "smi-failed" && f.Kind == "timeout" {
			return
		}
	}
	t.Errorf("no smi-failed timeout finding:\n%s", out)
}

// Output that is not a capture (a login banner, a shell that ignored the script) means the
// probe never ran: in a saved sweep (a directory) the host is reported failed, not triaged
// with nothing found; a lone file that is not a capture is a usage error (exit 2) that names
// it, as the README says.
func TestNotACapture(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "gpu01.capture")
	if err := os.WriteFile(p, []byte("Welcome to gpu01!\n\x1b[31mlast login\x00\xff\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code := cli(t, nil, "--replay", dir)
	if code != exitHostsFailed || !strings.Contains(out, "FAILED (probe: bad-output)") || strings.Contains(out, "\x1b") {
		t.Errorf("directory: exit %d:\n%q", code, out)
	}
	for _, args := range [][]string{{"--replay", p}, {"--replay", p, "--format", "json"}, {"--replay", filepath.Join(repoRoot(t), "README.md")}} {
		out, errOut, code := cli(t, nil, args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, "--replay "+args[1]+": ") ||
			!strings.Contains(errOut, "not a gputriage capture") || strings.Contains(errOut, "\x1b") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}
