package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/internal/sshtest"
)

// TestDebugSSH: --debug-ssh says on stderr how each host is reached (address, user, keys,
// known_hosts) and how its connection ended, with what the host wrote on stderr, sanitized;
// without it (and with -v) none of that is printed; the report on stdout is the same.
func TestDebugSSH(t *testing.T) {
	l := newSSHLab(t)
	ok := l.server(t, "gpu01", sshtest.Config{Exec: func(e *sshtest.Exec) int {
		fmt.Fprint(e.Stderr, "motd: welcome\n\x1b]0;pwned\x07\n")
		_, _ = e.Stdout.Write(fixtureFor(t, e.Stdin, "clean"))
		return 0
	}})
	l.server(t, "gpu02", sshtest.Config{Exec: func(e *sshtest.Exec) int {
		fmt.Fprint(e.Stderr, "sh: 1: probe exploded\n")
		return 7
	}})
	config := l.write(t, "")
	base := []string{"-F", config, "--timeout", "10s", "--format", "json", "gpu01", "gpu02"}
	out, errOut, code := cli(t, nil, append([]string{"--debug-ssh"}, base...)...)
	if code != exitHostsFailed {
		t.Errorf("exit %d, want %d", code, exitHostsFailed)
	}
	for _, want := range []string{
		fmt.Sprintf("gputriage: debug: gpu01: connect root@%s:%d\n", ok.Host(), ok.Port()),
		"gputriage: debug: gpu01: keys: agent no; identity files " + l.key + " (identities only)\n",
		"gputriage: debug: gpu01: known_hosts: " + l.known + "; unknown keys refused\n",
		"gputriage: debug: gpu01: timeouts: connect 10s, whole host 10s\n",
		"gputriage: debug: gpu01: done in ",
		"gputriage: debug: gpu01: stderr: motd: welcome\n",
		"gputriage: debug: gpu02: failed after ",
		"gputriage: debug: gpu02: stderr: sh: 1: probe exploded\n",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("--debug-ssh stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Contains(errOut, "\x1b") || strings.Contains(errOut, "\x07") {
		t.Errorf("a host's stderr reached the terminal raw: %q", errOut)
	}
	plain, plainErr, plainCode := cli(t, nil, append([]string{"-v"}, base...)...)
	if strings.Contains(plainErr, "debug:") || strings.Contains(plainErr, "motd") || plainCode != code {
		t.Errorf("without --debug-ssh: exit %d, stderr %q", plainCode, plainErr)
	}
	if strings.Count(out, `"host"`) != 2 || strings.Count(plain, `"host"`) != 2 {
		t.Errorf("reports differ in hosts:\n%s\n%s", out, plain)
	}
}
