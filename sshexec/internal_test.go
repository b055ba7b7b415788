package sshexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	op := func(err error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", err)}
	}
	tests := []struct {
		err  error
		want string
	}{
		{&net.DNSError{Err: "no such host", Name: "gpu99", IsNotFound: true}, KindNameLookup},
		{fmt.Errorf("wrapped: %w", &net.DNSError{Err: "timeout", Name: "x", IsTimeout: true}), KindTimeout},
		{op(syscall.ECONNREFUSED), KindRefused},
		{op(syscall.ECONNRESET), KindReset},
		{op(syscall.EHOSTUNREACH), KindUnreachable},
		{op(syscall.ENETUNREACH), KindUnreachable},
		{&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, KindTimeout},
		{context.DeadlineExceeded, KindTimeout},
		{io.EOF, KindClosed},
		{fmt.Errorf("ssh: handshake failed: %w", io.ErrUnexpectedEOF), KindClosed},
		{net.ErrClosed, KindClosed},
		{&ssh.OpenChannelError{Reason: ssh.ConnectionFailed, Message: "Connection refused"}, KindRefused},
		{&ssh.OpenChannelError{Reason: ssh.ConnectionFailed, Message: "getaddrinfo: Name or service not known"}, KindNameLookup},
		{&ssh.OpenChannelError{Reason: ssh.ConnectionFailed, Message: "Connection timed out"}, KindTimeout},
		{&ssh.OpenChannelError{Reason: ssh.Prohibited, Message: "administratively prohibited"}, KindUnreachable},
		{errors.New("ssh: something odd"), ""},
	}
	for _, tc := range tests {
		if got := classify(tc.err); got != tc.want {
			t.Errorf("classify(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"gpu01":                    "gpu01",
		"/home/u/.ssh/known_hosts": "/home/u/.ssh/known_hosts",
		"[10.0.0.1]:2222":          "'[10.0.0.1]:2222'",
		"it's":                     `'it'\''s'`,
		"":                         "''",
		"~/.ssh/known_hosts":       "'~/.ssh/known_hosts'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestBoundedBuffer(t *testing.T) {
	t.Parallel()
	b := &boundedBuffer{max: 5}
	for _, s := range []string{"abc", "defg", "hij"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if string(b.Bytes()) != "abcde" || b.dropped != 5 {
		t.Errorf("kept %q, dropped %d", b.Bytes(), b.dropped)
	}
}

func TestEscapeControl(t *testing.T) {
	t.Parallel()
	if got, want := escapeControl("rejected: \x1b[2Jboom\n"), `rejected: \x1b[2Jboom\x0a`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
