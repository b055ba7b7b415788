package main

import (
	"github.com/gputriage/gputriage/triage"

	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A replayed capture file is headed by the hostname the capture carries, not by the file's
// name; a hostname that is not a plain host name (spaces, escapes) falls back to the file name.
func TestReplayHeaderNamesHost(t *testing.T) {
	fx, err := os.ReadFile(filepath.Join(repoRoot(t), "fixtures", "busy.capture"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "saved-from-laptop.capture")
	bad := filepath.Join(dir, "fallback.capture")
	forged := bytes.Replace(fx, []byte("\nhostname=h100-02\n"), []byte("\nhostname=h100-02  OK x\n"), 1)
	if bytes.Equal(forged, fx) {
		t.Fatal("busy.capture has no hostname=h100-02 line")
	}
	for p, b := range map[string][]byte{good: fx, bad: forged} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ path, head string }{{good, "h100-02  OK"}, {bad, "fallback  OK"}} {
		out, errOut, code := cli(t, nil, "--replay", tc.path, "--color", "never")
		if code != exitOK || !strings.HasPrefix(out, tc.head) {
			t.Errorf("--replay %s: exit %d, want the report headed %q; got:\n%s%s", filepath.Base(tc.path), code, tc.head, out, errOut)
		}
	}
}

func TestPlainHostname(t *testing.T) {
	for s, want := range map[string]bool{
		"h100-02": true, "gpu03.lab.example": true, "node_7": true,
		"": false, "-x": false, ".x": false, "a b": false, "evil\x1b[31m": false, "ct200\n": false,
		strings.Repeat("a", 254): false,
	} {
		if got := triage.PlainHostname(s); got != want {
			t.Errorf("plainHostname(%q) = %v, want %v", s, got, want)
		}
	}
}
