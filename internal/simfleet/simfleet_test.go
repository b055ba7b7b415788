package simfleet_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/simfleet"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/probe"
	"github.com/gputriage/gputriage/sshexec"
)

func captures(t *testing.T) [][]byte {
	t.Helper()
	files, err := filepath.Glob("../../fixtures/*.capture")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// TestFleetOutcomes sweeps a small fleet with a quarter of its hosts misbehaving and checks
// that every host comes back with the right outcome within the deadline plus 5 s.
func TestFleetOutcomes(t *testing.T) {
	dir := t.TempDir()
	f, err := simfleet.Start(simfleet.Config{Hosts: 40, RTT: 20 * time.Millisecond, BadShare: 0.25,
		Captures: captures(t), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	var targets []sshexec.Target
	for _, h := range f.Hosts {
		targets = append(targets, sshexec.Target{Name: h.Name, HostName: h.Addr, Port: h.Port, User: "root",
			IdentityFiles: []string{f.ClientKey}, IdentitiesOnly: true, KnownHostsFiles: []string{f.KnownHosts}})
	}
	const nonce = "0123456789abcdef0123456789abcdef"
	timeout := 3 * time.Second
	start := time.Now()
	results := sshexec.Run(context.Background(), targets, sshexec.Options{
		Command: "sh -s", Stdin: probe.Input(nonce, 1),
		Timeout: timeout, Fanout: 16,
	})
	if el := time.Since(start); el > timeout+5*time.Second {
		t.Errorf("sweep took %v, want at most the %v deadline + 5s", el, timeout)
	}
	seen := map[simfleet.Behaviour]int{}
	for i, r := range results {
		h := f.Hosts[i]
		seen[h.Behaviour]++
		wantPhase, wantKind := simfleet.Expected(h.Behaviour)
		switch {
		case h.Behaviour == simfleet.Good || h.Behaviour == simfleet.Garbage:
			if r.Err != nil {
				t.Errorf("%s (%s): %v", h.Name, h.Behaviour, r.Err)
				continue
			}
			snap, perr := parse.Parse(r.Stdout)
			if h.Behaviour == simfleet.Garbage {
				if perr == nil {
					t.Errorf("%s: garbage output parsed without error", h.Name)
				}
				continue
			}
			if perr != nil || snap == nil || snap.Host.Hostname == "" {
				t.Errorf("%s: capture did not parse: %v", h.Name, perr)
			}
		case r.Err == nil:
			t.Errorf("%s (%s): succeeded, want %s/%s", h.Name, h.Behaviour, wantPhase, wantKind)
		case r.Err.Phase != wantPhase || r.Err.Kind != wantKind:
			t.Errorf("%s (%s): got %s/%s (%v), want %s/%s", h.Name, h.Behaviour, r.Err.Phase, r.Err.Kind, r.Err, wantPhase, wantKind)
		}
	}
	for _, b := range append([]simfleet.Behaviour{simfleet.Good}, simfleet.BadBehaviours...) {
		if seen[b] == 0 {
			t.Errorf("no host with behaviour %s in the fleet", b)
		}
	}
}

// TestRunProbe: with RunProbe, a host answers the probe the client sent by running it here
// (so its capture names this machine and carries the client's nonce), after the host-side
// time; a command that runs nvidia-smi gets the recorded nvidia-smi output.
func TestRunProbe(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs sh")
	}
	dir := t.TempDir()
	smi := filepath.Join(dir, "smi")
	if err := simfleet.WriteIdleSMI(smi); err != nil {
		t.Fatal(err)
	}
	const hostTime = 300 * time.Millisecond
	f, err := simfleet.Start(simfleet.Config{Hosts: 3, RTT: 5 * time.Millisecond, HostTime: hostTime, RunProbe: true,
		SMIDir: smi, Captures: captures(t), Dir: filepath.Join(dir, "fleet")})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var targets []sshexec.Target
	for _, h := range f.Hosts {
		targets = append(targets, sshexec.Target{Name: h.Name, HostName: h.Addr, Port: h.Port, User: "root",
			IdentityFiles: []string{f.ClientKey}, IdentitiesOnly: true, KnownHostsFiles: []string{f.KnownHosts}})
	}
	const nonce = "0123456789abcdef0123456789abcdef"
	start := time.Now()
	results := sshexec.Run(context.Background(), targets, sshexec.Options{
		Command: "sh -s", Stdin: probe.Input(nonce, 5), Timeout: time.Minute})
	if el := time.Since(start); el < hostTime {
		t.Errorf("answered in %v, before the %v host time", el, hostTime)
	}
	me, _ := os.Hostname()
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.Target.Name, r.Err)
		}
		snap, err := parse.Parse(r.Stdout)
		if err != nil || snap.Host.Hostname != me || len(snap.GPUs) != 8 || !bytes.Contains(r.Stdout, []byte(nonce)) {
			t.Errorf("%s: not this machine's capture for this run (%v): hostname %q, %d GPUs", r.Target.Name, err, snap.Host.Hostname, len(snap.GPUs))
		}
	}
	smiRes := sshexec.Run(context.Background(), targets[:1], sshexec.Options{
		Command: "nvidia-smi --query-gpu=index --format=csv; nvidia-smi --query-compute-apps=pid --format=csv", Timeout: time.Minute})
	if r := smiRes[0]; r.Err != nil || !bytes.HasPrefix(r.Stdout, []byte("index, uuid")) || !bytes.Contains(r.Stdout, []byte("pid, gpu_uuid")) {
		t.Errorf("nvidia-smi answer %q (%v)", r.Stdout, r.Err)
	}
}

func TestNonceOf(t *testing.T) {
	for cmd, want := range map[string]string{
		"set -- 0123456789abcdef0123456789abcdef 24\n": "0123456789abcdef0123456789abcdef",
		"set -- 00112233445566778899aabbccddeeff\n":    "00112233445566778899aabbccddeeff",
		"set -- 42\n": "",
	} {
		if got := simfleet.NonceOf(cmd); got != want {
			t.Errorf("NonceOf(%q) = %q, want %q", cmd, got, want)
		}
	}
}

// TestShellFedQueries: a host running `sh -s` fed nvidia-smi queries without a nonce (what
// bench/sshbare sends) answers with the recorded nvidia-smi output, as it does pdsh's command.
func TestShellFedQueries(t *testing.T) {
	caps := captures(t)
	f, err := simfleet.Start(simfleet.Config{Hosts: 1, Captures: caps[:1], Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := f.Hosts[0]
	tg := sshexec.Target{Name: h.Name, HostName: h.Addr, Port: h.Port, User: "root",
		IdentityFiles: []string{f.ClientKey}, IdentitiesOnly: true, KnownHostsFiles: []string{f.KnownHosts}}
	run := func(command, stdin string) sshexec.Result {
		return sshexec.Run(context.Background(), []sshexec.Target{tg}, sshexec.Options{
			Command: command, Stdin: []byte(stdin), Timeout: 10 * time.Second})[0]
	}
	want := run("nvidia-smi --query-gpu=index --format=csv; nvidia-smi --query-compute-apps=pid --format=csv", "")
	got := run("sh -s", "nvidia-smi --query-gpu=index --format=csv\nnvidia-smi --query-compute-apps=pid --format=csv\n")
	if want.Err != nil || got.Err != nil || len(want.Stdout) == 0 || !bytes.Equal(got.Stdout, want.Stdout) {
		t.Errorf("sh -s fed the queries: %q (%v), want %q (%v)", got.Stdout, got.Err, want.Stdout, want.Err)
	}
}
