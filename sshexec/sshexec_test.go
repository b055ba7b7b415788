package sshexec_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/sshtest"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/sshexec"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
)

// env is one test's client side: a user key written as an identity file and a known_hosts file.
type env struct {
	t       *testing.T
	dir     string
	userKey ssh.Signer
	keyFile string
	known   string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	priv, signer := sshtest.NewKey(t, "ed25519")
	e := &env{t: t, dir: dir, userKey: signer, keyFile: filepath.Join(dir, "id_ed25519"), known: filepath.Join(dir, "known_hosts")}
	writeFile(t, e.keyFile, sshtest.MarshalOpenSSH(t, priv, ""))
	return e
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// echoExec answers "user|command|stdin".
func echoExec(e *sshtest.Exec) int {
	in, _ := io.ReadAll(e.Stdin)
	fmt.Fprintf(e.Stdout, "%s|%s|%s", e.User, e.Command, in)
	return 0
}

// server starts a server that authorizes the env's key for any user; Exec defaults to echoExec.
func (e *env) server(cfg sshtest.Config) *sshtest.Server {
	e.t.Helper()
	if cfg.Authorized == nil {
		cfg.Authorized = map[string][]ssh.PublicKey{"*": {e.userKey.PublicKey()}}
	}
	if cfg.Exec == nil {
		cfg.Exec = echoExec
	}
	return sshtest.Start(e.t, cfg)
}

func knownName(s *sshtest.Server) string { return "[127.0.0.1]:" + strconv.Itoa(s.Port()) }

// trust records the server's host keys (or the given ones) in the env's known_hosts.
func (e *env) trust(s *sshtest.Server, keys ...ssh.PublicKey) {
	e.t.Helper()
	if len(keys) == 0 {
		keys = s.HostKeys()
	}
	for _, k := range keys {
		appendFile(e.t, e.known, sshtest.KnownHostsLine(knownName(s), k))
	}
}

func (e *env) target(s *sshtest.Server) sshexec.Target {
	return sshexec.Target{
		Name:            "host" + strconv.Itoa(s.Port()),
		HostName:        "127.0.0.1",
		Port:            s.Port(),
		User:            "ops",
		IdentityFiles:   []string{e.keyFile},
		KnownHostsFiles: []string{e.known},
	}
}

func opts() sshexec.Options {
	return sshexec.Options{Command: "sh -s -- 0123abcd", Stdin: []byte("echo hi\n"), Timeout: 5 * time.Second}
}

func run1(t *testing.T, tg sshexec.Target, o sshexec.Options) sshexec.Result {
	t.Helper()
	rs := sshexec.Run(context.Background(), []sshexec.Target{tg}, o)
	if len(rs) != 1 {
		t.Fatalf("Run returned %d results, want 1", len(rs))
	}
	return rs[0]
}

func wantOK(t *testing.T, r sshexec.Result) {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("%s: unexpected error: phase %s kind %s: %v", r.Target.Name, r.Err.Phase, r.Err.Kind, r.Err)
	}
	if r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("%s: exit code %v, want 0", r.Target.Name, r.ExitCode)
	}
}

func wantErr(t *testing.T, r sshexec.Result, phase, kind string, msgParts ...string) {
	t.Helper()
	if r.Err == nil {
		t.Fatalf("%s: succeeded, want %s/%s; stdout %q", r.Target.Name, phase, kind, r.Stdout)
	}
	t.Logf("%s: %v", r.Err.Kind, r.Err)
	if r.Err.Phase != phase || r.Err.Kind != kind {
		t.Fatalf("%s: got %s/%s (%v), want %s/%s", r.Target.Name, r.Err.Phase, r.Err.Kind, r.Err, phase, kind)
	}
	for _, p := range msgParts {
		if !strings.Contains(r.Err.Message, p) {
			t.Errorf("%s: message lacks %q:\n%s", r.Target.Name, p, r.Err.Message)
		}
	}
}

func TestRunSuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.server(sshtest.Config{})
	e.trust(s)
	r := run1(t, e.target(s), opts())
	wantOK(t, r)
	if got, want := string(r.Stdout), "ops|sh -s -- 0123abcd|echo hi\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if r.Truncated || len(r.Notes) != 0 || r.Duration <= 0 {
		t.Errorf("truncated %v, notes %q, duration %v", r.Truncated, r.Notes, r.Duration)
	}
	if s.Accepted() != 1 || s.Sessions() != 1 || s.AgentForwardRequests() != 0 {
		t.Errorf("server saw %d connections, %d sessions, %d agent forwarding requests; want 1, 1, 0",
			s.Accepted(), s.Sessions(), s.AgentForwardRequests())
	}
}

func TestHostKeys(t *testing.T) {
	t.Parallel()
	_, ed := sshtest.NewKey(t, "ed25519")
	_, ec := sshtest.NewKey(t, "ecdsa")
	_, other := sshtest.NewKey(t, "ed25519")
	_, ca := sshtest.NewKey(t, "ed25519")
	cert := &ssh.Certificate{Key: ed.PublicKey(), CertType: ssh.HostCert, ValidPrincipals: []string{"127.0.0.1"},
		ValidBefore: ssh.CertTimeInfinity}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	certSigner, err := ssh.NewCertSigner(cert, ed)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		hostKeys  []ssh.Signer
		known     func(s *sshtest.Server) string // known_hosts content; "" leaves the file absent
		alias     string
		acceptNew bool
		phase     string // "" = success
		kind      string
		msg       func(s *sshtest.Server) []string
	}{
		{name: "plain entry", hostKeys: []ssh.Signer{ed},
			known: func(s *sshtest.Server) string { return sshtest.KnownHostsLine(knownName(s), ed.PublicKey()) }},
		{name: "unknown host, no file", hostKeys: []ssh.Signer{ed},
			phase: sshexec.PhaseHostKey, kind: sshexec.KindUnknownHostKey,
			msg: func(s *sshtest.Server) []string {
				return []string{sshexec.Fingerprint(ed.PublicKey()), "ssh-ed25519",
					fmt.Sprintf("ssh-keyscan -t ed25519 -p %d 127.0.0.1 >> ", s.Port()), "--accept-new"}
			}},
		// OpenSSH's "checking without port identifier": on another port, the bare host's entry
		// vouches for the key it holds, and only for that key.
		{name: "entry without port holding the key matches another port", hostKeys: []ssh.Signer{ed},
			known: func(s *sshtest.Server) string { return sshtest.KnownHostsLine("127.0.0.1", ed.PublicKey()) }},
		{name: "entry without port holding another key leaves another port unknown", hostKeys: []ssh.Signer{ed},
			known: func(s *sshtest.Server) string { return sshtest.KnownHostsLine("127.0.0.1", other.PublicKey()) },
			phase: sshexec.PhaseHostKey, kind: sshexec.KindUnknownHostKey},
		{name: "changed key", hostKeys: []ssh.Signer{ed},
			known: func(s *sshtest.Server) string {
				return "# comment\n" + sshtest.KnownHostsLine(knownName(s), other.PublicKey())
			},
			phase: sshexec.PhaseHostKey, kind: sshexec.KindHostKeyChanged,
			msg: func(s *sshtest.Server) []string {
				return []string{"known_hosts:2", sshexec.Fingerprint(ed.PublicKey()), sshexec.Fingerprint(other.PublicKey()), "ssh-keygen -R"}
			}},
		{name: "changed key refused even with accept-new", hostKeys: []ssh.Signer{ed}, acceptNew: true,
			known: func(s *sshtest.Server) string { return sshtest.KnownHostsLine(knownName(s), other.PublicKey()) },
			phase: sshexec.PhaseHostKey, kind: sshexec.KindHostKeyChanged,
			msg: func(s *sshtest.Server) []string { return []string{"known_hosts:1"} }},
		{name: "hashed entry", hostKeys: []ssh.Signer{ed},
			known: func(s *sshtest.Server) string {
				return sshtest.KnownHostsLine(xknownhosts.HashHostname(knownName(s)), ed.PublicKey())
			}},
		{name: "two key types, only the second known", hostKeys: []ssh.Signer{ed, ec},
			known: func(s *sshtest.Server) string { return sshtest.KnownHostsLine(knownName(s), ec.PublicKey()) }},
		{name: "server lost the known key type", hostKeys: []ssh.Signer{ed},
			known: func(s *sshtest.Server) string { return sshtest.KnownHostsLine(knownName(s), ec.PublicKey()) },
			phase: sshexec.PhaseHostKey, kind: sshexec.KindHostKeyChanged,
			msg: func(s *sshtest.Server) []string {
				return []string{"known_hosts:1", sshexec.Fingerprint(ec.PublicKey())}
			}},
		{name: "host key alias", hostKeys: []ssh.Signer{ed}, alias: "gpu-alias",
			known: func(s *sshtest.Server) string { return sshtest.KnownHostsLine("gpu-alias", ed.PublicKey()) }},
		{name: "host key alias unknown gives the exact line", hostKeys: []ssh.Signer{ed}, alias: "gpu-alias",
			known: func(s *sshtest.Server) string { return sshtest.KnownHostsLine(knownName(s), ed.PublicKey()) },
			phase: sshexec.PhaseHostKey, kind: sshexec.KindUnknownHostKey,
			msg: func(s *sshtest.Server) []string { return []string{"echo 'gpu-alias ssh-ed25519 AAAA"} }},
		{name: "revoked", hostKeys: []ssh.Signer{ed},
			known: func(s *sshtest.Server) string {
				return sshtest.KnownHostsLine(knownName(s), ed.PublicKey()) + "@revoked * " + string(ssh.MarshalAuthorizedKey(ed.PublicKey()))
			},
			phase: sshexec.PhaseHostKey, kind: sshexec.KindRevoked},
		{name: "cert authority", hostKeys: []ssh.Signer{certSigner},
			known: func(s *sshtest.Server) string {
				return "@cert-authority " + sshtest.KnownHostsLine(knownName(s), ca.PublicKey())
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			s := e.server(sshtest.Config{HostKeys: tc.hostKeys})
			if tc.known != nil {
				writeFile(t, e.known, []byte(tc.known(s)))
			}
			before, _ := os.ReadFile(e.known)
			tg := e.target(s)
			tg.HostKeyAlias = tc.alias
			o := opts()
			o.AcceptNew = tc.acceptNew
			r := run1(t, tg, o)
			if tc.phase == "" {
				wantOK(t, r)
				return
			}
			var msg []string
			if tc.msg != nil {
				msg = tc.msg(s)
			}
			wantErr(t, r, tc.phase, tc.kind, msg...)
			after, err := os.ReadFile(e.known)
			if !bytes.Equal(before, after) || (tc.known == nil && err == nil) {
				t.Errorf("known_hosts was modified:\n%s", after)
			}
			if s.Sessions() != 0 {
				t.Errorf("a session was opened on a host that failed its key check")
			}
		})
	}
}

func TestAcceptNew(t *testing.T) {
	t.Parallel()
	for _, hashed := range []bool{false, true} {
		t.Run(fmt.Sprintf("hashed=%v", hashed), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			s := e.server(sshtest.Config{})
			_, other := sshtest.NewKey(t, "ed25519")
			existing := "other.example"
			if hashed {
				existing = xknownhosts.HashHostname(existing)
			}
			writeFile(t, e.known, []byte(strings.TrimSuffix(sshtest.KnownHostsLine(existing, other.PublicKey()), "\n")))
			o := opts()
			o.AcceptNew = true
			// The same unknown host twice in one sweep is recorded once.
			tg := e.target(s)
			tg2 := tg
			tg2.Name = "again"
			rs := sshexec.Run(context.Background(), []sshexec.Target{tg, tg2}, o)
			for _, r := range rs {
				wantOK(t, r)
			}
			if n := strings.Join(rs[0].Notes, "\n") + strings.Join(rs[1].Notes, "\n"); !strings.Contains(n, "accepted new host key") ||
				!strings.Contains(n, sshexec.Fingerprint(s.HostKeys()[0])) || !strings.Contains(n, "known_hosts:2") {
				t.Errorf("notes %q lack the accepted key", n)
			}
			data, _ := os.ReadFile(e.known)
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			if len(lines) != 2 {
				t.Fatalf("known_hosts has %d lines, want 2:\n%s", len(lines), data)
			}
			if got := strings.HasPrefix(lines[1], "|1|"); got != hashed {
				t.Errorf("new line %q hashed=%v, want %v", lines[1], got, hashed)
			}
			if !hashed && !strings.HasPrefix(lines[1], knownName(s)+" ssh-ed25519 ") {
				t.Errorf("new line %q", lines[1])
			}
			// A second, strict run trusts the recorded key.
			wantOK(t, run1(t, tg, opts()))
		})
	}
}

// TestAcceptNewRefused: accept-new records nothing when there is no user file to record in
// (UserKnownHostsFile none: the global files are never written), and nothing anywhere in a sweep
// where some known_hosts file could not be read fully, since that file may hold another key.
func TestAcceptNewRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.server(sshtest.Config{})
	global := filepath.Join(e.dir, "global_known_hosts")
	writeFile(t, global, []byte("# nothing here\n"))
	o := opts()
	o.AcceptNew = true

	noUser := e.target(s)
	noUser.KnownHostsFiles, noUser.GlobalKnownHostsFiles = nil, []string{global}
	wantErr(t, run1(t, noUser, o), sshexec.PhaseHostKey, sshexec.KindUnknownHostKey, "no known_hosts file is configured to record it in")
	if b, _ := os.ReadFile(global); string(b) != "# nothing here\n" {
		t.Errorf("the global file was written:\n%s", b)
	}

	unreadable := filepath.Join(e.dir, "kh.d") // a directory: opens, then fails to read
	if err := os.Mkdir(unreadable, 0o700); err != nil {
		t.Fatal(err)
	}
	broken := e.target(s)
	broken.Name = "broken"
	broken.GlobalKnownHostsFiles = []string{unreadable}
	rs := sshexec.Run(context.Background(), []sshexec.Target{e.target(s), broken}, o)
	for _, r := range rs {
		wantErr(t, r, sshexec.PhaseHostKey, sshexec.KindUnknownHostKey, "accept-new is off for this run", unreadable)
	}
	if n := strings.Join(rs[1].Notes, "\n"); !strings.Contains(n, "not read fully") || !strings.Contains(n, unreadable) {
		t.Errorf("notes of the host that reads the file: %q", n)
	}
	if _, err := os.Stat(e.known); err == nil {
		t.Errorf("a host key was recorded while a known_hosts file could not be read")
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	edPriv, edSigner := sshtest.NewKey(t, "ed25519")
	ecPriv, ecSigner := sshtest.NewKey(t, "ecdsa")
	rsaPriv, rsaSigner := sshtest.NewKey(t, "rsa")
	_, stranger := sshtest.NewKey(t, "ed25519")
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaPriv.(*rsa.PrivateKey))})

	tests := []struct {
		name       string
		authorized ssh.Signer
		file       []byte        // identity file content; nil = no identity file
		agentKey   crypto.Signer // loaded into an agent keyring
		idOnly     bool
		passphrase func(string) ([]byte, error)
		user       string
		kind       string // "" = success
		msg        []string
		note       string
	}{
		{name: "ed25519 openssh file", authorized: edSigner, file: sshtest.MarshalOpenSSH(t, edPriv, "")},
		{name: "ecdsa openssh file", authorized: ecSigner, file: sshtest.MarshalOpenSSH(t, ecPriv, "")},
		{name: "rsa pem file", authorized: rsaSigner, file: rsaPEM},
		{name: "agent", authorized: edSigner, agentKey: edPriv},
		{name: "agent holds the encrypted file's key", authorized: edSigner, agentKey: edPriv,
			file: sshtest.MarshalOpenSSH(t, edPriv, "secret"), idOnly: true},
		{name: "encrypted file skipped", authorized: edSigner, file: sshtest.MarshalOpenSSH(t, edPriv, "secret"),
			kind: sshexec.KindAuthFailed, note: "is encrypted and no agent holds it: skipped",
			msg: []string{"no key to offer", "is encrypted"}},
		{name: "encrypted file with passphrase", authorized: edSigner, file: sshtest.MarshalOpenSSH(t, edPriv, "secret"),
			passphrase: func(string) ([]byte, error) { return []byte("secret"), nil }},
		{name: "wrong user", authorized: edSigner, agentKey: edPriv, file: sshtest.MarshalOpenSSH(t, ecPriv, ""), user: "intruder",
			kind: sshexec.KindAuthFailed, msg: []string{"intruder@127.0.0.1:", "publickey (agent: 1 key; ", "/id)", "server allows publickey"}},
		{name: "identities only skips other agent keys", authorized: edSigner, agentKey: edPriv,
			file: sshtest.MarshalOpenSSH(t, ecPriv, ""), idOnly: true,
			kind: sshexec.KindAuthFailed, msg: []string{"publickey (/"}},
		{name: "unauthorized key", authorized: stranger, file: sshtest.MarshalOpenSSH(t, edPriv, ""),
			kind: sshexec.KindAuthFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			s := e.server(sshtest.Config{Authorized: map[string][]ssh.PublicKey{"ops": {tc.authorized.PublicKey()}}})
			e.trust(s)
			tg := e.target(s)
			tg.IdentityFiles, tg.IdentitiesOnly = nil, tc.idOnly
			if tc.file != nil {
				p := filepath.Join(e.dir, "id")
				writeFile(t, p, tc.file)
				tg.IdentityFiles = []string{filepath.Join(e.dir, "missing"), p}
			}
			if tc.user != "" {
				tg.User = tc.user
			}
			o := opts()
			o.Passphrase = tc.passphrase
			if tc.agentKey != nil {
				o.Agent = pipeAgent(t, tc.agentKey)
			}
			r := run1(t, tg, o)
			if tc.kind == "" {
				wantOK(t, r)
			} else {
				wantErr(t, r, sshexec.PhaseAuth, tc.kind, tc.msg...)
			}
			if tc.note != "" && !strings.Contains(strings.Join(r.Notes, "\n"), tc.note) {
				t.Errorf("notes %q lack %q", r.Notes, tc.note)
			}
			if tc.note == "" && len(r.Notes) != 0 {
				t.Errorf("unexpected notes %q", r.Notes)
			}
		})
	}
}

// pipeAgent serves a keyring holding key over an in-memory connection.
func pipeAgent(t *testing.T, key crypto.Signer) agent.ExtendedAgent {
	t.Helper()
	kr := agent.NewKeyring()
	if err := kr.Add(agent.AddedKey{PrivateKey: key}); err != nil {
		t.Fatal(err)
	}
	c1, c2 := net.Pipe()
	go func() { _ = agent.ServeAgent(kr, c2) }()
	t.Cleanup(func() { c1.Close(); c2.Close() })
	return agent.NewClient(c1)
}

func TestAgentFromEnv(t *testing.T) {
	t.Parallel()
	if ag, c, err := sshexec.AgentFromEnv(func(string) string { return "" }); ag != nil || c != nil || err != nil {
		t.Fatalf("unset SSH_AUTH_SOCK: got %v, %v, %v", ag, c, err)
	}
	if _, _, err := sshexec.AgentFromEnv(func(string) string { return filepath.Join(t.TempDir(), "nope") }); err == nil {
		t.Fatal("missing socket: no error")
	}

	dir, err := os.MkdirTemp("", "agent") // short path: unix socket names are limited to ~104 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	priv, signer := sshtest.NewKey(t, "ed25519")
	kr := agent.NewKeyring()
	if err := kr.Add(agent.AddedKey{PrivateKey: priv}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _ = agent.ServeAgent(kr, c) }()
		}
	}()

	ag, closer, err := sshexec.AgentFromEnv(func(k string) string {
		if k == "SSH_AUTH_SOCK" {
			return sock
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()

	e := newEnv(t)
	s := e.server(sshtest.Config{Authorized: map[string][]ssh.PublicKey{"*": {signer.PublicKey()}}})
	e.trust(s)
	// Several hosts share the one agent connection.
	tg := e.target(s)
	tg.IdentityFiles = nil
	targets := []sshexec.Target{tg, tg, tg, tg}
	o := opts()
	o.Agent = ag
	for _, r := range sshexec.Run(context.Background(), targets, o) {
		wantOK(t, r)
	}
}

func TestDeadlines(t *testing.T) {
	t.Parallel()
	const timeout = 500 * time.Millisecond
	tests := []struct {
		name      string
		cfg       sshtest.Config
		phase     string
		wantBytes string
	}{
		{name: "no banner", cfg: sshtest.Config{Behaviour: sshtest.NoBanner}, phase: sshexec.PhaseHandshake},
		{name: "stalled handshake", cfg: sshtest.Config{Behaviour: sshtest.StallHandshake}, phase: sshexec.PhaseHandshake},
		{name: "session never ends", phase: sshexec.PhaseProbe, wantBytes: "partial",
			cfg: sshtest.Config{Exec: func(e *sshtest.Exec) int {
				io.WriteString(e.Stdout, "partial")
				<-e.Ctx.Done()
				return 0
			}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			s := e.server(tc.cfg)
			e.trust(s)
			o := opts()
			o.Timeout = timeout
			start := time.Now()
			r := run1(t, e.target(s), o)
			elapsed := time.Since(start)
			wantErr(t, r, tc.phase, sshexec.KindTimeout, "500ms")
			if elapsed > timeout+testenv.Scale(time.Second) {
				t.Errorf("took %v with a %v timeout", elapsed, timeout)
			}
			if string(r.Stdout) != tc.wantBytes {
				t.Errorf("stdout %q, want %q", r.Stdout, tc.wantBytes)
			}
		})
	}
}

func TestDeadlineThroughJump(t *testing.T) {
	t.Parallel()
	// A bastion that accepts the forward but whose target never speaks SSH: the host deadline
	// must still end it, though a forwarded connection has no read deadline.
	e := newEnv(t)
	silent := e.server(sshtest.Config{Behaviour: sshtest.NoBanner})
	bastion := e.server(sshtest.Config{Forward: true})
	e.trust(silent)
	e.trust(bastion)
	tg := e.target(silent)
	jump := e.target(bastion)
	jump.Name = "bastion"
	tg.Jump = []sshexec.Target{jump}
	o := opts()
	o.Timeout = 2 * time.Second // room for the bastion leg on a loaded machine (-race)
	start := time.Now()
	r := run1(t, tg, o)
	wantErr(t, r, sshexec.PhaseHandshake, sshexec.KindTimeout)
	if r.Err.Hop != "" {
		t.Errorf("hop %q, want the target's own handshake", r.Err.Hop)
	}
	if d := time.Since(start); d > o.Timeout+testenv.Scale(time.Second) {
		t.Errorf("took %v", d)
	}
}

func TestOutput(t *testing.T) {
	t.Parallel()
	// headerWithin accepts output whose line "HEADER" starts within the first 100 bytes.
	headerWithin := func(head []byte) (bool, error) {
		if i := bytes.Index(head, []byte("HEADER\n")); i >= 0 && i <= 100 {
			return true, nil
		}
		if len(head) > 100+len("HEADER\n") {
			return false, fmt.Errorf("no header in the first %d bytes", len(head))
		}
		return false, nil
	}
	garbage := func(e *sshtest.Exec) int {
		chunk := bytes.Repeat([]byte("\x1b#"), 16<<10)
		for range 1600 { // 50 MiB unless the client hangs up first
			if _, err := e.Stdout.Write(chunk); err != nil {
				return 0
			}
		}
		return 0
	}
	tests := []struct {
		name      string
		exec      func(*sshtest.Exec) int
		head      func([]byte) (bool, error)
		max       int
		stdin     []byte
		phase     string
		kinds     []string // any of
		stdout    func([]byte) bool
		truncated bool
		exit      *int
		msg       []string
	}{
		{name: "over the bound", max: 1000, truncated: true,
			exec: func(e *sshtest.Exec) int {
				chunk := bytes.Repeat([]byte("x"), 32<<10)
				for range 300 { // ~10 MiB unless the client hangs up first
					if _, err := e.Stdout.Write(chunk); err != nil {
						return 0
					}
				}
				return 0
			},
			stdout: func(b []byte) bool { return len(b) == 1000 && bytes.Count(b, []byte("x")) == 1000 }},
		{name: "50 MiB of garbage, refused by its head", head: headerWithin, exec: garbage,
			phase: sshexec.PhaseProbe, kinds: []string{sshexec.KindBadOutput}, msg: []string{"no header in the first"},
			stdout: func(b []byte) bool { return len(b) > 107 && len(b) <= 64<<10 }},
		{name: "garbage after an accepted head is read on", head: headerWithin, max: 1 << 20, truncated: true,
			exec:   func(e *sshtest.Exec) int { io.WriteString(e.Stdout, "login banner\nHEADER\n"); return garbage(e) },
			stdout: func(b []byte) bool { return len(b) == 1<<20 && bytes.HasPrefix(b, []byte("login banner\nHEADER\n")) }},
		{name: "output that ends before its head is judged", head: headerWithin, exit: ptr(0),
			exec:   func(e *sshtest.Exec) int { io.WriteString(e.Stdout, "short"); return 0 },
			stdout: func(b []byte) bool { return string(b) == "short" }},
		{name: "exactly the bound", max: 5, exit: ptr(0),
			exec:   func(e *sshtest.Exec) int { io.WriteString(e.Stdout, "12345"); return 0 },
			stdout: func(b []byte) bool { return string(b) == "12345" }},
		{name: "exits without reading its input", exit: ptr(0), stdin: bytes.Repeat([]byte("#"), 4<<20),
			exec:   func(e *sshtest.Exec) int { io.WriteString(e.Stdout, "early"); return 0 },
			stdout: func(b []byte) bool { return string(b) == "early" }},
		{name: "non-zero exit", exit: ptr(3), phase: sshexec.PhaseProbe, kinds: []string{sshexec.KindExit},
			msg: []string{"status 3", `"nvidia-smi: not found\x1b[31m"`},
			exec: func(e *sshtest.Exec) int {
				io.WriteString(e.Stdout, "some")
				io.WriteString(e.Stderr, "nvidia-smi: not found\x1b[31m\n")
				return 3
			},
			stdout: func(b []byte) bool { return string(b) == "some" }},
		{name: "reset mid-output", phase: sshexec.PhaseProbe, kinds: []string{sshexec.KindReset, sshexec.KindClosed},
			exec: func(e *sshtest.Exec) int {
				io.WriteString(e.Stdout, "first part")
				time.Sleep(50 * time.Millisecond)
				e.Reset()
				return 0
			},
			stdout: func(b []byte) bool { return string(b) == "first part" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			s := e.server(sshtest.Config{Exec: tc.exec})
			e.trust(s)
			o := opts()
			o.MaxOutput, o.Head = tc.max, tc.head
			if tc.stdin != nil {
				o.Stdin = tc.stdin
			}
			start := time.Now()
			r := run1(t, e.target(s), o)
			if time.Since(start) > testenv.Scale(3*time.Second) {
				t.Errorf("took %v", time.Since(start))
			}
			if tc.phase == "" {
				if r.Err != nil {
					t.Fatalf("error %v", r.Err)
				}
			} else {
				if r.Err == nil || r.Err.Phase != tc.phase || !contains(tc.kinds, r.Err.Kind) {
					t.Fatalf("got %+v, want %s/%v", r.Err, tc.phase, tc.kinds)
				}
				wantErr(t, r, tc.phase, r.Err.Kind, tc.msg...)
			}
			if r.Truncated != tc.truncated {
				t.Errorf("truncated %v, want %v", r.Truncated, tc.truncated)
			}
			if tc.truncated && !strings.Contains(strings.Join(r.Notes, "\n"), fmt.Sprintf("exceeded %d bytes", tc.max)) {
				t.Errorf("notes %q", r.Notes)
			}
			if (r.ExitCode == nil) != (tc.exit == nil) || (r.ExitCode != nil && *r.ExitCode != *tc.exit) {
				t.Errorf("exit code %v, want %v", deref(r.ExitCode), deref(tc.exit))
			}
			if tc.stdout != nil && !tc.stdout(r.Stdout) {
				t.Errorf("stdout %d bytes: %.40q", len(r.Stdout), r.Stdout)
			}
		})
	}
}

func TestStderrBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.server(sshtest.Config{Exec: func(x *sshtest.Exec) int {
		x.Stderr.Write(bytes.Repeat([]byte("e"), 1<<20))
		io.WriteString(x.Stdout, "done")
		return 0
	}})
	e.trust(s)
	o := opts()
	o.MaxStderr = 100
	r := run1(t, e.target(s), o)
	wantOK(t, r)
	if len(r.Stderr) != 100 || string(r.Stdout) != "done" {
		t.Errorf("stderr %d bytes, stdout %q", len(r.Stderr), r.Stdout)
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "stderr exceeded 100 bytes") {
		t.Errorf("notes %q", r.Notes)
	}
}

func ptr(i int) *int { return &i }

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// closedPort is a loopback port that refuses connections until the test ends: a socket of the
// test's is bound to it and never listens, so no other process on this machine can take the
// port and answer.
func closedPort(t *testing.T) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return sa.(*syscall.SockaddrInet4).Port
}

func TestRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tg := sshexec.Target{Name: "dead", HostName: "127.0.0.1", Port: closedPort(t), User: "ops", KnownHostsFiles: []string{e.known}}
	wantErr(t, run1(t, tg, opts()), sshexec.PhaseConnect, sshexec.KindRefused, "127.0.0.1:")
}

func TestProxyJump(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	target := e.server(sshtest.Config{})
	bastion := e.server(sshtest.Config{Forward: true})
	e.trust(target)
	e.trust(bastion)
	jump := e.target(bastion)
	jump.Name, jump.User = "bastion", "jumper"

	t.Run("through the bastion", func(t *testing.T) {
		tg := e.target(target)
		tg.Jump = []sshexec.Target{jump}
		r := run1(t, tg, opts())
		wantOK(t, r)
		if got := bastion.Forwards(); len(got) != 1 || got[0] != target.Addr() {
			t.Errorf("bastion forwarded %q, want [%s]", got, target.Addr())
		}
		if bastion.Sessions() != 0 || target.Sessions() != 1 {
			t.Errorf("sessions: bastion %d, target %d", bastion.Sessions(), target.Sessions())
		}
	})
	t.Run("bastion key unknown", func(t *testing.T) {
		tg := e.target(target)
		j := jump
		j.KnownHostsFiles = []string{filepath.Join(e.dir, "empty")}
		tg.Jump = []sshexec.Target{j}
		r := run1(t, tg, opts())
		wantErr(t, r, sshexec.PhaseHostKey, sshexec.KindUnknownHostKey, "bastion")
		if r.Err.Hop != "bastion" {
			t.Errorf("hop %q, want bastion", r.Err.Hop)
		}
	})
	t.Run("target refused behind the bastion", func(t *testing.T) {
		tg := e.target(target)
		tg.Port = closedPort(t)
		tg.Jump = []sshexec.Target{jump}
		r := run1(t, tg, opts())
		wantErr(t, r, sshexec.PhaseConnect, sshexec.KindRefused, "through jump host bastion")
		if r.Err.Hop != "" {
			t.Errorf("hop %q, want the target's own failure", r.Err.Hop)
		}
	})
	t.Run("target key checked under its own name", func(t *testing.T) {
		tg := e.target(target)
		tg.KnownHostsFiles = []string{filepath.Join(e.dir, "empty")}
		tg.Jump = []sshexec.Target{jump}
		r := run1(t, tg, opts())
		wantErr(t, r, sshexec.PhaseHostKey, sshexec.KindUnknownHostKey, "echo '"+knownName(target)+" ssh-ed25519")
		if r.Err.Hop != "" {
			t.Errorf("hop %q", r.Err.Hop)
		}
	})
}

func TestFanoutAndOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var running, peak atomic.Int32
	s := e.server(sshtest.Config{Exec: func(x *sshtest.Exec) int {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		i, _ := strconv.Atoi(strings.TrimPrefix(x.User, "u"))
		time.Sleep(time.Duration(80-i*7) * time.Millisecond) // later hosts finish sooner
		io.WriteString(x.Stdout, x.User)
		return 0
	}})
	e.trust(s)
	var targets []sshexec.Target
	for i := range 10 {
		tg := e.target(s)
		tg.Name, tg.User = fmt.Sprintf("n%d", i), fmt.Sprintf("u%d", i)
		targets = append(targets, tg)
	}
	dead := sshexec.Target{Name: "dead", HostName: "127.0.0.1", Port: closedPort(t), User: "ops"}
	targets = append(targets[:5:5], append([]sshexec.Target{dead}, targets[5:]...)...)

	o := opts()
	o.Fanout = 3
	var mu sync.Mutex
	var last sshexec.Progress
	var calls int
	o.Progress = func(p sshexec.Progress) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if p.Running > 3 || p.Succeeded+p.Failed+p.Running+p.Waiting != p.Total {
			t.Errorf("progress %+v", p)
		}
		if p.Running > 0 && p.Slowest == "" {
			t.Errorf("progress without slowest host: %+v", p)
		}
		last = p
	}
	rs := sshexec.Run(context.Background(), targets, o)
	if peak.Load() > 3 || peak.Load() < 2 {
		t.Errorf("peak concurrency %d, want 2..3 with fanout 3", peak.Load())
	}
	for i, r := range rs {
		if r.Target.Name != targets[i].Name {
			t.Fatalf("result %d is %s, want %s", i, r.Target.Name, targets[i].Name)
		}
		if r.Target.Name == "dead" {
			wantErr(t, r, sshexec.PhaseConnect, sshexec.KindRefused)
			continue
		}
		wantOK(t, r)
		if string(r.Stdout) != r.Target.User {
			t.Errorf("%s: stdout %q", r.Target.Name, r.Stdout)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := (sshexec.Progress{Total: 11, Succeeded: 10, Failed: 1}); last != want || calls != 22 {
		t.Errorf("last progress %+v after %d calls, want %+v after 22", last, calls, want)
	}
}

// TestDone: every host's result goes through Done once, as soon as that host is finished, and
// Run keeps what Done left, so a caller can consume each output and drop it.
func TestDone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.server(sshtest.Config{})
	e.trust(s)
	var targets []sshexec.Target
	for i := range 6 {
		tg := e.target(s)
		tg.Name, tg.User = fmt.Sprintf("n%d", i), fmt.Sprintf("u%d", i)
		targets = append(targets, tg)
	}
	targets = append(targets, sshexec.Target{Name: "dead", HostName: "127.0.0.1", Port: closedPort(t), User: "ops"})
	o := opts()
	o.Fanout = 2
	var mu sync.Mutex
	seen := map[int]string{}
	o.Done = func(i int, r *sshexec.Result) {
		mu.Lock()
		defer mu.Unlock()
		if _, dup := seen[i]; dup {
			t.Errorf("Done called twice for host %d", i)
		}
		seen[i] = string(r.Stdout)
		if r.Target.Name != targets[i].Name {
			t.Errorf("Done(%d) got %s", i, r.Target.Name)
		}
		r.Stdout = nil
	}
	rs := sshexec.Run(context.Background(), targets, o)
	if len(seen) != len(targets) {
		t.Fatalf("Done was called for %d of %d hosts", len(seen), len(targets))
	}
	for i, r := range rs {
		if r.Stdout != nil {
			t.Errorf("%s: Run kept %d bytes of output that Done dropped", r.Target.Name, len(r.Stdout))
		}
		if r.Target.Name == "dead" {
			wantErr(t, r, sshexec.PhaseConnect, sshexec.KindRefused)
			continue
		}
		wantOK(t, r)
		if want := "u" + strconv.Itoa(i) + "|sh -s -- 0123abcd|echo hi\n"; seen[i] != want {
			t.Errorf("%s: Done saw %q, want %q", r.Target.Name, seen[i], want)
		}
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	started := make(chan struct{}, 10)
	hang := e.server(sshtest.Config{Exec: func(x *sshtest.Exec) int {
		started <- struct{}{}
		<-x.Ctx.Done()
		return 0
	}})
	quickDone := make(chan struct{})
	quick := e.server(sshtest.Config{Exec: func(x *sshtest.Exec) int {
		defer close(quickDone)
		return echoExec(x)
	}})
	e.trust(hang)
	e.trust(quick)
	targets := []sshexec.Target{e.target(quick), e.target(hang), e.target(hang), e.target(hang), e.target(hang)}
	for i := range targets {
		targets[i].Name = fmt.Sprintf("h%d", i)
	}
	o := opts()
	o.Fanout = 3
	o.Timeout = 30 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan time.Time, 1)
	go func() {
		<-quickDone
		<-started
		<-started
		time.Sleep(20 * time.Millisecond) // let h0's result be collected
		cancelled <- time.Now()
		cancel()
	}()
	rs := sshexec.Run(ctx, targets, o)
	select {
	case at := <-cancelled:
		if d := time.Since(at); d > testenv.Scale(time.Second) {
			t.Errorf("Run returned %v after cancel", d)
		}
	default:
		t.Fatalf("Run returned before the cancel: %+v", rs)
	}
	wantOK(t, rs[0])
	counts := map[string]int{}
	for _, r := range rs[1:] {
		if r.Err == nil || r.Err.Kind != sshexec.KindInterrupted {
			t.Fatalf("%s: %+v, want interrupted", r.Target.Name, r.Err)
		}
		counts[r.Err.Phase]++
	}
	// h1 and h2 were running the command; h3 may have been anywhere; h4 never started unless
	// h0's slot freed before the cancel.
	if counts[sshexec.PhaseProbe] < 2 || counts[sshexec.PhaseQueued] < 1 {
		t.Errorf("phases of interrupted hosts: %v", counts)
	}
}

func TestAppendKnownHost(t *testing.T) {
	t.Parallel()
	_, k := sshtest.NewKey(t, "ed25519")
	dir := t.TempDir()
	file := filepath.Join(dir, "sub", "known_hosts")
	if err := sshexec.AppendKnownHost(file, "gpu01", 22, k.PublicKey(), false); err != nil {
		t.Fatal(err)
	}
	if err := sshexec.AppendKnownHost(file, "::1", 2222, k.PublicKey(), false); err != nil {
		t.Fatal(err)
	}
	if err := sshexec.AppendKnownHost(file, "gpu02", 2200, k.PublicKey(), true); err != nil {
		t.Fatal(err)
	}
	if err := sshexec.AppendKnownHost(file, "bad name", 22, k.PublicKey(), false); err == nil {
		t.Error("a host name with a space was accepted")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "gpu01 ssh-ed25519 ") ||
		!strings.HasPrefix(lines[1], "[::1]:2222 ssh-ed25519 ") || !strings.HasPrefix(lines[2], "|1|") {
		t.Fatalf("known_hosts:\n%s", data)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	cb, err := xknownhosts.New(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"gpu01:22", "[::1]:2222", "gpu02:2200"} {
		if err := cb(addr, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}, k.PublicKey()); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
}
