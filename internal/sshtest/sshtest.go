// Package sshtest is an in-process SSH server for tests: configurable host keys, authorized
// user keys, an exec handler written in Go, direct-tcpip forwarding (a ProxyJump bastion), and
// the misbehaviours a sweep must survive (no banner, a stalled handshake, a reset connection).
// It listens on 127.0.0.1 only. Only tests import it.
package sshtest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
)

// Behaviour selects how the server treats every connection.
type Behaviour int

const (
	Normal         Behaviour = iota
	NoBanner                 // accept TCP, never send anything
	StallHandshake           // send the version banner, then go silent
)

// Exec is one exec request as the handler sees it.
type Exec struct {
	Ctx     context.Context // done when the client closes the channel or the server shuts down
	User    string
	Command string
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	// Reset aborts the TCP connection with a RST (SO_LINGER 0), as a crashing host or a
	// middlebox would.
	Reset func()
}

// Config configures a Server.
type Config struct {
	HostKeys []ssh.Signer // default: one fresh ed25519 key
	// Authorized maps a user to the public keys it may log in with; the user "*" stands for
	// any user.
	Authorized map[string][]ssh.PublicKey
	// Exec handles exec requests and returns the exit status. nil: exit 0 with no output.
	Exec      func(*Exec) int
	Forward   bool // allow direct-tcpip (ProxyJump) channels
	Behaviour Behaviour
}

// Server is a running test server.
type Server struct {
	cfg    Config
	ln     net.Listener
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu           sync.Mutex
	conns        map[net.Conn]struct{}
	accepted     int
	forwards     []string
	agentFwdReqs int
	sessions     int
}

// Start starts a server on 127.0.0.1:0 and closes it when the test ends.
func Start(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	if len(cfg.HostKeys) == 0 {
		_, s := NewKey(tb, "ed25519")
		cfg.HostKeys = []ssh.Signer{s}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("sshtest: listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, ln: ln, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	tb.Cleanup(s.Close)
	return s
}

// Addr is the "127.0.0.1:port" the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Host is the address without the port.
func (s *Server) Host() string { return "127.0.0.1" }

// Port is the port the server listens on.
func (s *Server) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// HostKeys are the server's host keys.
func (s *Server) HostKeys() []ssh.PublicKey {
	var out []ssh.PublicKey
	for _, k := range s.cfg.HostKeys {
		out = append(out, k.PublicKey())
	}
	return out
}

// Forwards lists the "host:port" targets of the direct-tcpip channels clients opened.
func (s *Server) Forwards() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.forwards...)
}

// Accepted counts TCP connections accepted.
func (s *Server) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// Sessions counts session channels opened.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions
}

// AgentForwardRequests counts auth-agent-req@openssh.com requests (always refused).
func (s *Server) AgentForwardRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agentFwdReqs
}

// Close stops the server, closes every connection and waits for its goroutines.
func (s *Server) Close() {
	s.cancel()
	_ = s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.ctx.Err() != nil {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.accepted++
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				_ = c.Close()
			}()
			s.serve(c)
		}()
	}
}

func (s *Server) serve(c net.Conn) {
	switch s.cfg.Behaviour {
	case NoBanner:
		_, _ = io.Copy(io.Discard, c)
		return
	case StallHandshake:
		_, _ = io.WriteString(c, "SSH-2.0-sshtest_stall\r\n")
		_, _ = io.Copy(io.Discard, c)
		return
	}
	conf := &ssh.ServerConfig{
		ServerVersion: "SSH-2.0-sshtest",
		PublicKeyCallback: func(md ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			for _, u := range []string{md.User(), "*"} {
				for _, k := range s.cfg.Authorized[u] {
					if string(k.Marshal()) == string(key.Marshal()) {
						return &ssh.Permissions{}, nil
					}
				}
			}
			return nil, fmt.Errorf("sshtest: key not authorized for %s", md.User())
		},
	}
	for _, k := range s.cfg.HostKeys {
		conf.AddHostKey(k)
	}
	sc, chans, reqs, err := ssh.NewServerConn(c, conf)
	if err != nil {
		return
	}
	defer sc.Close()
	go ssh.DiscardRequests(reqs)
	var wg sync.WaitGroup
	defer wg.Wait()
	for nc := range chans {
		switch nc.ChannelType() {
		case "session":
			ch, creqs, err := nc.Accept()
			if err != nil {
				continue
			}
			s.mu.Lock()
			s.sessions++
			s.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.session(c, sc.User(), ch, creqs)
			}()
		case "direct-tcpip":
			if !s.cfg.Forward {
				_ = nc.Reject(ssh.Prohibited, "forwarding disabled")
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.forward(nc)
			}()
		default:
			_ = nc.Reject(ssh.UnknownChannelType, "unsupported")
		}
	}
}

func (s *Server) session(c net.Conn, user string, ch ssh.Channel, reqs <-chan *ssh.Request) {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	defer ch.Close()
	var done chan struct{}
	for {
		var req *ssh.Request
		var ok bool
		select {
		case req, ok = <-reqs:
		case <-done:
			// the handler finished; keep serving requests until the client closes
			done = nil
			continue
		}
		if !ok {
			cancel()
			if done != nil {
				<-done
			}
			return
		}
		switch req.Type {
		case "exec":
			var payload struct{ Command string }
			if err := ssh.Unmarshal(req.Payload, &payload); err != nil || done != nil {
				_ = req.Reply(false, nil)
				continue
			}
			_ = req.Reply(true, nil)
			done = make(chan struct{})
			e := &Exec{Ctx: ctx, User: user, Command: payload.Command, Stdin: ch, Stdout: ch, Stderr: ch.Stderr(),
				Reset: func() {
					if tc, ok := c.(*net.TCPConn); ok {
						_ = tc.SetLinger(0)
					}
					_ = c.Close()
				}}
			go func(done chan struct{}) {
				defer close(done)
				status := 0
				if s.cfg.Exec != nil {
					status = s.cfg.Exec(e)
				}
				_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(status)}))
				_ = ch.CloseWrite()
				_ = ch.Close()
			}(done)
		case "auth-agent-req@openssh.com":
			s.mu.Lock()
			s.agentFwdReqs++
			s.mu.Unlock()
			_ = req.Reply(false, nil)
		default:
			_ = req.Reply(false, nil)
		}
	}
}

func (s *Server) forward(nc ssh.NewChannel) {
	var p struct {
		Host     string
		Port     uint32
		OrigHost string
		OrigPort uint32
	}
	if err := ssh.Unmarshal(nc.ExtraData(), &p); err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, "bad payload")
		return
	}
	addr := net.JoinHostPort(p.Host, strconv.Itoa(int(p.Port)))
	s.mu.Lock()
	s.forwards = append(s.forwards, addr)
	s.mu.Unlock()
	var d net.Dialer
	out, err := d.DialContext(s.ctx, "tcp", addr)
	if err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, err.Error())
		return
	}
	defer out.Close()
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	defer ch.Close()
	go ssh.DiscardRequests(reqs)
	stop := context.AfterFunc(s.ctx, func() { _ = out.Close(); _ = ch.Close() })
	defer stop()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(out, ch)
		if tc, ok := out.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		close(done)
	}()
	_, _ = io.Copy(ch, out)
	_ = ch.CloseWrite()
	<-done
}

// NewKey generates a key of kind "ed25519", "ecdsa" (P-256) or "rsa" (2048 bits), returning
// the raw private key (for writing identity files) and its signer.
func NewKey(tb testing.TB, kind string) (crypto.Signer, ssh.Signer) {
	tb.Helper()
	var priv crypto.Signer
	var err error
	switch kind {
	case "ed25519":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	case "ecdsa":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "rsa":
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		tb.Fatalf("sshtest: unknown key kind %q", kind)
	}
	if err != nil {
		tb.Fatalf("sshtest: generate %s key: %v", kind, err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		tb.Fatalf("sshtest: %v", err)
	}
	return priv, signer
}

// MarshalOpenSSH encodes priv in OpenSSH format, encrypted when passphrase is not empty.
func MarshalOpenSSH(tb testing.TB, priv crypto.Signer, passphrase string) []byte {
	tb.Helper()
	var block *pem.Block
	var err error
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, "sshtest")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "sshtest", []byte(passphrase))
	}
	if err != nil {
		tb.Fatalf("sshtest: marshal key: %v", err)
	}
	return pem.EncodeToMemory(block)
}

// KnownHostsLine is a known_hosts line for name (already in known_hosts form, e.g.
// "[127.0.0.1]:2222" or a hashed name) and key.
func KnownHostsLine(name string, key ssh.PublicKey) string {
	return name + " " + string(ssh.MarshalAuthorizedKey(key))
}
