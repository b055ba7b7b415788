package sshdtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
)

// The harness itself, checked with the OpenSSH client: a host answers with its own name and
// fake nvidia-smi, and a host inside a namespace is reachable only through its bastion.
func TestHarnessWithOpenSSHClient(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client")
	}
	dir := t.TempDir()
	key, pub := UserKey(t, dir, "ed25519")
	smi := &scenario.SMI{GPUs: []scenario.GPU{{UUID: "GPU-1", Name: "NVIDIA H100", TotalMiB: 81559}}}
	h := Start(t, Config{Name: "gpu07", Addr: "127.0.0.57", Port: 2207, AuthorizedKeys: []string{pub}, SMI: smi})
	ns := NewNetNS(t, 7)
	bastion := Start(t, Config{Name: "bastion", Addr: ns.NSAddr, Port: 22, NetNS: ns.Name, AuthorizedKeys: []string{pub}})
	inner := Start(t, Config{Name: "inner", Addr: "127.0.0.1", Port: 2222, NetNS: ns.Name, AuthorizedKeys: []string{pub}, SMI: smi})

	kh := filepath.Join(dir, "known_hosts")
	lines := h.KnownHostsLine("127.0.0.57") + "\n" + bastion.KnownHostsLine(ns.NSAddr) + "\n" + inner.KnownHostsLine("127.0.0.1") + "\n"
	if err := os.WriteFile(kh, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config")
	conf := "Host *\n  User root\n  IdentityFile " + key + "\n  IdentitiesOnly yes\n  UserKnownHostsFile " + kh + "\n  StrictHostKeyChecking yes\n  BatchMode yes\n" +
		"Host inner\n  HostName 127.0.0.1\n  Port 2222\n  ProxyJump root@" + ns.NSAddr + "\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		out, err := exec.Command("ssh", append([]string{"-F", cfg}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ssh %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run("-p", "2207", "127.0.0.57", "uname -n; nvidia-smi --query-gpu=uuid --format=csv,noheader"); got != "gpu07\nGPU-1" {
		t.Errorf("direct host answered %q", got)
	}
	if got := run("inner", "uname -n"); got != "inner" {
		t.Errorf("inner host answered %q", got)
	}
	if !strings.Contains(bastion.Log(), "direct-tcpip") && !strings.Contains(bastion.Log(), "Accepted publickey") {
		t.Errorf("bastion log shows no forwarding:\n%s", bastion.Log())
	}
}

// A host that joins another PID namespace sees that namespace's processes, under its own host
// name; one that joins the test's own sees the test's process; and sshd ends
// with the harness.
func TestHarnessJoinsNamespaces(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client")
	}
	dir := t.TempDir()
	key, pub := UserKey(t, dir, "ed25519")
	other := exec.Command("unshare", "-p", "-m", "-f", "--kill-child", "--mount-proc", "sleep", "600")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	init := 0
	for i := 0; i < 100 && init == 0; i++ {
		if init = testenv.ChildOf(other.Process.Pid); init == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	joined := Start(t, Config{Name: "joined", Addr: "127.0.0.58", Port: 2208, AuthorizedKeys: []string{pub}, JoinPID: init})
	machine := Start(t, Config{Name: "machine", Addr: "127.0.0.59", Port: 2209, AuthorizedKeys: []string{pub}, JoinPID: os.Getpid()})
	kh := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(kh, []byte(joined.KnownHostsLine("127.0.0.58")+"\n"+machine.KnownHostsLine("127.0.0.59")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(port, addr, cmd string) string {
		out, err := exec.Command("ssh", "-i", key, "-o", "IdentitiesOnly=yes", "-o", "UserKnownHostsFile="+kh,
			"-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-p", port, "root@"+addr, cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("ssh %s: %v: %s", addr, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run("2208", "127.0.0.58", "uname -n; tr '\\0' ' ' </proc/1/cmdline"); got != "joined\nsleep 600" {
		t.Errorf("joined host answered %q, want its name and the namespace's init", got)
	}
	if got := run("2209", "127.0.0.59", "uname -n; test -d /proc/"+strconv.Itoa(os.Getpid())+" && echo sees-test"); got != "machine\nsees-test" {
		t.Errorf("machine host answered %q, want its name and the test's own process", got)
	}
	pid := joined.cmd.Process.Pid
	joined.Stop()
	if sshd := testenv.ChildOf(pid); sshd != 0 {
		t.Errorf("sshd %d outlived the harness", sshd)
	}
	for i := 0; i < 100; i++ {
		if out, _ := exec.Command("pgrep", "-f", "sshd -D -e -f "+joined.Dir).Output(); len(out) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("sshd of %s still runs after Stop", joined.Dir)
}
