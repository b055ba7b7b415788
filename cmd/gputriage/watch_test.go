package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/sshdtest"
	"github.com/gputriage/gputriage/internal/testenv"
)

// watchLab is two real OpenSSH hosts for watch: w1 runs a leftover server (orphaned, its
// weights rm -rf'd) on GPU 0 and a healthy one on GPU 1, served by the dynamic fake
// nvidia-smi (a holder that exits leaves its list at once, its memory 2 s later); w2 is clean.
// w3's address has nothing listening.
type watchLab struct {
	config   string
	w1, w2   *sshdtest.SSHD
	smi      *scenario.SMI
	leftover *scenario.Proc
	healthy  *scenario.Proc
}

func newWatchLab(t *testing.T) *watchLab {
	sshdtest.SSHDPath(t)
	dir := t.TempDir()
	key, pub := sshdtest.UserKey(t, dir, "ed25519")
	l := &watchLab{}
	start := func(name string, i int) *sshdtest.SSHD {
		return sshdtest.Start(t, sshdtest.Config{Name: name, Addr: fmt.Sprintf("127.0.0.%d", 150+i), Port: 2250 + i,
			AuthorizedKeys: []string{pub}, SMI: cleanSMI(2)})
	}
	l.w1, l.w2 = start("w1", 1), start("w2", 2)
	l.startHolders(t)
	var conf, known strings.Builder
	for i := 1; i <= 3; i++ {
		fmt.Fprintf(&conf, "Host w%d\n  HostName 127.0.0.%d\n  Port %d\n\n", i, 150+i, 2250+i)
	}
	fmt.Fprintf(&conf, "Host *\n  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s/known_hosts\n  GlobalKnownHostsFile none\n  ConnectTimeout 3\n", key, dir)
	for _, s := range []*sshdtest.SSHD{l.w1, l.w2} {
		known.WriteString(s.KnownHostsLine(s.Addr) + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "known_hosts"), []byte(known.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	l.config = filepath.Join(dir, "ssh_config")
	if err := os.WriteFile(l.config, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return l
}

// startHolders starts w1's leftover and healthy servers and lists them in its nvidia-smi.
func (l *watchLab) startHolders(t *testing.T) {
	t.Helper()
	enter := l.w1.Enter(t)
	var err error
	l.leftover, err = scenario.Start(scenario.Server{Module: "sglang.launch_server",
		Args:   []string{"--model-path", "/dev/shm/Qwen3.6-27B", "--tp", "1"},
		ShmDir: "/dev/shm/Qwen3.6-27B", ShmFiles: 2, ShmBytes: 1 << 20, Delete: true, Orphan: true, Enter: enter})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.leftover.Stop)
	l.healthy, err = scenario.Start(scenario.Server{Module: "vllm.entrypoints.openai.api_server",
		Args: []string{"--model", "meta-llama/Llama-3.1-8B"}, Enter: enter})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.healthy.Stop)
	smi := cleanSMI(2)
	smi.GPUs[0].UsedMiB, smi.GPUs[1].UsedMiB = 55295, 30009
	smi.Apps = []scenario.App{{PID: l.leftover.PID, GPUUUID: smi.GPUs[0].UUID, UsedMiB: 55286, Name: "python3"},
		{PID: l.healthy.PID, GPUUUID: smi.GPUs[1].UUID, UsedMiB: 30000, Name: "python3"}}
	smi.Dynamic, smi.ReleaseDelay = true, 2*time.Second
	if err := scenario.WriteFakeSMI(l.w1.SMIDir(), *smi); err != nil {
		t.Fatal(err)
	}
	l.smi = smi
}

// kill ends a process of w1's namespace (the tests' Proc.Stop does not reach into it).
func (l *watchLab) kill(t *testing.T, pid int) {
	t.Helper()
	enter := l.w1.Enter(t)
	if out, err := exec.Command(enter[0], append(enter[1:], "kill", "-9", strconv.Itoa(pid))...).CombinedOutput(); err != nil {
		t.Fatalf("kill %d: %v: %s", pid, err, out)
	}
}

// watchRun is gputriage watch running in-process, its output readable while it runs.
type watchRun struct {
	stdout, stderr *testenv.SyncBuffer
	code           chan int
	cancel         context.CancelFunc
}

func startWatch(t *testing.T, args ...string) *watchRun {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watchRun{stdout: &testenv.SyncBuffer{}, stderr: &testenv.SyncBuffer{}, code: make(chan int, 1), cancel: cancel}
	notTerm := func(io.Writer) (bool, int) { return false, 0 }
	go func() {
		w.code <- run(ctx, append([]string{"watch"}, args...), strings.NewReader(""), w.stdout, w.stderr,
			func(string) string { return "" }, notTerm)
	}()
	t.Cleanup(cancel)
	return w
}

// waitFor waits until stdout holds want.
func (w *watchRun) waitFor(t *testing.T, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(testenv.Scale(within)) // a loaded machine takes longer
	for !strings.Contains(w.stdout.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in %s; stdout:\n%s\nstderr:\n%s", want, within, w.stdout, w.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (w *watchRun) exit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case c := <-w.code:
		return c
	case <-time.After(testenv.Scale(within)):
		t.Fatalf("watch still running after %s; stdout:\n%s\nstderr:\n%s", within, w.stdout, w.stderr)
		return -1
	}
}

var releasedRe = regexp.MustCompile(`w1: GPU 0: 55,286 MiB released ([0-9.]+) s after PID (\d+) was gone \(probes at \S+ and \S+; to within the ([0-9.]+) s between rounds\)`)

// TestWatchRelease: piped, watch --until free reports the leftover's exit and, once the fake
// driver gives its memory back 2 s later, the release with its delay, and exits 0 although a
// healthy holder still holds GPU 1. The whole watch costs each host one SSH handshake, and
// each round one session. JSON Lines parse line by line and carry the same.
func TestWatchRelease(t *testing.T) {
	l := newWatchLab(t)
	handshakes := func(s *sshdtest.SSHD) int { return strings.Count(s.Log(), "Accepted publickey") }
	sessions := func(s *sshdtest.SSHD) int { return strings.Count(s.Log(), "Starting session: command") }
	h0, s0 := handshakes(l.w1), sessions(l.w1)

	w := startWatch(t, "-F", l.config, "--until", "free", "--interval", "500ms", "--timeout", "60s", "w1", "w2")
	w.waitFor(t, fmt.Sprintf("w1: holder PID %d sglang.launch_server [leftover]: 55,286 MiB on GPU 0", l.leftover.PID), 20*time.Second)
	w.waitFor(t, "w1: waiting for leftover PID", 5*time.Second)
	w.waitFor(t, "w2: holds", 5*time.Second)
	before := w.stdout.String()
	time.Sleep(1500 * time.Millisecond) // rounds with nothing changed: nothing printed
	quiet := w.stdout.String()
	l.kill(t, l.leftover.PID)
	code := w.exit(t, 30*time.Second)
	out := w.stdout.String()
	if code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, w.stderr)
	}
	if quiet != before {
		t.Errorf("printed while nothing changed:\n%s", quiet[len(before):])
	}
	for _, want := range []string{
		fmt.Sprintf("w1: gone: PID %d sglang.launch_server [leftover]: 55,286 MiB on GPU 0", l.leftover.PID),
		"w1: GPU 0: used 55,295 MiB -> 9 MiB (free 81,018 MiB)",
		"w1: holds", "w2: holds", "watch ended: --until free holds on every host (exit 0)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	m := releasedRe.FindStringSubmatch(out)
	if m == nil || m[2] != strconv.Itoa(l.leftover.PID) {
		t.Fatalf("no release line for PID %d:\n%s", l.leftover.PID, out)
	}
	if after, _ := strconv.ParseFloat(m[1], 64); after < 0.5 || after > 5 {
		t.Errorf("released %s s after exit; the fake releases 2 s after it notices", m[1])
	}
	if strings.Contains(out, fmt.Sprintf("gone: PID %d", l.healthy.PID)) {
		t.Errorf("the healthy holder was reported gone:\n%s", out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if _, err := time.Parse("2006-01-02T15:04:05.000Z", strings.Fields(line)[0]); err != nil {
			t.Errorf("line without a timestamp: %q", line)
		}
	}
	rounds := sessions(l.w1) - s0
	if got := handshakes(l.w1) - h0; got != 1 {
		t.Errorf("%d SSH handshakes with w1 over %d rounds, want 1", got, rounds)
	}
	if rounds < 4 {
		t.Errorf("only %d sessions (rounds) on w1", rounds)
	}
	t.Logf("w1: %d rounds, %d handshake(s)\n%s", rounds, handshakes(l.w1)-h0, out)
}

// TestWatchJSONLines: --format json writes one object per host round, each line parsing on its
// own, one session per round, the release with its delay, and a last line with the end.
func TestWatchJSONLines(t *testing.T) {
	l := newWatchLab(t)
	sessions := func() int { return strings.Count(l.w1.Log(), "Starting session: command") }
	s0 := sessions()
	w := startWatch(t, "-F", l.config, "--until", "free", "--interval", "500ms", "--timeout", "60s", "--format", "json", "w1")
	w.waitFor(t, `"round":2`, 20*time.Second)
	l.kill(t, l.leftover.PID)
	if code := w.exit(t, 30*time.Second); code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, w.stdout, w.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(w.stdout.String(), "\n"), "\n")
	var released bool
	for i, line := range lines {
		var r struct {
			Host    string `json:"host"`
			Round   int    `json:"round"`
			Holds   bool   `json:"holds"`
			End     string `json:"end"`
			Exit    *int   `json:"exit_status"`
			Holders []struct {
				PID      int  `json:"pid"`
				Leftover bool `json:"leftover"`
			} `json:"holders"`
			Events []struct {
				Kind  string   `json:"kind"`
				PID   *int     `json:"pid"`
				After *float64 `json:"after_seconds"`
			} `json:"events"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %d does not parse: %v: %q", i+1, err, line)
		}
		if i == len(lines)-1 {
			if r.Exit == nil || *r.Exit != 0 || r.End == "" {
				t.Errorf("last line %q", line)
			}
			if rounds := sessions() - s0; rounds != len(lines)-1 {
				t.Errorf("%d sessions on w1 for %d rounds: want one probe per round", rounds, len(lines)-1)
			}
			break
		}
		if r.Host != "w1" || r.Round != i+1 {
			t.Errorf("line %d: host %q round %d", i+1, r.Host, r.Round)
		}
		for _, e := range r.Events {
			if e.Kind == "memory-released" && e.PID != nil && *e.PID == l.leftover.PID && e.After != nil {
				released = true
			}
		}
	}
	if !released {
		t.Errorf("no memory-released event for PID %d:\n%s", l.leftover.PID, w.stdout)
	}
}

// TestWatchEnds: a --timeout that passes before --until holds exits 1; a host that cannot be
// reached exits 3 at once; Ctrl-C exits 130; --replay is refused (2).
func TestWatchEnds(t *testing.T) {
	l := newWatchLab(t)
	begin := time.Now()
	out, errOut, code := cli(t, nil, "watch", "-F", l.config, "--until", "free", "--interval", "500ms", "--timeout", "3s", "w1", "w2")
	if code != exitHoldsNot || !strings.Contains(out, "watch ended: --timeout 3s passed before --until free held (exit 1)") {
		t.Errorf("timeout: exit %d\n%s\n%s", code, out, errOut)
	}
	if d := time.Since(begin); d > testenv.Scale(8*time.Second) {
		t.Errorf("a 3s --timeout took %s", d)
	}
	out, errOut, code = cli(t, nil, "watch", "-F", l.config, "--until", "free", "--timeout", "30s", "w2", "w3")
	if code != exitHostsFailed || !strings.Contains(out, "w3: unreachable: connect: refused") {
		t.Errorf("unreachable: exit %d\n%s\n%s", code, out, errOut)
	}
	w := startWatch(t, "-F", l.config, "--interval", "500ms", "w2")
	w.waitFor(t, "w2: watching: 2 GPUs, 0 holders", 20*time.Second)
	w.cancel()
	if code := w.exit(t, 5*time.Second); code != exitInterrupted {
		t.Errorf("Ctrl-C: exit %d", code)
	}
	if _, errOut, code := cli(t, nil, "watch", "--replay", "fixtures/ct200.capture"); code != exitUsage || !strings.Contains(errOut, "--replay: not a flag of gputriage watch") {
		t.Errorf("--replay: exit %d: %s", code, errOut)
	}
}

// TestWatchReconnect: a host whose sshd restarts mid-watch is shown unreachable, reconnected,
// and the gap from its last good round to the reconnect is given.
func TestWatchReconnect(t *testing.T) {
	l := newWatchLab(t)
	w := startWatch(t, "-F", l.config, "--interval", "500ms", "--timeout", "20s", "--format", "json", "w2")
	w.waitFor(t, `"round":2`, 20*time.Second)
	l.w2.Stop()
	w.waitFor(t, `"kind":"unreachable"`, 10*time.Second)
	time.Sleep(time.Second)
	l.w2.Restart(t)
	w.waitFor(t, `"kind":"reconnected"`, 10*time.Second)
	w.cancel()
	w.exit(t, 5*time.Second)
	re := regexp.MustCompile(`"text":"reconnected after a gap of ([0-9.]+) s[^"]*","gap_seconds":([0-9.]+)`)
	m := re.FindStringSubmatch(w.stdout.String())
	if m == nil {
		t.Fatalf("no reconnect with its gap:\n%s", w.stdout)
	}
	if gap, _ := strconv.ParseFloat(m[2], 64); gap < 1 || gap > 10 {
		t.Errorf("gap %s s; sshd was down for over 1 s", m[2])
	}
	if n := strings.Count(l.w2.Log(), "Accepted publickey"); n != 2 {
		t.Errorf("%d handshakes with w2: want 2 (one before, one after the restart)", n)
	}
}

// TestWatchScreen: on a terminal (with color allowed) the screen is redrawn in place: cursor
// home and clear before each round, the fleet table, bars for the hosts still waiting; with
// --color never the same terminal gets the piped lines instead.
func TestWatchScreen(t *testing.T) {
	l := newWatchLab(t)
	for _, c := range []struct {
		color  string
		screen bool
	}{{"auto", true}, {"never", false}} {
		var out, errb testenv.SyncBuffer
		tty := func(w io.Writer) (bool, int) { return w == io.Writer(&out), 100 }
		code := run(context.Background(), []string{"watch", "-F", l.config, "--color", c.color, "--interval", "500ms",
			"--timeout", "2s", "w1", "w2"}, strings.NewReader(""), &out, &errb, func(string) string { return "" }, tty)
		s := out.String()
		if code != exitOK {
			t.Errorf("--color %s: exit %d, want 0 (no --until)\n%s\n%s", c.color, code, s, errb.String())
		}
		redraws := strings.Count(s, "\x1b[H\x1b[2J")
		if c.screen != (redraws >= 2) || (!c.screen && strings.Contains(s, "\x1b")) {
			t.Errorf("--color %s: %d redraws:\n%q", c.color, redraws, s)
		}
		if c.screen {
			last := s[strings.LastIndex(s, "\x1b[H\x1b[2J"):]
			for _, want := range []string{"gputriage watch: 2 hosts every 500ms until Ctrl-C", "HOST ", "w1 ", "2 (1 left)",
				"w1 GPU 0 [#############-------] 55,295 MiB / 81,559 MiB", "watch ended: --timeout 2s passed (exit 0)"} {
				if !strings.Contains(last, want) {
					t.Errorf("screen lacks %q:\n%s", want, last)
				}
			}
			if strings.Contains(last, "w2 GPU") {
				t.Errorf("bars for w2, which has no problem:\n%s", last)
			}
		}
	}
}
