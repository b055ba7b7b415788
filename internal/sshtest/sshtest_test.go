package sshtest

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

func dial(t *testing.T, s *Server, user string, key ssh.Signer) *ssh.Client {
	t.Helper()
	c, err := ssh.Dial("tcp", s.Addr(), &ssh.ClientConfig{
		User:            user,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(key)},
		HostKeyCallback: ssh.FixedHostKey(s.HostKeys()[0]),
		Timeout:         5 * time.Second,
	})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestServer(t *testing.T) {
	t.Parallel()
	_, user := NewKey(t, "ecdsa")
	s := Start(t, Config{
		Authorized: map[string][]ssh.PublicKey{"ops": {user.PublicKey()}},
		Exec: func(e *Exec) int {
			in, _ := io.ReadAll(e.Stdin)
			io.WriteString(e.Stdout, e.User+" "+e.Command+" "+string(in))
			io.WriteString(e.Stderr, "warn")
			return 7
		},
	})
	c := dial(t, s, "ops", user)
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.RequestAgentForwarding(sess); err == nil {
		t.Error("agent forwarding was granted")
	}
	var out, errOut strings.Builder
	sess.Stdout, sess.Stderr, sess.Stdin = &out, &errOut, strings.NewReader("in")
	err = sess.Run("cmd")
	if ee, ok := err.(*ssh.ExitError); !ok || ee.ExitStatus() != 7 {
		t.Errorf("Run: %v, want exit 7", err)
	}
	if out.String() != "ops cmd in" || errOut.String() != "warn" {
		t.Errorf("stdout %q stderr %q", out.String(), errOut.String())
	}
	if _, err := c.Dial("tcp", "127.0.0.1:1"); err == nil {
		t.Error("forwarding allowed without Config.Forward")
	}
	if s.Accepted() != 1 || s.Sessions() != 1 || s.AgentForwardRequests() != 1 || len(s.Forwards()) != 0 {
		t.Errorf("accepted %d sessions %d agent requests %d forwards %q",
			s.Accepted(), s.Sessions(), s.AgentForwardRequests(), s.Forwards())
	}

	if _, err := ssh.Dial("tcp", s.Addr(), &ssh.ClientConfig{User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(user)},
		HostKeyCallback: ssh.FixedHostKey(s.HostKeys()[0]), Timeout: 5 * time.Second}); err == nil {
		t.Error("unauthorized user logged in")
	}
}

func TestForward(t *testing.T) {
	t.Parallel()
	_, user := NewKey(t, "ed25519")
	auth := map[string][]ssh.PublicKey{"*": {user.PublicKey()}}
	target := Start(t, Config{Authorized: auth})
	bastion := Start(t, Config{Authorized: auth, Forward: true})
	c := dial(t, bastion, "any", user)
	conn, err := c.Dial("tcp", target.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	banner := make([]byte, 8)
	if _, err := io.ReadFull(conn, banner); err != nil || string(banner) != "SSH-2.0-" {
		t.Fatalf("banner %q, %v", banner, err)
	}
	if got := bastion.Forwards(); len(got) != 1 || got[0] != target.Addr() {
		t.Errorf("forwards %q", got)
	}
}

func TestMisbehaviours(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		b    Behaviour
		want string
	}{{NoBanner, ""}, {StallHandshake, "SSH-2.0-sshtest_stall\r\n"}} {
		s := Start(t, Config{Behaviour: tc.b})
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		got, _ := io.ReadAll(c)
		c.Close()
		if string(got) != tc.want {
			t.Errorf("behaviour %d sent %q, want %q", tc.b, got, tc.want)
		}
	}
}
