package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/internal/sshdtest"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/triage"
)

// TestSudoProbePath: with --sudo, the root probe runs with sudo's secure_path plus only the
// directory of the nvidia-smi the login PATH found. A real sshd whose login PATH starts with a
// directory holding nvidia-smi and hostile sh, timeout, awk, env, ... (each logs when it runs
// under sudo): root runs that nvidia-smi, and none of the others.
func TestSudoProbePath(t *testing.T) {
	sshdtest.SSHDPath(t)
	testenv.Need(t, "sudo", "apt-get install sudo", "sudo")
	dir := t.TempDir()
	key, pub := sshdtest.UserKey(t, dir, "ed25519")
	s := sshdtest.Start(t, sshdtest.Config{Name: "gpu-sudo", Addr: "127.0.0.163", Port: 2363,
		AuthorizedKeys: []string{pub}, SMI: cleanSMI(2)})
	bin := s.SMIDir() // first on the login PATH; not in secure_path
	hostile := filepath.Join(dir, "hostile.log")
	for _, tool := range []string{"sh", "env", "timeout", "awk", "head", "tr", "cat", "base64", "readlink", "find", "id"} {
		real, err := exec.LookPath(tool)
		if err != nil {
			continue
		}
		wrapper := fmt.Sprintf("#!/bin/sh\nif [ -n \"${SUDO_USER:-}\" ]; then echo %s >>%s; fi\nexec %s \"$@\"\n", tool, hostile, real)
		if err := os.WriteFile(filepath.Join(bin, tool), []byte(wrapper), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	smiLog := filepath.Join(dir, "smi.log")
	if err := os.Rename(filepath.Join(bin, "nvidia-smi"), filepath.Join(bin, "nvidia-smi.real")); err != nil {
		t.Fatal(err)
	}
	smi := fmt.Sprintf("#!/bin/sh\necho \"sudo=${SUDO_USER:-}\" >>%s\nexec %s \"$@\"\n", smiLog, filepath.Join(bin, "nvidia-smi.real"))
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(smi), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "ssh_config")
	known := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(known, []byte(s.KnownHostsLine(s.Addr)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("Host gpu-sudo\n  HostName %s\n  Port %d\n  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n"+
		"  UserKnownHostsFile %s\n  GlobalKnownHostsFile none\n", s.Addr, s.Port, key, known)
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := cli(t, nil, "-F", conf, "--timeout", "30s", "--format", "json", "--sudo", "gpu-sudo")
	var doc struct {
		Hosts []struct {
			OK   bool              `json:"ok"`
			GPUs []json.RawMessage `json:"gpus"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitOK || len(doc.Hosts) != 1 || !doc.Hosts[0].OK {
		t.Fatalf("exit %d, %v, stderr %s\n%s", code, err, errOut, out)
	}
	if strings.Contains(errOut, triage.SudoFallbackMsg) {
		t.Fatalf("sudo fell back: %s", errOut)
	}
	if len(doc.Hosts[0].GPUs) != 2 {
		t.Errorf("%d GPUs, want the 2 the login PATH's nvidia-smi reports", len(doc.Hosts[0].GPUs))
	}
	if b, _ := os.ReadFile(smiLog); !strings.Contains(string(b), "sudo=root") {
		t.Errorf("the root probe did not run the login PATH's nvidia-smi under sudo: %q", b)
	}
	if b, err := os.ReadFile(hostile); err == nil {
		t.Errorf("the root probe ran the login PATH's own tools: %q", b)
	}
}
