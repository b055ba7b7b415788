package sshexec_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/sshtest"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/sshexec"
)

// TestHangUpInHandshake: a host that hangs up after the version exchange is a handshake
// failure of kind closed (FIN) or reset (RST), at once. x/crypto/ssh reports a reset that
// hits its key exchange write as "use of closed network connection" (it closes the conn
// itself and the read fails); the first I/O error is what classifies it. Repeated, because
// which of the read and the write meets the reset first is a race.
func TestHangUpInHandshake(t *testing.T) {
	t.Parallel()
	// Which of closed and reset the client sees is a race on the wire either way: after a FIN
	// the client's next write meets a closed socket and draws a RST; a RST may arrive after
	// the client already read what it needed and reads EOF. What must hold: a handshake
	// failure, at once, that does not blame a local close.
	for _, tc := range []struct {
		rst   bool
		kinds []string
	}{{false, []string{sshexec.KindClosed, sshexec.KindReset}}, {true, []string{sshexec.KindReset, sshexec.KindClosed}}} {
		port := sshtest.HangUpInHandshake(t, tc.rst)
		for range 10 {
			start := time.Now()
			r := run1(t, sshexec.Target{Name: "hangup", HostName: "127.0.0.1", Port: port, User: "ops"}, opts())
			if r.Err == nil || r.Err.Phase != sshexec.PhaseHandshake || !slices.Contains(tc.kinds, r.Err.Kind) {
				t.Fatalf("rst %v: got %+v, want %s/%v", tc.rst, r.Err, sshexec.PhaseHandshake, tc.kinds)
			}
			if strings.Contains(r.Err.Message, "use of closed network connection") {
				t.Errorf("rst %v: message blames a local close: %s", tc.rst, r.Err.Message)
			}
			if d := time.Since(start); d > testenv.Scale(2*time.Second) {
				t.Errorf("rst %v: took %s", tc.rst, d)
			}
		}
	}
}
