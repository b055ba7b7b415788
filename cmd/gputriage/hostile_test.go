package main

// The hostile and broken input suite (issue 5), end to end through the CLI: captures that are
// cut, forged, garbage or huge, remote strings that try to drive the terminal, hosts that
// misbehave on the wire or die mid-sweep, and host lists at and past their limits. Each test
// checks what the user relies on: the host's entry in the report, the exit status, no panic
// and no raw escape byte.

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/simfleet"
	"github.com/gputriage/gputriage/internal/sshdtest"
	"github.com/gputriage/gputriage/internal/sshtest"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/triage"
	"golang.org/x/crypto/ssh"
)

// hNonce is the nonce of the captures built here.
const hNonce = "0123456789abcdef0123456789abcdef"

// hSec is one well-formed capture section.
func hSec(name, body string, rc int) string {
	return fmt.Sprintf("@@gputriage %s begin %s limit=%d\n%s\n@@gputriage %s rc=%d\n@@gputriage %s end %s\n",
		hNonce, name, max(65536, len(body)+1024), body, hNonce, rc, hNonce, name)
}

const hHeader = "gputriage-capture v1 nonce=" + hNonce + "\n"
const hDone = "@@gputriage " + hNonce + " done\n"

// hProc is one GPU process of a built capture.
type hProc struct {
	pid     int
	comm    string   // the name in /proc/PID/stat
	smiName string   // nvidia-smi's process_name
	argv    []string // /proc/PID/cmdline
	cwd     string
	gpu     int
	mib     int
}

// hostileSections builds the sections of a two-GPU host (hostname host01, probed as root)
// running procs, each owned by alice (uid 1000) and started 10 minutes before the probe.
func hostileSections(procs ...hProc) []string {
	used := [2]int{}
	var apps, fds, ps strings.Builder
	apps.WriteString("pid, gpu_uuid, used_memory [MiB], process_name\n")
	for _, p := range procs {
		used[p.gpu] += p.mib
		fmt.Fprintf(&apps, "%d, GPU-00000000-0000-0000-0000-00000000000%d, %d, %s\n", p.pid, p.gpu, p.mib, p.smiName)
		fmt.Fprintf(&fds, "%d 3 /dev/nvidiactl\n%d 4 /dev/nvidia%d\n", p.pid, p.pid, p.gpu)
		argv := base64.StdEncoding.EncodeToString([]byte(strings.Join(p.argv, "\x00") + "\x00"))
		// btime 1796031514, clk_tck 100: started at 1796032914, 600 s before the probe.
		fmt.Fprintf(&ps, "pid %d\nstat %d (%s) S 77 %d %d 0 -1 4194304 1711 0 0 0 5 5 0 0 20 0 1 0 140000 17895424 3047 0 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
			p.pid, p.pid, p.comm, p.pid, p.pid)
		fmt.Fprintf(&ps, "status Name:\t%s\nstatus State:\tS (sleeping)\nstatus PPid:\t77\nstatus Uid:\t1000\t1000\t1000\t1000\nstatus NSpid:\t%d\n", p.comm, p.pid)
		fmt.Fprintf(&ps, "cgroup 0::/user.slice/user-1000.slice/session-4.scope\nargv %s\ncwd %s\nend\n", argv, p.cwd)
	}
	fds.WriteString("denied 0")
	gpus := "index, uuid, name, pci.bus_id, memory.total [MiB], memory.used [MiB], memory.free [MiB], utilization.gpu [%], compute_mode, driver_version, memory.reserved [MiB], mig.mode.current\n"
	for g := range 2 {
		gpus += fmt.Sprintf("%d, GPU-00000000-0000-0000-0000-00000000000%d, NVIDIA H100 80GB HBM3, 00000000:%02X:00.0, 81559, %d, %d, 10, Default, 550.90.07, 532, Disabled\n",
			g, g, 0x18+g*0x10, used[g]+1, 81559-532-used[g]-1)
	}
	return []string{
		hSec("host", "probe_version=1\nhostname=host01\nkernel=6.8.0\ntime=1796033514\nuptime=2000.00\nbtime=1796031514\nclk_tck=100\nuid=0\nuser=root\nnvidia_smi=/usr/bin/nvidia-smi\ntimeout=1", 0),
		hSec("smi-gpu", strings.TrimSuffix(gpus, "\n"), 0),
		hSec("smi-apps", strings.TrimSuffix(apps.String(), "\n"), 0),
		hSec("fds", fds.String(), 0),
		hSec("maps", "", 1),
		hSec("fdstat", "", 0),
		hSec("procs", strings.TrimSuffix(ps.String(), "\n"), 0),
		hSec("users", "alice:x:1000:1000::/home/alice:/bin/bash", 0),
		hSec("units", "", 0),
		hSec("shm-df", "Filesystem     1024-blocks  Used Available Capacity Mounted on\ntmpfs            104857600  1000  104856600  1% /dev/shm", 0),
		hSec("shm-ls", "d\t60\t1796033000.5\t0\t/dev/shm\x00f\t4096\t1796033000.5\t1000\t/dev/shm/seg0\x00", 0),
	}
}

var trainer = hProc{pid: 4242, comm: "python3", smiName: "/usr/bin/python3", gpu: 0, mib: 20000, cwd: "/home/alice",
	argv: []string{"python3", "train.py", "--epochs", "3"}}

// hostileCapture is a whole capture of sections, with the final marker.
func hostileCapture(sections ...string) []byte {
	return []byte(hHeader + strings.Join(sections, "") + hDone)
}

// replay writes raw as t.TempDir()/NAME.capture and runs gputriage --replay on that
// directory, a saved sweep of one host: output that is not a capture is then that host's
// failure, as in a live sweep (a lone file that is not a capture is a usage error).
func replay(t *testing.T, name string, raw []byte, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name+".capture"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	// At the width these checks were written for: where a line breaks is not what they test.
	stdout, stderr, code = cli(t, map[string]string{"COLUMNS": "100"}, append([]string{"--replay", dir}, args...)...)
	noCrash(t, stderr, code)
	return stdout, stderr, code
}

// noCrash fails on an internal error (a recovered panic) or a stack trace.
func noCrash(t *testing.T, stderr string, code int) {
	t.Helper()
	if code == exitInternal || strings.Contains(stderr, "internal error") || strings.Contains(stderr, "goroutine ") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
}

// hostileDoc is the part of the JSON report these tests read.
type hostileDoc struct {
	Hosts []struct {
		Host  string `json:"host"`
		OK    bool   `json:"ok"`
		Error *struct {
			Phase, Kind, Message string
		} `json:"error"`
		Hostname  *string `json:"hostname"`
		Truncated bool    `json:"truncated"`
		GPUs      []struct {
			Index         int    `json:"index"`
			MemoryUsedMiB *int64 `json:"memory_used_mib"`
		} `json:"gpus"`
		Processes []struct {
			PID  int      `json:"pid"`
			Name *string  `json:"name"`
			User *string  `json:"user"`
			Argv []string `json:"argv"`
		} `json:"processes"`
		Findings []struct {
			Code     string   `json:"code"`
			Severity string   `json:"severity"`
			Kind     *string  `json:"kind"`
			PIDs     []int    `json:"pids"`
			Evidence []string `json:"evidence"`
		} `json:"findings"`
		Shm *struct {
			Listed    bool `json:"listed"`
			Truncated bool `json:"truncated"`
		} `json:"shm"`
		Notes []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"notes"`
	} `json:"hosts"`
}

func decodeDoc(t *testing.T, out string) hostileDoc {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("the JSON report is not valid UTF-8")
	}
	var doc hostileDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("the JSON report does not decode: %v\n%.2000s", err, out)
	}
	return doc
}

func (d hostileDoc) hasFinding(host int, code string) bool {
	for _, f := range d.Hosts[host].Findings {
		if f.Code == code {
			return true
		}
	}
	return false
}

func (d hostileDoc) hasNote(host int, code string) bool {
	for _, n := range d.Hosts[host].Notes {
		if n.Code == code {
			return true
		}
	}
	return false
}

// rawControls finds what must never reach a terminal or a Markdown file raw: C0 controls other
// than newline and tab, DEL, C1 controls, bidi and other format characters, and invalid UTF-8.
// With color, SGR sequences (ESC [ digits ; m) are the one thing allowed.
func rawControls(t *testing.T, what, out string, color bool) {
	t.Helper()
	if color {
		out = sgr.ReplaceAllString(out, "")
	}
	if !utf8.ValidString(out) {
		t.Errorf("%s: output is not valid UTF-8", what)
	}
	for i, r := range out {
		bad := r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || 0x80 <= r && r <= 0x9f ||
			0x200b <= r && r <= 0x200f || 0x202a <= r && r <= 0x202e || 0x2066 <= r && r <= 0x2069 ||
			r == 0x2028 || r == 0x2029 || r == 0xfeff || r == 0x061c
		if bad {
			lo := max(0, i-60)
			t.Errorf("%s: raw %U at byte %d: %q", what, r, i, out[lo:min(len(out), i+60)])
			return
		}
	}
}

var sgr = regexp.MustCompile("\x1b\\[[0-9;]*m")

// TestHostileTruncatedCaptures: a capture cut anywhere is still diagnosed from what was read,
// the host is reported as cut short (capture-truncated, a probe-limited warning), and the
// exit status says findings (1), never a crash or a silent "clean".
func TestHostileTruncatedCaptures(t *testing.T) {
	full := hostileCapture(hostileSections(trainer)...)
	procsAt := bytes.Index(full, []byte("begin procs"))
	argvAt := bytes.Index(full, []byte("\nargv ")) + 8
	markerAt := bytes.Index(full, []byte("@@gputriage "+hNonce+" begin users"))
	tests := []struct {
		name     string
		raw      []byte
		wantProc bool // the process block was complete
	}{
		{"cut inside the procs body", full[:argvAt], false},
		{"cut inside a begin marker", full[:markerAt+20], true},
		{"cut between two sections", full[:procsAt-len("@@gputriage "+hNonce+" ")], false},
		{"cut before the done marker", full[:len(full)-len(hDone)], true},
	}
	if out, errOut, code := replay(t, "host01", full, "--format", "json"); code != exitOK || decodeDoc(t, out).Hosts[0].Truncated {
		t.Fatalf("the whole capture: exit %d, stderr %q\n%s", code, errOut, out)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := replay(t, "host01", tc.raw, "--format", "json")
			if code != exitFindings {
				t.Errorf("exit %d, want %d (stderr %q)", code, exitFindings, errOut)
			}
			doc := decodeDoc(t, out)
			if len(doc.Hosts) != 1 {
				t.Fatalf("%d hosts", len(doc.Hosts))
			}
			h := doc.Hosts[0]
			if !h.OK || !h.Truncated || !doc.hasNote(0, "capture-truncated") {
				t.Errorf("ok %v truncated %v notes %+v: want the host triaged and flagged as cut", h.OK, h.Truncated, h.Notes)
			}
			if len(h.GPUs) != 2 || h.GPUs[0].MemoryUsedMiB == nil || *h.GPUs[0].MemoryUsedMiB != 20001 {
				t.Errorf("GPUs read before the cut are lost: %+v", h.GPUs)
			}
			var probeLimited bool
			for _, f := range h.Findings {
				probeLimited = probeLimited || f.Code == "probe-limited" && f.Severity == "warning"
			}
			if !probeLimited {
				t.Errorf("no probe-limited warning: %+v", h.Findings)
			}
			gotArgv := len(h.Processes) == 1 && len(h.Processes[0].Argv) == 4
			if gotArgv != tc.wantProc {
				t.Errorf("process block complete %v, want %v: %+v", gotArgv, tc.wantProc, h.Processes)
			}
			text, _, _ := replay(t, "host01", tc.raw, "--color", "never")
			if !strings.Contains(text, "capture truncated") {
				t.Errorf("the text report does not say the capture was cut:\n%s", text)
			}
		})
	}
}

// TestHostileForgedMarkers: marker lines without this run's nonce (no nonce, another nonce,
// the nonce in upper case or one digit off) inside a process name, a command line, a working
// directory and /dev/shm file names neither end nor start a section: every later section is
// still read, and the process keeps its forged text as its name, shown escaped.
func TestHostileForgedMarkers(t *testing.T) {
	other := "fedcba9876543210fedcba9876543210"
	offByOne := hNonce[:31] + "0"
	forgedName := "@@gputriage " + other + " end smi-apps"
	p := hProc{pid: 4242, comm: "@@gputriage end procs", smiName: forgedName, gpu: 0, mib: 20000,
		argv: []string{"python3", "-c", "\n@@gputriage " + offByOne + " end procs\n@@gputriage " + offByOne + " done\n"},
		cwd: "/tmp/x\n@@gputriage end procs\n@@gputriage " + other + " done\n@@gputriage  begin host limit=1\nhostname=forged\n" +
			"@@gputriage " + strings.ToUpper(hNonce) + " begin host limit=9\nhostname=forged2"}
	secs := hostileSections(p)
	for i, s := range secs {
		if strings.Contains(s, " begin shm-ls ") {
			secs[i] = hSec("shm-ls", "d\t60\t1796033000.5\t0\t/dev/shm\x00"+
				"f\t10\t1796033000.5\t1000\t/dev/shm/a\n@@gputriage done\n@@gputriage "+strings.ToUpper(hNonce)+" end shm-ls\n\x00"+
				"f\t20\t1796033000.5\t1000\t/dev/shm/b\n@@gputriage "+offByOne+" rc=0\n\x00", 0)
		}
	}
	raw := hostileCapture(secs...)
	out, errOut, code := replay(t, "host01", raw, "--format", "json")
	if code != exitOK && code != exitFindings {
		t.Errorf("exit %d (stderr %q)", code, errOut)
	}
	doc := decodeDoc(t, out)
	h := doc.Hosts[0]
	if !h.OK || h.Truncated || doc.hasNote(0, "capture-truncated") || doc.hasNote(0, "section-truncated") {
		t.Errorf("a forged marker cut the capture: ok %v truncated %v notes %+v", h.OK, h.Truncated, h.Notes)
	}
	if h.Hostname == nil || *h.Hostname != "host01" {
		t.Errorf("a forged host section was honored: hostname %v", h.Hostname)
	}
	if len(h.GPUs) != 2 || h.Shm == nil || !h.Shm.Listed || h.Shm.Truncated {
		t.Errorf("sections around the forged markers were lost: GPUs %+v shm %+v", h.GPUs, h.Shm)
	}
	if len(h.Processes) != 1 {
		t.Fatalf("processes %+v", h.Processes)
	}
	pr := h.Processes[0]
	if pr.Name == nil || *pr.Name != forgedName {
		t.Errorf("name %v, want the forged text %q kept as the name", pr.Name, forgedName)
	}
	if strings.Join(pr.Argv, "\x00") != strings.Join(p.argv, "\x00") {
		t.Errorf("argv %q, want %q", pr.Argv, p.argv)
	}
	if pr.User == nil || *pr.User != "alice" {
		t.Errorf("user %v: the users section after procs was not read", pr.User)
	}

	text, _, _ := replay(t, "host01", raw, "-v", "--color", "never")
	rawControls(t, "text", text, false)
	if !strings.Contains(text, `-c '\n@@gputriage `+offByOne+` end procs\n@@gputriage`) {
		t.Errorf("the forged command line is not shown escaped on one line:\n%s", text)
	}
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "@@gputriage") || strings.HasPrefix(strings.TrimSpace(l), "hostname=forged") {
			t.Errorf("remote text starts a line of the report: %q", l)
		}
	}
}

// TestHostileGarbage: output that is not a capture at all is a failed host (probe:
// bad-output, exit 3) in every format, and none of its bytes reaches the report raw.
func TestHostileGarbage(t *testing.T) {
	noise := make([]byte, 64<<10)
	x := uint32(2463534242)
	for i := range noise {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		noise[i] = byte(x)
	}
	copy(noise[100:], "\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07\x1b[2J\u202e")
	tests := []struct {
		name string
		raw  []byte
		msg  string // in the error message
	}{
		{"random bytes", noise, "65536 bytes"},
		{"empty", nil, "(0 bytes)"},
		{"a header with a bad nonce", append([]byte("gputriage-capture v1 nonce=NOT-HEX\n"), noise...), "NOT-HEX"},
		{"a capture in the wrong format version", []byte(strings.Replace(string(hostileCapture(hostileSections(trainer)...)), " v1 ", " v9 ", 1)), "v9"},
		// A shell startup file that prints (what rsync calls an unclean shell): the host is
		// failed, and the message quotes what the shell printed so the user sees why.
		{"a shell banner then a capture", append([]byte("Last login: today\x1b[0m\n"), hostileCapture(hostileSections(trainer)...)...), "Last login: today"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := replay(t, "host01", tc.raw, "--format", "json")
			if code != exitHostsFailed {
				t.Errorf("exit %d, want %d (stderr %q)", code, exitHostsFailed, errOut)
			}
			doc := decodeDoc(t, out)
			if h := doc.Hosts[0]; h.OK || h.Error == nil || h.Error.Phase != "probe" || h.Error.Kind != "bad-output" {
				t.Errorf("host %+v, want FAILED probe: bad-output", h)
			} else if !strings.Contains(h.Error.Message, tc.msg) {
				t.Errorf("message %q lacks %q", h.Error.Message, tc.msg)
			}
			for _, args := range [][]string{{"--color", "never"}, {"--color", "always"}, {"--format", "markdown"}, {"-v", "--color", "never"}} {
				out, _, code := replay(t, "host01", tc.raw, args...)
				if code != exitHostsFailed {
					t.Errorf("%v: exit %d", args, code)
				}
				rawControls(t, fmt.Sprint(args), out, args[1] == "always")
				if args[0] == "--color" && !strings.Contains(sgr.ReplaceAllString(out, ""), "FAILED (probe: bad-output)") {
					t.Errorf("%v: no FAILED line:\n%s", args, out)
				}
			}
		})
	}
}

// TestHostileEncodings: CRLF line ends (a capture that went through a Windows editor or a
// pty) give exactly the report of the original; invalid UTF-8 in host facts, GPU names,
// command lines and file names reaches no report raw, and JSON stays valid.
func TestHostileEncodings(t *testing.T) {
	fx, err := os.ReadFile(filepath.Join(repoRoot(t), "fixtures", "ct200.capture"))
	if err != nil {
		t.Fatal(err)
	}
	want, _, wantCode := replay(t, "ct200", fx, "--format", "json")
	crlf := bytes.ReplaceAll(fx, []byte("\n"), []byte("\r\n"))
	got, errOut, code := replay(t, "ct200", crlf, "--format", "json")
	if code != wantCode || got != want {
		t.Errorf("CRLF capture: exit %d (want %d), stderr %q; report differs from the LF one:\n%s", code, wantCode, errOut, got)
	}

	p := trainer
	p.argv = []string{"python3", "tr\xffain.py", "--name", "\xc3\x28bad\xed\xa0\x80surrogate"}
	p.smiName = "py\xfethon"
	p.comm = "py\xff"
	secs := hostileSections(p)
	for i, s := range secs {
		switch {
		case strings.Contains(s, " begin host "):
			secs[i] = strings.Replace(s, "hostname=host01", "hostname=ho\xffst01", 1)
		case strings.Contains(s, " begin smi-gpu "):
			secs[i] = strings.ReplaceAll(s, "NVIDIA H100 80GB HBM3", "NVIDIA \xff\xfe H100")
		case strings.Contains(s, " begin shm-ls "):
			secs[i] = hSec("shm-ls", "d\t60\t1796033000.5\t0\t/dev/shm\x00f\t4096\t1796033000.5\t1000\t/dev/shm/s\xffeg\x00", 0)
		}
	}
	for _, eol := range []string{"\n", "\r\n"} {
		raw := bytes.ReplaceAll(hostileCapture(secs...), []byte("\n"), []byte(eol))
		out, errOut, code := replay(t, "host01", raw, "--format", "json")
		if code != exitOK {
			t.Errorf("eol %q: exit %d, stderr %q", eol, code, errOut)
		}
		doc := decodeDoc(t, out)
		h := doc.Hosts[0]
		if !h.OK || len(h.GPUs) != 2 || len(h.Processes) != 1 || h.Hostname == nil || *h.Hostname != "ho\uFFFDst01" {
			t.Fatalf("eol %q: host %+v", eol, h)
		}
		if a := h.Processes[0].Argv; len(a) != 4 || a[1] != "tr\uFFFDain.py" {
			t.Errorf("eol %q: argv %q", eol, a)
		}
		for _, args := range [][]string{{"-v", "--color", "never"}, {"-v", "--color", "always"}, {"-v", "--format", "markdown"}} {
			out, _, _ := replay(t, "host01", raw, args...)
			rawControls(t, fmt.Sprint(eol, args), out, args[2] == "always")
			if !regexp.MustCompile(`tr\\+xffain\.py`).MatchString(out) {
				t.Errorf("eol %q %v: the bad byte is not shown as \\xff:\n%s", eol, args, out)
			}
		}
	}
}

// TestHostileHugeHost: a /dev/shm and processes holding /dev/nvidia* (every one listed by
// nvidia-smi) at the client's caps on records (2,000 processes, 4,096 entries: the probe
// describes at most 2,000 processes) are triaged in full, with sane counts, in reasonable time;
// the verbose text report details them within its budget and says what it folded.
func TestHostileHugeHost(t *testing.T) {
	const procs = 2000
	raw := simfleet.SyntheticCapture(procs, parse.RecordCap("shm-ls"))
	start := time.Now()
	out, errOut, code := replay(t, "crowded", raw, "--format", "json")
	elapsed := time.Since(start)
	t.Logf("%d MiB capture, %d processes: JSON report in %s", len(raw)>>20, procs, elapsed)
	if code != exitOK && code != exitFindings {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	if elapsed > testenv.Scale(10*time.Second) {
		t.Errorf("took %s", elapsed)
	}
	doc := decodeDoc(t, out)
	h := doc.Hosts[0]
	if !h.OK || h.Truncated || len(h.GPUs) != 8 || h.Shm == nil || !h.Shm.Listed || h.Shm.Truncated {
		t.Fatalf("ok %v truncated %v GPUs %d shm %+v", h.OK, h.Truncated, len(h.GPUs), h.Shm)
	}
	perGPU := map[int]int{}
	pids := map[int]bool{}
	for _, p := range h.Processes {
		pids[p.PID] = true
		if p.User == nil || len(p.Argv) != 7 {
			t.Fatalf("process %d: user %v argv %q", p.PID, p.User, p.Argv)
		}
	}
	// The report keeps the processes its findings name and 32 others (diagnose.Retain), and
	// each gpu-busy finding names its GPU's processes up to its budget: none twice, none
	// that is not one of the report's processes, every GPU's named.
	if len(h.Processes) != len(pids) || len(pids) <= diagnose.MaxProcesses || len(pids) > procs {
		t.Errorf("%d processes (%d distinct), want distinct, more than %d and at most %d", len(h.Processes), len(pids), diagnose.MaxProcesses, procs)
	}
	named := map[int]bool{}
	for _, f := range h.Findings {
		if f.Code == "gpu-busy" {
			for _, pid := range f.PIDs {
				if named[pid] || !pids[pid] {
					t.Errorf("PID %d: named twice in gpu-busy findings, or not one of the report's processes", pid)
				}
				named[pid] = true
				perGPU[(pid-10000)%8]++
			}
		}
	}
	for g := range 8 {
		if perGPU[g] == 0 || perGPU[g] > procs/8 {
			t.Errorf("GPU %d: %d processes in gpu-busy findings, want 1 to %d", g, perGPU[g], procs/8)
		}
	}
	start = time.Now()
	text, _, _ := replay(t, "crowded", raw, "-v", "--color", "never")
	t.Logf("verbose text report in %s", time.Since(start))
	// The report details what its budget allows (diagnose/budget.go) and says what it folded.
	if n := strings.Count(text, "python3 -m torch.distributed.run"); n < diagnose.MaxProcesses || !strings.Contains(text, "more processes folded") {
		t.Errorf("the verbose text report shows %d of the %d command lines and does not say the rest were folded", n, procs)
	}
}

// sshLab is a set of in-process SSH servers (and raw TCP misbehavers) reached through an
// ssh_config, known_hosts and identity file written the usual way.
type sshLab struct {
	dir, config, known, key string
	signer                  ssh.Signer
	conf, kh                strings.Builder
}

func newSSHLab(t *testing.T) *sshLab {
	l := &sshLab{dir: t.TempDir()}
	priv, signer := sshtest.NewKey(t, "ed25519")
	l.signer = signer
	l.key = filepath.Join(l.dir, "id_ed25519")
	if err := os.WriteFile(l.key, sshtest.MarshalOpenSSH(t, priv, ""), 0o600); err != nil {
		t.Fatal(err)
	}
	l.config, l.known = filepath.Join(l.dir, "ssh_config"), filepath.Join(l.dir, "known_hosts")
	return l
}

// server starts an sshtest server for host name and trusts its key.
func (l *sshLab) server(t *testing.T, name string, cfg sshtest.Config) *sshtest.Server {
	cfg.Authorized = map[string][]ssh.PublicKey{"*": {l.signer.PublicKey()}}
	s := sshtest.Start(t, cfg)
	l.host(name, s.Host(), s.Port())
	for _, k := range s.HostKeys() {
		l.kh.WriteString(sshtest.KnownHostsLine(fmt.Sprintf("[%s]:%d", s.Host(), s.Port()), k))
	}
	return s
}

func (l *sshLab) host(name, addr string, port int) {
	fmt.Fprintf(&l.conf, "Host %s\n  HostName %s\n  Port %d\n\n", name, addr, port)
}

// write writes the config, with extra appended after this lab's own hosts, and returns its path.
func (l *sshLab) write(t *testing.T, extra string) string {
	conf := l.conf.String() + fmt.Sprintf("Host *\n  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  GlobalKnownHostsFile none\n\n", l.key, l.known) + extra
	if err := os.WriteFile(l.config, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.known, []byte(l.kh.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return l.config
}

// captureFor reads the first line of the probe's stdin ("set -- NONCE SECONDS") and returns
// capture raw with its nonce replaced by that run's; the rest of stdin is drained.
func captureFor(stdin io.Reader, raw []byte) []byte {
	first, _ := bufio.NewReaderSize(io.LimitReader(stdin, 512), 512).ReadString('\n')
	go func() { _, _ = io.Copy(io.Discard, stdin) }()
	return bytes.ReplaceAll(raw, []byte(hNonce), []byte(simfleet.NonceOf(first)))
}

// TestHostileHugeOutput: a host answers the probe with a valid start and then 100 MB in one
// section (the probe's own bounds bypassed). gputriage reads at most its 32 MiB bound, hangs
// up, reports the host as truncated while using what it read (the GPUs), and the client's
// memory stays bounded.
func TestHostileHugeOutput(t *testing.T) {
	const total = 100 << 20
	var sent atomic.Int64
	l := newSSHLab(t)
	head := []byte(hHeader + strings.Join(hostileSections(trainer)[:10], "") +
		"@@gputriage " + hNonce + " begin shm-ls limit=4194304\nd\t60\t1796033000.5\t0\t/dev/shm\x00")
	rec := []byte("f\t4096\t1796033000.5\t1000\t/dev/shm/spam/0123456789abcdef0123456789abcdef\x00")
	chunk := bytes.Repeat(rec, (1<<20)/len(rec))
	l.server(t, "huge", sshtest.Config{Exec: func(e *sshtest.Exec) int {
		n, err := e.Stdout.Write(captureFor(e.Stdin, head))
		sent.Add(int64(n))
		for err == nil && sent.Load() < total {
			n, err = e.Stdout.Write(chunk)
			sent.Add(int64(n))
		}
		return 0
	}})
	config := l.write(t, "")

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
		}
	}()
	start := time.Now()
	out, errOut, code := cli(t, nil, "-F", config, "--timeout", "30s", "--format", "json", "huge")
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	runtime.ReadMemStats(&after)
	noCrash(t, errOut, code)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("server sent %d MiB; sweep %s; client+server allocated %d MiB in all, peak heap in use %d MiB (from %d)",
		sent.Load()>>20, elapsed, alloc>>20, peak.Load()>>20, before.HeapInuse>>20)

	if code != exitFindings {
		t.Errorf("exit %d, want %d (stderr %q)", code, exitFindings, errOut)
	}
	if !strings.Contains(errOut, "huge:") || !strings.Contains(errOut, fmt.Sprint(triage.MaxCaptureBytes)) {
		t.Errorf("stderr does not say the output was cut at %d bytes: %q", triage.MaxCaptureBytes, errOut)
	}
	doc := decodeDoc(t, out)
	h := doc.Hosts[0]
	if !h.OK || !h.Truncated || !doc.hasNote(0, "capture-truncated") || h.Shm == nil || !h.Shm.Truncated {
		t.Errorf("ok %v truncated %v shm %+v notes %+v: want triaged and flagged as cut", h.OK, h.Truncated, h.Shm, h.Notes)
	}
	if len(h.GPUs) != 2 || len(h.Processes) != 1 || h.Processes[0].User == nil || *h.Processes[0].User != "alice" {
		t.Errorf("what was read before the flood is not used: GPUs %d processes %+v", len(h.GPUs), h.Processes)
	}
	if !doc.hasFinding(0, "probe-limited") {
		t.Errorf("no probe-limited finding: %+v", h.Findings)
	}
	if s := sent.Load(); s >= total {
		t.Errorf("the server could send all %d MiB: the client did not hang up at its bound", s>>20)
	}
	// Measured: about 550 MiB allocated and 250 MiB peak heap, most of it parsing the 32 MiB
	// shm-ls body (about 480,000 records) that the host sent past the section's declared
	// 4 MiB limit. The bound is what matters: it does not grow with what the host sends.
	if alloc > 1<<30 || peak.Load() > 512<<20 {
		t.Errorf("memory not bounded: %d MiB allocated, %d MiB peak heap for a %d MiB bound", alloc>>20, peak.Load()>>20, triage.MaxCaptureBytes>>20)
	}
	if elapsed > testenv.Scale(20*time.Second) {
		t.Errorf("took %s", elapsed)
	}
}

// TestHostileWire: hosts that misbehave on the wire, swept through the CLI with a short
// deadline: silent after TCP accept, a banner then silence, closed or reset mid-handshake,
// reset mid-output, refused, garbage output, and one byte a second. Each is reported with
// the right phase and kind, and the sweep ends within the deadline plus a margin.
func TestHostileWire(t *testing.T) {
	const timeout = 3 * time.Second
	dir := t.TempDir()
	fleet, err := simfleet.Start(simfleet.Config{Hosts: 6, BadShare: 5.0 / 6, Dir: filepath.Join(dir, "fleet"),
		Captures: [][]byte{hostileCapture(hostileSections(trainer)...)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fleet.Close)
	want := map[string][2]string{}
	var names []string
	for _, h := range fleet.Hosts {
		phase, kind := simfleet.Expected(h.Behaviour)
		switch h.Behaviour {
		case simfleet.Garbage:
			phase, kind = "probe", "bad-output"
		case simfleet.Reset:
			// The RST races the channel's end on the wire, as in the handshake below: under
			// load the session can end (closed) before the reset is read.
			kind = "reset|closed"
		}
		want[h.Name] = [2]string{phase, kind}
		names = append(names, h.Name)
	}

	l := newSSHLab(t)
	l.server(t, "stall", sshtest.Config{Behaviour: sshtest.StallHandshake})
	want["stall"] = [2]string{"handshake", "timeout"}
	// closer reads the client's banner and key exchange offer, then hangs up: with a FIN
	// (close) or, with SO_LINGER 0, a RST (reset).
	closer := func(name string, rst bool, phase, kind string) {
		l.host(name, "127.0.0.1", sshtest.HangUpInHandshake(t, rst))
		want[name] = [2]string{phase, kind}
	}
	// Which of closed and reset the client sees is a race on the wire: after a FIN its next
	// write draws a RST; a RST may come after it read EOF.
	closer("closes-in-handshake", false, "handshake", "closed|reset")
	closer("resets-in-handshake", true, "handshake", "reset|closed")
	fleetConf, err := os.ReadFile(fleet.SSHConfig)
	if err != nil {
		t.Fatal(err)
	}
	// The lab's hosts and Host * first; the fleet's hosts then find their own settings in the
	// fleet's blocks, the first value of each option winning as in ssh.
	config := l.write(t, "")
	if err := os.WriteFile(config, append([]byte(strings.Replace(string(mustRead(t, config)), "Host *", "Host stall closes-in-handshake resets-in-handshake", 1)), fleetConf...), 0o600); err != nil {
		t.Fatal(err)
	}
	names = append(names, "stall", "closes-in-handshake", "resets-in-handshake")

	save := filepath.Join(dir, "saved")
	start := time.Now()
	out, errOut, code := cli(t, nil, append([]string{"-F", config, "--timeout", timeout.String(), "--format", "json", "--save", save}, names...)...)
	elapsed := time.Since(start)
	noCrash(t, errOut, code)
	t.Logf("%d hosts in %s with a %s deadline", len(names), elapsed, timeout)
	if code != exitHostsFailed {
		t.Errorf("exit %d, want %d", code, exitHostsFailed)
	}
	if elapsed > timeout+testenv.Scale(3*time.Second) {
		t.Errorf("the sweep took %s; the deadline is %s per host", elapsed, timeout)
	}
	doc := decodeDoc(t, out)
	if len(doc.Hosts) != len(names) {
		t.Fatalf("%d hosts reported, want %d", len(doc.Hosts), len(names))
	}
	for i, h := range doc.Hosts {
		w := want[h.Host]
		if h.Host != names[i] {
			t.Errorf("host %d is %q, want %q", i, h.Host, names[i])
		}
		switch {
		case w[0] == "":
			if !h.OK {
				t.Errorf("%s: failed %+v, want triaged", h.Host, h.Error)
			}
		case h.OK || h.Error == nil:
			t.Errorf("%s: triaged, want %s/%s", h.Host, w[0], w[1])
		case h.Error.Phase != w[0] || !slices.Contains(strings.Split(w[1], "|"), h.Error.Kind):
			t.Errorf("%s: %s/%s (%s), want %s/%s", h.Host, h.Error.Phase, h.Error.Kind, h.Error.Message, w[0], w[1])
		}
	}
	for _, args := range [][]string{{"--color", "never"}, {"--format", "markdown"}} {
		text, _, _ := cli(t, nil, append([]string{"--replay", save}, args...)...)
		rawControls(t, fmt.Sprint(args), text, false)
		if !strings.Contains(text, "resets-in-handshake") {
			t.Errorf("%v: the saved sweep lacks a host:\n%s", args, text)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHostileSSHDKilled: one host's sshd is killed while its probe runs (nvidia-smi hangs, so
// the probe is still in its first nvidia-smi call). That host is reported failed in the probe
// phase at once, not at its deadline; the other host is triaged.
func TestHostileSSHDKilled(t *testing.T) {
	sshdtest.SSHDPath(t)
	dir := t.TempDir()
	key, pub := sshdtest.UserKey(t, dir, "ed25519")
	healthy := sshdtest.Start(t, sshdtest.Config{Name: "healthy", Addr: "127.0.0.201", Port: 2301, AuthorizedKeys: []string{pub}, SMI: cleanSMI(2)})
	doomed := sshdtest.Start(t, sshdtest.Config{Name: "doomed", Addr: "127.0.0.202", Port: 2302, AuthorizedKeys: []string{pub}, SMI: &scenario.SMI{Hang: true}})
	known := filepath.Join(dir, "known_hosts")
	config := filepath.Join(dir, "ssh_config")
	var conf strings.Builder
	for _, s := range []*sshdtest.SSHD{healthy, doomed} {
		fmt.Fprintf(&conf, "Host %s\n  HostName %s\n  Port %d\n", s.Name, s.Addr, s.Port)
	}
	fmt.Fprintf(&conf, "Host *\n  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  GlobalKnownHostsFile none\n", key, known)
	if err := os.WriteFile(config, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(known, []byte(healthy.KnownHostsLine(healthy.Addr)+"\n"+doomed.KnownHostsLine(doomed.Addr)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	const timeout = 20 * time.Second // nvidia-smi's bound is 8 s of it
	var at time.Time
	stopped := make(chan struct{})
	start := time.Now()
	time.AfterFunc(time.Second, func() {
		defer close(stopped)
		at = time.Now()
		doomed.Stop()
	})
	out, errOut, code := cli(t, nil, "-F", config, "--timeout", timeout.String(), "--format", "json", "healthy", "doomed")
	elapsed := time.Since(start)
	<-stopped // before the cleanup's own Stop, and before at is read
	noCrash(t, errOut, code)
	t.Logf("sshd killed %s into the sweep; the sweep ended %s after that", at.Sub(start), elapsed-at.Sub(start))
	if code != exitHostsFailed {
		t.Errorf("exit %d, want %d (stderr %q)", code, exitHostsFailed, errOut)
	}
	doc := decodeDoc(t, out)
	if len(doc.Hosts) != 2 {
		t.Fatalf("%d hosts:\n%s", len(doc.Hosts), out)
	}
	if h := doc.Hosts[0]; !h.OK || len(h.GPUs) != 2 {
		t.Errorf("the healthy host: ok %v error %+v GPUs %d", h.OK, h.Error, len(h.GPUs))
	}
	h := doc.Hosts[1]
	if h.OK || h.Error == nil || h.Error.Phase != "probe" || !strings.Contains(" reset closed exit ", " "+h.Error.Kind+" ") {
		t.Errorf("the host whose sshd was killed: %+v, want failed in probe (reset, closed or exit)", h.Error)
	}
	// Killing sshd ends its sessions: the host is reported when its connection drops, long
	// before nvidia-smi's 8 s bound or the 20 s deadline.
	if elapsed > min(testenv.Scale(6*time.Second), 8*time.Second) {
		t.Errorf("the sweep took %s; the host's connection dropped %s in", elapsed, at.Sub(start))
	}
}

// TestHostileHostLists: a host named twice (literally, through a range, a comma list and the
// hosts file) is probed and reported once; 10,000 hosts from a file resolve in reasonable
// time; a range past the documented limit of 20,000 hosts is a one-line usage error.
func TestHostileHostLists(t *testing.T) {
	t.Run("duplicates", func(t *testing.T) {
		l := newSSHLab(t)
		exec := func(e *sshtest.Exec) int {
			_, _ = e.Stdout.Write(captureFor(e.Stdin, hostileCapture(hostileSections(trainer)...)))
			return 0
		}
		gpu1 := l.server(t, "gpu1", sshtest.Config{Exec: exec})
		gpu2 := l.server(t, "gpu2", sshtest.Config{Exec: exec})
		config := l.write(t, "")
		hosts := filepath.Join(t.TempDir(), "hosts")
		if err := os.WriteFile(hosts, []byte("gpu2\ngpu1 # again\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := cli(t, nil, "-F", config, "--timeout", "10s", "--format", "json", "-f", hosts,
			"gpu1", "gpu1", "gpu[1-2]", "gpu2,gpu1")
		noCrash(t, errOut, code)
		doc := decodeDoc(t, out)
		var got []string
		for _, h := range doc.Hosts {
			got = append(got, h.Host)
			if !h.OK {
				t.Errorf("%s: %+v", h.Host, h.Error)
			}
		}
		if strings.Join(got, " ") != "gpu1 gpu2" || code != exitOK {
			t.Errorf("reported %q (exit %d), want gpu1 gpu2 once each, in first-seen order", got, code)
		}
		if gpu1.Sessions() != 1 || gpu2.Sessions() != 1 {
			t.Errorf("sessions: gpu1 %d, gpu2 %d; want each host probed once", gpu1.Sessions(), gpu2.Sessions())
		}
	})

	t.Run("10000 hosts from a file", func(t *testing.T) {
		dir := t.TempDir()
		empty := filepath.Join(dir, "empty_config")
		hosts := filepath.Join(dir, "hosts")
		var b strings.Builder
		for i := range 10000 {
			fmt.Fprintf(&b, "node%05d.cluster.example\n", i)
		}
		b.WriteString("node00000.cluster.example\n") // and one twice
		for _, f := range []struct {
			name string
			data string
		}{{empty, ""}, {hosts, b.String()}} {
			if err := os.WriteFile(f.name, []byte(f.data), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		out, errOut, code := cli(t, nil, "-F", empty, "-f", hosts, "--dry-run", "--format", "json")
		elapsed := time.Since(start)
		noCrash(t, errOut, code)
		t.Logf("10,000 hosts resolved in %s", elapsed)
		var doc struct {
			Hosts []struct {
				Host     string `json:"host"`
				HostName string `json:"hostname"`
				Port     int    `json:"port"`
			} `json:"hosts"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitOK {
			t.Fatalf("exit %d, %v, stderr %q", code, err, errOut)
		}
		if len(doc.Hosts) != 10000 || doc.Hosts[9999].Host != "node09999.cluster.example" ||
			doc.Hosts[9999].HostName != doc.Hosts[9999].Host || doc.Hosts[9999].Port != 22 {
			t.Errorf("%d hosts, last %+v", len(doc.Hosts), doc.Hosts[len(doc.Hosts)-1])
		}
		if elapsed > testenv.Scale(10*time.Second) {
			t.Errorf("resolving 10,000 hosts took %s", elapsed)
		}
	})

	t.Run("past the limit", func(t *testing.T) {
		dir := t.TempDir()
		many := filepath.Join(dir, "hosts")
		var b strings.Builder
		for i := range 20001 {
			fmt.Fprintf(&b, "n%d\n", i)
		}
		if err := os.WriteFile(many, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"gpu[1-100000]"},
			{"--dry-run", "gpu[1-100000]"},
			{"gpu[1-10000]", "node[1-10001]"},
			{"rack[1-1000]-gpu[1-100]"},
			{"-f", many},
		} {
			start := time.Now()
			out, errOut, code := cli(t, nil, args...)
			if code != exitUsage || out != "" {
				t.Errorf("%v: exit %d, want %d; stdout %q", args, code, exitUsage, out)
			}
			first, _, _ := strings.Cut(errOut, "\n")
			if !strings.Contains(first, "20000") || !strings.HasPrefix(first, "gputriage: ") || len(errOut) > 400 ||
				strings.Contains(errOut, "goroutine ") || strings.Contains(errOut, "panic") {
				t.Errorf("%v: stderr %q, want one line naming the limit of 20000 hosts", args, errOut)
			}
			if d := time.Since(start); d > testenv.Scale(2*time.Second) {
				t.Errorf("%v: took %s to refuse", args, d)
			}
		}
	})
}

// hostileArgs are command-line arguments that try to drive a terminal or break a report:
// CSI (colors, clearing the screen, moving the cursor), OSC title and clipboard (52) and
// hyperlink (8) sequences with BEL and ST terminators, 8-bit C1 controls, bidi overrides and
// isolates, zero-width and separator characters, line breaks that would forge report lines,
// Markdown syntax, and NUL-free binary garbage.
func hostileArgs() []string {
	garbage := make([]byte, 300)
	x := uint32(88172645)
	for i := range garbage {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		garbage[i] = byte(x%255) + 1 // never NUL: argv elements cannot hold one
	}
	return []string{
		"\x1b[31mred\x1b[0m\x1b[2J\x1b[H\x1b[1A\x1b[K",
		"\x1b]0;pwned title\x07",
		"\x1b]2;other title\x1b\\",
		"\x1b]52;c;cm0gLXJmIH4K\x07",
		"\x1b]8;;https://evil.example/\x1b\\click me\x1b]8;;\x1b\\",
		"\u009b31mC1-CSI\u009d0;c1 title\u009c",
		"\u202eevil.py\u202c \u2066iso\u2069 \u200fRLM \u200bzw \ufeffbom \u2028ls \u2029ps",
		"one\nFORGED LINE: OK\rFORGED AFTER CR\r\nFORGED CRLF\v\f\b\x07\x7f",
		"| cell | `tick` ``` <script>alert(1)</script> [link](https://evil.example) *em* # h",
		string(garbage),
	}
}

// jsonString is s as encoding/json decodes it back: each byte of invalid UTF-8 becomes U+FFFD.
func jsonString(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// TestHostileStrings: remote strings carrying escape sequences, bidi overrides, line breaks
// and garbage (in command lines, process names, the working directory and /dev/shm names)
// reach no text or Markdown report raw, with color on or off, verbose or not, redacted or
// not; JSON stays valid and gives back every argument exactly.
func TestHostileStrings(t *testing.T) {
	args := hostileArgs()
	evil := "\x1b]0;pwned\x07py\u202e\x1b[2J"
	procs := []hProc{
		// A leftover (its parent is gone) so it is shown even without -v.
		{pid: 5001, comm: evil, smiName: "/usr/bin/" + evil, gpu: 0, mib: 30000, cwd: "/tmp/\x1b]52;c;Y2xpcA==\x07\nFORGED CWD\n```\n# FORGED HEADING",
			argv: append([]string{"python3", "-m", "sglang.launch_server", "--model-path", "/dev/shm/\x1b[8mhidden"}, args...)},
		{pid: 5002, comm: "python3", smiName: "python3", gpu: 1, mib: 1000, cwd: "/",
			argv: append([]string{"python3"}, args[len(args)-3:]...)},
	}
	secs := hostileSections(procs...)
	for i, s := range secs {
		switch {
		case strings.Contains(s, " begin procs "):
			secs[i] = strings.Replace(s, "S 77 5001", "S 1 5001", 1)
			secs[i] = strings.Replace(secs[i], "PPid:\t77\nstatus Uid:\t1000\t1000\t1000\t1000\nstatus NSpid:\t5001", "PPid:\t1\nstatus Uid:\t1000\t1000\t1000\t1000\nstatus NSpid:\t5001", 1)
		case strings.Contains(s, " begin fds "):
			secs[i] = strings.Replace(s, "denied 0", "5001 9 /dev/shm/\x1b]0;shm title\x07\u202eseg (deleted)\ndenied 0", 1)
		case strings.Contains(s, " begin shm-ls "):
			secs[i] = hSec("shm-ls", "d\t60\t1796033000.5\t0\t/dev/shm\x00f\t4096\t1700000000.5\t1000\t/dev/shm/\x1b[31mstale\u202e\nFORGED SHM\x00", 0)
		}
	}
	raw := hostileCapture(secs...)

	for _, redact := range []bool{false, true} {
		extra := []string{}
		if redact {
			extra = []string{"--redact"}
		}
		t.Run(fmt.Sprintf("redact=%v", redact), func(t *testing.T) {
			out, errOut, code := replay(t, "host01", raw, append([]string{"--format", "json"}, extra...)...)
			if code != exitFindings {
				t.Errorf("exit %d, want %d (stderr %q)", code, exitFindings, errOut)
			}
			doc := decodeDoc(t, out)
			h := doc.Hosts[0]
			if !h.OK || len(h.Processes) != 2 {
				t.Fatalf("host %+v", h)
			}
			if !doc.hasFinding(0, "shm-deleted-mapped") {
				t.Errorf("no shm-deleted-mapped finding: %+v", h.Findings)
			}
			for i, pr := range h.Processes {
				want := procs[i].argv
				if len(pr.Argv) != len(want) {
					t.Errorf("PID %d: %d arguments, want %d", pr.PID, len(pr.Argv), len(want))
					continue
				}
				for k := range want {
					if pr.Argv[k] != jsonString(want[k]) {
						t.Errorf("PID %d argv[%d] = %q, want %q", pr.PID, k, pr.Argv[k], want[k])
					}
				}
			}
			if n := h.Processes[0].Name; n == nil || *n != "/usr/bin/"+evil {
				t.Errorf("name %v, want %q", n, "/usr/bin/"+evil)
			}

			for _, f := range [][]string{
				{"--color", "never"}, {"--color", "always"}, {"-v", "--color", "never"}, {"-v", "--color", "always"},
				{"--format", "markdown"}, {"-v", "--format", "markdown"},
			} {
				what := fmt.Sprint(f, extra)
				out, errOut, code := replay(t, "host01", raw, append(f, extra...)...)
				if code != exitFindings {
					t.Errorf("%s: exit %d (stderr %q)", what, code, errOut)
				}
				color := f[len(f)-1] == "always"
				rawControls(t, what, out, color)
				if color && !sgr.MatchString(out) {
					t.Errorf("%s: no color at all", what)
				}
				plain := sgr.ReplaceAllString(out, "")
				if f[len(f)-1] == "markdown" && !redact {
					plain = rawCaptureBlock(t, plain)
				}
				for _, l := range strings.Split(plain, "\n") {
					if l = strings.TrimLeft(l, " |>-*`"); strings.HasPrefix(l, "FORGED") {
						t.Errorf("%s: remote text starts a report line: %q", what, l)
					}
				}
				// What was there is shown, visibly escaped, not dropped (Markdown escapes
				// brackets with a backslash, hence the unescaping).
				plain = strings.ReplaceAll(plain, `\`, "")
				for _, want := range []string{`x1b]0;pwned`, `u202e`, "5001"} {
					if !strings.Contains(plain, want) {
						t.Errorf("%s: lacks %q:\n%s", what, want, plain)
					}
				}
				if f[0] == "-v" && !strings.Contains(plain, `x1b]52;c;cm0gLXJmIH4K`) {
					t.Errorf("%s: the OSC 52 argument is not shown escaped:\n%s", what, plain)
				}
			}
		})
	}
}

// rawCaptureBlock checks that the raw capture at the end of a Markdown host entry is fenced
// with a fence that none of its lines (one is a forged "```") can close, and returns the
// report without it.
func rawCaptureBlock(t *testing.T, md string) string {
	t.Helper()
	start := strings.Index(md, "<details><summary>raw capture")
	end := strings.LastIndex(md, "</details>")
	if start < 0 || end < start {
		t.Errorf("no raw capture block in the Markdown report")
		return md
	}
	lines := strings.Split(md[start:end], "\n")
	var fence string
	for i, l := range lines {
		if fence == "" {
			if strings.HasPrefix(l, "```") {
				fence = strings.TrimSuffix(l, "text")
			}
			continue
		}
		if strings.HasPrefix(l, fence) {
			if rest := lines[i+1:]; len(strings.TrimSpace(strings.Join(rest, ""))) > 0 {
				t.Errorf("the raw capture's fence %q is closed early, at %q", fence, l)
			}
			break
		}
	}
	if !strings.Contains(md[start:end], "\n```\n# FORGED HEADING") || len(fence) <= 3 {
		t.Errorf("the forged fence is not inside a longer fence (%q)", fence)
	}
	return md[:start] + md[end:]
}

// A capture that describes a process twice (here: a second procs section, and in another a
// forged second block for the trainer's PID) is tampered with: the contested data is not used,
// and the report says so as a probe-limited warning that names what was contested.
func TestHostileTamperedCapture(t *testing.T) {
	forged := hSec("procs", "pid 4242\nstat 4242 (forged) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\nend", 0)
	secs := hostileSections(trainer)
	twice := append(append([]string(nil), secs...), forged)
	var inBlock []string
	for _, s := range secs {
		if strings.Contains(s, " begin procs ") {
			s = strings.Replace(s, "\nend\n", "\nend\npid 4242\nstat 4242 (forged) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\nend\n", 1)
		}
		inBlock = append(inBlock, s)
	}
	for name, raw := range map[string][]byte{"section-twice": hostileCapture(twice...), "pid-twice": hostileCapture(inBlock...)} {
		t.Run(name, func(t *testing.T) {
			out, _, _ := replay(t, "host01", raw, "--format", "json")
			doc := decodeDoc(t, out)
			if !doc.hasNote(0, "capture-tampered") {
				t.Errorf("no capture-tampered note: %+v", doc.Hosts[0].Notes)
			}
			for _, p := range doc.Hosts[0].Processes {
				if p.PID == 4242 && p.Name != nil && *p.Name == "forged" {
					t.Errorf("the forged description of PID 4242 was used")
				}
			}
			found := false
			for _, f := range doc.Hosts[0].Findings {
				if f.Code == "probe-limited" && f.Severity == "warning" && strings.Contains(strings.Join(f.Evidence, "\n"), "capture-tampered") {
					found = true
				}
			}
			if !found {
				t.Errorf("no probe-limited warning naming capture-tampered: %+v", doc.Hosts[0].Findings)
			}
		})
	}
}
