package simfleet_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/simfleet"
	"github.com/gputriage/gputriage/parse"
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
		Command: "sh -s", Stdin: parse.ProbeInput(nonce, 1),
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
