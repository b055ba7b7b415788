package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestReportWidth: the text report wraps to the terminal's width when stdout is a terminal,
// else to COLUMNS when it holds a sensible number, else to 80 (a pipe, a file).
func TestReportWidth(t *testing.T) {
	tests := []struct {
		name    string
		tty     bool
		term    int
		columns string
		want    int
	}{
		{"terminal", true, 100, "", 100},
		{"terminal beats COLUMNS", true, 100, "132", 100},
		{"terminal of unknown size", true, 0, "132", 132},
		{"pipe", false, 0, "", 80},
		{"pipe with COLUMNS", false, 0, "120", 120},
		{"COLUMNS not a number", false, 0, "wide", 80},
		{"COLUMNS too small", false, 0, "5", 80},
		{"COLUMNS absurd", false, 0, "100000", 80},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &env{getenv: func(k string) string {
				if k == "COLUMNS" {
					return tt.columns
				}
				return ""
			}}
			if got := reportWidth(e, tt.tty, tt.term); got != tt.want {
				t.Errorf("width %d, want %d", got, tt.want)
			}
		})
	}
}

// widest is the widest line of a text report, in runes (the reports here are plain).
func widest(out string) int {
	w := 0
	for _, l := range strings.Split(out, "\n") {
		w = max(w, utf8.RuneCountInString(l))
	}
	return w
}

// TestReportWidthEndToEnd: the widths reach the report, and --output FILE gets COLUMNS's.
func TestReportWidthEndToEnd(t *testing.T) {
	fx := filepath.Join(repoRoot(t), "fixtures", "ct200.capture")
	piped, _, _ := cli(t, nil, "--replay", fx, "-v")
	wide, _, _ := cli(t, map[string]string{"COLUMNS": "120"}, "--replay", fx, "-v")
	if w := widest(piped); w > 80 || w < 70 {
		t.Errorf("piped: widest line %d, want 80 at most and near it", w)
	}
	if w := widest(wide); w > 120 || w <= 100 {
		t.Errorf("COLUMNS=120: widest line %d, want over 100 and 120 at most", w)
	}
	file := filepath.Join(t.TempDir(), "r.txt")
	cli(t, map[string]string{"COLUMNS": "120"}, "--replay", fx, "-v", "--output", file)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != wide {
		t.Errorf("--output with COLUMNS=120 differs from stdout with it:\n%s", b)
	}
}

// TestIncidentOneScreen is the bar: on a 100-column terminal, without -v, the ct200
// report fits in 40 lines (37 since the fixtures were re-recorded without a probe note, with
// issue 19 item 6's figures and rounding line) and still names the PID, the GPU, its MiB,
// SGLang's numbers, the deleted /dev/shm files and the command that fixes it.
func TestIncidentOneScreen(t *testing.T) {
	fx := filepath.Join(repoRoot(t), "fixtures", "ct200.capture")
	out, _, code := cliTerminal(t, 100, nil, "--replay", fx, "--color", "never")
	if code != exitFindings {
		t.Errorf("exit status %d", code)
	}
	if n := strings.Count(out, "\n"); n > 40 {
		t.Errorf("%d lines, want 40 at most", n)
	}
	for _, want := range []string{
		"PID 20629", "GPU 0", "55,286 MiB", "41,958", "97,252", "87,527",
		"/dev/shm/Qwen3.6-27B/model-000{01..12}-of-00012.safetensors", "48 MiB", "\n       kill 20629\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", out)
	}
}

// TestCommandsWhole: however narrow the report, every command of "what to do" is on a line of
// its own, whole, and carries no comment: its note is prose before it.
func TestCommandsWhole(t *testing.T) {
	root := repoRoot(t)
	for _, tc := range []struct {
		fixture string
		cmds    []string
		notes   []string
	}{
		{"ct200", []string{"kill 20629", "sleep 30; kill -0 20629 2>/dev/null && kill -9 20629",
			"nvidia-smi --query-gpu=index,memory.used,memory.free --format=csv"}, nil},
		{"driver-mismatch", []string{"ls /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.* /usr/lib64/libnvidia-ml.so.* 2>/dev/null",
			"systemctl stop nvidia-persistenced; rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia"},
			[]string{"the libraries:"}},
		{"ghost", []string{"nvidia-smi --gpu-reset -i 2"}, []string{"only once nothing uses GPU 2; a reboot also clears it:"}},
	} {
		for _, cols := range []string{"20", "40", "80"} {
			out, _, _ := cli(t, map[string]string{"COLUMNS": cols}, "--replay", filepath.Join(root, "fixtures", tc.fixture+".capture"))
			ls := strings.Split(out, "\n")
			for _, c := range tc.cmds {
				found := false
				for _, l := range ls {
					found = found || strings.TrimSpace(l) == c
				}
				if !found {
					t.Errorf("%s at %s columns: no line is the whole command %q:\n%s", tc.fixture, cols, c, out)
				}
			}
			if cols == "80" {
				for _, n := range tc.notes {
					if !strings.Contains(out, n) {
						t.Errorf("%s: the note %q is not said before its command:\n%s", tc.fixture, n, out)
					}
				}
			}
			if strings.Contains(out, " # ") || strings.Contains(out, "  #") {
				t.Errorf("%s at %s columns: a command carries a comment:\n%s", tc.fixture, cols, out)
			}
		}
	}
}

// TestReadmeSample: the README shows ct200's report as it is printed piped, byte for byte.
func TestReadmeSample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile(filepath.Join("testdata", "golden", "ct200.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```text\n"+string(golden)+"```\n") {
		t.Error("README.md's sample report is not testdata/golden/ct200.txt: paste the golden into it")
	}
}
