package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/sshdtest"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/triage"
)

// lab is sixteen real OpenSSH hosts, gpu01..gpu16, each with its own host name, processes and
// /dev/shm, reached through an ssh config written the usual way.
type lab struct {
	dir, config, knownHosts string
	hosts                   map[string]*sshdtest.SSHD
	leftoverPID             int
	bastion                 *sshdtest.SSHD
	netns                   string // the network namespace of the bastion and gpu14
}

func cleanSMI(n int) *scenario.SMI {
	var g []scenario.GPU
	for i := 0; i < n; i++ {
		g = append(g, scenario.GPU{Index: i, UUID: fmt.Sprintf("GPU-0000000%d-1111-2222-3333-444444444444", i),
			Name: "NVIDIA H100 80GB HBM3", BusID: fmt.Sprintf("00000000:%02X:00.0", 0x18+i*0x10),
			TotalMiB: 81559, UsedMiB: 1, ReservedMiB: 532, Driver: "550.90.07"})
	}
	return &scenario.SMI{GPUs: g}
}

// newLab starts the lab: healthy hosts with ed25519, ecdsa and rsa host keys; a leftover (a
// real orphaned server mapping deleted /dev/shm files, named by nvidia-smi); a hanging
// nvidia-smi; a driver failure; an unknown and a changed host key; a refused port; a wrong
// user; a host reachable only through a bastion; and one that accepts TCP and never speaks.
func newLab(t *testing.T) *lab {
	sshdtest.SSHDPath(t)
	l := &lab{dir: t.TempDir(), hosts: map[string]*sshdtest.SSHD{}}
	key, pub := sshdtest.UserKey(t, l.dir, "ed25519")
	var conf, known strings.Builder
	addr := func(i int) string { return fmt.Sprintf("127.0.0.%d", 100+i) }
	start := func(i int, c sshdtest.Config) *sshdtest.SSHD {
		name := fmt.Sprintf("gpu%02d", i)
		c.Name, c.Addr, c.Port, c.AuthorizedKeys = name, addr(i), 2200+i, []string{pub}
		s := sshdtest.Start(t, c)
		l.hosts[name] = s
		return s
	}
	for _, i := range []int{1, 2, 3, 4, 16} {
		start(i, sshdtest.Config{SMI: cleanSMI(8)})
	}
	start(5, sshdtest.Config{SMI: cleanSMI(8), KeyType: "ecdsa"})
	start(6, sshdtest.Config{SMI: cleanSMI(8), KeyType: "rsa"})
	start(7, sshdtest.Config{SMI: cleanSMI(8)})
	start(8, sshdtest.Config{SMI: &scenario.SMI{Hang: true}})
	start(9, sshdtest.Config{SMI: &scenario.SMI{FailText: "Unable to determine the device handle for GPU 0000:18:00.0: GPU is lost.  Reboot the system to recover this GPU\n", FailRC: 15}})
	start(10, sshdtest.Config{SMI: cleanSMI(8)})
	start(11, sshdtest.Config{SMI: cleanSMI(8)})
	start(13, sshdtest.Config{SMI: cleanSMI(8)})

	// gpu07's leftover: the previous deployment's server, orphaned, its weights rm -rf'd.
	gpu07 := l.hosts["gpu07"]
	p, err := scenario.Start(scenario.Server{
		Module: "sglang.launch_server", Args: []string{"--model-path", "/dev/shm/Qwen3.6-27B", "--tp", "1"},
		ShmDir: "/dev/shm/Qwen3.6-27B", ShmFiles: 4, ShmBytes: 2 << 20, Delete: true, Orphan: true,
		Enter: gpu07.Enter(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	l.leftoverPID = p.PID
	smi := cleanSMI(8)
	smi.GPUs[0].UsedMiB = 55295
	smi.Apps = []scenario.App{{PID: p.PID, GPUUUID: smi.GPUs[0].UUID, UsedMiB: 55286, Name: "python3"}}
	if err := scenario.WriteFakeSMI(gpu07.SMIDir(), *smi); err != nil {
		t.Fatal(err)
	}

	// gpu14 listens on the loopback of a network namespace: only its bastion reaches it.
	ns := sshdtest.NewNetNS(t, 14)
	l.netns = ns.Name
	l.bastion = sshdtest.Start(t, sshdtest.Config{Name: "bastion", Addr: ns.NSAddr, Port: 22, NetNS: ns.Name, AuthorizedKeys: []string{pub}})
	l.hosts["gpu14"] = sshdtest.Start(t, sshdtest.Config{Name: "gpu14", Addr: "127.0.0.1", Port: 2214, NetNS: ns.Name,
		AuthorizedKeys: []string{pub}, SMI: cleanSMI(4)})

	// gpu15 accepts TCP and never says a word.
	ln, err := net.Listen("tcp", addr(15)+":2215")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()

	for i := 1; i <= 16; i++ {
		name := fmt.Sprintf("gpu%02d", i)
		switch name {
		case "gpu14":
			fmt.Fprintf(&conf, "Host gpu14\n  HostName 127.0.0.1\n  Port 2214\n  ProxyJump bastion\n\n")
			continue
		case "gpu13":
			conf.WriteString("Host gpu13\n  User nosuchuser\n")
		}
		fmt.Fprintf(&conf, "Host %s\n  HostName %s\n  Port %d\n\n", name, addr(i), 2200+i)
	}
	fmt.Fprintf(&conf, "Host bastion\n  HostName %s\n  Port 22\n\n", ns.NSAddr)
	l.knownHosts = filepath.Join(l.dir, "known_hosts")
	fmt.Fprintf(&conf, "Host *\n  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  GlobalKnownHostsFile none\n", key, l.knownHosts)
	for name, s := range l.hosts {
		switch name {
		case "gpu10": // unknown: not in known_hosts
		case "gpu11": // changed: known_hosts holds another key
			other := sshdtest.Start(t, sshdtest.Config{Name: "other", Addr: "127.0.0.99", Port: 2299})
			known.WriteString(fmt.Sprintf("[%s]:%d %s\n", s.Addr, s.Port, other.HostKeyPub))
			other.Stop()
		default:
			known.WriteString(s.KnownHostsLine(s.Addr) + "\n")
		}
	}
	known.WriteString(l.bastion.KnownHostsLine(ns.NSAddr) + "\n")
	if err := os.WriteFile(l.knownHosts, []byte(known.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	l.config = filepath.Join(l.dir, "ssh_config")
	if err := os.WriteFile(l.config, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return l
}

type jsonDoc struct {
	Hosts []struct {
		Host  string `json:"host"`
		OK    bool   `json:"ok"`
		Error *struct {
			Phase, Kind, Message string
		} `json:"error"`
		Hostname *string `json:"hostname"`
		Findings []struct {
			Code string `json:"code"`
			Kind string `json:"kind"`
			PIDs []int  `json:"pids"`
		} `json:"findings"`
	} `json:"hosts"`
}

// TestLab sweeps the sixteen hosts as a user would and checks every host's outcome, the
// deadline, and that a saved sweep replays to the same report.
func TestLab(t *testing.T) {
	l := newLab(t)
	const timeout = 12 * time.Second
	save := filepath.Join(t.TempDir(), "sweep")
	begin := time.Now()
	out, errOut, code := cli(t, nil, "-F", l.config, "--timeout", timeout.String(), "--format", "json", "--save", save, "gpu[01-16]")
	elapsed := time.Since(begin)
	if code != exitHostsFailed {
		t.Errorf("exit status %d, want %d", code, exitHostsFailed)
	}
	if elapsed > timeout+testenv.Scale(5*time.Second) {
		t.Errorf("sweep took %s; its deadline is %s per host", elapsed, timeout)
	}
	var doc jsonDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(doc.Hosts) != 16 {
		t.Fatalf("%d hosts in the report, want 16:\n%s", len(doc.Hosts), out)
	}
	type want struct {
		ok          bool
		phase, kind string // for failures
		finding     string // a finding code that must be present
		findingKind string
	}
	wants := map[string]want{
		"gpu01": {ok: true}, "gpu02": {ok: true}, "gpu03": {ok: true}, "gpu04": {ok: true},
		"gpu05": {ok: true}, "gpu06": {ok: true}, "gpu16": {ok: true},
		"gpu07": {ok: true, finding: "leftover-process"},
		"gpu08": {ok: true, finding: "smi-failed", findingKind: "timeout"},
		"gpu09": {ok: true, finding: "smi-failed", findingKind: "gpu-lost"},
		"gpu10": {phase: "hostkey", kind: "unknown-host-key"},
		"gpu11": {phase: "hostkey", kind: "host-key-changed"},
		"gpu12": {phase: "connect", kind: "refused"},
		"gpu13": {phase: "auth", kind: "auth-failed"},
		"gpu14": {ok: true},
		"gpu15": {phase: "handshake", kind: "timeout"},
	}
	for i, h := range doc.Hosts {
		if wantName := fmt.Sprintf("gpu%02d", i+1); h.Host != wantName {
			t.Errorf("host %d is %s, want %s (input order)", i, h.Host, wantName)
		}
		w := wants[h.Host]
		if h.OK != w.ok {
			t.Errorf("%s: ok=%v, want %v (error %+v)", h.Host, h.OK, w.ok, h.Error)
			continue
		}
		if !w.ok {
			if h.Error == nil || h.Error.Phase != w.phase || h.Error.Kind != w.kind {
				t.Errorf("%s: error %+v, want phase %s kind %s", h.Host, h.Error, w.phase, w.kind)
			}
			continue
		}
		if h.Hostname == nil || *h.Hostname != h.Host {
			t.Errorf("%s: probe ran on %v", h.Host, h.Hostname)
		}
		found := w.finding == ""
		for _, f := range h.Findings {
			if f.Code == w.finding && (w.findingKind == "" || f.Kind == w.findingKind) {
				found = true
			}
			if w.finding == "" && f.Code != "gpu-busy" && f.Code != "probe-limited" {
				t.Errorf("%s: unexpected finding %s", h.Host, f.Code)
			}
		}
		if !found {
			t.Errorf("%s: no %s %s finding: %+v", h.Host, w.finding, w.findingKind, h.Findings)
		}
	}
	for _, h := range doc.Hosts {
		if h.Host == "gpu10" && h.Error != nil && !strings.Contains(h.Error.Message, "SHA256:") {
			t.Errorf("unknown host key message lacks the fingerprint: %s", h.Error.Message)
		}
	}
	if !strings.Contains(l.bastion.Log(), "Accepted publickey") {
		t.Errorf("the bastion never authenticated us:\n%s", l.bastion.Log())
	}
	if t.Failed() {
		t.Logf("stderr:\n%s\nreport:\n%s", errOut, out)
	}

	// The fleet summary folds hosts by problem and failures by cause.
	text, _, _ := cli(t, nil, "--replay", save, "--color", "never")
	for _, want := range []string{
		"16 hosts", "leftover-process on gpu07", "CRITICAL  smi-failed on gpu09", "ERROR     smi-failed on gpu08",
		"not shown (--only findings): 8 hosts without problems: gpu[01-06,14,16]",
		"host key changed: gpu11", "unknown host key: gpu10", "connection refused: gpu12",
		"authentication failed: gpu13", "timeout (handshake): gpu15",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("fleet summary lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("text report:\n%s", text)
	}

	// Which hosts can take a TP-8 job: the clean ones now, gpu07 once its leftover is stopped;
	// not gpu08/09 (nvidia-smi hangs, GPU lost) nor gpu14 (4 GPUs).
	tpOut, _, _ := cli(t, nil, "--replay", save, "--tp", "8", "--format", "json")
	var tp struct {
		Summary map[string][]string `json:"readiness_summary"`
	}
	if err := json.Unmarshal([]byte(tpOut), &tp); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"ready_now": "gpu01 gpu02 gpu03 gpu04 gpu05 gpu06 gpu16",
		"ready_after_fix": "gpu07", "not_ready": "gpu08 gpu09 gpu14"} {
		if got := strings.Join(tp.Summary[key], " "); got != want {
			t.Errorf("--tp 8 %s = %q, want %q", key, got, want)
		}
	}

	// The saved sweep replays to the same report, byte for byte.
	replayed, _, rcode := cli(t, nil, "--replay", save, "--format", "json")
	if replayed != out || rcode != code {
		t.Errorf("replay differs from the live sweep (exit %d vs %d)\n--- live ---\n%s\n--- replay ---\n%s", rcode, code, out, replayed)
	}
	if b, err := os.ReadFile(l.knownHosts); err != nil || strings.Contains(string(b), "127.0.0.110") {
		t.Errorf("the unknown host was recorded without --accept-new")
	}
}

// TestLabAcceptNew: --accept-new records an unknown key and the next strict run trusts it; a
// changed key is refused all the same.
func TestLabAcceptNew(t *testing.T) {
	l := newLab(t)
	out, _, _ := cli(t, nil, "-F", l.config, "--timeout", "30s", "--format", "json", "--accept-new", "gpu10", "gpu11")
	var doc jsonDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Hosts) != 2 || !doc.Hosts[0].OK || doc.Hosts[1].OK || doc.Hosts[1].Error.Kind != "host-key-changed" {
		t.Fatalf("with --accept-new: %s", out)
	}
	out, _, code := cli(t, nil, "-F", l.config, "--timeout", "30s", "--format", "json", "gpu10")
	if code != exitOK {
		t.Errorf("second strict run: exit %d\n%s", code, out)
	}
}

// cliWith runs gputriage in-process with a context, a stderr that is a terminal when
// stderrTTY, and a hook that sees stderr as it grows.
func cliWith(ctx context.Context, t *testing.T, stderrTTY bool, watch func(stderr string), args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out bytes.Buffer
	errb := &testenv.SyncBuffer{}
	isTerm := func(w io.Writer) (bool, int) { return stderrTTY && w == io.Writer(errb), 0 }
	done := make(chan struct{})
	if watch != nil {
		go func() {
			for {
				select {
				case <-done:
					return
				case <-time.After(50 * time.Millisecond):
					watch(errb.String())
				}
			}
		}()
	}
	code = run(ctx, args, strings.NewReader(""), &out, errb, func(string) string { return "" }, isTerm)
	close(done)
	return out.String(), errb.String(), code
}

// TestLabOptions: --sudo (real sudo, and the fallback when sudo would prompt), --dry-run,
// Ctrl-C, and the progress line, against the real sshd lab.
func TestLabOptions(t *testing.T) {
	l := newLab(t)
	base := []string{"-F", l.config, "--timeout", "30s", "--format", "json"}

	t.Run("sudo", func(t *testing.T) {
		testenv.Need(t, "sudo", "apt-get install sudo", "sudo")
		// gpu02's sudo wants a password: the probe must fall back, and say so.
		fake := "#!/bin/sh\necho 'sudo: a password is required' >&2\nexit 1\n"
		if err := os.WriteFile(filepath.Join(l.hosts["gpu02"].SMIDir(), "sudo"), []byte(fake), 0o755); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := cli(t, nil, append(base, "--sudo", "gpu01", "gpu02")...)
		var doc jsonDoc
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		if code != exitOK || len(doc.Hosts) != 2 || !doc.Hosts[0].OK || !doc.Hosts[1].OK {
			t.Fatalf("exit %d, stderr %s\n%s", code, errOut, out)
		}
		if strings.Contains(errOut, "gpu01: "+triage.SudoFallbackMsg) || !strings.Contains(errOut, "gpu02: "+triage.SudoFallbackMsg) {
			t.Errorf("fallback notes wrong: %q", errOut)
		}
	})

	t.Run("login-banner", func(t *testing.T) {
		// gpu03's shell profile prints a banner before the probe: it is dropped and named.
		rc := filepath.Join(l.hosts["gpu03"].Dir, "home", ".bashrc")
		if err := os.WriteFile(rc, []byte("echo 'Welcome to gpu03: be nice'\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(rc)
		out, errOut, code := cli(t, nil, append(base, "gpu03")...)
		var doc jsonDoc
		if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitOK || !doc.Hosts[0].OK {
			t.Fatalf("exit %d, %v\n%s\n%s", code, err, errOut, out)
		}
		if !strings.Contains(errOut, "gpu03: the login shell printed") || !strings.Contains(errOut, "Welcome to gpu03") {
			t.Errorf("banner not named on stderr: %q", errOut)
		}
	})

	t.Run("dry-run", func(t *testing.T) {
		before := len(l.bastion.Log())
		out, _, code := cli(t, nil, "-F", l.config, "--dry-run", "--format", "json", "gpu14", "gpu13")
		var doc struct {
			Hosts []struct {
				Host, HostName, User string
				Port                 int
				ProxyJump            []string `json:"proxy_jump"`
				KnownHostsFiles      []string `json:"known_hosts_files"`
				IdentityFiles        []string `json:"identity_files"`
			} `json:"hosts"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitOK || len(doc.Hosts) != 2 {
			t.Fatalf("exit %d, %v\n%s", code, err, out)
		}
		h := doc.Hosts[0]
		// The jump hop as ssh -G writes a ProxyJump, not only its alias.
		if h.Host != "gpu14" || h.HostName != "127.0.0.1" || h.Port != 2214 || h.User != "root" ||
			len(h.ProxyJump) != 1 || h.ProxyJump[0] != "root@"+l.bastion.Addr+":22" || len(h.KnownHostsFiles) != 1 || len(h.IdentityFiles) != 1 {
			t.Errorf("gpu14 resolved to %+v", h)
		}
		if doc.Hosts[1].User != "nosuchuser" {
			t.Errorf("gpu13 user %q", doc.Hosts[1].User)
		}
		if len(l.bastion.Log()) != before {
			t.Errorf("--dry-run connected to the bastion")
		}
	})

	t.Run("proxycommand", func(t *testing.T) { testLabProxyCommand(t, l) })
	t.Run("config-notes", func(t *testing.T) { testLabConfigNotes(t, l) })

	t.Run("explain-host", func(t *testing.T) {
		msg := fmt.Sprintf("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.50 GiB is free. Process %d has 54.00 GiB memory in use. Including non-PyTorch memory, this process has 23.00 GiB memory in use.", l.leftoverPID)
		out, errOut, code := cli(t, nil, "explain", "-F", l.config, "--timeout", "30s", "--color", "never", "--host", "gpu07", msg)
		if code != exitFindings {
			t.Errorf("exit %d, stderr %s", code, errOut)
		}
		want := fmt.Sprintf("PID %d (54.00 GiB in the log) on gpu07: python3 -m sglang.launch_server", l.leftoverPID)
		if !strings.Contains(out, want) || !strings.Contains(out, "leftover-process") {
			t.Errorf("the PID is not tied to the host's process:\n%s", out)
		}
	})

	t.Run("interrupt", func(t *testing.T) {
		// Ctrl-C once gpu01 is done and gpu15 (which never speaks) is still running.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var cancelled time.Time
		var once sync.Once
		watch := func(stderr string) {
			if strings.Contains(stderr, "1/2 done") {
				once.Do(func() { cancelled = time.Now(); cancel() })
			}
		}
		out, errOut, code := cliWith(ctx, t, true, watch, "-F", l.config, "--timeout", "60s", "--format", "json", "gpu01", "gpu15")
		if code != exitInterrupted {
			t.Fatalf("exit %d, want %d (stderr %q)", code, exitInterrupted, errOut)
		}
		if d := time.Since(cancelled); d > testenv.Scale(5*time.Second) {
			t.Errorf("took %s after Ctrl-C", d)
		}
		var doc jsonDoc
		if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Hosts) != 2 {
			t.Fatalf("%v\n%s", err, out)
		}
		if !doc.Hosts[0].OK || doc.Hosts[1].Error == nil || doc.Hosts[1].Error.Kind != "interrupted" {
			t.Errorf("what was collected is not reported: %s", out)
		}
		if !strings.Contains(errOut, "\r\x1b[K") || !strings.Contains(errOut, "1 running") {
			t.Errorf("no progress line on a terminal's stderr: %q", errOut)
		}
	})
}
