package sshtest

import (
	"io"
	"net"
	"testing"
	"time"
)

// HangUpInHandshake listens on 127.0.0.1 and, for every connection, sends an SSH banner, reads
// what the client sends first (its key exchange offer) and hangs up: with a FIN, or with a
// RST (SO_LINGER 0) when rst. It returns the port; the listener closes at cleanup.
func HangUpInHandshake(t testing.TB, rst bool) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n")
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, _ = c.Read(make([]byte, 4096))
			if rst {
				_ = c.(*net.TCPConn).SetLinger(0)
			}
			_ = c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}
