//go:build linux

package fix

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// identity is pid's identity as the probe would capture it, read from /proc here.
func identity(t *testing.T, pid int) Target {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	ticks, _ := strconv.ParseInt(f[19], 10, 64)
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cmdline)
	return Target{Kind: KindKill, PID: pid, StartTicks: ticks, UID: os.Getuid(), ArgvSHA256: hex.EncodeToString(sum[:])}
}

func bootID(t *testing.T) string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(strings.TrimSpace(string(b)), "-", "")
}

// sleeper starts a real process in a session of its own, reaped in the background.
func sleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	c := exec.Command("sleep", "300")
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go c.Wait()
	t.Cleanup(func() { c.Process.Kill() })
	// Start returns once the child runs, maybe before its exec: its identity is sleep's after.
	for i := 0; ; i++ {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c.Process.Pid)); string(comm) == "sleep\n" {
			return c
		}
		if i == 500 {
			t.Fatal("sleep did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runApply runs the apply script locally through sh -s, as a host would.
func runApply(t *testing.T, hp HostPlan, mode Mode) []Result {
	t.Helper()
	o := ApplyOptions{Nonce: "0123abcd", PlanID: "00112233aabbccdd", Mode: mode, Wait: 5 * time.Second}
	in, err := ApplyInput(o, hp)
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command("sh", "-s")
	c.Stdin = bytes.NewReader(in)
	c.Env = append(os.Environ(), "PATH=/nonexistent:"+os.Getenv("PATH")) // no nvidia-smi: released at exit
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	res, err := ParseResults(out, o.Nonce, len(hp.Targets))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return res
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b[bytes.LastIndexByte(b, ')'):]), ") Z")
}

// Each identity field that differs from the process's is refused, and the process lives;
// the exact one is signalled and stops.
func TestApplyChecksIdentity(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("no sha256sum")
	}
	boot := bootID(t)
	cases := []struct {
		name   string
		edit   func(*Target, *string)
		detail string
	}{
		{"start time", func(t *Target, _ *string) { t.StartTicks++ }, "start-time-differs"},
		{"argv", func(t *Target, _ *string) { t.ArgvSHA256 = strings.Repeat("0", 64) }, "argv-differs"},
		{"uid", func(t *Target, _ *string) { t.UID++ }, "uid-differs"},
		{"boot id", func(_ *Target, b *string) { *b = strings.Repeat("1", 32) }, "boot-id-differs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := sleeper(t)
			tg, b := identity(t, p.Process.Pid), boot
			c.edit(&tg, &b)
			res := runApply(t, HostPlan{Host: "h", BootID: b, Targets: []Target{tg}}, ModeTerm)
			if res[0].Outcome != Refused || res[0].Detail != c.detail || res[0].Signal != nil {
				t.Errorf("result %+v, want refused %s", res[0], c.detail)
			}
			if !alive(p.Process.Pid) {
				t.Errorf("pid %d was signalled", p.Process.Pid)
			}
		})
	}
	t.Run("exact", func(t *testing.T) {
		p := sleeper(t)
		res := runApply(t, HostPlan{Host: "h", BootID: boot, Targets: []Target{identity(t, p.Process.Pid)}}, ModeTerm)
		if res[0].Outcome != Stopped || res[0].Signal == nil || res[0].Exit == nil || res[0].Release == nil {
			t.Errorf("result %+v, want stopped", res[0])
		}
		if alive(p.Process.Pid) {
			t.Errorf("pid %d still alive", p.Process.Pid)
		}
	})
}

// The script's own ancestors (here: this test process, which shares its session) are never
// signalled, even when their identity matches.
func TestApplyRefusesOwnSession(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("no sha256sum")
	}
	tg := identity(t, os.Getpid())
	res := runApply(t, HostPlan{Host: "h", BootID: bootID(t), Targets: []Target{tg}}, ModeTerm)
	if res[0].Outcome != Refused || res[0].Detail != "own-session" {
		t.Errorf("result %+v, want refused own-session", res[0])
	}
}

// A word of the wrong form never reaches the script's commands: the script itself refuses
// it, whatever the client let through. (The words are single shell words: the first line is
// built by ApplyInput, which lets nothing else through.)
func TestApplyScriptRefusesBadWords(t *testing.T) {
	for _, w := range []string{"12a", "-1", "1x", "12.5", "0x10"} {
		in := "set -- 0123abcd 00112233aabbccdd " + strings.Repeat("a", 32) + " 1 5 0 1 " + w + " 1 0 " + strings.Repeat("a", 64) + " 0 -\n" + ApplyScript
		c := exec.Command("sh", "-s")
		c.Stdin = strings.NewReader(in)
		out, err := c.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "0123abcd bad-input target-0") {
			t.Errorf("word %q: %v %q", w, err, out)
		}
	}
}

// A unit, container or job is stopped by name only while the process's cgroup still names it:
// otherwise the stop command never runs.
func TestApplyStopsByNameOnlyInItsGroup(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("no sha256sum")
	}
	bin := t.TempDir()
	calls := bin + "/calls"
	for _, tool := range []string{"systemctl", "docker", "scancel"} {
		script := "#!/bin/sh\necho " + tool + " \"$@\" >>" + calls + "\n"
		if err := os.WriteFile(bin+"/"+tool, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	for _, c := range []struct {
		kind     Kind
		name, rt string
		detail   string
	}{
		{KindStopUnit, "vllm.service", "", "not-in-unit"},
		{KindStopContainer, strings.Repeat("b7", 32), "docker", "not-in-container"},
		{KindCancelJob, "4242", "", "not-in-job"},
	} {
		p := sleeper(t)
		tg := identity(t, p.Process.Pid)
		tg.Kind, tg.Name, tg.Runtime = c.kind, c.name, c.rt
		res := runApply(t, HostPlan{Host: "h", BootID: bootID(t), Targets: []Target{tg}}, ModeTerm)
		if res[0].Outcome != Refused || res[0].Detail != c.detail || !alive(p.Process.Pid) {
			t.Errorf("%s %s: %+v, want refused %s", c.kind, c.name, res[0], c.detail)
		}
	}
	if b, err := os.ReadFile(calls); err == nil {
		t.Errorf("a stop command ran: %q", b)
	}
}
