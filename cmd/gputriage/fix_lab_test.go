//go:build linux

package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/fix"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/sshdtest"
)

// fixLab is one real OpenSSH host, "gpu-fix", as in the seed incident: the previous
// deployment's SGLang server, orphaned, its weights rm -rf'd while mapped, holding GPU 0; and
// a healthy server, started by a live parent, holding GPU 1. Its nvidia-smi follows the
// processes (a holder that exits leaves the list, its memory comes back a second later).
// logger, first on the login PATH, writes its arguments to syslog.txt beside it.
type fixLab struct {
	config, dir, state string
	sshd               *sshdtest.SSHD
	leftover, healthy  *scenario.Proc
}

func newFixLab(t *testing.T) *fixLab {
	return newFixLabWith(t, fixLabConfig{host: "gpu-fix", gpus: 2})
}

// fixLabConfig varies the lab: the host's name (its ssh_config alias), its number of GPUs
// (the healthy server holds GPU 1 with 30,000 MiB when there are 2, with 1,000 MiB when
// more), and a leftover that ignores SIGTERM.
type fixLabConfig struct {
	host       string
	gpus       int
	ignoreTerm bool
	second     bool          // 127.0.0.178:2378 instead of 127.0.0.177:2377, for a fleet of two
	release    time.Duration // the fake nvidia-smi's ReleaseDelay (whole seconds; 0: 1s)
}

func newFixLabWith(t *testing.T, c fixLabConfig) *fixLab {
	sshdtest.SSHDPath(t)
	l := &fixLab{dir: t.TempDir()}
	l.state = filepath.Join(l.dir, "state")
	key, pub := sshdtest.UserKey(t, l.dir, "ed25519")
	addr, port := "127.0.0.177", 2377
	if c.second {
		addr, port = "127.0.0.178", 2378
	}
	l.sshd = sshdtest.Start(t, sshdtest.Config{Name: c.host, Addr: addr, Port: port,
		AuthorizedKeys: []string{pub}, SMI: cleanSMI(c.gpus)})
	enter := l.sshd.Enter(t)
	start := func(s scenario.Server) *scenario.Proc {
		s.Enter = enter
		p, err := scenario.Start(s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		return p
	}
	l.leftover = start(scenario.Server{Module: "sglang.launch_server", Args: []string{"--model-path", "/dev/shm/Qwen3.6-27B", "--tp", "1"},
		ShmDir: "/dev/shm/Qwen3.6-27B", ShmFiles: 4, ShmBytes: 2 << 20, Delete: true, Orphan: true, IgnoreTerm: c.ignoreTerm})
	l.healthy = start(scenario.Server{Module: "sglang.launch_server", Args: []string{"--model-path", "/dev/shm/Llama-3-8B", "--tp", "1"},
		ShmDir: "/dev/shm/Llama-3-8B", ShmFiles: 2, ShmBytes: 1 << 20})
	smi := cleanSMI(c.gpus)
	healthyMiB := int64(30000)
	if c.gpus > 2 {
		healthyMiB = 1000
	}
	smi.GPUs[0].UsedMiB, smi.GPUs[1].UsedMiB = 55295, healthyMiB+9
	smi.Apps = []scenario.App{{PID: l.leftover.PID, GPUUUID: smi.GPUs[0].UUID, UsedMiB: 55286, Name: "python3"},
		{PID: l.healthy.PID, GPUUUID: smi.GPUs[1].UUID, UsedMiB: healthyMiB, Name: "python3"}}
	smi.Dynamic, smi.ReleaseDelay = true, cmp.Or(c.release, time.Second)
	bin := l.sshd.SMIDir()
	if err := scenario.WriteFakeSMI(bin, *smi); err != nil {
		t.Fatal(err)
	}
	fakeLogger(t, l.sshd)
	l.config = labClientConfig(t, l.dir, c.host, l.sshd, key)
	return l
}

// labClientConfig writes an ssh_config in dir that reaches s as host, as root with key, and
// its known_hosts; it returns the config's path.
func labClientConfig(t *testing.T, dir, host string, s *sshdtest.SSHD, key string) string {
	t.Helper()
	known := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(known, []byte(s.KnownHostsLine(s.Addr)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "ssh_config")
	cfg := fmt.Sprintf("Host %s\n  HostName %s\n  Port %d\n  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n"+
		"  UserKnownHostsFile %s\n  GlobalKnownHostsFile none\n", host, s.Addr, s.Port, key, known)
	if err := os.WriteFile(config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return config
}

// fakeLogger puts a logger first on s's login PATH (beside its nvidia-smi) that appends its
// arguments to syslog.txt there.
func fakeLogger(t *testing.T, s *sshdtest.SSHD) {
	t.Helper()
	bin := s.SMIDir()
	logger := "#!/bin/sh\nprintf '%s\\n' \"$*\" >>" + filepath.Join(bin, "syslog.txt") + "\n"
	if err := os.WriteFile(filepath.Join(bin, "logger"), []byte(logger), 0o755); err != nil {
		t.Fatal(err)
	}
}

// fix runs gputriage with stdin (nil: empty, not a terminal) and XDG_STATE_HOME in the lab.
func (l *fixLab) fix(t *testing.T, stdin io.Reader, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return l.gputriage(t, stdin, append([]string{"fix"}, args...)...)
}

// planOut writes the plan for host with fix --plan-out, reads it back, and fails the test
// unless it holds one host with targets targets. It returns the file, what fix printed, the
// file's bytes and the plan.
func (l *fixLab) planOut(t *testing.T, host string, targets int) (path, out, errOut string, raw []byte, p fix.Plan) {
	t.Helper()
	path = filepath.Join(l.dir, "plan.json")
	out, errOut, code := l.fix(t, nil, "--plan-out", path, host)
	if code != exitOK {
		t.Fatalf("--plan-out: exit %d\n%s\n%s", code, out, errOut)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err = fix.Read(bytes.NewReader(raw))
	if err != nil || len(p.Hosts) != 1 || len(p.Hosts[0].Targets) != targets {
		t.Fatalf("plan %+v (%v), want %d target(s) on one host\n%s\n%s\n%s", p, err, targets, raw, out, errOut)
	}
	return path, out, errOut, raw, p
}

// gputriage runs any gputriage command line in the lab (its ssh_config and a 30 s --timeout
// go in front of args after the subcommand, if any).
func (l *fixLab) gputriage(t *testing.T, stdin io.Reader, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var out, errb bytes.Buffer
	getenv := func(k string) string {
		if k == "XDG_STATE_HOME" {
			return l.state
		}
		return ""
	}
	lab := []string{"-F", l.config, "--timeout", "30s"}
	if len(args) > 0 && (args[0] == "fix" || args[0] == "watch" || args[0] == "collect" || args[0] == "explain") {
		lab = append([]string{args[0]}, lab...)
		args = args[1:]
	}
	args = append(lab, args...)
	code = run(context.Background(), args, stdin, &out, &errb, getenv, func(io.Writer) (bool, int) { return false, 0 })
	return out.String(), errb.String(), code
}

// alive asks the lab host itself (its /proc) whether its PID pid runs, and is not a zombie.
func (l *fixLab) alive(t *testing.T, pid int) bool {
	t.Helper()
	args := append(l.sshd.Enter(t), "cat", fmt.Sprintf("/proc/%d/stat", pid))
	out, err := exec.Command(args[0], args[1:]...).Output()
	return err == nil && !bytes.Contains(out[bytes.LastIndexByte(out, ')'):], []byte(") Z"))
}

// records reads the audit log.
func (l *fixLab) records(t *testing.T) []fix.Record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(l.state, "gputriage", "fix.log"))
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	var out []fix.Record
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var r fix.Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

func (l *fixLab) syslog(t *testing.T) string {
	b, _ := os.ReadFile(filepath.Join(l.sshd.SMIDir(), "syslog.txt"))
	return string(b)
}

// The seed incident, end to end: fix stops the leftover and only the leftover, reports the
// release, and records the action on both sides.
func TestFixSeedIncident(t *testing.T) {
	l := newFixLab(t)
	out, errOut, code := l.fix(t, nil, "--yes", "gpu-fix")
	if code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	t.Logf("gputriage fix --yes gpu-fix:\n%s", out)
	stopped := regexp.MustCompile(fmt.Sprintf(`(?m)^gpu-fix: PID %d sglang\.launch_server: stopped \S+ after the signal; nvidia-smi no longer lists it \(it held 55,286 MiB on GPU 0\)$`, l.leftover.PID))
	released := regexp.MustCompile(fmt.Sprintf(`(?m)^gpu-fix: GPU 0: 55,286 MiB released \S+ s after PID %d was gone`, l.leftover.PID))
	if !strings.Contains(out, fmt.Sprintf("kill -s TERM %d\n", l.leftover.PID)) || !stopped.MatchString(out) || !released.MatchString(out) {
		t.Errorf("output lacks the plan, the stop or the release:\n%s", out)
	}
	if regexp.MustCompile(fmt.Sprintf(`(PID|kill -s TERM|"pid":) %d\b`, l.healthy.PID)).MatchString(out) {
		t.Errorf("the healthy server %d is named:\n%s", l.healthy.PID, out)
	}
	if l.alive(t, l.leftover.PID) || !l.alive(t, l.healthy.PID) {
		t.Errorf("leftover alive %v, healthy alive %v", l.alive(t, l.leftover.PID), l.alive(t, l.healthy.PID))
	}
	recs := l.records(t)
	if len(recs) != 1 {
		t.Fatalf("%d audit records, want 1: %+v", len(recs), recs)
	}
	r := recs[0]
	tg := r.Target
	if r.Host != "gpu-fix" || r.Login != "root" || r.Sudo || r.Signal != "SIGTERM" || len(r.PlanID) != 16 || len(r.BootID) != 32 ||
		r.Who == "" || time.Since(r.Time) > time.Minute || r.Time.Location() != time.UTC {
		t.Errorf("audit record: %+v", r)
	}
	if tg.Kind != fix.KindKill || tg.PID != l.leftover.PID || tg.StartTicks <= 0 || len(tg.ArgvSHA256) != 64 || tg.UID != 0 ||
		tg.Finding != "leftover-process" || tg.FreesMiB[0] != 55286 {
		t.Errorf("audit target: %+v", tg)
	}
	if r.Result.Outcome != fix.Stopped || r.Result.Signal == nil || r.Result.Exit == nil || r.Result.Release == nil {
		t.Errorf("audit result: %+v", r.Result)
	}
	wantLog := fmt.Sprintf("-t gputriage -- fix plan=%s pid=%d kind=1 name=- outcome=stopped detail=- user=root sudo_user=-\n", r.PlanID, tg.PID)
	if got := l.syslog(t); got != wantLog {
		t.Errorf("syslog %q, want %q", got, wantLog)
	}
}

// A reviewed plan applies only to the processes it was made for: a start time (a restarted
// process, a reused PID), a boot id (a reboot), an argv hash or a uid that differs is refused,
// the process left alone, and the refusal recorded.
func TestFixRefusesStalePlan(t *testing.T) {
	l := newFixLab(t)
	_, _, _, raw, p := l.planOut(t, "gpu-fix", 1)
	if p.Hosts[0].Targets[0].PID != l.leftover.PID {
		t.Fatalf("plan %+v", p)
	}
	if bytes.Contains(raw, []byte(fmt.Sprintf(`"pid": %d`, l.healthy.PID))) {
		t.Errorf("the healthy server is in the plan:\n%s", raw)
	}
	cases := []struct {
		name, detail string
		edit         func(*fix.HostPlan)
	}{
		{"restarted", "start-time-differs", func(h *fix.HostPlan) { h.Targets[0].StartTicks++ }},
		{"rebooted", "boot-id-differs", func(h *fix.HostPlan) { h.BootID = strings.Repeat("0", 32) }},
		{"other argv", "argv-differs", func(h *fix.HostPlan) { h.Targets[0].ArgvSHA256 = strings.Repeat("f", 64) }},
		{"other owner", "uid-differs", func(h *fix.HostPlan) { h.Targets[0].UID = 1000 }},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, _ := fix.Read(bytes.NewReader(raw))
			c.edit(&q.Hosts[0])
			name := filepath.Join(l.dir, c.name+".json")
			var b bytes.Buffer
			if err := fix.Write(&b, q); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, b.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			out, errOut, code := l.fix(t, nil, "--yes", "--apply", name)
			if code != exitFixIncomplete || !strings.Contains(out, "refused: "+refusalWords(c.detail)) {
				t.Errorf("exit %d, want %d and the refusal\n%s\n%s", code, exitFixIncomplete, out, errOut)
			}
			if !l.alive(t, l.leftover.PID) {
				t.Fatalf("the leftover was signalled on a plan that no longer matches")
			}
			recs := l.records(t)
			if len(recs) != i+1 || recs[i].Result.Outcome != fix.Refused || recs[i].Result.Detail != c.detail || recs[i].Result.Signal != nil {
				t.Errorf("audit records %+v", recs)
			}
		})
	}
	// The probe fix takes just before applying saw each difference: nothing reached the host
	// (its own checks, for a change after that probe, are fix/apply_linux_test.go's).
	if got := l.syslog(t); got != "" {
		t.Errorf("a stale plan reached the host: syslog %q", got)
	}
}

// refusalWords is how fix words a refusal: the test checks that the user is told why.
func refusalWords(detail string) string {
	return map[string]string{
		"start-time-differs": "PID reused or process restarted",
		"boot-id-differs":    "the host has rebooted",
		"argv-differs":       "its command line differs",
		"uid-differs":        "its owner differs",
	}[detail]
}

// Without a terminal, fix applies nothing unless --yes is given, and says so.
func TestFixNeedsYesWithoutTerminal(t *testing.T) {
	l := newFixLab(t)
	out, errOut, code := l.fix(t, strings.NewReader("gpu-fix\n"), "gpu-fix")
	if code != exitUsage || !strings.Contains(errOut, "pass --yes") {
		t.Errorf("exit %d, want %d and a pointer to --yes\n%s\n%s", code, exitUsage, out, errOut)
	}
	if !l.alive(t, l.leftover.PID) {
		t.Error("the leftover was signalled without confirmation")
	}
}

// A login that is not root cannot signal root's leftover: the target is refused, the process
// left alone, and the message points at --sudo.
func TestFixNonRootToldAboutSudo(t *testing.T) {
	l := newFixLab(t)
	plan := filepath.Join(l.dir, "plan.json")
	if out, errOut, code := l.fix(t, nil, "--plan-out", plan, "gpu-fix"); code != exitOK {
		t.Fatalf("--plan-out: exit %d\n%s\n%s", code, out, errOut)
	}
	l.nobodyLogin(t)
	out, errOut, code := l.fix(t, nil, "--yes", "-l", "nobody", "--apply", plan)
	want := fmt.Sprintf("gpu-fix: PID %d sglang.launch_server: refused: permission denied: it is another user's process; --sudo would signal it as root", l.leftover.PID)
	if code != exitFixIncomplete || !strings.Contains(out, want) {
		t.Errorf("exit %d, want %d and %q\n%s\n%s", code, exitFixIncomplete, want, out, errOut)
	}
	if !l.alive(t, l.leftover.PID) {
		t.Error("the leftover is gone")
	}
	if recs := l.records(t); len(recs) != 1 || recs[0].Login != "nobody" || recs[0].Result.Detail != "permission" {
		t.Errorf("audit records %+v", recs)
	}
}

// nobodyLogin lets nobody log in to the lab host: a shell in its own /etc/passwd, bind-mounted
// in the host's mount namespace, and read access to the authorized keys.
func (l *fixLab) nobodyLogin(t *testing.T) {
	t.Helper()
	passwd := filepath.Join(l.dir, "passwd")
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	b = regexp.MustCompile(`(?m)^nobody:.*$`).ReplaceAll(b, []byte("nobody:x:65534:65534:nobody:/tmp:/bin/sh"))
	if err := os.WriteFile(passwd, b, 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(l.sshd.Enter(t), "mount", "--bind", passwd, "/etc/passwd")
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Skipf("cannot give nobody a shell in the lab: %v %s", err, out)
	}
	for _, d := range []string{filepath.Dir(l.sshd.Dir), l.sshd.Dir, filepath.Join(l.sshd.Dir, "authorized_keys")} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// At a terminal, fix applies only once the operator types the host's name: a wrong answer
// applies nothing.
func TestFixTypedConfirmation(t *testing.T) {
	l := newFixLab(t)
	for _, c := range []struct {
		answer string
		code   int
		alive  bool
	}{{"gpu-fox", exitFixIncomplete, true}, {"gpu-fix", exitOK, false}} {
		t.Run(c.answer, func(t *testing.T) {
			code, out := l.confirmAtPTY(t, "type the host name gpu-fix: ", c.answer, "fix", "-F", l.config, "gpu-fix")
			if code != c.code || l.alive(t, l.leftover.PID) != c.alive {
				t.Errorf("answer %q: exit %d, leftover alive %v; want %d, %v\n%s", c.answer, code, l.alive(t, l.leftover.PID), c.code, c.alive, out)
			}
		})
	}
}

// A reviewed plan applied later is watched as well: fix probes the host once more right before
// it acts, and reports the stopped leftover's memory coming back.
func TestFixApplyWatches(t *testing.T) {
	l := newFixLab(t)
	plan := filepath.Join(l.dir, "plan.json")
	if out, errOut, code := l.fix(t, nil, "--plan-out", plan, "gpu-fix"); code != exitOK {
		t.Fatalf("--plan-out: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code := l.fix(t, nil, "--yes", "--apply", plan)
	if code != exitOK {
		t.Fatalf("--apply: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	released := regexp.MustCompile(fmt.Sprintf(`(?m)^gpu-fix: GPU 0: 55,286 MiB released \S+ s after PID %d was gone`, l.leftover.PID))
	if !released.MatchString(out) {
		t.Errorf("--apply does not report the release:\n%s", out)
	}
	if l.alive(t, l.leftover.PID) || !l.alive(t, l.healthy.PID) {
		t.Errorf("leftover alive %v, healthy alive %v", l.alive(t, l.leftover.PID), l.alive(t, l.healthy.PID))
	}
	if recs := l.records(t); len(recs) != 1 || recs[0].Result.Outcome != fix.Stopped || recs[0].Result.Release == nil {
		t.Errorf("audit records %+v", recs)
	}
}

// Without --kill-after, at a terminal, fix asks before it sends SIGKILL to a target that
// outlived SIGTERM, and sends it only when the operator types the number of such targets.
func TestFixAsksBeforeSIGKILL(t *testing.T) {
	for _, c := range []struct {
		answer string
		code   int
		alive  bool
	}{{"no", exitFixIncomplete, true}, {"1", exitOK, false}} {
		t.Run(c.answer, func(t *testing.T) {
			l := newFixLabWith(t, fixLabConfig{host: "gpu-fix", gpus: 2, ignoreTerm: true})
			code, out := l.atPTY(t, []exchange{
				{"type the host name gpu-fix: ", "gpu-fix"},
				{"1 target(s) still run after SIGTERM. Send SIGKILL (identities checked again)? Type 1: ", c.answer},
			}, "fix", "-F", l.config, "--wait", "3s", "gpu-fix")
			if code != c.code || l.alive(t, l.leftover.PID) != c.alive || !l.alive(t, l.healthy.PID) {
				t.Errorf("answer %q: exit %d, leftover alive %v, healthy alive %v; want %d, %v, true\n%s",
					c.answer, code, l.alive(t, l.leftover.PID), l.alive(t, l.healthy.PID), c.code, c.alive, out)
			}
		})
	}
}

// readUntil reads r until what it has read contains want.
func readUntil(t *testing.T, r io.Reader, want string) {
	t.Helper()
	got := make([]byte, 0, 256)
	buf := make([]byte, 256)
	for !bytes.Contains(got, []byte(want)) {
		n, err := r.Read(buf)
		if err != nil {
			t.Fatalf("no %q in %q (%v)", want, got, err)
		}
		got = append(got, buf[:n]...)
	}
}
