package sshconf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProxyCommandLineMatchesSSH: the command gputriage runs for a ProxyCommand is, byte for
// byte, the one ssh runs (ssh -v names it: "Executing proxy command: exec ..."), for config
// values and command-line overrides alike; a token ssh does not expand there is refused by both.
func TestProxyCommandLineMatchesSSH(t *testing.T) {
	ssh := sshOrSkip(t)
	e := newOracleEnv(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	text := `Host gpu*
  HostName %h.Cluster.Example
  User Ops
  Port 2201
  ProxyCommand true %h %n %p %r %k 100%% ~/x ${HOME} 'a b' "c d"
Host aliased
  HostKeyAlias Key.Example
  ProxyCommand=true [%h]:%p %k
Host badtoken
  ProxyCommand true %C
`
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		alias string
		cl    cmdline
	}{
		{"gpu07", cmdline{}},
		{"GPU08x", cmdline{}},
		{"gpu09", cmdline{user: "cli", port: 22}},
		{"aliased", cmdline{}},
	} {
		o := e.options(cfg)
		o.User, o.Port = tc.cl.user, tc.cl.port
		h, err := Resolve(tc.alias, o)
		if err != nil {
			t.Fatalf("%s: %v", tc.alias, err)
		}
		args := append([]string{"-v", "-F", cfg, "-o", "BatchMode=yes"}, tc.cl.args()...)
		out := runSSH(ssh, e, append(args, tc.alias, "true")...)
		want := ""
		for _, line := range strings.Split(out, "\n") {
			if rest, ok := strings.CutPrefix(line, "debug1: Executing proxy command: "); ok {
				want = strings.TrimSuffix(rest, "\r")
			}
		}
		if tc.alias == "GPU08x" {
			// No Host block matches: ssh runs no proxy, and gputriage has none.
			if want != "" || h.ProxyCommandLine != "" {
				t.Errorf("%s: ssh runs %q, gputriage %q", tc.alias, want, h.ProxyCommandLine)
			}
			continue
		}
		if want == "" {
			t.Fatalf("%s: ssh -v did not name its proxy command:\n%s", tc.alias, out)
		}
		if got := "exec " + h.ProxyCommandLine; got != want {
			t.Errorf("%s: gputriage runs %q\n%*s ssh runs %q", tc.alias, got, len(tc.alias), "", want)
		}
	}
	o := e.options(cfg)
	if _, err := Resolve("badtoken", o); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "unknown token %C") {
		t.Errorf("badtoken: %v, want an unknown token error", err)
	}
	if out := runSSH(ssh, e, "-F", cfg, "-o", "BatchMode=yes", "badtoken", "true"); !strings.Contains(out, "unknown key %C") {
		t.Errorf("ssh accepted %%C in a ProxyCommand? %s", out)
	}
}

// TestNamesSSHRefuses: a host or user name on the command line that ssh refuses (it could
// carry shell syntax into a ProxyCommand's %h, %n or %r) is refused by Resolve too, and every
// name ssh accepts is accepted.
func TestNamesSSHRefuses(t *testing.T) {
	ssh := sshOrSkip(t)
	e := newOracleEnv(t)
	var hosts, users []string
	for _, c := range []string{"'", "`", "\"", "$", "\\", ";", "&", "<", ">", "|", "(", ")", "{", "}",
		",", " ", "\t", "\x01", "\x7f", "*", "?", "!", "#", "~", "%", "^", "=", "+", ":", "é", " -"} {
		hosts = append(hosts, "a"+c+"b")
		users = append(users, "u"+c+"v")
	}
	hosts = append(hosts, "-oProxyCommand=x", "gpu-01", "10.0.0.1", "::1")
	users = append(users, "-oops", "trailing\\", "ops-1", "first.last")
	for _, host := range hosts {
		_, err := Resolve(host, e.options("none"))
		out := runSSH(ssh, e, "-G", "-F", "none", "--", host)
		sshRefuses := !strings.Contains(out, "\nhostname ")
		if sshRefuses != errors.Is(err, ErrName) {
			t.Errorf("host %q: Resolve error %v; ssh -G refuses it: %v (%s)", host, err, sshRefuses, firstLine(out))
		}
	}
	for _, u := range users {
		o := e.options("none")
		o.User = u
		_, err := Resolve("gpu01", o)
		out := runSSH(ssh, e, "-G", "-F", "none", "-l", u, "gpu01")
		sshRefuses := strings.Contains(out, "invalid characters")
		if sshRefuses != errors.Is(err, ErrName) {
			t.Errorf("user %q: Resolve error %v; ssh -G refuses it: %v (%s)", u, err, sshRefuses, firstLine(out))
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestStockConfigsAreQuiet: the ssh_config files Debian, Ubuntu and macOS ship, and a Mac
// user's usual ~/.ssh/config (UseKeychain, AddKeysToAgent, a shared connection), give no note
// at all: nothing in them changes how a host is reached. The Debian and Ubuntu files are also
// read as ssh reads them.
func TestStockConfigsAreQuiet(t *testing.T) {
	e := newOracleEnv(t)
	for _, name := range []string{"debian/ssh_config", "ubuntu/ssh_config", "macos/ssh_config", "macos/user_config"} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "stock", name))
			if err != nil {
				t.Fatal(err)
			}
			// The stock Include names /etc/ssh/ssh_config.d: point it at an empty directory so
			// that only the stock file itself is read.
			dir := t.TempDir()
			text := strings.ReplaceAll(string(b), "/etc/ssh/ssh_config.d/", dir+"/ssh_config.d/")
			cfg := filepath.Join(dir, "config")
			if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, alias := range []string{"gpu01", "login.example.org"} {
				h, err := Resolve(alias, e.options(cfg))
				if err != nil {
					t.Fatal(err)
				}
				if len(h.Notes) != 0 || h.ProxyCommand != "" || h.ProxyJumpSpec != "" {
					t.Errorf("%s: notes %q, proxy %q %q", alias, h.Notes, h.ProxyCommand, h.ProxyJumpSpec)
				}
				if !strings.HasPrefix(name, "macos/") {
					if ssh := sshOrSkip(t); ssh != "" {
						compare(t, alias, h, askSSH(t, ssh, e, cfg, alias, cmdline{}))
					}
				}
			}
		})
	}
}
