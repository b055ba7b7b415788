package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/gputriage/gputriage/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var reportTime = time.Date(2025, 6, 1, 12, 0, 3, 0, time.UTC)

type renderFunc func(io.Writer, []Host, Options) error

func render(t *testing.T, f renderFunc, hosts []Host, o Options) string {
	t.Helper()
	var b bytes.Buffer
	if err := f(&b, hosts, o); err != nil {
		t.Fatalf("render: %v", err)
	}
	return b.String()
}

func TestGolden(t *testing.T) {
	plain := Options{Width: 100, Now: reportTime}
	tests := []struct {
		file  string
		f     renderFunc
		hosts []Host
		o     Options
	}{
		{"report.txt", Text, standardHosts(), plain},
		{"report-color.txt", Text, standardHosts(), Options{Color: true, Width: 100, Now: reportTime}},
		// Colors follow the diagnosis: the healthy, 90%-full GPUs of h100-02 are green, ct200's
		// GPU 0, which the leftover holds, red.
		{"colors.txt", Text, []Host{incidentHost(), busyHost()}, Options{Color: true, Width: 100, Only: OnlyAll}},
		{"workers-verbose.txt", Text, []Host{busyHost()}, Options{Width: 100, Verbose: true}},
		{"report-verbose.txt", Text, standardHosts(), Options{Width: 100, Verbose: true, Now: reportTime}},
		{"report-narrow.txt", Text, standardHosts(), Options{Width: 60}},
		{"report.md", Markdown, standardHosts(), plain},
		{"report.json", JSON, standardHosts(), plain},
		{"hostile.txt", Text, []Host{hostileHost()}, Options{Width: 100, Verbose: true}},
		{"hostile.md", Markdown, []Host{hostileHost()}, plain},
		{"hostile.json", JSON, []Host{hostileHost()}, plain},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			checkGolden(t, tt.file, render(t, tt.f, tt.hosts, tt.o))
		})
	}
}

func allHosts() []Host { return append(standardHosts(), hostileHost()) }

// Remote bytes that must never reach text or Markdown output as they are.
var forbidden = []string{"\x1b", "\x07", "\x00", "\u202e", "\u2066", "\u2069", "\u200b", "\xff"}

func TestNoEscapeWhenColorOff(t *testing.T) {
	for _, width := range []int{0, 40, 100, 200} {
		for _, verbose := range []bool{false, true} {
			o := Options{Width: width, Verbose: verbose}
			for name, f := range map[string]renderFunc{"text": Text, "markdown": Markdown} {
				out := render(t, f, allHosts(), o)
				for _, bad := range forbidden {
					if strings.Contains(out, bad) {
						t.Errorf("%s width=%d verbose=%v: output contains %q", name, width, verbose, bad)
					}
				}
				if !utf8.ValidString(out) {
					t.Errorf("%s: output is not valid UTF-8", name)
				}
				// The attack is shown, not dropped.
				if !strings.Contains(out, `\x1b]0;pwned\x07`) || !strings.Contains(out, `\u202e`) {
					t.Errorf("%s: escaped forms of the hostile strings are missing", name)
				}
			}
		}
	}
}

var sgr = regexp.MustCompile(`\x1b\[[0-9;]*m`)

func TestColorOnlySGR(t *testing.T) {
	out := render(t, Text, allHosts(), Options{Color: true, Width: 100, Verbose: true})
	if !strings.Contains(out, "\x1b[") {
		t.Fatal("color on wrote no color")
	}
	// Every escape in the output is one of ours (a color); none came from a remote string.
	rest := sgr.ReplaceAllString(out, "")
	for _, bad := range forbidden {
		if strings.Contains(rest, bad) {
			t.Errorf("color output contains %q outside SGR sequences", bad)
		}
	}
}

func TestTextWidth(t *testing.T) {
	for _, width := range []int{30, 40, 60, 80, 100, 140} {
		for _, verbose := range []bool{false, true} {
			for _, color := range []bool{false, true} {
				out := render(t, Text, allHosts(), Options{Width: width, Verbose: verbose, Color: color})
				for i, l := range proseLines(out) {
					if w := lipgloss.Width(l); w > width {
						t.Errorf("width=%d verbose=%v color=%v: line %d is %d cells: %q", width, verbose, color, i+1, w, l)
					}
				}
			}
		}
	}
	// Width 0 means 80.
	out := render(t, Text, allHosts(), Options{})
	for _, l := range proseLines(out) {
		if lipgloss.Width(l) > 80 {
			t.Errorf("default width: line is %d cells: %q", lipgloss.Width(l), l)
		}
	}
}

// proseLines are the lines of a text report but the commands of its "what to do" sections,
// which are never wrapped or cut whatever the width (cmd/gputriage TestCommandsWhole); those are
// blanked.
func proseLines(out string) []string {
	ls := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	inTodo := false
	for i, l := range ls {
		plain := ansi.Strip(l)
		switch {
		case plain == "  what to do":
			inTodo = true
		case plain == "":
			inTodo = false
		case inTodo && strings.HasPrefix(plain, commandIndent) && plain[len(commandIndent)] != ' ':
			ls[i] = ""
		}
	}
	return ls
}

func TestTextContent(t *testing.T) {
	out := render(t, Text, standardHosts(), Options{Width: 100, Only: OnlyAll})
	for _, want := range []string{
		"ct200  1 error, 1 warning",
		"8× NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
		"GPU 0     [", "55,295       635  41,958  97,887 MiB",
		// Identical GPUs fold into one line.
		"GPUs 1-7  [", "0       635  97,252  97,887 MiB each",
		"20629", "ubuntu", "55,286 MiB", "2h13m", "sglang-qwen.service",
		// The process table names the program before the command line that runs it.
		"PROGRAM               COMMAND", "sglang.launch_server  python3 -m sglang",
		"ERROR     leftover-process",
		"sudo systemctl stop sglang-qwen.service",
		"gpu-clean01  OK (1 note)",
		"gpu12  FAILED (connect: refused) dial tcp 10.0.0.12:22: connect: connection refused",
		"nvidia-smi failed (no-driver)",
		"summary: 5 hosts, 1 ok, 2 with problems (1 critical, 1 error, 1 warning), 2 failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q", want)
		}
	}
	// A long command line is cut with an ellipsis, not wrapped or dropped.
	narrow := render(t, Text, []Host{incidentHost()}, Options{Width: 80})
	if !strings.Contains(narrow, "python3 -m sglang") || !strings.Contains(narrow, "…") {
		t.Errorf("narrow output does not truncate the command line with an ellipsis:\n%s", narrow)
	}
}

// tableRows returns the Markdown table rows (lines starting with "|") split into cells at
// unescaped pipes.
func tableRows(md string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(md, "\n") {
		if !strings.HasPrefix(l, "|") {
			continue
		}
		var cells []string
		var cur strings.Builder
		for i := 1; i < len(l); i++ {
			switch {
			case l[i] == '\\' && i+1 < len(l):
				cur.WriteByte(l[i])
				cur.WriteByte(l[i+1])
				i++
			case l[i] == '|':
				cells = append(cells, cur.String())
				cur.Reset()
			default:
				cur.WriteByte(l[i])
			}
		}
		rows = append(rows, cells)
	}
	return rows
}

func TestMarkdownTableCells(t *testing.T) {
	md := render(t, Markdown, []Host{hostileHost()}, Options{})
	rows := tableRows(md)
	if len(rows) == 0 {
		t.Fatal("no tables")
	}
	// The GPU table has 9 columns, the process table 8; no hostile | adds one.
	for _, r := range rows {
		if len(r) != 9 && len(r) != 8 {
			t.Errorf("row has %d cells: %q", len(r), r)
		}
	}
	for _, want := range []string{`a\|b`, `NVIDIA A100\|SXM4`, `&lt;script&gt;`, "\\`\\`\\`; rm"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks escaped %q", want)
		}
	}
}

// codeBlocks finds fenced code blocks the way CommonMark does: an opening fence of n >= 3
// backticks is closed only by a line of at least n backticks (up to 3 spaces of indent).
func codeBlocks(md string) (blocks []string, unclosed bool) {
	openRe := regexp.MustCompile("^ {0,3}(`{3,})[^`]*$")
	var cur []string
	n := 0
	for _, l := range strings.Split(md, "\n") {
		if n == 0 {
			if m := openRe.FindStringSubmatch(l); m != nil {
				n = len(m[1])
				cur = nil
			}
			continue
		}
		trim := strings.TrimRight(strings.TrimLeft(l, " "), " ")
		if len(l)-len(strings.TrimLeft(l, " ")) <= 3 && len(trim) >= n && strings.Trim(trim, "`") == "" {
			blocks = append(blocks, strings.Join(cur, "\n"))
			n = 0
			continue
		}
		cur = append(cur, l)
	}
	return blocks, n != 0
}

func TestMarkdownFenceCannotBeClosed(t *testing.T) {
	md := render(t, Markdown, []Host{hostileHost()}, Options{})
	blocks, unclosed := codeBlocks(md)
	if unclosed {
		t.Fatal("a code block is never closed")
	}
	var fix, capture string
	for _, b := range blocks {
		if strings.Contains(b, "docker stop") {
			fix = b
		}
		if strings.Contains(b, "gputriage-capture") {
			capture = b
		}
	}
	// Every fix command is inside the one block: the remote ```` did not end it early.
	if !strings.Contains(fix, "kill 4242 ```` echo pwned") || !strings.Contains(fix, "scancel") {
		t.Errorf("fix block was cut short: %q", fix)
	}
	// The whole capture, up to its last line, is inside its block, NULs shown visibly.
	if !strings.Contains(capture, "</details>") || !strings.Contains(capture, `\xff\xfe`) ||
		!strings.Contains(capture, `NUL:\x00`) {
		t.Errorf("capture block was cut short or not sanitized: %q", capture)
	}
	// Ours close what we open; the remote one inside the capture's block is one more.
	if strings.Count(md, "</details>") != strings.Count(md, "<details>")+1 {
		t.Errorf("want exactly one </details> more than ours, inside the capture")
	}
}

func TestMarkdownProseEscapes(t *testing.T) {
	md := render(t, Markdown, []Host{hostileHost()}, Options{})
	for _, want := range []string{
		// An explanation is one paragraph: a newline in it came from the host and is shown
		// escaped, so what follows it starts no line (no list, rule or quote either).
		`\# not a heading`, `\\n1. not a list\\n---\\n&gt; not a quote`,
		`- \- not a nested list`, `&lt;b&gt;GPU 0&lt;/b&gt;`, "\\`holds\\`",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "<") && !strings.HasPrefix(l, "<details>") && l != "</details>" {
			if blocks, _ := codeBlocks(md); !containsLine(blocks, l) {
				t.Errorf("raw HTML line outside a code block: %q", l)
			}
		}
	}
}

func containsLine(blocks []string, l string) bool {
	for _, b := range blocks {
		for _, bl := range strings.Split(b, "\n") {
			if bl == l {
				return true
			}
		}
	}
	return false
}

func TestMarkdownSummaryLine(t *testing.T) {
	// One host: a summary line under the heading, as before the fleet view.
	for _, tt := range []struct {
		h    Host
		want string
	}{
		{incidentHost(), "- **ct200**: 1 error, 1 warning — GPU 0 held by PID 20629, a leftover SGLang server (55,286 MiB) (`leftover-process`)"},
		{cleanHost(), "- **gpu-clean01**: OK (1 note)"},
		{failedHost(), "- **gpu12**: FAILED (connect: refused) — dial tcp 10.0.0.12:22: connect: connection refused"},
	} {
		if md := render(t, Markdown, []Host{tt.h}, Options{}); !strings.Contains(md, "\n"+tt.want+"\n") {
			t.Errorf("markdown lacks %q:\n%s", tt.want, md)
		}
	}
	// A fleet: a title line and a table of problems and failures.
	md := render(t, Markdown, standardHosts(), Options{Only: OnlyAll})
	for _, want := range []string{
		"# gputriage: 5 hosts, 1 ok, 2 with problems (1 critical, 1 error, 1 warning), 2 failed\n",
		"| error | `leftover-process` | `ct200` | 1 |",
		"| failed | connection refused | `gpu12` | 1 |",
		"### gpu-clean01\n\n**OK**\n",
		"<details><summary>raw capture (",
		"```sh\nsudo systemctl stop sglang-qwen.service\nsudo kill 20629\n```",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}

func TestMarkdownCaptureBounded(t *testing.T) {
	h := incidentHost()
	h.Capture = bytes.Repeat([]byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n"), 4096)
	md := render(t, Markdown, []Host{h}, Options{})
	if len(md) > maxCaptureBytes+16<<10 {
		t.Errorf("markdown is %d bytes with a 256 KiB capture", len(md))
	}
	if !strings.Contains(md, "raw capture (262,144 bytes; the first 49,151 shown)") {
		t.Errorf("truncated capture not announced: %s", md[strings.Index(md, "<details>"):][:120])
	}
}

func TestJSONShape(t *testing.T) {
	out := render(t, JSON, append(standardHosts(), hostileHost()), Options{})
	if !strings.HasSuffix(out, "}\n") || !strings.HasPrefix(out, "{\n  \"schema\": \"gputriage/v1\",\n") {
		t.Errorf("want 2-space indented JSON with a trailing newline, got prefix %q", out[:40])
	}
	var doc struct {
		Schema string           `json:"schema"`
		Hosts  []map[string]any `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Schema != "gputriage/v1" || len(doc.Hosts) != 6 {
		t.Fatalf("schema %q, %d hosts", doc.Schema, len(doc.Hosts))
	}
	keys := func(m map[string]any, want ...string) {
		t.Helper()
		for _, k := range want {
			if _, ok := m[k]; !ok {
				t.Errorf("missing key %q in %v", k, m)
			}
		}
	}
	ct := doc.Hosts[0]
	keys(ct, "host", "ok", "error", "gpus", "processes", "findings", "hostname", "kernel", "driver_version", "probe_time", "notes", "truncated")
	if ct["host"] != "ct200" || ct["ok"] != true || ct["error"] != nil || ct["probe_time"] != "2025-06-01T12:00:00Z" {
		t.Errorf("ct200 header: %v %v %v %v", ct["host"], ct["ok"], ct["error"], ct["probe_time"])
	}
	gpu := ct["gpus"].([]any)[0].(map[string]any)
	keys(gpu, "index", "uuid", "name", "memory_total_mib", "memory_used_mib", "memory_free_mib",
		"memory_reserved_mib", "utilization_pct", "bus_id", "mig_mode")
	if gpu["memory_used_mib"] != 55295.0 || gpu["memory_free_mib"] != 41958.0 || gpu["index"] != 0.0 {
		t.Errorf("gpu 0: %v", gpu)
	}
	proc := ct["processes"].([]any)[0].(map[string]any)
	keys(proc, "pid", "user", "argv", "elapsed_seconds", "gpu_memory_mib", "unit", "container", "shm")
	if proc["pid"] != 20629.0 || proc["elapsed_seconds"] != 7980.0 || proc["container"] != nil {
		t.Errorf("process: %v", proc)
	}
	if m := proc["gpu_memory_mib"].(map[string]any); m["0"] != 55286.0 {
		t.Errorf("gpu_memory_mib: %v", m)
	}
	shm := proc["shm"].([]any)[0].(map[string]any)
	keys(shm, "path", "bytes", "deleted")
	if shm["deleted"] != true {
		t.Errorf("shm: %v", shm)
	}
	f := ct["findings"].([]any)[0].(map[string]any)
	keys(f, "code", "severity", "title", "gpus", "pids", "explanation", "fix", "evidence", "files", "kind")
	if f["code"] != "leftover-process" || f["severity"] != "error" || f["kind"] != nil {
		t.Errorf("finding: %v", f)
	}
	// Empty lists are [], not null.
	clean := doc.Hosts[1]
	if p, ok := clean["processes"].([]any); !ok || len(p) != 0 {
		t.Errorf("clean host processes: %#v", clean["processes"])
	}
	if g := clean["findings"].([]any)[0].(map[string]any)["gpus"]; g == nil {
		t.Errorf("finding gpus is null, want []")
	}
	// A failed host: ok false, an error object, empty lists.
	failed := doc.Hosts[3]
	if failed["ok"] != false {
		t.Errorf("failed host ok = %v", failed["ok"])
	}
	e, _ := failed["error"].(map[string]any)
	if e["phase"] != "connect" || e["kind"] != "refused" || !strings.Contains(e["message"].(string), "refused") {
		t.Errorf("failed host error = %v", failed["error"])
	}
	if g, ok := failed["gpus"].([]any); !ok || len(g) != 0 || failed["probe_time"] != nil {
		t.Errorf("failed host gpus %v, probe_time %v", failed["gpus"], failed["probe_time"])
	}
	// Unknown memory is null, never 0.
	hostile := doc.Hosts[5]
	g1 := hostile["gpus"].([]any)[1].(map[string]any)
	for _, k := range []string{"memory_total_mib", "memory_used_mib", "memory_free_mib", "uuid"} {
		if v, ok := g1[k]; !ok || v != nil {
			t.Errorf("unknown %s = %v, want null", k, v)
		}
	}
	// Remote strings are exact: the escape sequence survives as data.
	argv := hostile["processes"].([]any)[0].(map[string]any)["argv"].([]any)
	if argv[2] != "print('"+osc+csiRed+"x')" {
		t.Errorf("argv[2] = %q", argv[2])
	}
}

func TestJSONInvalidUTF8(t *testing.T) {
	a := render(t, JSON, []Host{hostileHost()}, Options{})
	b := render(t, JSON, []Host{hostileHost()}, Options{})
	if a != b {
		t.Error("JSON output is not deterministic")
	}
	if !utf8.ValidString(a) {
		t.Error("JSON output is not valid UTF-8")
	}
	if !strings.Contains(a, `"\ufffd\ufffd"`) && !strings.Contains(a, "\"\uFFFD\uFFFD\"") {
		t.Error("invalid bytes are not each replaced by U+FFFD")
	}
}

func TestNoSnapshotIsFailure(t *testing.T) {
	h := Host{Name: "ghost"}
	out := render(t, JSON, []Host{h}, Options{})
	if !strings.Contains(out, `"ok": false`) || !strings.Contains(out, `"kind": "no-data"`) {
		t.Errorf("host without snapshot or error: %s", out)
	}
	if txt := render(t, Text, []Host{h}, Options{}); !strings.Contains(txt, "FAILED") {
		t.Errorf("text: %s", txt)
	}
}

func TestSanitize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"python3 -m sglang", "python3 -m sglang"},
		{"", ""},
		{"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},
		{"\x1b[31mred", `\x1b[31mred`},
		{"a\nb\tc\rd", `a\nb\tc\rd`},
		{"nul\x00del\x7f", `nul\x00del\x7f`},
		{"\u009b31m", `\u009b31m`},
		{"abc\u202edef", `abc\u202edef`},
		{"\u2066\u2067\u2068\u2069\u200e\u200f\u061c", `\u2066\u2067\u2068\u2069\u200e\u200f\u061c`},
		{"zero\u200bwidth\ufeff", `zero\u200bwidth\ufeff`},
		{"tag\U000E0041", `tag\U000e0041`},
		{"sep\u2028\u2029", `sep\u2028\u2029`},
		{"bad\xff\xc3", `bad\xff\xc3`},
		{"ünïcödé 日本 ✓", "ünïcödé 日本 ✓"},
		{"\ufffd", "\ufffd"},
	}
	for _, tt := range tests {
		if got := Sanitize(tt.in); got != tt.want {
			t.Errorf("Sanitize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := sanitizeBlock("a\tb\nc\x00\r\n"); got != "a\tb\nc\\x00\\r\n" {
		t.Errorf("sanitizeBlock = %q", got)
	}
}

func TestMdText(t *testing.T) {
	tests := []struct{ in, inline, line string }{
		{"plain words", "plain words", "plain words"},
		{"a|b", `a\|b`, `a\|b`},
		{"`code`", "\\`code\\`", "\\`code\\`"},
		{"<b>&amp;", "&lt;b&gt;&amp;amp;", "&lt;b&gt;&amp;amp;"},
		{"# h", "# h", `\# h`},
		{"- item", "- item", `\- item`},
		{"+ item", "+ item", `\+ item`},
		{"=====", "=====", `\=====`},
		{"12. item", "12. item", `12\. item`},
		{"3) item", "3) item", `3\) item`},
		{"575.57.08", "575.57.08", `575\.57.08`},
		{"    code", "    code", "code"},
		{"*bold* _it_ [link](x) ~~s~~ $x$", `\*bold\* \_it\_ \[link\](x) \~\~s\~\~ \$x\$`, `\*bold\* \_it\_ \[link\](x) \~\~s\~\~ \$x\$`},
		{`back\slash`, `back\\slash`, `back\\slash`},
		{"esc\x1b[31m", `esc\\x1b\[31m`, `esc\\x1b\[31m`},
		{"", "", ""},
	}
	for _, tt := range tests {
		if got := mdText(tt.in); got != tt.inline {
			t.Errorf("mdText(%q) = %q, want %q", tt.in, got, tt.inline)
		}
		if got := mdLine(tt.in); got != tt.line {
			t.Errorf("mdLine(%q) = %q, want %q", tt.in, got, tt.line)
		}
	}
}

func TestFence(t *testing.T) {
	for in, want := range map[string]string{"": "```", "a`b": "```", "x```y": "````", "`````": "``````"} {
		if got := fence(in); got != want {
			t.Errorf("fence(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWrapWords(t *testing.T) {
	tests := []struct {
		text        string
		first, rest int
		want        []string
	}{
		{"a b c", 10, 10, []string{"a b c"}},
		{"aaa bbb ccc", 7, 7, []string{"aaa bbb", "ccc"}},
		{"aaa bbb ccc", 3, 7, []string{"aaa", "bbb ccc"}},
		{"abcdefghij", 4, 4, []string{"abcd", "efgh", "ij"}},
		{"x abcdefghij", 4, 4, []string{"x", "abcd", "efgh", "ij"}},
		{"日本語テキスト", 4, 4, []string{"日本", "語テ", "キス", "ト"}},
		{"", 10, 10, []string{""}},
		{"'a  b' c", 10, 10, []string{"'a  b' c"}},
	}
	for _, tt := range tests {
		got := wrapWords(tt.text, tt.first, tt.rest)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("wrapWords(%q, %d, %d) = %q, want %q", tt.text, tt.first, tt.rest, got, tt.want)
		}
	}
}

func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		45 * time.Second: "45s", 12 * time.Minute: "12m", 2*time.Hour + 13*time.Minute: "2h13m",
		76*time.Hour + 30*time.Minute: "3d04h",
	} {
		if got := age(&d); got != want {
			t.Errorf("age(%v) = %q, want %q", d, got, want)
		}
	}
	if age(nil) != "?" {
		t.Error("age(nil)")
	}
}

// TestMarkdownRendersWithCmarkGFM renders the hostile report with GitHub's own CommonMark
// implementation when it is installed (Debian: apt-get install cmark-gfm).
func TestMarkdownRendersWithCmarkGFM(t *testing.T) {
	bin := testenv.Need(t, "GFM renderer", "apt-get install cmark-gfm", "cmark-gfm")
	md := render(t, Markdown, append(standardHosts(), hostileHost()), Options{})
	cmd := exec.Command(bin, "--unsafe", "-e", "table", "-e", "strikethrough", "-e", "autolink")
	cmd.Stdin = strings.NewReader(md)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	html := string(out)
	// The summary table; ct200 and the hostile host have a GPU and a process table, and ct200
	// the table of each GPU (collapsed) its folded GPU table leaves out (the clean host is not
	// shown).
	if n := strings.Count(html, "<table>"); n != 6 {
		t.Errorf("%d tables, want 6", n)
	}
	for _, bad := range []string{"<script>", "<b>GPU", "<del>", "<em>", "<strong>holds"} {
		if strings.Contains(html, bad) {
			t.Errorf("remote markup rendered: %q", bad)
		}
	}
	if strings.Count(html, "<details><summary>raw capture") != 2 || strings.Count(html, "</details>") != strings.Count(html, "<details>") {
		t.Errorf("want two raw capture <details> blocks (ct200 and the hostile host), each closed")
	}
	// The hostile fix block holds all three commands.
	if !strings.Contains(html, "kill 4242 ```` echo pwned\nscancel '77|x'\n</code></pre>") {
		t.Error("the fix code block was closed early")
	}
	// Headings are only ours: the title is the one h1.
	if n := strings.Count(html, "<h1>"); n != 1 {
		t.Errorf("%d h1 headings, want 1", n)
	}
	if strings.Contains(html, "<h1>not a heading") || strings.Contains(html, "<ol>") || strings.Contains(html, "<blockquote>") {
		t.Error("remote text became a heading, list or quote")
	}
}

// A GPU's bar is colored by the diagnosis, not by its fill level: h100-02's GPUs are 90% full
// and healthy (green, no red); ct200's GPU 0 is 56% full and held by a leftover the error
// finding blames (red), its empty neighbours green.
func TestTextColorsFollowDiagnosis(t *testing.T) {
	const red, yellow, green = "\x1b[31m", "\x1b[33m", "\x1b[32m"
	gpuLine := func(out, host string, gpu int) string {
		_, rest, _ := strings.Cut(out, host)
		for _, l := range strings.Split(rest, "\n") {
			// A GPU's line is its own or its folded range's ("GPUs 1-7").
			if plain := ansi.Strip(l); strings.Contains(plain, fmt.Sprintf("GPU %d ", gpu)) && strings.Contains(plain, "[") ||
				gpuInRange(plain, gpu) {
				return l
			}
		}
		t.Fatalf("no GPU %d line for %s in:\n%s", gpu, host, out)
		return ""
	}
	out := render(t, Text, []Host{incidentHost(), busyHost()}, Options{Color: true, Width: 100, Only: OnlyAll})
	for gpu := range 4 {
		l := gpuLine(out, "h100-02", gpu)
		if !strings.Contains(l, green) || strings.Contains(l, red) || strings.Contains(l, yellow) {
			t.Errorf("healthy 90%%-full GPU %d is not plain green: %q", gpu, l)
		}
	}
	if l := gpuLine(out, "ct200", 0); !strings.Contains(l, red) || strings.Contains(l, green) {
		t.Errorf("blamed GPU 0 of ct200 is not red: %q", l)
	}
	if l := gpuLine(out, "ct200", 1); strings.Contains(l, red) || strings.Contains(l, yellow) {
		t.Errorf("unblamed GPU 1 of ct200 is colored as a problem: %q", l)
	}
	// In the process table the leftover's PID is red; the healthy workers' are not colored.
	for _, l := range strings.Split(out, "\n") {
		plain := strings.TrimSpace(ansi.Strip(l))
		switch {
		case strings.HasPrefix(plain, "20629  ") && !strings.HasPrefix(strings.TrimSpace(l), "\x1b[1;31m20629"):
			t.Errorf("the leftover's row does not start red: %q", l)
		case strings.HasPrefix(plain, "300") && strings.Contains(l, "\x1b["):
			t.Errorf("a healthy worker's row is colored: %q", l)
		}
	}
}

// gpuInRange reports whether a GPU line folds GPUs "a-b" that include gpu.
func gpuInRange(line string, gpu int) bool {
	var a, b int
	_, rest, ok := strings.Cut(line, "GPUs ")
	if !ok {
		return false
	}
	if n, _ := fmt.Sscanf(rest, "%d-%d", &a, &b); n == 2 {
		return a <= gpu && gpu <= b
	}
	return false
}

// A worker's parent command line is shown, so its credentials are masked like the worker's.
func TestParentArgvSecretsMasked(t *testing.T) {
	h := busyHost()
	h.Result.Processes[0].ParentArgv = []string{"vllm", "serve", "/models/llama", "--api-key", "sekrit-parent-123"}
	for name, f := range map[string]renderFunc{"text": Text, "markdown": Markdown, "json": JSON} {
		out := render(t, f, []Host{h}, Options{Width: 100, Verbose: true, Only: OnlyAll})
		if strings.Contains(out, "sekrit-parent-123") {
			t.Errorf("%s shows the parent's API key:\n%s", name, out)
		}
		if !strings.Contains(out, "/models/llama") {
			t.Errorf("%s does not show the parent's command line:\n%s", name, out)
		}
	}
}
