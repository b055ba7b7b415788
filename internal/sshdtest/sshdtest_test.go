package sshdtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/internal/scenario"
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
