package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/parse"
)

// replayEnv is fix --replay's world in a test: an ssh_config that sends every host to a
// listener of the test's, a state directory for the audit log. conns reports, once the
// command has returned, how many connections reached the listener.
func replayEnv(t *testing.T) (args []string, env map[string]string, conns func() int) {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	addr := ln.Addr().(*net.TCPAddr)
	config := filepath.Join(dir, "ssh_config")
	cfg := fmt.Sprintf("Host *\n  HostName 127.0.0.1\n  Port %d\n  ConnectTimeout 2\n", addr.Port)
	if err := os.WriteFile(config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	conns = func() int {
		// The kernel queues connections in the order they came: the test's own, made once
		// the command has returned, comes after any the command made.
		mine, err := net.Dial("tcp", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		defer mine.Close()
		n := 0
		for c := range accepted {
			if c.RemoteAddr().String() == mine.LocalAddr().String() {
				c.Close()
				return n
			}
			c.Close()
			n++
		}
		t.Fatal("listener closed")
		return n
	}
	env = map[string]string{"HOME": dir, "XDG_STATE_HOME": filepath.Join(dir, "state")}
	return []string{"-F", config, "--timeout", "5s"}, env, conns
}

// replayed runs gputriage fix ARGS as typed (with the test's ssh_config, which reaches only
// the test's listener) and checks that it reached no host, asked nothing and recorded nothing.
func replayed(t *testing.T, args ...string) (out, errOut string, code int) {
	t.Helper()
	reach, env, conns := replayEnv(t)
	out, errOut, code = cli(t, env, append(append([]string{"fix"}, args...), reach...)...)
	if n := conns(); n != 0 {
		t.Errorf("fix %q connected %d time(s)", args, n)
	}
	if strings.Contains(errOut, "To apply") {
		t.Errorf("fix %q asked for a confirmation: %q", args, errOut)
	}
	if _, err := os.Stat(filepath.Join(env["XDG_STATE_HOME"], "gputriage", "fix.log")); !os.IsNotExist(err) {
		t.Errorf("fix %q wrote an audit log (%v)", args, err)
	}
	return out, errOut, code
}

// planCommands are the lines of a plan's text that are commands the host would run, or that
// a person is told to run.
func planCommands(out string) []string {
	var cmds []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		for _, p := range []string{"kill ", "systemctl ", "docker ", "podman ", "crictl ", "scancel ", "sleep ", "then, if PID", "if you judge it"} {
			if strings.HasPrefix(l, p) {
				cmds = append(cmds, l)
				break
			}
		}
	}
	return cmds
}

// innocents are the PIDs of the fixture's processes other than ct200's leftover 20629.
func innocents(t *testing.T, capture string) []int {
	t.Helper()
	raw, err := os.ReadFile(capture)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := parse.Parse(raw)
	var pids []int
	for _, p := range s.Processes {
		if p.PID != 20629 {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

// TestFixReplayFixtures: fix --replay on every fixture, and on the directory of them, prints
// the plan a live fix would show before its confirmation: ct200's leftover PID 20629 with its
// identity (boot id, start time, uid, argv hash) and the exact command; no other process in
// any command; "nothing to apply" where there is nothing to fix; exit 0; and nothing reached,
// asked or recorded.
func TestFixReplayFixtures(t *testing.T) {
	root := repoRoot(t)
	ct200 := regexp.MustCompile(`(?m)^ct200 \(boot [0-9a-f]{12}\):\n  kill -s TERM 20629\n` +
		`      sglang\.launch_server of root \(uid 0\), started at tick [0-9]+, argv sha256 [0-9a-f]{12}; leftover-process: [a-z, -]+\n` +
		`      frees 55,286 MiB on GPU 0\n`)
	for _, name := range []string{"ct200", "busy", "clean", "driver-mismatch", "ghost", ""} {
		path := filepath.Join(root, "fixtures", name+".capture")
		if name == "" {
			name, path = "the directory", filepath.Join(root, "fixtures")
		}
		t.Run(name, func(t *testing.T) {
			out, errOut, code := replayed(t, "--replay", path)
			if code != exitOK {
				t.Errorf("exit %d, want 0\n%s%s", code, out, errOut)
			}
			culprit := name == "ct200" || name == "the directory"
			if culprit != ct200.MatchString(out) {
				t.Errorf("plan names ct200's leftover and its identity: %v, want %v:\n%s", !culprit, culprit, out)
			}
			want := "nothing to apply\n"
			if culprit {
				want = "nothing applied (--replay): gputriage fix ct200 probes again"
			}
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
			if !culprit && !strings.Contains(out, "  nothing to stop\n") {
				t.Errorf("the plan does not say there is nothing to stop:\n%s", out)
			}
			var pids []int
			for _, f := range []string{"ct200", "busy", "clean", "driver-mismatch", "ghost"} {
				pids = append(pids, innocents(t, filepath.Join(root, "fixtures", f+".capture"))...)
			}
			for _, c := range planCommands(out) {
				for _, pid := range pids {
					if regexp.MustCompile(fmt.Sprintf(`\b%d\b`, pid)).MatchString(c) {
						t.Errorf("the innocent PID %d is in the command %q", pid, c)
					}
				}
			}
			if culprit && len(planCommands(out)) != 1 {
				t.Errorf("commands %q, want ct200's kill only", planCommands(out))
			}
		})
	}
}

// A capture whose probe ran as another user than the culprit's: the plan is the same, and
// fix --replay says that a live run as that user would be refused, in the live run's words
// (without --sudo only).
func TestFixReplayOtherUsersProcess(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "fixtures", "ct200.capture"))
	if err != nil {
		t.Fatal(err)
	}
	for from, to := range map[string]string{"\nuid=0\n": "\nuid=1000\n", "\nuser=root\n": "\nuser=alice\n"} {
		if strings.Count(string(raw), from) != 1 {
			t.Fatalf("ct200's host section lacks %q", from)
		}
		raw = []byte(strings.Replace(string(raw), from, to, 1))
	}
	path := filepath.Join(t.TempDir(), "ct200.capture")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	refused := "applied as the capture's user (uid 1000), it would end:\n" +
		"ct200: PID 20629 sglang.launch_server: refused: permission denied: it is another user's process; --sudo would signal it as root\n"
	out, errOut, code := replayed(t, "--replay", path)
	if code != exitOK || !strings.Contains(out, "  kill -s TERM 20629\n") || !strings.Contains(out, refused) {
		t.Errorf("exit %d, want 0, the plan and %q\n%s%s", code, refused, out, errOut)
	}
	out, _, _ = replayed(t, "--replay", path, "--sudo")
	if !regexp.MustCompile(`(?m)^ct200 \(boot [0-9a-f]{12}\), through sudo -n:$`).MatchString(out) || strings.Contains(out, "refused") {
		t.Errorf("--sudo: the plan through sudo, and no refusal:\n%s", out)
	}
}

// The README and docs/fix.md show fix --replay on ct200 as it is printed, byte for byte: the
// golden testdata/golden/fix-replay-ct200.txt (regenerate with -update, then paste it).
func TestFixReplayReadme(t *testing.T) {
	out, _, code := replayed(t, "--replay", filepath.Join(repoRoot(t), "fixtures", "ct200.capture"))
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	checkGolden(t, filepath.Join("testdata", "golden", "fix-replay-ct200.txt"), out)
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	sample := "```sh\ngo run ./cmd/gputriage fix --replay fixtures/ct200.capture\n```\n\n```text\n" + out + "```\n"
	if !strings.Contains(string(readme), sample) {
		t.Errorf("README.md does not show fix --replay fixtures/ct200.capture and its output; want:\n%s", sample)
	}
	guide, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "fix.md"))
	if err != nil {
		t.Fatal(err)
	}
	if sample := "```\n$ gputriage fix --replay fixtures/ct200.capture\n" + out + "```\n"; !strings.Contains(string(guide), sample) {
		t.Errorf("docs/fix.md does not show fix --replay fixtures/ct200.capture and its output; want:\n%s", sample)
	}
}

// What does not go with --replay (applying, and hosts to reach) is refused, naming the flags
// as given; the flags fix checks live are checked alike; a path that is no capture is refused;
// a directory with a host that failed exits 3.
func TestFixReplayUsage(t *testing.T) {
	root := repoRoot(t)
	ct200 := filepath.Join(root, "fixtures", "ct200.capture")
	dir := t.TempDir()
	for name, body := range map[string]string{"ct200.capture": "", "gpu09.capture": "not a capture\n"} {
		if body == "" {
			b, err := os.ReadFile(ct200)
			if err != nil {
				t.Fatal(err)
			}
			body = string(b)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args     []string
		code     int
		want     []string
		notWants []string
	}{
		{[]string{"--replay", ct200, "--yes"}, exitUsage, []string{"fix: --replay prints the plan of saved captures and applies nothing: leave out --yes\n"}, nil},
		{[]string{"--yes", "--replay", ct200, "-w", "gpu[01-02]", "--plan-out", "p.json", "gpu07"}, exitUsage,
			[]string{"leave out --yes, --plan-out, -w (--hosts), the host names gpu07\n"}, []string{"--apply", "-f "}},
		{[]string{"--replay", ct200, "--apply", "p.json", "--slurm-job", "7"}, exitUsage, []string{"leave out --apply, --slurm-job\n"}, []string{"--yes"}},
		{[]string{"--replay", ct200, "--kill-after", "70s"}, exitUsage, []string{"--kill-after (1m10s) must be shorter than --wait (1m0s)"}, nil},
		{[]string{"--replay", filepath.Join(root, "nope.capture")}, exitUsage, []string{"fix --replay: ", "no such file"}, nil},
		{[]string{"--replay", filepath.Join(root, "README.md")}, exitUsage, []string{"is not a gputriage capture"}, nil},
		{[]string{"--replay", dir}, exitFixHostFailed, []string{"gpu09: not probed: "}, nil},
	} {
		out, errOut, code := replayed(t, tc.args...)
		if code != tc.code {
			t.Errorf("fix %q: exit %d, want %d\n%s%s", tc.args, code, tc.code, out, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("fix %q: stderr %q lacks %q", tc.args, errOut, w)
			}
		}
		for _, w := range tc.notWants {
			if strings.Contains(errOut, w) {
				t.Errorf("fix %q: stderr %q names %q, which was not given", tc.args, errOut, w)
			}
		}
	}
}
