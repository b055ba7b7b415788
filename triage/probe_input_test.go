package triage

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/probe"
)

// The remote command line is a constant: the nonce travels on stdin, where no other process
// on the host can read it, and nothing the user typed is shell text.
func TestProbeCommandCarriesNoNonce(t *testing.T) {
	hex := regexp.MustCompile(`[0-9a-f]{16,}`)
	for _, sudo := range []bool{false, true} {
		if c := probeCommand(sudo); hex.MatchString(c) || c != probeCommand(sudo) {
			t.Errorf("probeCommand(%v) = %q", sudo, c)
		}
	}
	nonce := NewNonce()
	in := probe.Input(nonce, 12)
	if !bytes.HasPrefix(in, []byte("set -- "+nonce+" 12\n")) || !bytes.HasSuffix(in, []byte(probe.Script)) {
		t.Errorf("probe.Input starts %q", in[:60])
	}
}

func TestFromHeader(t *testing.T) {
	const nonce = "0123456789abcdef0123456789abcdef"
	capture := parse.CaptureHeader(nonce) + "@@gputriage " + nonce + " done\n"
	tests := []struct {
		name, out, wantCapture, wantDropped string
		wantErr                             bool
	}{
		{"clean", capture, capture, "", false},
		{"profile banner", "Welcome!\nlast login: today\n" + capture, capture, "Welcome!\nlast login: today\n", false},
		{"not a capture", "garbage", "garbage", "", false},
		{"another run's capture", strings.ReplaceAll(capture, nonce, "ffffffffffffffffffffffffffffffff"), "", "", true},
		{"header mid-line", "x " + parse.CaptureHeader(nonce), "x " + parse.CaptureHeader(nonce), "", false},
	}
	for _, tt := range tests {
		c, d, err := fromHeader([]byte(tt.out), nonce)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: err = %v", tt.name, err)
			continue
		}
		if tt.wantErr {
			continue
		}
		if string(c) != tt.wantCapture || string(d) != tt.wantDropped {
			t.Errorf("%s: capture %q, dropped %q", tt.name, c, d)
		}
	}
}
