package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/sshconf"
	"github.com/gputriage/gputriage/triage"
)

// proxyConfig is an ssh config, read before the lab's own, whose hosts are reached through
// ProxyCommands, and its known_hosts for the names only a ProxyCommand reaches. {{...}} are
// filled in by writeProxyConfig.
const proxyConfig = `# gpu14 through the real ssh client, ssh -W by the bastion, as ssh's manual suggests.
Host pc-ssh-w
  HostName 127.0.0.1
  Port 2214
  ProxyCommand ssh -F {{lab}} -o BatchMode=yes -W %h:%p bastion
# gpu01 under a name no resolver knows: only nc can reach it.
Host pc-nc
  HostName gpu01.proxy.invalid
  Port 2201
  ProxyCommand nc 127.0.0.101 %p
  UserKnownHostsFile {{known}}
# gpu14 from inside its network namespace, like a cloud CLI's tunnel into a private network.
Host pc-netns
  HostName 127.0.0.1
  Port 2214
  ProxyCommand ip netns exec {{netns}} nc %h %p
Host pc-fail
  HostName 127.0.0.1
  Port 2214
  ProxyCommand sh -c 'echo "bastion: channel 0: open failed: no route to $1" >&2; exit 7' sh %h
Host pc-hang
  ProxyCommand sh -c 'echo $$ > {{dir}}/hang.pid; sleep 300 & echo $! >> {{dir}}/hang.pid; wait'
# gpu01 through a socket the ProxyCommand connects and hands back (ProxyUseFdpass).
Host pc-fdpass
  HostName gpu01.proxy.invalid
  Port 2201
  ProxyCommand python3 {{fdpass}} 127.0.0.101 %p
  ProxyUseFdpass yes
  UserKnownHostsFile {{known}}
# ProxyCommand none is set first: gpu01 directly, the ProxyJump is ignored.
Host pc-none
  HostName 127.0.0.101
  Port 2201
  ProxyCommand none
  ProxyJump nosuchbastion
# The ProxyCommand is set first and wins over the ProxyJump.
Host pc-first
  HostName 127.0.0.1
  Port 2214
  ProxyCommand ip netns exec {{netns}} nc %h %p
  ProxyJump nosuchbastion
# The ProxyJump is set first and wins over the ProxyCommand.
Host pj-first
  HostName 127.0.0.1
  Port 2214
  ProxyJump bastion
  ProxyCommand false
Host *
Include {{lab}}
`

func writeProxyConfig(t *testing.T, l *lab) string {
	t.Helper()
	dir := t.TempDir()
	known := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(known, []byte(l.hosts["gpu01"].KnownHostsLine("gpu01.proxy.invalid")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fdpass := filepath.Join(dir, "fdpass.py")
	script := "import socket, sys\ns = socket.create_connection((sys.argv[1], int(sys.argv[2])))\n" +
		"socket.send_fds(socket.socket(fileno=1), [b\"\\0\"], [s.fileno()])\n"
	if err := os.WriteFile(fdpass, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer("{{lab}}", l.config, "{{known}}", known, "{{netns}}", l.netns, "{{dir}}", dir,
		"{{fdpass}}", fdpass).Replace(proxyConfig)
	cfg := filepath.Join(dir, "ssh_config")
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// sshGProxy is what `ssh -G` says of a host's ProxyCommand and ProxyJump.
func sshGProxy(t *testing.T, cfg, alias string) (command, jump string) {
	t.Helper()
	out, err := exec.Command("ssh", "-G", "-F", cfg, alias).Output()
	if err != nil {
		t.Fatalf("ssh -G %s: %v", alias, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "proxycommand":
			command = v
		case "proxyjump":
			jump = v
		}
	}
	return command, jump
}

// testLabProxyCommand: hosts the lab reaches only through a ProxyCommand (the real ssh -W by
// the bastion, nc, nc inside a network namespace, a socket handed back under
// ProxyUseFdpass) are reached by gputriage as by ssh itself;
// ProxyCommand none and the first-wins rule against ProxyJump agree with ssh -G; a failing
// ProxyCommand's exit status and stderr are the host's failure; a hanging one is ended, with
// everything it started, at the host's deadline.
func testLabProxyCommand(t *testing.T, l *lab) {
	needTool(t, "nc", "netcat-openbsd")
	needTool(t, "ssh", "openssh-client")
	cfg := writeProxyConfig(t, l)
	reached := map[string]string{ // alias: the host whose probe must answer
		"pc-ssh-w": "gpu14", "pc-nc": "gpu01", "pc-netns": "gpu14", "pc-fdpass": "gpu01", "pc-none": "gpu01",
		"pc-first": "gpu14", "pj-first": "gpu14",
	}
	aliases := []string{"pc-ssh-w", "pc-nc", "pc-netns", "pc-fdpass", "pc-none", "pc-first", "pj-first", "pc-fail"}

	// What each host would use, as --dry-run prints it, is what ssh -G says.
	dry, _, code := cli(t, nil, append([]string{"-F", cfg, "--dry-run", "--format", "json"}, aliases...)...)
	var plan struct {
		Hosts []struct {
			Host         string   `json:"host"`
			ProxyCommand *string  `json:"proxy_command"`
			ProxyJump    []string `json:"proxy_jump"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(dry), &plan); err != nil || code != exitOK || len(plan.Hosts) != len(aliases) {
		t.Fatalf("--dry-run: exit %d, %v\n%s", code, err, dry)
	}
	for _, h := range plan.Hosts {
		command, jump := sshGProxy(t, cfg, h.Host)
		got := ""
		if h.ProxyCommand != nil {
			got = *h.ProxyCommand
		}
		if got != command || (jump != "") != (len(h.ProxyJump) > 0) {
			t.Errorf("%s: gputriage would use ProxyCommand %q, ProxyJump %q; ssh -G says %q, %q", h.Host, got, h.ProxyJump, command, jump)
		}
	}

	text, _, _ := cli(t, nil, "-F", cfg, "--dry-run", "pc-nc", "gpu14")
	for _, want := range []string{"\n  proxy command: nc 127.0.0.101 %p\n", "\n  proxy jump: none\n",
		"\n  proxy jump: root@" + l.bastion.Addr + ":22 (bastion)\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("--dry-run text lacks %q:\n%s", want, text)
		}
	}

	begin := time.Now()
	out, errOut, _ := cli(t, nil, append([]string{"-F", cfg, "--timeout", "20s", "--format", "json"}, aliases...)...)
	t.Logf("swept %d hosts through their ProxyCommands in %s", len(aliases), time.Since(begin).Round(time.Millisecond))
	var doc jsonDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Hosts) != len(aliases) {
		t.Fatalf("%v\nstderr %s\n%s", err, errOut, out)
	}
	for _, h := range doc.Hosts {
		want, ok := reached[h.Host]
		if !ok {
			continue
		}
		if !h.OK || h.Hostname == nil || *h.Hostname != want {
			t.Errorf("%s: ok %v, probe ran on %v, want %s (error %+v)", h.Host, h.OK, h.Hostname, want, h.Error)
		}
		// ssh itself, with the same config, reaches the same host.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		b, err := exec.CommandContext(ctx, "ssh", "-F", cfg, "-o", "BatchMode=yes", h.Host, "uname -n").CombinedOutput()
		cancel()
		if got := strings.TrimSpace(string(b)); err != nil || got != want {
			t.Errorf("%s: ssh reaches %q (%v), gputriage %s", h.Host, got, err, want)
		}
	}
	fail := doc.Hosts[len(doc.Hosts)-1]
	if fail.Error == nil || fail.Error.Phase != "connect" || fail.Error.Kind != "proxy-failed" ||
		!strings.Contains(fail.Error.Message, "exited with status 7") ||
		!strings.Contains(fail.Error.Message, "bastion: channel 0: open failed: no route to 127.0.0.1") {
		t.Errorf("pc-fail: %+v, want its ProxyCommand's exit status and stderr", fail.Error)
	}
	if strings.Contains(errOut, "ProxyCommand") {
		t.Errorf("a supported ProxyCommand is noted on stderr: %q", errOut)
	}

	// A ProxyCommand that never connects is ended, with what it started, at the deadline.
	begin = time.Now()
	out, _, _ = cli(t, nil, "-F", cfg, "--timeout", "2s", "--format", "json", "pc-hang")
	if d := time.Since(begin); d > testenv.Scale(6*time.Second) {
		t.Errorf("a hanging ProxyCommand held a 2s host for %s", d)
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Hosts[0].Error == nil || doc.Hosts[0].Error.Kind != "timeout" {
		t.Fatalf("pc-hang: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(cfg), "hang.pid"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		if !scenario.Exited(pid, 500*time.Millisecond) {
			t.Errorf("PID %d of the hanging ProxyCommand outlived the sweep", pid)
		}
	}
}

func needTool(t *testing.T, name, pkg string) {
	t.Helper()
	testenv.Need(t, "ProxyCommand", "apt-get install "+pkg, name)
}

// testLabConfigNotes: a sweep over hosts whose config includes the stock Debian ssh_config
// and lines that do not matter to gputriage says nothing about them, and names a line that
// changes how the hosts are reached once, folded over the hosts, and in each host's failure.
func testLabConfigNotes(t *testing.T, l *lab) {
	dir := t.TempDir()
	stock, err := os.ReadFile(filepath.Join(repoRoot(t), "sshconf", "testdata", "stock", "debian", "ssh_config"))
	if err != nil {
		t.Fatal(err)
	}
	debian := filepath.Join(dir, "debian_ssh_config")
	text := strings.ReplaceAll(string(stock), "/etc/ssh/ssh_config.d/", dir+"/ssh_config.d/")
	if err := os.WriteFile(debian, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "ssh_config")
	// ssh would find canon01 as canon01.lab.internal; gputriage looks up canon01.invalid.
	conf := `Host canon*
  HostName %h.invalid
  CanonicalizeHostname yes
  CanonicalDomains lab.internal
Host *
  ControlMaster auto
  ControlPath ~/.ssh/cm-%C
  ControlPersist 10m
  ServerAliveInterval 30
  AddKeysToAgent yes
  ForwardAgent yes
Include ` + l.config + `
Include ` + debian + "\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, _ := cli(t, nil, "-F", cfg, "--timeout", "20s", "--format", "json", "gpu01", "gpu02", "canon01", "canon02", "canon03")
	want := "gputriage: CanonicalizeHostname (" + cfg + ":3): not supported by gputriage; the HostName is used as written; used by canon[01-03]\n"
	if errOut != want {
		t.Errorf("stderr:\n%s\nwant exactly:\n%s", errOut, want)
	}
	var doc jsonDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Hosts) != 5 {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, h := range doc.Hosts {
		if strings.HasPrefix(h.Host, "gpu") {
			if !h.OK {
				t.Errorf("%s: %+v", h.Host, h.Error)
			}
			continue
		}
		if h.Error == nil || !strings.Contains(h.Error.Message, "did not honor this host's CanonicalizeHostname ("+cfg+":3)") {
			t.Errorf("%s: failure %+v does not name the CanonicalizeHostname line", h.Host, h.Error)
		}
	}
}

// TestNamesSSHRefuses: a host or user name that ssh refuses (shell syntax a ProxyCommand's %h,
// %n or %r would hand to a shell) is a usage error before any command runs.
func TestNamesSSHRefuses(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ssh_config")
	marker := filepath.Join(dir, "ran")
	if err := os.WriteFile(cfg, []byte("Host *\n  ProxyCommand touch "+marker+"; nc %h %p\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"gpu01;touch " + marker},
		{"gpu$(touch " + marker + ")"},
		{"-l", "ops`touch " + marker + "`", "gpu01"},
	} {
		_, errOut, code := cli(t, nil, append([]string{"-F", cfg, "--timeout", "5s"}, args...)...)
		if code != exitUsage || !strings.Contains(errOut, "contains invalid characters, which ssh refuses") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("a ProxyCommand ran for a name ssh refuses")
	}
}

// TestConfigNotesFolded: each config line gputriage does not act on is named once for the
// sweep, with the hosts it touches folded, in the order first met; harmless lines not at all.
func TestConfigNotesFolded(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ssh_config")
	text := `Host gpu*
  CanonicalizeHostname yes
  SendEnv LANG LC_*
Host gpu1*
  StrictHostKeyChecking no
Match exec "true"
  User nobody
`
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var hosts []triage.Host
	for i := 1; i <= 16; i++ {
		name := fmt.Sprintf("gpu%02d", i)
		h, err := sshconf.Resolve(name, sshconf.Options{ConfigFile: cfg, Home: dir, LocalUser: "me"})
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, triage.Host{Label: name, Conf: h})
	}
	var b strings.Builder
	triage.PrintConfigNotes(&b, hosts)
	want := "gputriage: CanonicalizeHostname (~/ssh_config:2): not supported by gputriage; the HostName is used as written; used by gpu[01-16]\n" +
		"gputriage: Match exec (~/ssh_config:6): not evaluated by gputriage; its block is treated as not matching; used by gpu[01-16]\n" +
		"gputriage: " + triage.StrictNoNote + "; used by gpu[10-16]\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
