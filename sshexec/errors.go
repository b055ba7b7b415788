package sshexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"

	"golang.org/x/crypto/ssh"
)

// Phases name where on the way to a host's output a failure happened. They are stable: reports
// print them and users grep for them.
const (
	PhaseResolve   = "resolve"   // looking up the host name
	PhaseConnect   = "connect"   // opening the TCP connection (directly or through a jump host)
	PhaseHandshake = "handshake" // SSH version exchange and key exchange
	PhaseHostKey   = "hostkey"   // checking the host key against known_hosts
	PhaseAuth      = "auth"      // user authentication
	PhaseSession   = "session"   // opening the session channel and starting the command
	PhaseProbe     = "probe"     // the command running and its output being read
	// PhaseQueued is the phase of a host that never started because the sweep was interrupted
	// before its turn came.
	PhaseQueued = "queued"
)

// Kinds say what went wrong. They are stable: reports print them and users grep for them.
const (
	KindNameLookup     = "name-lookup"      // the name did not resolve
	KindRefused        = "refused"          // connection refused
	KindUnreachable    = "unreachable"      // no route, or a jump host could not forward
	KindTimeout        = "timeout"          // the phase did not finish before the deadline
	KindReset          = "reset"            // connection reset by peer
	KindClosed         = "closed"           // the peer closed the connection or session early
	KindProtocol       = "protocol"         // the peer does not speak SSH as expected
	KindUnknownHostKey = "unknown-host-key" // no known_hosts entry for this host
	KindHostKeyChanged = "host-key-changed" // known_hosts has other keys for this host: possible MITM
	KindRevoked        = "revoked"          // the host key is marked @revoked
	KindHostCert       = "host-cert-invalid"
	KindAuthFailed     = "auth-failed" // no offered key was accepted
	KindExit           = "exit"        // the command exited non-zero or was killed by a signal
	KindBadOutput      = "bad-output"  // Options.Head refused the output's beginning
	// KindTooLarge is never set by Run: output over Options.MaxOutput is kept up to the bound
	// and flagged with Result.Truncated, with Err nil. Callers that treat truncation as a failure
	// use this kind so that every layer spells it the same.
	KindTooLarge    = "too-large"
	KindInterrupted = "interrupted" // the sweep was cancelled (Ctrl-C) before this host finished
	KindConfig      = "config"      // local configuration unusable (known_hosts, target fields)
	// KindProxy: the host's ProxyCommand could not start, or exited before the host answered;
	// the message carries its exit status and the end of its stderr.
	KindProxy = "proxy-failed"
	KindOther = "other"
)

// Error is why one host produced no usable result.
type Error struct {
	Phase   string // one of the Phase constants
	Kind    string // one of the Kind constants
	Hop     string // Name of the jump host where it failed; "" when it failed on the target itself
	Message string // complete, human-readable, lower case; may quote remote text with %q
	Err     error  // underlying cause, if any
}

func (e *Error) Error() string {
	if e.Hop != "" {
		return fmt.Sprintf("%s (jump host %s): %s", e.Phase, e.Hop, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Phase, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// classify maps a network or SSH error to a kind, or "" when it is none of the known ones.
func classify(err error) string {
	var dnsErr *net.DNSError
	var chanErr *ssh.OpenChannelError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &dnsErr):
		if dnsErr.IsTimeout {
			return KindTimeout
		}
		return KindNameLookup
	case errors.Is(err, syscall.ECONNREFUSED):
		return KindRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return KindReset
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTDOWN):
		return KindUnreachable
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded), isTimeout(err):
		return KindTimeout
	case errors.As(err, &chanErr):
		return classifyOpenChannel(chanErr)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return KindClosed
	}
	return ""
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// classifyOpenChannel reads a jump host's refusal to forward. OpenSSH puts strerror or the
// resolver's message into it; nothing more structured is on the wire.
func classifyOpenChannel(e *ssh.OpenChannelError) string {
	msg := strings.ToLower(e.Message)
	switch {
	case strings.Contains(msg, "refused"):
		return KindRefused
	case strings.Contains(msg, "timed out") || strings.Contains(msg, "timeout"):
		return KindTimeout
	case strings.Contains(msg, "name or service") || strings.Contains(msg, "getaddrinfo") ||
		strings.Contains(msg, "no such host") || strings.Contains(msg, "not known") ||
		strings.Contains(msg, "resolve"):
		return KindNameLookup
	}
	return KindUnreachable
}
