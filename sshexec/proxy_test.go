package sshexec_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/sshtest"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/sshexec"
)

// needNC finds OpenBSD netcat, the `nc %h %p` of many ProxyCommands. CI must have it.
func needNC(t *testing.T) string {
	t.Helper()
	return testenv.Need(t, "ProxyCommand", "apt-get install netcat-openbsd", "nc")
}

// pids reads the PIDs a ProxyCommand wrote to file, one a line.
func pids(t *testing.T, file string) []int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the ProxyCommand did not record its PIDs: %v", err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s: %q", file, b)
		}
		out = append(out, n)
	}
	return out
}

// TestProxyCommand: a host reached through a ProxyCommand, as ssh reaches it: SSH over the
// command's stdin and stdout, the command run by the user's shell, its host key checked under
// the host's own name, the command and all it started ended with the host or at its deadline,
// and its exit status and stderr the cause of a failure.
func TestProxyCommand(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	nc := needNC(t)
	e := newEnv(t)
	srv := e.server(sshtest.Config{Forward: true})
	// The name is not in DNS: only the ProxyCommand can reach it; its key is recorded under it.
	const name = "gpu-behind-proxy.invalid"
	for _, k := range srv.HostKeys() {
		appendFile(t, e.known, sshtest.KnownHostsLine("["+name+"]:"+strconv.Itoa(srv.Port()), k))
	}
	proxied := func(command string) sshexec.Target {
		tg := e.target(srv)
		tg.Name, tg.HostName, tg.ProxyCommand = "gpu01", name, command
		return tg
	}
	relay := nc + " 127.0.0.1 " + strconv.Itoa(srv.Port())

	t.Run("nc, run by the user's shell, ended with the host", func(t *testing.T) {
		dir := t.TempDir()
		shell := filepath.Join(dir, "shell")
		writeFile(t, shell, []byte("#!/bin/sh\nprintf '%s\\n' \"$@\" > "+dir+"/argv\nexec /bin/sh \"$@\"\n"))
		if err := os.Chmod(shell, 0o755); err != nil {
			t.Fatal(err)
		}
		// The command leaves a child of its own behind; both go when the host is done.
		cmd := "sh -c 'echo $$ > " + dir + "/pids; sleep 300 & echo $! >> " + dir + "/pids; exec " + relay + "'"
		o := opts()
		o.Shell = shell
		r := run1(t, proxied(cmd), o)
		wantOK(t, r)
		if string(r.Stdout) != "ops|sh -s -- 0123abcd|echo hi\n" {
			t.Errorf("stdout %q", r.Stdout)
		}
		argv, _ := os.ReadFile(filepath.Join(dir, "argv"))
		if want := "-c\nexec " + cmd + "\n"; string(argv) != want {
			t.Errorf("the shell was run with %q, want %q (as ssh runs a ProxyCommand)", argv, want)
		}
		for _, pid := range pids(t, filepath.Join(dir, "pids")) {
			if !scenario.Exited(pid, 500*time.Millisecond) {
				t.Errorf("PID %d of the ProxyCommand outlived the host", pid)
			}
		}
	})
	t.Run("first hop of a jump chain", func(t *testing.T) {
		target := e.server(sshtest.Config{})
		e.trust(target)
		tg := e.target(target)
		jump := proxied(relay)
		jump.Name = "bastion"
		tg.Jump = []sshexec.Target{jump}
		wantOK(t, run1(t, tg, opts()))
		if got := srv.Forwards(); len(got) != 1 || got[0] != target.Addr() {
			t.Errorf("the proxied bastion forwarded %q, want [%s]", got, target.Addr())
		}
	})
	t.Run("fails: exit status and stderr are the cause", func(t *testing.T) {
		r := run1(t, proxied(`sh -c 'echo "channel 0: open failed: connect failed: No route to host" >&2; exit 7'`), opts())
		wantErr(t, r, sshexec.PhaseConnect, sshexec.KindProxy, "exited with status 7",
			`"channel 0: open failed: connect failed: No route to host"`)
	})
	t.Run("refused behind nc", func(t *testing.T) {
		r := run1(t, proxied(nc+" 127.0.0.1 "+strconv.Itoa(closedPort(t))), opts())
		wantErr(t, r, sshexec.PhaseConnect, sshexec.KindProxy, "exited with status 1 before the host answered")
	})
	t.Run("stderr is kept bounded, its end", func(t *testing.T) {
		r := run1(t, proxied(`sh -c 'i=0; while [ $i -lt 3000 ]; do echo "noise line $i"; i=$((i+1)); done >&2; echo "the real cause" >&2; exit 3'`), opts())
		wantErr(t, r, sshexec.PhaseConnect, sshexec.KindProxy, "exited with status 3", `the real cause"`, `..."`)
		if len(r.Err.Message) > 5<<10 {
			t.Errorf("message of %d bytes: the stderr kept is not bounded", len(r.Err.Message))
		}
	})
	t.Run("hangs: the host deadline ends it and all it started", func(t *testing.T) {
		dir := t.TempDir()
		o := opts()
		o.Timeout = time.Second
		start := time.Now()
		r := run1(t, proxied("sh -c 'echo $$ > "+dir+"/pids; sleep 300 & echo $! >> "+dir+"/pids; wait'"), o)
		wantErr(t, r, sshexec.PhaseHandshake, sshexec.KindTimeout, "no SSH handshake through the ProxyCommand within the 1s host timeout")
		if d := time.Since(start); d > o.Timeout+testenv.Scale(3*time.Second) {
			t.Errorf("took %v past a 1s deadline", d)
		}
		for _, pid := range pids(t, filepath.Join(dir, "pids")) {
			if !scenario.Exited(pid, 500*time.Millisecond) {
				t.Errorf("PID %d of the ProxyCommand outlived the host deadline", pid)
			}
		}
	})
	t.Run("ignores SIGHUP: killed after the grace", func(t *testing.T) {
		dir := t.TempDir()
		o := opts()
		o.Timeout = time.Second
		r := run1(t, proxied("sh -c 'trap \"\" HUP; echo $$ > "+dir+"/pids; while :; do sleep 1; done'"), o)
		wantErr(t, r, sshexec.PhaseHandshake, sshexec.KindTimeout)
		for _, pid := range pids(t, filepath.Join(dir, "pids")) {
			if !scenario.Exited(pid, 500*time.Millisecond) {
				t.Errorf("PID %d ignored SIGHUP and outlived the host", pid)
			}
		}
	})
	t.Run("ProxyCommand - is refused", func(t *testing.T) {
		wantErr(t, run1(t, proxied("-"), opts()), sshexec.PhaseConnect, sshexec.KindConfig, "cannot carry a sweep")
	})
	t.Run("ProxyUseFdpass: SSH over the socket it hands back", func(t *testing.T) {
		needTool(t, "python3")
		tg := proxied("python3 " + fdpassScript(t) + " 127.0.0.1 " + strconv.Itoa(srv.Port()))
		tg.ProxyUseFdpass = true
		r := run1(t, tg, opts())
		wantOK(t, r)
		if string(r.Stdout) != "ops|sh -s -- 0123abcd|echo hi\n" {
			t.Errorf("stdout %q", r.Stdout)
		}
		tg = proxied(`sh -c 'echo "no socket for you" >&2; exit 4'`)
		tg.ProxyUseFdpass = true
		wantErr(t, run1(t, tg, opts()), sshexec.PhaseConnect, sshexec.KindProxy, "exited with status 4", "no socket for you")
	})
}

// fdpassScript writes a ProxyCommand for ProxyUseFdpass: it connects to argv[1]:argv[2] and
// hands the socket back over its stdout, as OpenSSH's ProxyUseFdpass expects.
func fdpassScript(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fdpass.py")
	writeFile(t, p, []byte(`import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
socket.send_fds(socket.socket(fileno=1), [b"\0"], [s.fileno()])
`))
	return p
}

func needTool(t *testing.T, name string) {
	t.Helper()
	testenv.Need(t, "ProxyCommand", "apt-get install "+name, name)
}
