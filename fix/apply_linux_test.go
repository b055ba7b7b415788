//go:build linux

package fix

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/testenv"
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
	waitSleep(t, c.Process.Pid)
	return c
}

// waitSleep waits until pid runs sleep. Start returns once the child runs, maybe before its
// exec: its identity is sleep's after. The kernel names the process sleep before it has
// written sleep's command line, which is empty until then: both are waited for.
func waitSleep(t *testing.T, pid int) {
	t.Helper()
	for i := 0; ; i++ {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if string(comm) == "sleep\n" && strings.HasPrefix(string(cmdline), "sleep\x00") {
			return
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

// A process whose command line takes hours to read (its argv pointed at a terabyte of
// untouched memory, as any user can do to their own) is refused once the script's 2 s bound
// on that read has passed, and the next target on the host is still checked and stopped.
// Before reads of a process's memory were bounded, the script read on for hours.
func TestApplyBoundsArgvRead(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("no sha256sum")
	}
	slow := slowArgv(t)
	p := sleeper(t)
	start := time.Now()
	res := runApply(t, HostPlan{Host: "h", BootID: bootID(t), Targets: []Target{slow, identity(t, p.Process.Pid)}}, ModeTerm)
	took := time.Since(start)
	if res[0].Outcome != Refused || res[0].Detail != "argv-read-timeout" || res[0].Signal != nil || !alive(slow.PID) {
		t.Errorf("slow argv: %+v, alive %v; want refused argv-read-timeout, and alive", res[0], alive(slow.PID))
	}
	if res[1].Outcome != Stopped || alive(p.Process.Pid) {
		t.Errorf("the next target: %+v, want stopped", res[1])
	}
	if took > testenv.Scale(10*time.Second) {
		t.Errorf("apply took %s", took)
	}
	t.Logf("apply took %s", took.Round(time.Millisecond))
	// The abandoned read was killed: nothing is left reading the slow command line.
	if r := readers(fmt.Sprintf("/proc/%d/cmdline", slow.PID)); len(r) > 0 {
		t.Errorf("processes still read the slow command line: %v", r)
	}
}

// readers are the processes whose standard input is file, after a second's grace.
func readers(file string) []string {
	var found []string
	for try := 0; try < 20; try++ {
		found = nil
		ins, _ := filepath.Glob("/proc/[0-9]*/fd/0")
		for _, in := range ins {
			if l, err := os.Readlink(in); err == nil && l == file {
				found = append(found, in)
			}
		}
		if len(found) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return found
}

// slowArgv starts testdata/slowargv.py and returns its identity as a target once its command
// line has become slow to read; it ends at cleanup.
func slowArgv(t *testing.T) Target {
	t.Helper()
	c := exec.Command("python3", "testdata/slowargv.py")
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		t.Fatalf("python3: %v", err)
	}
	t.Cleanup(func() { in.Close(); c.Process.Kill(); c.Wait() })
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	var tg Target
	if _, err2 := fmt.Sscan(line, &tg.PID, &tg.StartTicks, &tg.UID, &tg.ArgvSHA256); err != nil || err2 != nil {
		t.Fatalf("slowargv.py said %q (%v %v)", line, err, err2)
	}
	tg.Kind = KindKill
	in.Write([]byte("go\n"))
	if line, err := r.ReadString('\n'); line != "slow\n" {
		t.Fatalf("slowargv.py did not make its command line slow: %q %v", line, err)
	}
	return tg
}

// A word of the wrong form never reaches the script's commands: the script itself refuses
// it, whatever the client let through. (The words are single shell words: the first line is
// built by ApplyInput, which lets nothing else through.)
func TestApplyScriptRefusesBadWords(t *testing.T) {
	for _, w := range []string{"12a", "-1", "1x", "12.5", "0x10"} {
		in := "set -- 0123abcd 00112233aabbccdd " + strings.Repeat("a", 32) + " 1 500 0 1 " + w + " 1 0 " + strings.Repeat("a", 64) + " 0 -\n" + ApplyScript
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

// The plan shows, for a unit, a container and a job, the very command the script then runs on
// the host (once the process is confirmed in it): the stand-ins record their argv, and end the
// process as the real commands would.
func TestApplyRunsThePlansLine(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("no sha256sum")
	}
	root := cgroupRoot(t)
	calls, victim := stubManagers(t, true)
	for _, c := range groupCases(strings.Repeat("d4", 32)) {
		t.Run(string(c.kind), func(t *testing.T) {
			os.Remove(calls)
			pid := jobHolder(t, "", 0, root, c.cgrp)
			if err := os.WriteFile(victim, []byte(strconv.Itoa(pid)), 0o644); err != nil {
				t.Fatal(err)
			}
			tg := c.target(t, pid)
			res := runApply(t, HostPlan{Host: "h", BootID: bootID(t), Targets: []Target{tg}}, ModeTerm)
			ran, _ := os.ReadFile(calls)
			shown, _, _ := strings.Cut(tg.Line(), "   (holds PID")
			if res[0].Outcome != Stopped || string(ran) != shown+"\n" {
				t.Errorf("%+v; ran %q, the plan shows %q", res[0], ran, shown)
			}
		})
	}
}

// The SIGKILL the operator confirms after SIGTERM (mode 2) is SIGKILL to the PID for a unit,
// a container or a job too, as the prompt says and as --kill-after sends it: not their stop
// command again, which had already run and left the process running.
func TestApplySIGKILLModeKillsThePID(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("no sha256sum")
	}
	root := cgroupRoot(t)
	calls, _ := stubManagers(t, false)
	for _, c := range groupCases(strings.Repeat("c9", 32)) {
		t.Run(string(c.kind), func(t *testing.T) {
			os.Remove(calls)
			pid := jobHolder(t, "", 0, root, c.cgrp)
			tg := c.target(t, pid)
			res := runApply(t, HostPlan{Host: "h", BootID: bootID(t), Targets: []Target{tg}}, ModeKill)
			ran, _ := os.ReadFile(calls)
			if res[0].Outcome != Stopped || len(ran) > 0 || alive(pid) {
				t.Errorf("%+v, stop command ran %q, alive %v; want stopped by SIGKILL to PID %d and no stop command", res[0], ran, alive(pid), pid)
			}
		})
	}
}

// A job is cancelled by name only while the process is in it by the evidence the probe ties it
// with: a Slurm cgroup of that job, or where it has no Slurm cgroup its nearest root-owned
// slurmstepd ancestor, "slurmstepd: [JOB.STEP]", naming that job. A cgroup of another job, a
// stepd of another job or one a user owns, a cgroup below a user's manager (the user names
// those) and one that merely ends in job_N are refused, and scancel never runs for them.
func TestApplyCancelsOnlyInTheJob(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("no sha256sum")
	}
	root := cgroupRoot(t)
	bin := t.TempDir()
	calls, victim := bin+"/calls", bin+"/victim"
	// scancel here records its arguments and ends the process the case started, as the real
	// one would end the job's processes.
	script := "#!/bin/sh\necho scancel \"$@\" >>" + calls + "\nkill \"$(cat " + victim + ")\"\n"
	if err := os.WriteFile(bin+"/scancel", []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	own := fmt.Sprintf("gt-apply-%d", os.Getpid())
	for _, c := range []struct {
		name, stepd string
		stepdUID    int
		cgroup      string
		ran         bool
	}{
		{"stepd ancestor", "slurmstepd: [4242.0]", 0, "", true},
		{"stepd of the batch step", "slurmstepd: [4242.batch]", 0, "", true},
		{"stepd of another job", "slurmstepd: [4243.0]", 0, "", false},
		{"stepd a user owns", "slurmstepd: [4242.0]", 65534, "", false},
		{"slurm cgroup v1", "", 0, "slurm_" + own + "/uid_0/job_4242/step_0", true},
		{"slurm cgroup v2", "", 0, own + "/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0", true},
		{"another job's cgroup, this job's stepd", "slurmstepd: [4242.0]", 0, "slurm_" + own + "/uid_0/job_4243/step_0", false},
		{"below a user's manager", "", 0, "user.slice/user-0.slice/user@0.service/" + own + "/slurm/uid_0/job_4242", false},
		{"a look-alike cgroup", "", 0, own + "/job_4242", false},
		{"below another unit", "", 0, own + "/system.slice/hub.service/slurmstepd.scope/job_4242/step_0", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			pid := jobHolder(t, c.stepd, c.stepdUID, root, c.cgroup)
			if err := os.WriteFile(victim, []byte(strconv.Itoa(pid)), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Remove(calls)
			tg := identity(t, pid)
			tg.UID = c.stepdUID
			tg.Kind, tg.Name = KindCancelJob, "4242"
			res := runApply(t, HostPlan{Host: "h", BootID: bootID(t), Targets: []Target{tg}}, ModeTerm)
			ran, _ := os.ReadFile(calls)
			if c.ran && (res[0].Outcome != Stopped || string(ran) != "scancel -- 4242\n") {
				t.Errorf("%+v, scancel ran %q; want stopped by scancel -- 4242", res[0], ran)
			}
			if !c.ran && (res[0].Outcome != Refused || res[0].Detail != "not-in-job" || len(ran) > 0 || !alive(pid)) {
				t.Errorf("%+v, scancel ran %q, alive %v; want refused not-in-job and nothing run", res[0], ran, alive(pid))
			}
		})
	}
}

// cgroupRoot is a cgroup hierarchy the test may make cgroups in: v1's freezer, else v2's.
func cgroupRoot(t *testing.T) string {
	for _, d := range []string{"/sys/fs/cgroup/freezer", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(d + "/cgroup.procs"); err == nil && os.Geteuid() == 0 {
			return d
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no writable cgroup hierarchy (run as root with /sys/fs/cgroup)")
	}
	t.Skip("SKIPPING: needs root and a cgroup hierarchy at /sys/fs/cgroup")
	return ""
}

// jobHolder starts sleep as the child of a shell run as stepdUID in a session of its own: a
// shell named slurmstepd whose command line is stepd when stepd is set; and puts sleep in the
// cgroup root/cgroup (made here) when that is set. It returns sleep's PID.
func jobHolder(t *testing.T, stepd string, stepdUID int, root, cgroup string) int {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	// A directory any uid may use: the shell may run as stepdUID.
	dir, err := os.MkdirTemp("", "gt-apply-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	pidFile := dir + "/pid"
	p := exec.Command(sh, "-c", `sleep 300 & echo $! >"$0"; wait`, pidFile)
	if stepd != "" {
		b, err := os.ReadFile(sh)
		if err != nil {
			t.Fatal(err)
		}
		named := dir + "/slurmstepd"
		if err := os.WriteFile(named, b, 0o755); err != nil {
			t.Fatal(err)
		}
		p.Path, p.Args[0] = named, stepd
	}
	p.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: uint32(stepdUID), Gid: uint32(stepdUID)}}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Process.Kill(); p.Wait() })
	var pid int
	for i := 0; pid == 0; i++ {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if i == 500 {
			t.Fatal("the shell did not start sleep")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) }) // killing the shell leaves sleep
	waitSleep(t, pid)
	if cgroup != "" {
		dir := filepath.Join(root, cgroup)
		made := dir // the first of dir and its parents that is not there yet
		for p := dir; p != root; p = filepath.Dir(p) {
			if _, err := os.Stat(p); err != nil {
				made = p
			}
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			syscall.Kill(pid, syscall.SIGKILL)
			for i := 0; i < 100 && alive(pid); i++ {
				time.Sleep(10 * time.Millisecond)
			}
			removeCgroups(made, dir)
		})
		if err := os.WriteFile(dir+"/cgroup.procs", []byte(strconv.Itoa(pid)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return pid
}

// removeCgroups removes the cgroup dir and its parents up to top, once its process is gone
// (a killed one leaves it when its parent has reaped it).
func removeCgroups(top, dir string) {
	for d := dir; d == top || strings.HasPrefix(d, top+"/"); d = filepath.Dir(d) {
		for try := 0; try < 50; try++ {
			if err := syscall.Rmdir(d); err == nil || err != syscall.EBUSY {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// stubManagers puts stand-in systemctl, docker and scancel first on PATH: each appends its
// command line to the file calls and, with kill, kills the PID written in the file victim.
func stubManagers(t *testing.T, kill bool) (calls, victim string) {
	t.Helper()
	bin := t.TempDir()
	calls, victim = bin+"/calls", bin+"/victim"
	for _, tool := range []string{"systemctl", "docker", "scancel"} {
		script := "#!/bin/sh\necho " + tool + " \"$@\" >>" + calls + "\n"
		if kill {
			script += "kill \"$(cat " + victim + ")\"\n"
		}
		if err := os.WriteFile(bin+"/"+tool, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	return calls, victim
}

// groupCase is a target of a unit, a container (ctr) or a job, in a cgroup of this test's own.
type groupCase struct {
	kind           Kind
	name, rt, cgrp string
}

// target is pid's identity as a target of c's kind, name and runtime.
func (c groupCase) target(t *testing.T, pid int) Target {
	tg := identity(t, pid)
	tg.Kind, tg.Name, tg.Runtime = c.kind, c.name, c.rt
	return tg
}

func groupCases(ctr string) []groupCase {
	own := fmt.Sprintf("gt-apply-%d", os.Getpid())
	return []groupCase{
		{KindStopUnit, "gt-apply.service", "", own + "/system.slice/gt-apply.service"},
		{KindStopContainer, ctr, "docker", own + "/system.slice/docker-" + ctr + ".scope"},
		{KindCancelJob, "4242", "", "slurm_" + own + "/uid_0/job_4242/step_0"},
	}
}
